"""Warpgroup semantics for shared memory: a load sees the warpgroup's earlier stores, a
store or TMA refill waits for its earlier loads. The lowering meets (the warpgroup's named
barrier) exactly where threads may touch each other's elements, and the simulator, which
reports a race wherever that order is missing, checks the numbers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd
from smalti.runtime import compile_mlir, run_simulated
from tests.dsl_helpers import isolated_cache  # noqa: F401

F32 = jnp.float32
WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")
STRIDED = "#smalti.strided<vec = 4>"

ROUND_TRIP = """
func.func @k(%a: memref<128x128xf32>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<128x128xf32, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [STORED]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  "smalti.vector_store"(%v, %s, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32, #gpu.address_space<workgroup>>, index, index) -> ()
  %w = "smalti.vector_load"(%s, %c0, %c0) {out_layouts = [LOADED]} : (memref<128x128xf32, #gpu.address_space<workgroup>>, index, index) -> vector<128x128xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
"""


def _round_trip(stored: str, loaded: str):
    compiled = compile_mlir(ROUND_TRIP.replace("STORED", stored).replace("LOADED", loaded),
                            "round_trip.mlir")
    a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    out = run_simulated(compiled, a, np.zeros_like(a))[-1]
    np.testing.assert_array_equal(out, a)
    return compiled.ptx


def test_a_load_in_another_layout_waits_for_the_stores():
    ptx = _round_trip(WGMMA, STRIDED)
    stores, load = ptx.index("st.shared"), ptx.index("ld.shared")
    assert ptx.count("bar.sync") == 1
    assert stores < ptx.index("bar.sync") < load


def test_a_load_of_what_each_thread_stored_needs_no_barrier():
    ptx = _round_trip(STRIDED, STRIDED)
    assert "bar.sync" not in ptx


def test_the_dsl_round_trip_reads_what_it_stored():
    """../shared/repros/dsl_smem_roundtrip_race.py: `s[...] = x; y = s[...]` (transposed
    after), with no barrier written by the user."""

    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128, 128), F32),
               smem=[sd.SMEM((128, 128), F32)])
    def roundtrip(x_ref, o_ref, s):
        s[...] = x_ref[...] * 2.0
        o_ref[...] = s[...].T

    x = jax.random.normal(jax.random.key(0), (128, 128), F32)
    np.testing.assert_array_equal(np.asarray(jax.jit(roundtrip)(x)), np.asarray(x * 2).T)


def test_a_tma_refill_waits_for_the_loads_of_the_previous_iteration():
    """A loop that loads a tile by TMA and reads it with generic loads: the next iteration's
    copy overwrites what this one's threads read, so it waits for them."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32),
               smem=[sd.Barriers(1), sd.SMEM((128, 128), F32)])
    def column_sums(x_ref, out_ref, bars, tile):
        def step(k, acc):
            bars[0].arrive_expect_tx(tile.nbytes)
            sd.async_copy(x_ref.at[:, k * 128:k * 128 + 128], tile, bars[0])
            bars[0].wait(k)
            return acc + tile[...]

        out_ref[...] = sd.fori(0, x_ref.shape[1] // 128, step, sd.zeros((128, 128)))

    x = np.random.default_rng(1).standard_normal((128, 512)).astype(np.float32)
    got = np.asarray(jax.jit(column_sums)(x))
    want = x.reshape(128, 4, 128).sum(axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    _, compiled = column_sums.compile(jax.ShapeDtypeStruct((128, 512), F32))
    loop = compiled.ptx[compiled.ptx.index("$loop_0:"):compiled.ptx.index("$loop_end_0:")]
    assert loop.index("bar.sync") < loop.index("cp.async.bulk.tensor")


def test_an_explicit_barrier_is_not_doubled():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), F32),
               smem=[sd.SMEM((128, 128), F32)])
    def explicit(x_ref, out_ref, tile):
        tile[...] = x_ref[...]
        sd.warpgroup_barrier()
        out_ref[...] = tile[...].T

    _, compiled = explicit.compile(jax.ShapeDtypeStruct((128, 128), F32))
    assert compiled.ptx.count("bar.sync") == 1
