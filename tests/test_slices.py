"""vector.extract_strided_slice / insert_strided_slice: inference and numbers."""

import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.runtime import compile_mlir, run_simulated

WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")

EXTRACT = f"""
func.func @k(%a: memref<128x128xf32>, %out: memref<64x64xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {{out_layouts = [{WGMMA}]}} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = "vector.extract_strided_slice"(%v) <{{offsets = [OFFSET_ROW, OFFSET_COL], sizes = [64, 64], strides = [1, 1]}}> : (vector<128x128xf32>) -> vector<64x64xf32>
  "smalti.vector_store"(%s, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}}
"""

INSERT = f"""
func.func @k(%a: memref<128x128xf32>, %b: memref<64x64xf32>, %out: memref<128x128xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {{out_layouts = [{WGMMA}]}} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %w = "smalti.vector_load"(%b, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %r = "vector.insert_strided_slice"(%w, %v) <{{offsets = [64, 32], strides = [1, 1]}}> : (vector<64x64xf32>, vector<128x128xf32>) -> vector<128x128xf32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}}
"""


@pytest.mark.parametrize(("row", "col"), [(0, 0), (64, 32), (64, 64)])
def test_extract_takes_whole_tiles(row, col):
    compiled = compile_mlir(EXTRACT.replace("OFFSET_ROW", str(row)).replace("OFFSET_COL",
                                                                            str(col)))
    a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    out = run_simulated(compiled, a, np.zeros((64, 64), np.float32))[-1]
    np.testing.assert_array_equal(out, a[row:row + 64, col:col + 64])


def test_insert_replaces_whole_tiles():
    compiled = compile_mlir(INSERT)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    out = run_simulated(compiled, a, b, np.zeros((128, 128), np.float32))[-1]
    expected = a.copy()
    expected[64:, 32:96] = b
    np.testing.assert_array_equal(out, expected)


def test_a_slice_through_every_layouts_tiles_is_refused_with_the_reason():
    with pytest.raises(DiagnosticError, match=r"the slice \[2, 66\) of dim 1 cuts through the "
                                              r"layout's \[64, 8\] tiles"):
        compile_mlir(EXTRACT.replace("OFFSET_ROW", "0").replace("OFFSET_COL", "2"))


def test_a_slice_through_its_operands_tiles_is_taken_after_a_relayout():
    """Columns [4, 68) cut the wgmma layout's 8-column tiles, but are whole tiles of the tf32
    A layout (4 columns): inference relays the operand out into it (within warps)."""
    compiled = compile_mlir(EXTRACT.replace("OFFSET_ROW", "0").replace("OFFSET_COL", "4"))
    assert "shfl.sync" in compiled.ptx
    a = np.random.default_rng(2).standard_normal((128, 128)).astype(np.float32)
    out = run_simulated(compiled, a, np.zeros((64, 64), np.float32))[-1]
    np.testing.assert_array_equal(out, a[:64, 4:68])
