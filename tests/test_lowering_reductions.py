"""vector.multi_reduction through the PTX simulator, against numpy.

Inputs are chosen so that every order of combination gives the same bits (small integers
for sums, powers of two for products), so the comparisons are exact."""

import ml_dtypes
import numpy as np
import pytest

from smalti.runtime import NUMPY_DTYPES, compile_mlir, run_simulated

BF16 = ml_dtypes.bfloat16
WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")
WGMMA_T = ("#smalti.tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], "
           "lane = [-3, -4], vector = -2>")
STRIDED = "#smalti.strided<vec = 4>"
NUMPY = {"f32": np.float32, "bf16": BF16, "i32": np.int32}


def reduction_kernel(kind: str, element: str, shape: tuple[int, int], dims: list[int],
                     layout: str) -> str:
    """out = reduce(kind, a, dims) combined with acc (loaded), for a 2-D `a` in `layout`."""
    kept = [s for d, s in enumerate(shape) if d not in dims]
    a = f"memref<{shape[0]}x{shape[1]}x{element}>"
    va = f"vector<{shape[0]}x{shape[1]}x{element}>"
    r = f"memref<{kept[0]}x{element}>"
    vr = f"vector<{kept[0]}x{element}>"
    return f"""
func.func @k(%a: {a}, %acc: {r}, %out: {r}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {{out_layouts = [{layout}]}} : ({a}, index, index) -> {va}
  %z = "smalti.vector_load"(%acc, %c0) : ({r}, index) -> {vr}
  %r = vector.multi_reduction <{kind}>, %x, %z {dims} : {va} to {vr}
  "smalti.vector_store"(%r, %out, %c0) : ({vr}, {r}, index) -> ()
  return
}}
"""


def _inputs(kind: str, dtype, shape, rng):
    if dtype == np.int32:
        return rng.integers(-2**31, 2**31, shape, dtype=np.int32)
    if kind == "add":
        return rng.integers(-4, 5, shape).astype(dtype)
    if kind == "mul":
        return rng.choice([1.0, -1.0, 2.0, 0.5], shape).astype(dtype)
    values = rng.standard_normal(shape).astype(dtype)
    values.flat[rng.choice(values.size, 3, replace=False)] = np.nan
    return values


REFERENCE = {"add": np.add, "mul": np.multiply, "maximumf": np.maximum,
             "minimumf": np.minimum, "maxsi": np.maximum, "minsi": np.minimum}


def _run(text: str, *inputs):
    compiled = compile_mlir(text, "test.mlir")
    out_arg = compiled.signature().args[-1]
    out = np.zeros(out_arg.shape, NUMPY_DTYPES[out_arg.dtype])
    return compiled, run_simulated(compiled, *inputs, out)[-1]


def _expected(kind, a, acc, dim):
    ufunc = REFERENCE[kind]
    with np.errstate(over="ignore", invalid="ignore"):
        return ufunc(ufunc.reduce(a, axis=dim, dtype=a.dtype), acc).astype(a.dtype)


def _same(got, expected):
    np.testing.assert_array_equal(got.astype(np.float64) if got.dtype == BF16 else got,
                                  expected.astype(np.float64) if got.dtype == BF16 else expected)


@pytest.mark.parametrize(("kind", "element"), [
    ("add", "f32"), ("maximumf", "f32"), ("minimumf", "f32"), ("mul", "f32"),
    ("add", "i32"), ("maxsi", "i32"), ("minsi", "i32"),
    ("add", "bf16"), ("maximumf", "bf16"),
])
@pytest.mark.parametrize(("layout", "shape", "dim"), [
    (WGMMA, (128, 64), 1),    # rows: registers, then the 4 lanes of a quad
    (WGMMA, (128, 64), 0),    # columns: registers, 8 lane groups, then 4 warps via SMEM
    (WGMMA_T, (64, 128), 0),  # the transposed layout: the vector dim is reduced
    (WGMMA_T, (64, 128), 1),  # ... and here the warps hold the reduced dim
    (STRIDED, (4, 512), 0),   # leading dims of a strided layout: registers only
], ids=["wgmma-rows", "wgmma-cols", "transposed-0", "transposed-1", "strided"])
def test_reduction_matches_numpy(kind, element, layout, shape, dim):
    dtype = NUMPY[element]
    rng = np.random.default_rng(abs(hash((kind, element, shape, dim))) % 2**32)
    a = _inputs(kind, dtype, shape, rng)
    acc = _inputs(kind, dtype, (shape[1 - dim],), rng)
    _, got = _run(reduction_kernel(kind, element, shape, [dim], layout), a, acc)
    _same(got, _expected(kind, a, acc, dim))


