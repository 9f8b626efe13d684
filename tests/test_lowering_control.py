"""scf.for / scf.if with vector and scalar values, through the PTX simulator."""

import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated

WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")

COLUMN_BLOCKS = """
func.func @k(%a: memref<128x512xf32>, %n: i32, %out: memref<128x128xf32>,
             %sums: memref<128xf32>, %iterations: memref<128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant dense<0.0> : vector<128x128xf32>
  %zrow = arith.constant dense<0.0> : vector<128xf32>
  %upper = arith.index_cast %n : i32 to index
  %sum, %cols, %count = scf.for %i = %c0 to %upper step %c1
      iter_args(%acc = %zero, %col = %zrow, %k = %c0)
      -> (vector<128x128xf32>, vector<128xf32>, index) {
    %start = arith.muli %i, %c128 : index
    %v = "smalti.vector_load"(%a, %c0, %start) {out_layouts = [LAYOUT]} : (memref<128x512xf32>, index, index) -> vector<128x128xf32>
    %next = arith.addf %acc, %v : vector<128x128xf32>
    %cs = vector.multi_reduction <add>, %v, %col [0] : vector<128x128xf32> to vector<128xf32>
    %k1 = arith.addi %k, %c1 : index
    scf.yield %next, %cs, %k1 : vector<128x128xf32>, vector<128xf32>, index
  }
  "smalti.vector_store"(%sum, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  %count32 = arith.index_cast %count : index to i32
  %kb = vector.broadcast %count32 : i32 to vector<128xi32>
  "smalti.vector_store"(%cols, %sums, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  "smalti.vector_store"(%kb, %iterations, %c0) : (vector<128xi32>, memref<128xi32>, index) -> ()
  return
}
"""


@pytest.mark.parametrize("layout", [WGMMA, "#smalti.strided<vec = 1>"])
@pytest.mark.parametrize("n", [4, 1, 0])
def test_loop_sums_column_blocks_with_a_dynamic_trip_count(layout, n):
    a = np.random.default_rng(1).integers(-50, 51, (128, 512)).astype(np.float32)
    compiled = compile_mlir(COLUMN_BLOCKS.replace("LAYOUT", layout), "loop.mlir")
    _, _, out, sums, iterations = run_simulated(
        compiled, a, np.int32(n), np.zeros((128, 128), np.float32), np.zeros(128, np.float32),
        np.zeros(128, np.int32))
    blocks = a.reshape(128, 4, 128)[:, :n]
    np.testing.assert_array_equal(out, blocks.sum(axis=1))
    np.testing.assert_array_equal(sums, blocks.sum(axis=(0, 1)))
    np.testing.assert_array_equal(iterations, np.full(128, n, np.int32))
    # With WGMMA the column sum crosses warps through SMEM in every iteration.
    assert ("bar.sync" in compiled.ptx) == (layout == WGMMA)


SWAP = """
func.func @k(%a: memref<4x128xf32>, %b: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %p, %q = scf.for %i = %c0 to %c3 step %c1 iter_args(%u = %x, %v = %y)
      -> (vector<4x128xf32>, vector<4x128xf32>) {
    scf.yield %v, %u : vector<4x128xf32>, vector<4x128xf32>
  }
  "smalti.vector_store"(%p, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  "smalti.vector_store"(%q, %b, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}
"""


def test_loop_carried_values_swap_as_a_parallel_move():
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal((4, 128)).astype(np.float32) for _ in range(2))
    p, q = run_simulated(compile_mlir(SWAP, "swap.mlir"), x, y)
    np.testing.assert_array_equal(p, y)  # three swaps
    np.testing.assert_array_equal(q, x)


