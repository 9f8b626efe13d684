"""Shared memory through the simulator: slices, transforms, vector_load/store, barriers, TMA."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.runtime import compile_mlir, run_simulated

BF16 = ml_dtypes.bfloat16
SMEM = "#gpu.address_space<workgroup>"


def _ref(shape: str, element: str) -> str:
    return f"memref<{shape}x{element}, {SMEM}>"


def roundtrip_kernel(shape: str, element: str, transforms: str, offset: int = 1024) -> str:
    """GMEM -> registers -> SMEM (with transforms) -> registers -> GMEM."""
    ref = _ref(shape, element)
    return f"""
func.func @roundtrip(%a: memref<{shape}x{element}>, %out: memref<{shape}x{element}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %off = arith.constant {offset} : index
  %s = "smalti.slice_smem"(%off) : (index) -> {ref}
  %t = "smalti.with_transforms"(%s) {{transforms = [{transforms}]}} : ({ref}) -> {ref}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<{shape}x{element}>, index, index) -> vector<{shape}x{element}>
  "smalti.vector_store"(%v, %t, %c0, %c0) : (vector<{shape}x{element}>, {ref}, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %w = "smalti.vector_load"(%t, %c0, %c0) : ({ref}, index, index) -> vector<{shape}x{element}>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<{shape}x{element}>, memref<{shape}x{element}>, index, index) -> ()
  return
}}
"""


@pytest.mark.parametrize(("shape", "element", "transforms"), [
    ("64x128", "bf16", ""),
    ("64x128", "bf16", "#smalti.tile<[8, 64]>, #smalti.swizzle<128>"),
    ("32x64", "bf16", "#smalti.tile<[8, 32]>, #smalti.swizzle<64>"),
    ("16x64", "f32", "#smalti.tile<[8, 8]>, #smalti.swizzle<32>"),
    ("64x64", "bf16", "#smalti.transpose<[1, 0]>, #smalti.tile<[8, 64]>, #smalti.swizzle<128>"),
    ("32x32", "f32", "#smalti.tile<[8, 8]>"),
    ("32x48", "bf16", "#smalti.tile<[8, 16]>, #smalti.swizzle<32>"),  # rows of 48: unravelled
    ("24x40", "f32", "#smalti.transpose<[1, 0]>, #smalti.tile<[8, 8]>"),
])
def test_roundtrip_through_transformed_smem(shape, element, transforms):
    dims = tuple(int(d) for d in shape.split("x"))
    dtype = BF16 if element == "bf16" else np.float32
    a = np.random.default_rng(0).standard_normal(dims).astype(dtype)
    compiled = compile_mlir(roundtrip_kernel(shape, element, transforms), "smem.mlir")
    assert compiled.signature().smem_bytes == 1024 + a.nbytes
    out = run_simulated(compiled, a, np.zeros_like(a))[-1]
    np.testing.assert_array_equal(out.astype(np.float32), a.astype(np.float32))


def test_aliasing_slices_share_bytes():
    """A row-major f32 slice and a second slice over its second half see the same bytes."""
    text = f"""
func.func @alias(%a: memref<8x128xf32>, %out: memref<4x128xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %o0 = arith.constant 0 : index
  %o2 = arith.constant 2048 : index
  %s = "smalti.slice_smem"(%o0) : (index) -> {_ref("8x128", "f32")}
  %h = "smalti.slice_smem"(%o2) : (index) -> {_ref("4x128", "f32")}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xf32>, index, index) -> vector<8x128xf32>
  "smalti.vector_store"(%v, %s, %c0, %c0) : (vector<8x128xf32>, {_ref("8x128", "f32")}, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %w = "smalti.vector_load"(%h, %c0, %c0) : ({_ref("4x128", "f32")}, index, index) -> vector<4x128xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}}
