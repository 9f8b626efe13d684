"""Non-splat vector constants (smalti.lowering.constants) in the simulator: in every kind of
layout (strided of each width, the wgmma tiles, a replicated row layout), of every element
type (i1 as bytes, bf16 and fp8 read through a folded bitcast), as movs when each register
is the same in every thread, and as canonicalization folds them from splats. Every kernel
assembles."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "i1": np.bool_,
          "i8": np.int8, "i16": np.int16, "i32": np.int32,
          "f8E4M3FN": ml_dtypes.float8_e4m3fn}
WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")
WGMMA_ROW = "#smalti.tiled<tiling = [[64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>"


def _literal(value: object, element: str) -> str:
    if element == "i1":
        return "true" if value else "false"
    if element.startswith("i"):
        return str(int(value))
    return repr(float(value))


def _values(element: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if element == "i1":
        return rng.random(shape) < 0.5
    if element.startswith("i"):
        return rng.integers(-100, 100, shape).astype(DTYPES[element])
    return rng.standard_normal(shape).astype(np.float32).astype(DTYPES[element])


def _constant_kernel(values: np.ndarray, element: str, layout: str) -> str:
    """out = the constant, cast to `layout` first (the cast makes inference give the
    constant that layout, where it can)."""
    shape = "x".join(map(str, values.shape))
    rows = (values.reshape(1, -1) if values.ndim == 1 else values)
    dense = ", ".join("[" + ", ".join(_literal(v, element) for v in row) + "]" for row in rows)
    dense = f"[{dense}]" if values.ndim > 1 else dense
    v, m = f"vector<{shape}x{element}>", f"memref<{shape}x{element}>"
    zeros = ", ".join(["%c0"] * values.ndim)
    return f"""
func.func @k(%out: {m}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<{dense}> : {v}
  %w = "smalti.layout_cast"(%v) {{new_layout = {layout}}} : ({v}) -> {v}
  "smalti.vector_store"(%w, %out, {zeros}) : ({v}, {m}, {", ".join(["index"] * values.ndim)}) -> ()
  return
}}
"""


def _run(text: str, out: np.ndarray):
    compiled = compile_mlir(text, "constants.mlir")
    compiled.assemble()
    return compiled, run_simulated(compiled, out)[-1]


@pytest.mark.parametrize("element", sorted(DTYPES))
@pytest.mark.parametrize(("shape", "layout"), [
    ((4, 128), "#smalti.strided<vec = 1>"), ((4, 128), "#smalti.strided<vec = 2>"),
    ((4, 128), "#smalti.strided<vec = 4>"), ((64, 16), WGMMA), ((128,), WGMMA_ROW)])
def test_nonsplat_constants_in_every_layout(element, shape, layout):
    values = _values(element, shape, np.random.default_rng(31))
    compiled, got = _run(_constant_kernel(values, element, layout), np.zeros(shape,
                                                                             values.dtype))
    np.testing.assert_array_equal(got.view(np.uint8), values.view(np.uint8))
    assert "_constant_0" in compiled.ptx  # thread-dependent values: a table


def test_constants_equal_in_every_thread_are_movs():
    """[1.5, -2, 3, 4] repeated, strided<vec = 4>: every thread's four registers hold the
    same four values, so no table."""
    values = np.tile(np.array([1.5, -2.0, 3.0, 4.0], np.float32), 128)
    compiled, got = _run(_constant_kernel(values, "f32", "#smalti.strided<vec = 4>"),
                         np.zeros(512, np.float32))
    np.testing.assert_array_equal(got, values)
    assert "_constant_0" not in compiled.ptx


@pytest.mark.parametrize("fold", ["insert_strided_slice", "shape_cast"])
def test_constants_canonicalization_folds_from_splats(fold):
    """Valid programs with only splat constants that canonicalization folds into non-splat
    ones (folded_nonsplat_constant.mlir was the first)."""
    if fold == "insert_strided_slice":
        body = """
  %big = arith.constant dense<1.0> : vector<4x128xf32>
  %small = arith.constant dense<-2.0> : vector<1x128xf32>
  %v = "vector.insert_strided_slice"(%small, %big) <{offsets = [2, 0], strides = [1, 1]}> : (vector<1x128xf32>, vector<4x128xf32>) -> vector<4x128xf32>"""
        want = np.ones((4, 128), np.float32)
        want[2] = -2.0
    else:
        body = """
  %big = arith.constant dense<1.0> : vector<2x256xf32>
  %small = arith.constant dense<-2.0> : vector<1x256xf32>
  %u = "vector.insert_strided_slice"(%small, %big) <{offsets = [1, 0], strides = [1, 1]}> : (vector<1x256xf32>, vector<2x256xf32>) -> vector<2x256xf32>
  %v = vector.shape_cast %u : vector<2x256xf32> to vector<4x128xf32>"""
        want = np.repeat(np.array([1.0, -2.0], np.float32), 256).reshape(4, 128)
    text = f"""
func.func @k(%out: memref<4x128xf32>) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index{body}
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}}
"""
    _, got = _run(text, np.zeros((4, 128), np.float32))
    np.testing.assert_array_equal(got, want)


def test_two_kernels_keep_their_own_tables():
    first = _constant_kernel(np.arange(512, dtype=np.int32), "i32", "#smalti.strided<vec = 4>")
    second = first.replace("@k(", "@k2(").replace("dense<[0, 1, 2,", "dense<[7, 1, 2,")
    compiled = compile_mlir(first + second, "two.mlir")
    compiled.assemble()
    assert "__smalti_k_constant_0" in compiled.ptx and "__smalti_k2_constant_0" in compiled.ptx
    for kernel, head in (("k", 0), ("k2", 7)):
        out = run_simulated(compiled, np.zeros(512, np.int32), kernel=kernel)[-1]
        assert out[0] == head and (out[1:] == np.arange(1, 512)).all()
