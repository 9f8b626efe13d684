"""The Blackwell flash attention example (examples/blackwell_flash_attention.py): numbers
under jax.jit through the simulator against a numpy softmax, no hazard when async work
completes late, the ops it traces to (S and O in TMEM, a 2-stage ring released by commits),
and ptxas for sm_100a: no spills, the tcgen05 MMAs, TMA and TMEM accesses in the SASS."""

from __future__ import annotations

import math
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
from tests.dsl_helpers import isolated_cache, load_example  # noqa: F401

BF16 = jnp.bfloat16
ARCH = "sm_100a"
ATOL = 2e-2
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")


@cache
def example():
    return load_example("blackwell_flash_attention")


def spec(heads: int, seq: int, head_dim: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((heads, seq, head_dim), BF16)


def kernel(causal: bool):
    return example().causal_attention if causal else example().attention


@cache
def compiled(head_dim: int, causal: bool, seq: int = 256, heads: int = 2) -> CompiledModule:
    shape = spec(heads, seq, head_dim)
    return compile_module(kernel(causal).trace(shape, shape, shape).module, arch=ARCH)


def inputs(heads: int, seq: int, head_dim: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((heads, seq, head_dim)).astype(ml_dtypes.bfloat16)
                 for _ in range(3))


def expected(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v in f32 numpy from the bf16 inputs."""
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    scores = np.einsum("hqd,hkd->hqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("hqk,hkd->hqd", weights / weights.sum(axis=-1, keepdims=True), v)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("heads", "seq", "head_dim"), [(2, 256, 64), (1, 256, 128),
                                                        (1, 512, 64)])
def test_attention_under_jit_matches_numpy(heads, seq, head_dim, causal):
    """seq 512 takes two trips of the ring (non-causal; causal, the last Q blocks one trip
    and the tail): the refill of stage 0 and both stages' phases flipping."""
    q, k, v = inputs(heads, seq, head_dim)
    out = jax.jit(example().flash_attention, static_argnames="causal")(q, k, v, causal=causal)
    assert out.shape == q.shape and out.dtype == BF16
    want = expected(q, k, v, causal)
    np.testing.assert_allclose(np.asarray(out, np.float32), want, atol=ATOL, rtol=0)
    np.testing.assert_allclose(np.asarray(example().reference(q, k, v, causal), np.float32),
                               want, atol=1e-2, rtol=0)


def test_causal_attention_never_reads_tiles_past_the_diagonal():
    """NaN keys and values after row 256 would poison any Q block that read them (masked or
    not): the first two Q blocks, whose diagonals come before, stay exact."""
    q, k, v = inputs(1, 512, 64, seed=2)
    poisoned_k, poisoned_v = (x.copy() for x in (k, v))
    poisoned_k[:, 256:], poisoned_v[:, 256:] = np.nan, np.nan
    run = jax.jit(example().flash_attention, static_argnames="causal")
    clean = np.asarray(run(q, k, v, causal=True), np.float32)
    poisoned = np.asarray(run(q, poisoned_k, poisoned_v, causal=True), np.float32)
    np.testing.assert_array_equal(poisoned[:, :256], clean[:, :256])
    assert np.isnan(poisoned[:, 256:]).all()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("policy", ["latest", "random"])
def test_no_hazard_when_async_work_completes_late(policy, causal):
    """The simulator reports a stage refilled while an MMA may still read it, P or O
    rewritten under a running MMA, or S or O read before the MMA writing it completed, as a
    SimError; "latest" completes every TMA copy and MMA as late as allowed."""
    q, k, v = inputs(1, 512, 64, seed=3)
    out = run_simulated(compiled(64, causal, 512, 1), q, k, v, np.zeros_like(q),
                        async_completion=policy, seed=5)[-1]
    np.testing.assert_allclose(out.astype(np.float32), expected(q, k, v, causal), atol=ATOL,
                               rtol=0)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_traces_to_s_and_o_in_tmem_and_a_ring_of_mmas(head_dim):
    shape = spec(2, 256, head_dim)
    traced = example().attention.trace(shape, shape, shape)
    assert traced.grid == (2, 1, 2)
    text = traced.mlir
    ops = re.findall(r'"(smalti\.\w+)"', text)
    assert 'memref<128x128xf32, "tmem">' in text  # S
    assert f'memref<128x{head_dim}xf32, "tmem">' in text  # O
    assert ops.count("smalti.tmem_alloc") == 2
    assert ops.count("smalti.tcgen05_mma") == 4  # S and P V, for each stage of the ring
    assert ops.count("smalti.tcgen05_commit") == 5  # S done and a stage freed each, the end
    assert ops[-4:] == ["smalti.async_store", "smalti.async_store_wait", "smalti.tmem_dealloc",
                        "smalti.tmem_dealloc"]


@needs_ptxas
@pytest.mark.parametrize("head_dim", [64, 128])
def test_ptxas_for_sm_100a_without_spills(head_dim):
    result = compile_ptx(compiled(head_dim, False).ptx, arch=ARCH)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    # Per K/V tile (2 traced): S = Q K^T is d / 16 MMAs of K 16, P V is 128 / 16.
    assert counts["UTCHMMA"] == 2 * (head_dim // 16 + 128 // 16)
    # S twice in 64-column halves, O's rescale 32 columns at a time, and the epilogue.
    assert counts["LDTM"] == 2 * (4 + head_dim // 32) + head_dim // 32
    assert counts["UTMALDG"] > 0 and counts["UTMASTG"] > 0 and counts["STTM"] > 0


@needs_ptxas
@pytest.mark.parametrize("head_dim", [64, 128])
def test_causal_kernel_compiles_without_spills(head_dim):
    result = compile_ptx(compiled(head_dim, True).ptx, arch=ARCH)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    assert counts["UTCHMMA"] > 0 and counts["LDTM"] > 0 and counts["UTMALDG"] > 0


def test_causal_mask_is_computed_in_the_tmem_loads_layout():
    """Each thread compares and selects its row's 128 elements of the diagonal tile in each
    of the two passes over S (two diagonal steps are traced), and no data moves between
    threads for it: the shuffles and shared-memory stores are the non-causal kernel's."""
    causal, full = compiled(64, True).ptx, compiled(64, False).ptx
    compares, selects = (len(re.findall(p, causal)) for p in (r"setp\.le\.s32", r"selp\.f32"))
    assert compares == selects == 2 * 2 * 128
    assert "selp" not in full
    assert causal.count("shfl.sync") == full.count("shfl.sync")


@pytest.mark.parametrize(("shape", "message"), [
    ((1, 128, 64), "seq a multiple of 256"),
    ((1, 256, 96), "head_dim 64 or 128"),
    ((256, 64), "one shape"),
])
def test_unsupported_shapes_are_refused(shape, message):
    shape = jax.ShapeDtypeStruct(shape, BF16)
    with pytest.raises(ValueError, match=message):
        example().attention.trace(shape, shape, shape)