"""
    a = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    compiled = compile_mlir(text, "alias.mlir")
    assert compiled.signature().smem_bytes == 4096
    out = run_simulated(compiled, a, np.zeros((4, 128), np.float32))[-1]
    np.testing.assert_array_equal(out, a[4:])


def test_swizzled_slice_must_be_aligned_to_its_pattern():
    text = roundtrip_kernel("64x128", "bf16", "#smalti.tile<[8, 64]>, #smalti.swizzle<128>",
                            offset=512)
    with pytest.raises(DiagnosticError, match="must start on a multiple of 1024 bytes"):
        compile_mlir(text, "smem.mlir")


def matrix_store_kernel(shape: str, transforms: str, row: int, col: int, full: str) -> str:
    """A bf16 array cast to the WGMMA layout, stored into a bigger SMEM ref at (row, col):
    the stmatrix path; then the whole ref is copied out."""
    ref = _ref(full, "bf16")
    return f"""
func.func @matrices(%a: memref<{shape}xbf16>, %out: memref<{full}xbf16>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %row = arith.constant {row} : index
  %col = arith.constant {col} : index
  %off = arith.constant 1024 : index
  %s = "smalti.slice_smem"(%off) : (index) -> {ref}
  %t = "smalti.with_transforms"(%s) {{transforms = [{transforms}]}} : ({ref}) -> {ref}
  %zero = arith.constant dense<0.0> : vector<{full}xbf16>
  "smalti.vector_store"(%zero, %t, %c0, %c0) : (vector<{full}xbf16>, {ref}, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<{shape}xbf16>, index, index) -> vector<{shape}xbf16>
  %w = "smalti.layout_cast"(%v) {{new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>}} : (vector<{shape}xbf16>) -> vector<{shape}xbf16>
  "smalti.vector_store"(%w, %t, %row, %col) : (vector<{shape}xbf16>, {ref}, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %r = "smalti.vector_load"(%t, %c0, %c0) : ({ref}, index, index) -> vector<{full}xbf16>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<{full}xbf16>, memref<{full}xbf16>, index, index) -> ()
  return
}}
"""


@pytest.mark.parametrize(("shape", "full", "transforms", "row", "col", "stmatrix"), [
    ("64x64", "64x64", "#smalti.tile<[8, 64]>, #smalti.swizzle<128>", 0, 0, True),
    ("128x32", "192x64", "#smalti.tile<[8, 32]>, #smalti.swizzle<64>", 64, 32, True),
    ("64x16", "72x48", "#smalti.tile<[8, 16]>, #smalti.swizzle<32>", 8, 24, True),
    ("64x32", "64x64", "", 0, 8, True),                        # untiled rows
    ("64x32", "64x64", "#smalti.tile<[8, 8]>", 0, 16, True),   # 8-column tiles
    ("64x32", "64x40", "", 0, 4, False),                       # rows start mid-chunk
    ("64x32", "64x64", "#smalti.transpose<[1, 0]>, #smalti.tile<[8, 64]>, "
                       "#smalti.swizzle<128>", 0, 0, False),  # columns are not contiguous
])
def test_wgmma_layout_stores_by_stmatrix_where_rows_are_contiguous(shape, full, transforms,
                                                                    row, col, stmatrix):
    dims = tuple(int(d) for d in shape.split("x"))
    full_dims = tuple(int(d) for d in full.split("x"))
    a = np.random.default_rng(3).standard_normal(dims).astype(BF16)
    compiled = compile_mlir(matrix_store_kernel(shape, transforms, row, col, full), "st.mlir")
    assert ("stmatrix.sync.aligned.m8n8.x4.shared.b16" in compiled.ptx) == stmatrix
    out = run_simulated(compiled, a, np.zeros(full_dims, BF16))[-1]
    expected = np.zeros(full_dims, np.float32)
    expected[row:row + dims[0], col:col + dims[1]] = a.astype(np.float32)
    np.testing.assert_array_equal(out.astype(np.float32), expected)
