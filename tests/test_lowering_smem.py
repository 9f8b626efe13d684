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
