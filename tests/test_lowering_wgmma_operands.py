"""smalti.wgmma's operand forms through the simulator against numpy: every swizzle, A and B
K-major or MN-major (transposed) in shared memory, A from registers, one or two 64-row
blocks, several N. The operands reach shared memory through vector_store, so any transform
the wgmma accepts can be tested, not only TMA-compatible ones."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.runtime import compile_mlir, run_simulated

SMEM = "#gpu.address_space<workgroup>"
DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _transforms(swizzle: int, element_bytes: int, transposed: bool, rows: int = 8) -> str:
    tile = f"#smalti.tile<[{rows}, {swizzle // element_bytes}]>, #smalti.swizzle<{swizzle}>"
    return f"#smalti.transpose<[1, 0]>, {tile}" if transposed else tile


def wgmma_kernel(m: int, n: int, k: int, element: str, swizzle: int, a_form: str,
                 b_transposed: bool, rows: int = 8) -> str:
    """out = a @ b with a (m x k) `a_form` in {"k-major", "mn-major", "registers"} and b
    (k x n) stored N-contiguous, or K-contiguous when `b_transposed`."""
    a_gmem, b_gmem = f"memref<{m}x{k}x{element}>", f"memref<{k}x{n}x{element}>"
    a_smem, b_smem = f"memref<{m}x{k}x{element}, {SMEM}>", f"memref<{k}x{n}x{element}, {SMEM}>"
    a_vec, b_vec = f"vector<{m}x{k}x{element}>", f"vector<{k}x{n}x{element}>"
    acc = f"vector<{m}x{n}xf32>"
    a_bytes = m * k * 2
    b_offset = 1024 * (1 + (a_bytes + 1023) // 1024)
    b_transforms = _transforms(swizzle, 2, b_transposed, rows)
    if a_form == "registers":
        a_operand, a_type, a_staging = "%va", a_vec, ""
    else:
        a_transforms = _transforms(swizzle, 2, a_form == "mn-major", rows)
        a_operand, a_type = "%ta", a_smem
        a_staging = f"""  %sa = "smalti.slice_smem"(%o_a) : (index) -> {a_smem}
  %ta = "smalti.with_transforms"(%sa) {{transforms = [{a_transforms}]}} : ({a_smem}) -> {a_smem}
  "smalti.vector_store"(%va, %ta, %c0, %c0) : ({a_vec}, {a_smem}, index, index) -> ()
"""
    return f"""
func.func @mm(%a: {a_gmem}, %b: {b_gmem}, %out: memref<{m}x{n}xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant {b_offset} : index
  %va = "smalti.vector_load"(%a, %c0, %c0) : ({a_gmem}, index, index) -> {a_vec}
  %vb = "smalti.vector_load"(%b, %c0, %c0) : ({b_gmem}, index, index) -> {b_vec}
{a_staging}  %sb = "smalti.slice_smem"(%o_b) : (index) -> {b_smem}
  %tb = "smalti.with_transforms"(%sb) {{transforms = [{b_transforms}]}} : ({b_smem}) -> {b_smem}
  "smalti.vector_store"(%vb, %tb, %c0, %c0) : ({b_vec}, {b_smem}, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %zero = arith.constant dense<0.0> : {acc}
  %d = "smalti.wgmma"(%zero, {a_operand}, %tb) : ({acc}, {a_type}, {b_smem}) -> {acc}
  "smalti.vector_store"(%d, %out, %c0, %c0) : ({acc}, memref<{m}x{n}xf32>, index, index) -> ()
  return
}}
"""


def _run(m: int, n: int, k: int, element: str, swizzle: int, a_form: str,
         b_transposed: bool, rows: int = 8) -> None:
    rng = np.random.default_rng(m * n + k + swizzle)
    dtype = DTYPES[element]
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    compiled = compile_mlir(wgmma_kernel(m, n, k, element, swizzle, a_form, b_transposed,
                                         rows), "wgmma.mlir")
    out = run_simulated(compiled, a, b, np.zeros((m, n), np.float32))[-1]
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("a_form", ["k-major", "mn-major", "registers"])
@pytest.mark.parametrize("b_transposed", [False, True], ids=["b-mn-major", "b-k-major"])
def test_every_swizzle_and_operand_major_matches_numpy(swizzle, a_form, b_transposed):
    _run(64, 64, 64, "bf16", swizzle, a_form, b_transposed)


@pytest.mark.parametrize(("m", "n", "k", "element", "swizzle", "a_form", "b_transposed"), [
    (128, 128, 64, "f16", 128, "k-major", False),     # two 64-row blocks, f16
    (128, 256, 16, "bf16", 128, "mn-major", False),   # the largest N, one K step
    (64, 128, 64, "bf16", 32, "k-major", False),      # MN-major B spans four swizzle chunks
    (64, 24, 32, "bf16", 32, "registers", True),      # N not a power of two: B stored by
    (64, 48, 32, "bf16", 32, "k-major", False),       # div/rem-unravelled strided stores
    (128, 64, 128, "bf16", 64, "registers", True),    # A from registers over 8 K steps
])
def test_shapes_and_types_match_numpy(m, n, k, element, swizzle, a_form, b_transposed):
    _run(m, n, k, element, swizzle, a_form, b_transposed)


def test_unswizzled_operand_is_a_located_error():
    text = wgmma_kernel(64, 64, 64, "bf16", 128, "k-major", False).replace(
        "#smalti.tile<[8, 64]>, #smalti.swizzle<128>", "#smalti.tile<[8, 64]>", 1)
    with pytest.raises(DiagnosticError, match=r"wgmma.mlir:\d+:\d+: error: 'smalti.wgmma' op "
                                              r"cannot be given transforms: .* then a swizzle"):
        compile_mlir(text, "wgmma.mlir")


@pytest.mark.parametrize(("m", "n", "k", "a_form", "b_transposed", "rows"), [
    (128, 128, 64, "k-major", True, 64),    # tiles cover each 64-row block of A, K one span
    (128, 128, 128, "k-major", False, 64),  # K spans two swizzle spans: 64-row tiles still even
    (64, 128, 64, "mn-major", False, 32),   # MN-major: K groups stay within 32-row tiles
    (64, 64, 128, "registers", True, 64),   # K-major B whose tiles cover all of N
])
def test_tiles_taller_than_eight_rows_match_numpy(m, n, k, a_form, b_transposed, rows):
    _run(m, n, k, "bf16", 128, a_form, b_transposed, rows)


@pytest.mark.parametrize(("operand", "a_form", "b_transposed"), [
    ("A", "k-major", False), ("B", "registers", True)])
def test_unevenly_spaced_row_groups_are_a_located_error(operand, a_form, b_transposed):
    """32-row tiles of a K-major operand whose K spans two swizzle spans: the 8-row groups
    of one instruction are not evenly spaced, which one descriptor cannot express."""
    text = wgmma_kernel(64, 128, 128, "bf16", 128, a_form, b_transposed, rows=32)
    with pytest.raises(DiagnosticError, match=rf"wgmma.mlir:\d+:\d+: error: 'smalti.wgmma' op "
                                              rf"cannot be given transforms: .*this {operand}'s "
                                              r"8-row groups are not evenly spaced"):
        compile_mlir(text, "wgmma.mlir")
