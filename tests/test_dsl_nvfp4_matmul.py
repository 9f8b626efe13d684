"""The NVFP4 block-scaled matmul example (examples/nvfp4_matmul.py): e2m1 A and B packed two
per byte, a UE4M3 scale per 1x16 block of K, the scales copied to tensor memory with
tcgen05_copy, tcgen05 .kind::mxf4nvf4 MMAs (scale_vec::4X) into an f32 accumulator, bf16
out. Numbers under jax.jit with jnp.float4_e2m1fn arrays through the simulator against numpy
(dequantise, then matmul), no hazard when async work completes late, the scale rearrangement
against the ISA's byte order, and ptxas for sm_100a: no spills, the block-scaled MMAs and
scale copies in the SASS."""

from __future__ import annotations

import re
from functools import cache

import jax
import jax.numpy as jnp
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
    return load_example("nvfp4_matmul")


def specs(m: int, n: int, k: int) -> tuple[jax.ShapeDtypeStruct, ...]:
    ex = example()
    return (jax.ShapeDtypeStruct((m, k), ex.E2M1),
            jax.ShapeDtypeStruct((m // 128, k // 256, 4, 32, 16), ex.UE4M3),
            jax.ShapeDtypeStruct((n, k), ex.E2M1),
            jax.ShapeDtypeStruct((n // 128, k // 256, 4, 32, 16), ex.UE4M3))


@cache
def compiled(m: int, n: int, k: int) -> CompiledModule:
    return compile_module(example().matmul.trace(*specs(m, n, k)).module, arch=ARCH)


def _assert_within_one_bf16_ulp(out: np.ndarray, a, a_scale, b, b_scale) -> None:
    """`out` is the f64 product of the dequantised operands rounded to bf16, give or take
    the f32 accumulation's rounding (one bf16 ulp)."""
    exact = example().dequantize(a, a_scale) @ example().dequantize(b, b_scale).T
    expected = assert_within_one_bf16_ulp(out, exact)
    assert np.abs(expected).max() > 1  # a product, not zeros


def test_quantized_operands_dequantize_to_the_inputs_within_e2m1():
    """The example's NVFP4 quantisation: non-negative UE4M3 scales, every block's largest
    element within e2m1's range, the dequantised values within e2m1's and the scale's
    rounding of the input (e2m1 steps are at most a third of the block's largest)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 256)).astype(np.float32) * 100
    x[0, :16] = 0  # an all-zero block
    elements, scales = example().quantize(x)
    assert elements.dtype == ml_dtypes.float4_e2m1fn and scales.dtype == ml_dtypes.float8_e4m3fn
    assert scales.shape == (128, 16)
    assert (scales.astype(np.float32) > 0).all()
    assert np.abs(elements.astype(np.float32)).max() <= 6
    blocks = np.abs(x).reshape(128, 16, 16).max(axis=2)
    error = np.abs(example().dequantize(elements, scales) - x).reshape(128, 16, 16).max(axis=2)
    assert (error <= blocks / 3 + 1e-6).all()


def test_scale_blocks_follow_the_tcgen05_cp_byte_order():
    """Byte 4c + s of row j of copy g of block (t, u) is the scale of row 128t + 32c + j for
    K block 16u + 4g + s (smalti/dialect/ops_tcgen05.py "Scale factors in TMEM", the
    .32x128b.warpx4 copy, 4 TMEM columns per copy)."""
    scales = np.arange(256 * 32, dtype=np.float32).reshape(256, 32)
    blocks = np.asarray(example().scale_blocks(scales))
    assert blocks.shape == (2, 2, 4, 32, 16)
    for t, u, g, j, c, s in [(0, 0, 0, 0, 0, 0), (1, 1, 3, 31, 3, 3), (0, 1, 2, 5, 2, 1),
                             (1, 0, 1, 17, 1, 2)]:
        assert blocks[t, u, g, j, 4 * c + s] == scales[128 * t + 32 * c + j, 16 * u + 4 * g + s]


def test_matmul_under_jit_with_jax_fp4_arrays_matches_numpy():
    """256x384x2048: two trips of the 4-stage ring, a 2x3 grid; jnp.float4_e2m1fn arrays."""
    a, a_scale, b, b_scale = quantized_operands(example(), 256, 384, 2048, seed=1)
    out = example().nvfp4_matmul(jnp.asarray(a), jnp.asarray(a_scale), jnp.asarray(b),
                                 jnp.asarray(b_scale))
    assert out.shape == (256, 384) and out.dtype == example().BF16
    _assert_within_one_bf16_ulp(np.asarray(out), a, a_scale, b, b_scale)


@pytest.mark.parametrize(("policy", "k"), [("latest", 1024), ("random", 2048)])
def test_no_hazard_when_async_work_completes_late(policy, k):
    """A stage (or its TMEM scales) refilled while an MMA may still read it, or the
    accumulator read before the MMAs finished, is a SimError."""
    a, a_scale, b, b_scale = quantized_operands(example(), 128, 128, k, seed=2)
    ex = example()
    args = (a, np.asarray(ex.scale_blocks(a_scale)), b, np.asarray(ex.scale_blocks(b_scale)))
    c = np.zeros((128, 128), ml_dtypes.bfloat16)
    out = run_simulated(compiled(128, 128, k), *args, c, async_completion=policy, seed=3)[-1]
    _assert_within_one_bf16_ulp(out, a, a_scale, b, b_scale)


def test_scales_and_both_nibbles_matter():
    """Every scale of A's first 16-element K block doubled doubles those blocks'
    contribution (the MMA reads each block's own scale), and swapping the nibbles of B's
    bytes changes the product (the MMA reads both elements of each byte, in order)."""
    a, a_scale, b, b_scale = quantized_operands(example(), 128, 128, 1024, seed=4)
    doubled = a_scale.astype(np.float32)
    doubled[:, 0] *= 2
    doubled = doubled.astype(ml_dtypes.float8_e4m3fn)
    matmul = example().nvfp4_matmul
    out = np.asarray(matmul(a, doubled, b, b_scale))
    _assert_within_one_bf16_ulp(out, a, doubled, b, b_scale)
    assert not np.array_equal(out, np.asarray(matmul(a, a_scale, b, b_scale)))
    codes = b.view(np.uint8).reshape(128, 512, 2)[..., ::-1].reshape(128, 1024)
    swapped = np.ascontiguousarray(codes).view(ml_dtypes.float4_e2m1fn)
    _assert_within_one_bf16_ulp(np.asarray(matmul(a, a_scale, swapped, b_scale)), a, a_scale,
                                swapped, b_scale)


@needs_ptxas
def test_ptxas_for_sm_100a_without_spills():
    result = compile_ptx(compiled(512, 512, 1024).ptx, arch=ARCH)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in result.log
    registers = int(re.search(r"Used (\d+) registers", result.log).group(1))
    assert registers <= 96, result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    # 4 stages x 4 K steps of 64 (.kind::mxf4nvf4: UTCOMMA); 2 x 4 scale copies per stage.
    assert counts["UTCOMMA"] == 16 and counts["UTCCP"] == 32
    assert counts["UTMALDG"] > 0 and counts["UTMASTG"] > 0 and counts["LDTM"] == 4
    assert counts["STS"] <= 32  # the epilogue's 16-byte stores, not one per element
    assert ".kind::mxf4nvf4.block_scale.scale_vec::4X" in compiled(512, 512, 1024).ptx


def test_shapes_that_do_not_tile_are_refused():
    with pytest.raises(ValueError, match=r"K a multiple of 1024"):
        example().matmul.trace(*specs(128, 128, 512))
