"""Scoped barriers end with `smalti.invalidate_barrier` (PTX ISA, mbarrier.inval: required
before an mbarrier's bytes are reused): the op's lowering run in the simulator against
numpy, the simulator's report of a data store over a live mbarrier, and the invalidation
that `sd.scoped_smem` and `sd.emit_pipeline` emit where their scope ends."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime import compile_mlir
from smalti.runtime.compiler import compile_module
from smalti.runtime.simulate import run_simulated
from smalti.sim.errors import SimError

ROOT = Path(__file__).resolve().parents[1]
LIT_FILE = ROOT / "lit_tests" / "lowering" / "invalidate_barrier.mlir"
F32 = jnp.float32
INVALIDATE = '"smalti.invalidate_barrier"'


def _kernel(invalidate: bool) -> str:
    text = LIT_FILE.read_text()
    assert INVALIDATE in text
    return text if invalidate else "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith(INVALIDATE))


def test_invalidated_barrier_bytes_hold_data():
    """The lit kernel: two barriers at offset 0, invalidated, then 512 bytes of data stored
    over them and read back."""
    x = np.arange(128, dtype=np.float32) * 0.5
    compiled = compile_mlir(_kernel(True), "invalidate_barrier.mlir")
    (out,) = run_simulated(compiled, x.copy())
    np.testing.assert_array_equal(out, x)


def test_storing_over_a_live_barrier_is_reported():
    compiled = compile_mlir(_kernel(False), "invalidate_barrier.mlir")
    with pytest.raises(SimError, match=r"overwrites the live mbarrier at 0x0: invalidate it "
                                       r"\(mbarrier.inval\) before reusing its memory"):
        run_simulated(compiled, np.zeros(128, np.float32))


def test_scoped_barriers_are_invalidated_before_the_next_scope_reuses_them():
    """A scope with barriers (and a data buffer); the next scope's tile lands on the same
    bytes and is stored to: fine, since the first scope's exit invalidated its barriers."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32))
    def reuse(x_ref, o_ref):
        with sd.scoped_smem(sd.Barriers(2), sd.SMEM((128, 128), F32)) as (bars, tile):
            bars[0].arrive_expect_tx(tile.nbytes)
            sd.async_copy(x_ref, tile, bars[0])
            bars[0].wait(0)
        with sd.scoped_smem(sd.SMEM((128, 128), F32)) as (again,):
            again[...] = x_ref[...] * 2.0
            o_ref[...] = again[...]

    x = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    traced = str(reuse.trace(x).module)
    assert traced.count(INVALIDATE) == 1
    np.testing.assert_array_equal(np.asarray(jax.jit(reuse)(x)), x * 2.0)


def pipeline_kernel(reuse: bool):
    """A 2-stage pipeline (rings at [0, 64 KiB), barriers at 64 KiB); with `reuse`, the
    accumulator then goes through a scoped 68 KiB tile that covers the barriers' bytes."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32))
    def matmul(a_ref, b_ref, c_ref):
        acc = sd.emit_pipeline(
            lambda _, a, b, acc: sd.wgmma(acc, a, b), grid=2,
            in_specs=[sd.BlockSpec((128, 64), lambda j: (0, j)),
                      sd.BlockSpec((64, 128), lambda j: (j, 0))],
            max_concurrent_steps=2, init_carry=sd.zeros((128, 128), F32))(a_ref, b_ref)
        if not reuse:
            c_ref[...] = acc
            return
        with sd.scoped_smem(sd.SMEM((136, 128), F32)) as (tile,):
            tile[8:, :] = acc
            c_ref[...] = tile[8:, :]

    return matmul


@pytest.mark.parametrize("reuse", [True, False])
def test_a_pipelines_barriers_are_invalidated_where_their_bytes_are_reused(reuse):
    """Invalidated after the loop when a later scope reuses the bytes; never reused, the
    invalidation is dropped (ptxas schedules the loop worse with one after it)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 128)).astype(jnp.bfloat16)
    b = rng.standard_normal((128, 128)).astype(jnp.bfloat16)
    kernel = pipeline_kernel(reuse)
    text = str(kernel.trace(a, b).module)
    assert text.count(INVALIDATE) == reuse
    if reuse:
        assert text.rindex('"smalti.wgmma"') < text.index(INVALIDATE) < text.rindex(
            '"smalti.vector_store"')
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(a, b)),
                               a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-4)


def test_a_tma_load_over_a_live_barrier_is_reported():
    """A union of barriers and a tile: TMA writing the tile while the barriers live (they
    are never invalidated) is reported at the copy."""
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32),
               smem=[sd.Union(sd.Barriers(2), sd.SMEM((128, 128), F32)), sd.Barriers(1)])
    def clobber(x_ref, o_ref, bars, tile, done):
        done[0].arrive_expect_tx(tile.nbytes)
        sd.async_copy(x_ref, tile, done[0])
        done[0].wait(0)
        o_ref[...] = tile[...]

    spec = jax.ShapeDtypeStruct((128, 128), F32)
    compiled = compile_module(clobber.trace(spec).module)
    x = np.ones((128, 128), np.float32)
    with pytest.raises(SimError, match=r"writes shared address 0x0, in the live mbarrier at "
                                       r"0x0: invalidate it \(mbarrier.inval\)"):
        run_simulated(compiled, x, np.zeros_like(x))