def test_cross_warp_reduction_uses_scratch_smem_between_barriers():
    compiled, _ = _run(reduction_kernel("add", "f32", (128, 64), [0], WGMMA),
                       np.zeros((128, 64), np.float32), np.zeros(64, np.float32))
    ptx = compiled.ptx
    assert ".shared .align 16 .b8 __smalti_reduce_0[1024];" in ptx  # 16 slots x 16 partials
    assert ptx.count("bar.sync 0;") == 2
    assert ptx.count("shfl.sync.bfly.b32") == 16 * 3  # lane bits 2, 3, 4 per partial


def test_row_reduction_stays_in_the_warp():
    compiled, _ = _run(reduction_kernel("maximumf", "f32", (128, 64), [1], WGMMA),
                       np.zeros((128, 64), np.float32), np.zeros(128, np.float32))
    assert "bar.sync" not in compiled.ptx and ".shared" not in compiled.ptx
    assert compiled.ptx.count("shfl.sync.bfly.b32") == 4 * 2  # 4 row registers, lanes 1, 2


FULL = """
func.func @k(%a: memref<128x64xf32>, %out: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %init = arith.constant 1.0 : f32
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [LAYOUT]} : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %s = vector.multi_reduction <add>, %x, %init [0, 1] : vector<128x64xf32> to f32
  %b = vector.broadcast %s : f32 to vector<4x128xf32>
  "smalti.vector_store"(%b, %out, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}
"""


@pytest.mark.parametrize("layout", [WGMMA, STRIDED])
def test_full_reduction_to_a_scalar(layout):
    a = np.random.default_rng(2).integers(-8, 9, (128, 64)).astype(np.float32)
    _, got = _run(FULL.replace("LAYOUT", layout), a)
    np.testing.assert_array_equal(got, np.full((4, 128), a.sum() + 1, np.float32))


SPLAT = """
func.func @k(%out: memref<128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = arith.constant dense<1.5> : vector<128x64xf32>
  %z = arith.constant dense<-3.0> : vector<128xf32>
  %r = vector.multi_reduction <KIND>, %x, %z [1] : vector<128x64xf32> to vector<128xf32>
  %s = "smalti.layout_cast"(%r) {new_layout = #smalti.strided<vec = 1>} : (vector<128xf32>) -> vector<128xf32>
  "smalti.vector_store"(%s, %out, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}
"""


@pytest.mark.parametrize(("kind", "value"), [("add", 1.5 * 64), ("mul", 1.5 ** 64),
                                             ("maximumf", 1.5), ("minimumf", 1.5)])
def test_splat_sources_reduce_analytically(kind, value):
    compiled, got = _run(SPLAT.replace("KIND", kind))
    assert "shfl" not in compiled.ptx and compiled.ptx.count("ld.global") == 0
    expected = REFERENCE[kind](np.float32(value), np.float32(-3.0))
    np.testing.assert_array_equal(got, np.full(128, expected, np.float32))


# Broadcasts back, transposes, shape_casts and iota: ops that keep data in its threads.

SOFTMAX_LIKE = f"""
func.func @k(%a: memref<128x64xf32>, %s: f32, %out: memref<128x64xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %ninf = arith.constant dense<0xFF800000> : vector<128xf32>
  %zero = arith.constant dense<0.0> : vector<64xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) {{out_layouts = [{WGMMA}]}} : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %m = vector.multi_reduction <maximumf>, %x, %ninf [1] : vector<128x64xf32> to vector<128xf32>
  %mb = "smalti.broadcast_in_dim"(%m) {{broadcast_dimensions = array<i64: 0>}} : (vector<128xf32>) -> vector<128x64xf32>
  %d = arith.subf %x, %mb : vector<128x64xf32>
  %c = vector.multi_reduction <add>, %d, %zero [0] : vector<128x64xf32> to vector<64xf32>
  %cb = vector.broadcast %c : vector<64xf32> to vector<128x64xf32>
  %sb = vector.broadcast %s : f32 to vector<128x64xf32>
  %e = arith.addf %d, %cb : vector<128x64xf32>
  %f = arith.mulf %e, %sb : vector<128x64xf32>
  "smalti.vector_store"(%f, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  return
}}
"""


