"""The MXFP8 block-scaled matmul example (examples/mxfp8_matmul.py): e4m3 A and B with an
E8M0 scale per 1x32 block of K (OCP MX), the scales copied to tensor memory with
tcgen05_copy, block-scaled tcgen05 MMAs into an f32 accumulator, bf16 out. Numbers under
jax.jit through the simulator against numpy (dequantise, then matmul), no hazard when async
work completes late, the scale rearrangement against the ISA's byte order, and ptxas for
sm_100a: no spills, the block-scaled MMAs and scale copies in the SASS."""

from __future__ import annotations

import re
from functools import cache

import jax
import ml_dtypes
import numpy as np
import pytest

from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import CompiledModule, compile_module
from tests.dsl_helpers import (  # noqa: F401
    assert_within_one_bf16_ulp,
    isolated_cache,
    load_example,
    quantized_operands,
)

ARCH = "sm_100a"
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")


@cache
def example():
    return load_example("mxfp8_matmul")


def specs(m: int, n: int, k: int) -> tuple[jax.ShapeDtypeStruct, ...]:
    ex = example()
    return (jax.ShapeDtypeStruct((m, k), ex.E4M3),
            jax.ShapeDtypeStruct((m // 128, k // 128, 32, 16), ex.E8M0),
            jax.ShapeDtypeStruct((n, k), ex.E4M3),
            jax.ShapeDtypeStruct((n // 128, k // 128, 32, 16), ex.E8M0))


@cache
def compiled(m: int, n: int, k: int) -> CompiledModule:
    return compile_module(example().matmul.trace(*specs(m, n, k)).module, arch=ARCH)


def _assert_within_one_bf16_ulp(out: np.ndarray, a, a_scale, b, b_scale) -> None:
    """`out` is the f64 product of the dequantised operands rounded to bf16, give or take
    the f32 accumulation's rounding (one bf16 ulp)."""
    exact = example().dequantize(a, a_scale).astype(np.float64) \
        @ example().dequantize(b, b_scale).astype(np.float64).T
    assert_within_one_bf16_ulp(out, exact)


def test_quantized_operands_dequantize_to_the_inputs_within_e4m3():
    """The example's MX quantisation: power-of-two scales, every block's largest element
    within e4m3's range, the dequantised values within e4m3's rounding of the input."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 256)).astype(np.float32) * 100
    elements, scales = example().quantize(x)
    assert elements.dtype == ml_dtypes.float8_e4m3fn and scales.dtype == ml_dtypes.float8_e8m0fnu
    assert scales.shape == (128, 8)
    exponents = np.log2(scales.astype(np.float32))
    np.testing.assert_array_equal(exponents, np.round(exponents))
    assert np.abs(elements.astype(np.float32)).max() <= 448
    np.testing.assert_allclose(example().dequantize(elements, scales), x, rtol=2**-3)


def test_scale_blocks_follow_the_tcgen05_cp_byte_order():
    """Byte 4c + s of row j of block (t, u) is the scale of row 128t + 32c + j for K block
    4u + s (smalti/dialect/ops_tcgen05.py "Scale factors in TMEM", the .32x128b.warpx4 copy)."""
    scales = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
    blocks = np.asarray(example().scale_blocks(scales))
    assert blocks.shape == (2, 2, 32, 16)
    for t, u, j, c, s in [(0, 0, 0, 0, 0), (1, 1, 31, 3, 3), (0, 1, 5, 2, 1), (1, 0, 17, 1, 2)]:
        assert blocks[t, u, j, 4 * c + s] == scales[128 * t + 32 * c + j, 4 * u + s]


def test_matmul_under_jit_matches_numpy():
    """256x384x1024: two trips of the 4-stage ring, a 2x3 grid."""
    a, a_scale, b, b_scale = quantized_operands(example(), 256, 384, 1024, seed=1)
    out = example().mxfp8_matmul(a, a_scale, b, b_scale)
    assert out.shape == (256, 384) and out.dtype == example().BF16
    _assert_within_one_bf16_ulp(np.asarray(out), a, a_scale, b, b_scale)


@pytest.mark.parametrize(("policy", "k"), [("latest", 512), ("random", 1024)])
def test_no_hazard_when_async_work_completes_late(policy, k):
    """A stage (or its TMEM scales) refilled while an MMA may still read it, or the
    accumulator read before the MMAs finished, is a SimError."""
    a, a_scale, b, b_scale = quantized_operands(example(), 128, 128, k, seed=2)
    ex = example()
    args = (a, np.asarray(ex.scale_blocks(a_scale)), b, np.asarray(ex.scale_blocks(b_scale)))
    c = np.zeros((128, 128), ml_dtypes.bfloat16)
    out = run_simulated(compiled(128, 128, k), *args, c, async_completion=policy, seed=3)[-1]
    _assert_within_one_bf16_ulp(out, a, a_scale, b, b_scale)


def test_scales_matter():
    """The same elements with every scale of A's first K block doubled: those blocks'
    contribution doubles (the MMA reads each block's own scale)."""
    a, a_scale, b, b_scale = quantized_operands(example(), 128, 128, 512, seed=4)
    doubled = a_scale.astype(np.float32)
    doubled[:, 0] *= 2
    doubled = doubled.astype(ml_dtypes.float8_e8m0fnu)
    out = np.asarray(example().mxfp8_matmul(a, doubled, b, b_scale))
    _assert_within_one_bf16_ulp(out, a, doubled, b, b_scale)
    assert not np.array_equal(out, np.asarray(example().mxfp8_matmul(a, a_scale, b, b_scale)))


@needs_ptxas
def test_ptxas_for_sm_100a_without_spills():
    result = compile_ptx(compiled(512, 512, 1024).ptx, arch=ARCH)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in result.log
    registers = int(re.search(r"Used (\d+) registers", result.log).group(1))
    assert registers <= 96, result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    # 4 stages x 4 K steps of 32 (block-scaled: UTCQMMA); 2 scale copies per stage.
    assert counts["UTCQMMA"] == 16 and counts["UTCCP"] == 8
    assert counts["UTMALDG"] > 0 and counts["UTMASTG"] > 0 and counts["LDTM"] == 4
    assert counts["STS"] <= 32  # the epilogue's 16-byte stores, not one per element


def test_shapes_that_do_not_tile_are_refused():
    with pytest.raises(ValueError, match=r"K a multiple of 512"):
        example().matmul.trace(*specs(128, 128, 256))
