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


def _transforms(swizzle: int, element_bytes: int, transposed: bool) -> str:
    tile = f"#smalti.tile<[8, {swizzle // element_bytes}]>, #smalti.swizzle<{swizzle}>"
    return f"#smalti.transpose<[1, 0]>, {tile}" if transposed else tile


def wgmma_kernel(m: int, n: int, k: int, element: str, swizzle: int, a_form: str,
                 b_transposed: bool) -> str:
    """out = a @ b with a (m x k) `a_form` in {"k-major", "mn-major", "registers"} and b
    (k x n) stored N-contiguous, or K-contiguous when `b_transposed`."""
    a_gmem, b_gmem = f"memref<{m}x{k}x{element}>", f"memref<{k}x{n}x{element}>"
    a_smem, b_smem = f"memref<{m}x{k}x{element}, {SMEM}>", f"memref<{k}x{n}x{element}, {SMEM}>"
    a_vec, b_vec = f"vector<{m}x{k}x{element}>", f"vector<{k}x{n}x{element}>"
    acc = f"vector<{m}x{n}xf32>"
    a_bytes = m * k * 2
    b_offset = 1024 * (1 + (a_bytes + 1023) // 1024)
    b_transforms = _transforms(swizzle, 2, b_transposed)
    if a_form == "registers":
        a_operand, a_type, a_staging = "%va", a_vec, ""
    else:
        a_transforms = _transforms(swizzle, 2, a_form == "mn-major")
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
         b_transposed: bool) -> None:
    rng = np.random.default_rng(m * n + k + swizzle)
    dtype = DTYPES[element]
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    compiled = compile_mlir(wgmma_kernel(m, n, k, element, swizzle, a_form, b_transposed),
                            "wgmma.mlir")
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
                                              r"cannot be given a layout: .* then a swizzle"):
        compile_mlir(text, "wgmma.mlir")