def test_broadcasts_of_reduced_rows_and_columns_and_scalars():
    a = np.random.default_rng(8).integers(-16, 17, (128, 64)).astype(np.float32)
    compiled, got = _run(SOFTMAX_LIKE, a, np.float32(0.5))
    d = a - a.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(got, (d + d.sum(axis=0, keepdims=True)) * np.float32(0.5))
    assert compiled.ptx.count("shfl.sync") == 128 // 64 * 2 * 2 + 64 // 8 * 2 * 3


MOVES = f"""
func.func @k(%a: memref<64x128xbf16>, %b: memref<128x128xf32>, %t: memref<128x64xbf16>,
             %s: memref<64x256xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {{out_layouts = [{WGMMA_T}]}} : (memref<64x128xbf16>, index, index) -> vector<64x128xbf16>
  %xt = vector.transpose %x, [1, 0] : vector<64x128xbf16> to vector<128x64xbf16>
  "smalti.vector_store"(%xt, %t, %c0, %c0) : (vector<128x64xbf16>, memref<128x64xbf16>, index, index) -> ()
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %ys = vector.shape_cast %y : vector<128x128xf32> to vector<64x256xf32>
  "smalti.vector_store"(%ys, %s, %c0, %c0) : (vector<64x256xf32>, memref<64x256xf32>, index, index) -> ()
  return
}}
"""


def test_free_transpose_and_shape_cast_move_no_data():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 128)).astype(BF16)
    b = rng.standard_normal((128, 128)).astype(np.float32)
    compiled = compile_mlir(MOVES, "moves.mlir")
    _, _, t, s = run_simulated(compiled, a, b, np.zeros((128, 64), BF16),
                               np.zeros((64, 256), np.float32))
    np.testing.assert_array_equal(t.astype(np.float32), a.T.astype(np.float32))
    np.testing.assert_array_equal(s, b.reshape(64, 256))
    assert "shfl" not in compiled.ptx and ".shared" not in compiled.ptx
    # The only pairings are the load's (its vector runs down columns): 32 per thread.
    assert compiled.ptx.count("mov.b32") == 64 * 128 // 128 // 2


IOTA = """
func.func @k(%out0: memref<128x64xi32>, %out1: memref<128x64xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %i = "smalti.iota"() {dimension = 0 : i64LAYOUT} : () -> vector<128x64xi32>
  %j = "smalti.iota"() {dimension = 1 : i64LAYOUT} : () -> vector<128x64xi32>
  %k = arith.muli %i, %j : vector<128x64xi32>
  %l = arith.addi %j, %i : vector<128x64xi32>
  "smalti.vector_store"(%k, %out0, %c0, %c0) : (vector<128x64xi32>, memref<128x64xi32>, index, index) -> ()
  "smalti.vector_store"(%l, %out1, %c0, %c0) : (vector<128x64xi32>, memref<128x64xi32>, index, index) -> ()
  return
}
"""


@pytest.mark.parametrize("layout", [None, WGMMA, WGMMA_T, "#smalti.strided<vec = 1>"])
def test_iota_in_any_layout(layout):
    attrs = "" if layout is None else f", out_layouts = [{layout}]"
    compiled = compile_mlir(IOTA.replace("LAYOUT", attrs), "iota.mlir")
    zeros = np.zeros((128, 64), np.int32)
    product, total = run_simulated(compiled, zeros, zeros)
    i, j = np.indices((128, 64), dtype=np.int32)
    np.testing.assert_array_equal(product, i * j)
    np.testing.assert_array_equal(total, i + j)
    assert "ld.global" not in compiled.ptx
