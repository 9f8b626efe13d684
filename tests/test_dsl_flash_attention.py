"""The flash attention example (examples/flash_attention.py): numbers under jax.jit through
the simulator against jax.nn.dot_product_attention, causal tiles past the diagonal never
read, the causal mask computed in the kernel without moving data, no hazards when async
work completes late, P fed to wgmma from registers, and ptxas (no spills; HGMMA and TMA in
the SASS)."""

from __future__ import annotations

import re
from functools import cache

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import export

from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import launcher, run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import CompiledModule, compile_module
from tests.dsl_helpers import isolated_cache, load_example  # noqa: F401

BF16 = jnp.bfloat16
F32 = jnp.float32
ATOL = 2e-2
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")


@cache
def example():
    return load_example("flash_attention")


def inputs(heads: int, seq: int, head_dim: int, seed: int = 0) -> tuple[jax.Array, ...]:
    keys = jax.random.split(jax.random.key(seed), 3)
    return tuple(jax.random.normal(key, (heads, seq, head_dim), F32).astype(BF16)
                 for key in keys)


def expected(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool) -> np.ndarray:
    """jax.nn.dot_product_attention in f32 (one head per leading index)."""
    q, k, v = (x.astype(F32)[:, :, None, :] for x in (q, k, v))  # (batch, seq, 1, d)
    return np.asarray(jax.nn.dot_product_attention(q, k, v, is_causal=causal)[:, :, 0, :])


@cache
def compiled(head_dim: int, causal: bool, seq: int = 256, heads: int = 2) -> CompiledModule:
    spec = jax.ShapeDtypeStruct((heads, seq, head_dim), BF16)
    kernel = example().causal_attention if causal else example().attention
    return compile_module(kernel.trace(spec, spec, spec).module)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq, head_dim", [(128, 64), (256, 64), (256, 128)])
def test_flash_attention_under_jit_matches_dot_product_attention(seq, head_dim, causal):
    q, k, v = inputs(2, seq, head_dim)
    run = jax.jit(example().flash_attention, static_argnames="causal")
    out = run(q, k, v, causal=causal)
    assert out.shape == q.shape and out.dtype == BF16
    got = np.asarray(out, np.float32)
    want = expected(q, k, v, causal)
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)
    # The example's own reference agrees with jax's.
    np.testing.assert_allclose(np.asarray(example().reference(q, k, v, causal), np.float32),
                               want, atol=1e-2, rtol=0)


def test_causal_attention_never_reads_tiles_past_the_diagonal():
    """NaN keys and values after row 128 would poison any Q block that read them (masked or
    not): the first two Q blocks, whose diagonals come before, stay exact."""
    q, k, v = inputs(1, 256, 64, seed=3)
    poisoned_k, poisoned_v = (x.at[:, 128:, :].set(jnp.nan) for x in (k, v))
    run = jax.jit(example().flash_attention, static_argnames="causal")
    clean = np.asarray(run(q, k, v, causal=True), np.float32)
    poisoned = np.asarray(run(q, poisoned_k, poisoned_v, causal=True), np.float32)
    np.testing.assert_array_equal(poisoned[:, :128], clean[:, :128])
    assert np.isnan(poisoned[:, 128:]).all()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("policy", ["latest", "random"])
def test_no_hazards_when_async_work_completes_late(policy, causal):
    """The simulator reports a missing wait or fence as a SimError; "latest" completes every
    TMA copy and wgmma as late as allowed. Grid (2, 2, 2) covers every pipeline path."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 256, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    out = np.zeros_like(q)
    result = run_simulated(compiled(64, causal), q, k, v, out,
                           async_completion=policy, seed=5)[-1]
    want = expected(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), causal)
    np.testing.assert_allclose(result.astype(np.float32), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_p_is_fed_to_wgmma_from_registers(causal):
    """S = Q K^T reads both operands by descriptor; O += P V takes P as four registers per
    instruction (m64n64k16 for S, m64n{d}k16 for P V)."""
    ptx = compiled(64, causal).ptx
    instructions = re.findall(r"wgmma\.mma_async\S* \{[^}]*\}, (\{[^}]*\}|%rd\d+)", ptx)
    from_registers = [a for a in instructions if a.startswith("{")]
    assert from_registers and len(from_registers) == len(instructions) // 2
    assert all(len(a.split(",")) == 4 for a in from_registers)


def test_causal_mask_is_computed_in_the_accumulators_layout():
    """The causal kernel takes Q, K and V only. Each thread compares and selects its 32
    elements of the 64x64 diagonal tile (two diagonal steps are traced: 64 of each), and the
    iotas are made in the WGMMA layout itself: no data moves between threads for the mask
    (shuffles per traced step and shared-memory stores match the non-causal kernel's)."""
    spec = jax.ShapeDtypeStruct((2, 256, 64), BF16)
    text = str(example().causal_attention.trace(spec, spec, spec).module)
    arguments = re.search(r"func\.func @causal_attention\(([^)]*)\)", text).group(1)
    assert arguments.count("%arg") == 4 and '"smalti.iota"' in text  # Q, K, V, O
    causal, full = compiled(64, True).ptx, compiled(64, False).ptx
    compares, selects = (len(re.findall(p, causal)) for p in (r"setp\.le\.s32", r"selp\.f32"))
    assert compares == selects == 64
    assert "selp" not in full
    # step() is traced 5 times causal (2 in the loop, 2 + 1 for the diagonal), twice not;
    # its shuffles are the row reductions' butterflies (the shfl.sync.idx broadcasting the
    # warp index for the TMA issue's elected branch is the kernel's, once).
    assert 2 * causal.count("shfl.sync.bfly") == 5 * full.count("shfl.sync.bfly") > 0
    assert causal.count("st.shared") == full.count("st.shared")


@needs_ptxas
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_flash_attention_compiles_without_spills(head_dim, causal):
    result = compile_ptx(compiled(head_dim, causal).ptx, arch="sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    for opcode in ("HGMMA", "UTMALDG", "UTMASTG"):
        assert any(name.startswith(opcode) for name in counts), opcode


@needs_ptxas
def test_export_for_cuda_carries_the_causal_kernels_cubin():
    """On this CPU-only machine: the custom call carries the cubin, and the kernel takes Q, K
    and V only (the causal mask is computed inside it)."""
    name = launcher.TARGET_NAME
    q = jax.ShapeDtypeStruct((2, 256, 64), BF16)
    causal = jax.jit(lambda q, k, v: example().flash_attention(q, k, v, causal=True))
    exported = export.export(causal, platforms=["cuda"],
                             disabled_checks=[export.DisabledSafetyCheck.custom_call(name)])(
        q, q, q)
    call = next(line for line in exported.mlir_module().splitlines()
                if f"custom_call @{name}" in line)
    _, kernel = example().causal_attention.compile(q, q, q)
    assert kernel.cubin is not None and kernel.cubin.hex().upper() in call
    assert 'kernel = "causal_attention"' in call
    assert exported.out_avals[0].shape == (2, 256, 64)


@pytest.mark.parametrize("shape, message", [
    ((1, 192, 64), "seq a multiple of 128"),
    ((1, 128, 96), "head_dim 64 or 128"),
    ((128, 64), "one shape"),
])
def test_unsupported_shapes_raise_before_tracing_the_body(shape, message):
    spec = jax.ShapeDtypeStruct(shape, BF16)
    with pytest.raises(ValueError, match=message):
        example().attention.trace(spec, spec, spec)