BRANCH = """
func.func @k(%a: memref<4x128xf32>, %n: i32, %out: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : i32
  %two = arith.constant dense<2.0> : vector<4x128xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %big = arith.cmpi sgt, %n, %c2 : i32
  %r, %s = scf.if %big -> (vector<4x128xf32>, f32) {
    %d = arith.mulf %x, %two : vector<4x128xf32>
    %s1 = arith.constant 10.0 : f32
    scf.yield %d, %s1 : vector<4x128xf32>, f32
  } else {
    %e = arith.negf %x : vector<4x128xf32>
    %s2 = arith.constant 20.0 : f32
    scf.yield %e, %s2 : vector<4x128xf32>, f32
  }
  %t = arith.constant 30.0 : f32
  %pick = arith.select %big, %s, %t : f32
  %sb = vector.broadcast %pick : f32 to vector<4x128xf32>
  %y = arith.addf %r, %sb : vector<4x128xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}
"""


@pytest.mark.parametrize("n", [5, 2, -7])
def test_if_yields_vectors_and_scalars_from_a_uniform_condition(n):
    x = np.random.default_rng(3).integers(-9, 10, (4, 128)).astype(np.float32)
    _, _, out = run_simulated(compile_mlir(BRANCH, "if.mlir"), x, np.int32(n),
                              np.zeros((4, 128), np.float32))
    expected = x * 2 + 10 if n > 2 else -x + 30
    np.testing.assert_array_equal(out, expected)


NESTED = """
func.func @k(%a: memref<2x4x128xf32>, %out: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant dense<0.0> : vector<1x4x128xf32>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %zero) -> (vector<1x4x128xf32>) {
    %inner = scf.for %j = %c0 to %c2 step %c1 iter_args(%acc2 = %acc) -> (vector<1x4x128xf32>) {
      %odd = arith.cmpi eq, %j, %c1 : index
      %v = "smalti.vector_load"(%a, %j, %c0, %c0) : (memref<2x4x128xf32>, index, index, index) -> vector<1x4x128xf32>
      %w = scf.if %odd -> (vector<1x4x128xf32>) {
        %n = arith.negf %v : vector<1x4x128xf32>
        scf.yield %n : vector<1x4x128xf32>
      } else {
        scf.yield %v : vector<1x4x128xf32>
      }
      %s = arith.addf %acc2, %w : vector<1x4x128xf32>
      scf.yield %s : vector<1x4x128xf32>
    }
    scf.yield %inner : vector<1x4x128xf32>
  }
  %f = vector.shape_cast %r : vector<1x4x128xf32> to vector<4x128xf32>
  "smalti.vector_store"(%f, %out, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}
"""


def test_nested_loops_and_branches_at_loop_dependent_indices():
    a = np.random.default_rng(4).integers(-9, 10, (2, 4, 128)).astype(np.float32)
    compiled = compile_mlir(NESTED, "nested.mlir")
    _, out = run_simulated(compiled, a, np.zeros((4, 128), np.float32))
    np.testing.assert_array_equal(out, 3 * (a[0] - a[1]))
    assert compiled.ptx.count("bra.uni") == 2 + 2  # two back edges, one if-else pair


BARRIER = """
func.func @k(%a: memref<4x128xf32>, %n: i32, %out: memref<4x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y, %m = "smalti.optimization_barrier"(%x, %n) : (vector<4x128xf32>, i32) -> (vector<4x128xf32>, i32)
  %z = arith.addf %y, %y : vector<4x128xf32>
  %mb = vector.broadcast %m : i32 to vector<4x128xi32>
  "smalti.vector_store"(%z, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  "smalti.vector_store"(%mb, %out, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  return
}
"""


def test_optimization_barrier_passes_registers_through():
    x = np.random.default_rng(5).standard_normal((4, 128)).astype(np.float32)
    compiled = compile_mlir(BARRIER, "barrier.mlir")
    z, _, m = run_simulated(compiled, x, np.int32(-12), np.zeros((4, 128), np.int32))
    np.testing.assert_array_equal(z, x + x)
    np.testing.assert_array_equal(m, np.full((4, 128), -12, np.int32))
    assert compiled.ptx.count("mov.f32") == 0  # no copies: the same registers
