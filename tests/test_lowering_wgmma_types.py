"""smalti.wgmma on f8 (e4m3, e5m2, mixed) and tf32 (f32) operands: simulator numbers against
numpy, ptxas acceptance for sm_90a, and the located errors of what is not supported.

Each kernel TMA-loads A (M x K) and B^T (N x K, K contiguous) into swizzled shared memory,
views B^T as the K x N B through a leading transpose (wgmma cannot transpose f8 or tf32
operands), multiplies once, and stores the f32 accumulator.
"""

from __future__ import annotations

import re
from functools import cache

import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir import ir

from smalti.dialect.diagnostics import DiagnosticError
from smalti.passes.registry import run_pipeline
from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.compiler import compile_module, make_context, parse_module

SMEM = "#gpu.address_space<workgroup>"
DTYPES = {"f32": np.dtype(np.float32), "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
          "f8E5M2": np.dtype(ml_dtypes.float8_e5m2)}
# (M, N, K, A type, B type, swizzle span): several 64-row blocks, K over several swizzle
# spans, every span width, mixed fp8.
CASES = [
    (128, 64, 256, "f8E4M3FN", "f8E4M3FN", 128),
    (64, 128, 128, "f8E5M2", "f8E5M2", 128),
    (64, 64, 64, "f8E4M3FN", "f8E5M2", 64),
    (64, 32, 96, "f8E5M2", "f8E4M3FN", 32),
    (64, 128, 64, "f32", "f32", 128),
    (128, 32, 32, "f32", "f32", 64),
]
IDS = [f"{m}x{n}x{k}-{a}-{b}-sw{s}" for m, n, k, a, b, s in CASES]


def wgmma_kernel(m: int, n: int, k: int, a_type: str, b_type: str, span: int) -> str:
    """acc (M x N) = A @ (B^T)^T, A and B^T in global memory, through TMA and one wgmma."""
    a_bytes = m * k * DTYPES[a_type].itemsize
    b_bytes = n * k * DTYPES[b_type].itemsize
    ga, gbt = f"memref<{m}x{k}x{a_type}>", f"memref<{n}x{k}x{b_type}>"
    out, acc = f"memref<{m}x{n}xf32>", f"vector<{m}x{n}xf32>"
    sa, sbt = f"memref<{m}x{k}x{a_type}, {SMEM}>", f"memref<{n}x{k}x{b_type}, {SMEM}>"
    sb, bars = f"memref<{k}x{n}x{b_type}, {SMEM}>", f"memref<1xi64, {SMEM}>"
    a_tile = f"#smalti.tile<[{m}, {span // DTYPES[a_type].itemsize}]>"
    b_tile = f"#smalti.tile<[{n}, {span // DTYPES[b_type].itemsize}]>"
    swizzle = f"#smalti.swizzle<{span}>"
    return f"""
func.func @wgmma_types(%a: {ga}, %bt: {gbt}, %out: {out})
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant {1024 + a_bytes} : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> {bars}
  %sa0 = "smalti.slice_smem"(%o_a) : (index) -> {sa}
  %sa = "smalti.with_transforms"(%sa0) {{transforms = [{a_tile}, {swizzle}]}} : ({sa}) -> {sa}
  %sbt0 = "smalti.slice_smem"(%o_b) : (index) -> {sbt}
  %sbt = "smalti.with_transforms"(%sbt0) {{transforms = [{b_tile}, {swizzle}]}} : ({sbt}) -> {sbt}
  %sb0 = "smalti.slice_smem"(%o_b) : (index) -> {sb}
  %sb = "smalti.with_transforms"(%sb0) {{transforms = [#smalti.transpose<[1, 0]>, {b_tile}, {swizzle}]}} : ({sb}) -> {sb}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {a_bytes + b_bytes} : i64}} : ({bars}, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : ({ga}, {sa}, {bars}, index, index, index) -> ()
  "smalti.async_load"(%bt, %sbt, %bars, %c0, %c0, %c0) : ({gbt}, {sbt}, {bars}, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : ({bars}, index, index) -> ()
  %zero = arith.constant dense<0.0> : {acc}
  %d = "smalti.wgmma"(%zero, %sa, %sb) : ({acc}, {sa}, {sb}) -> {acc}
  "smalti.vector_store"(%d, %out, %c0, %c0) : ({acc}, {out}, index, index) -> ()
  return
}}
"""


@cache
def compiled(case: tuple):
    return compile_mlir(wgmma_kernel(*case), "wgmma_types.mlir")


def to_tf32(x: np.ndarray) -> np.ndarray:
    """f32 values rounded (to nearest, ties to even) to tf32's 10 mantissa bits."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    return bits.astype(np.uint32).view(np.float32)


def inputs(rows: int, k: int, element: str, rng: np.random.Generator) -> np.ndarray:
    """Values of `element` over several binades (exact in the element type)."""
    x = rng.standard_normal((rows, k)) * np.exp2(rng.integers(-3, 4, (rows, k)))
    if element == "f32":
        return to_tf32(x)
    return x.astype(DTYPES[element])


def error_bound(a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """f32 rounding of the partial sums (once per instruction, at most 8 per K here)."""
    return 2.0**-20 * (np.abs(a) @ np.abs(bt).T) + 1e-30


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_simulator_matches_numpy(case):
    m, n, k, a_type, b_type, _ = case
    rng = np.random.default_rng(7)
    a, bt = inputs(m, k, a_type, rng), inputs(n, k, b_type, rng)
    out = run_simulated(compiled(case), a, bt, np.zeros((m, n), np.float32),
                        async_completion="random", seed=1)[-1]
    wide_a, wide_bt = a.astype(np.float64), bt.astype(np.float64)
    bound = error_bound(wide_a, wide_bt)
    error = np.abs(out - wide_a @ wide_bt.T)
    assert (error <= bound).all(), f"{int((error > bound).sum())} of {error.size} elements off"
    # The bound is tight enough to tell a K permutation (a wrong fragment or descriptor step).
    shuffled = wide_a @ np.roll(wide_bt, 1, axis=1).T
    assert (np.abs(out - shuffled) > bound).mean() > 0.9


def test_f32_inputs_are_computed_as_tf32():
    """f32 operands lose their 13 low mantissa bits: the result is A @ B of the tf32 parts."""
    case = CASES[4]
    m, n, k = case[:3]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    out = run_simulated(compiled(case), a, bt, np.zeros((m, n), np.float32))[-1]
    truncated = [(x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
                 for x in (a, bt)]
    bound = error_bound(*truncated)
    assert (np.abs(out - truncated[0] @ truncated[1].T) <= bound).all()
    full = a.astype(np.float64) @ bt.astype(np.float64).T
    assert (np.abs(out - full) > bound).mean() > 0.9


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_ptxas_accepts_for_sm_90a(case):
    m, _, k, a_type, b_type, _ = case
    result = compile_ptx(compiled(case).ptx, arch="sm_90a")
    assert not re.search(r"C75\d\d", result.log), result.log
    counts = sass_opcode_counts(disassemble(result.cubin))
    instructions = (m // 64) * (k * DTYPES[b_type].itemsize // 32)
    opcode = "HGMMA" if a_type == "f32" else "QGMMA"
    assert sum(c for op, c in counts.items() if op.startswith(opcode)) == instructions, counts


def test_lowering_rejects_an_mn_major_f8_operand_the_verifier_cannot_see():
    """Hand-annotated IR without the wgmma's in_transforms: the lowering reads B's transforms
    from its slice and refuses an MN-major f8 B (wgmma would read it K-major: wrong numbers)."""
    text = f"""
func.func @mn_major(%out: memref<64x64xf32>) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64x128xf8E4M3FN, {SMEM}>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<128x64xf8E4M3FN, {SMEM}>
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x128xf8E4M3FN, {SMEM}>, memref<128x64xf8E4M3FN, {SMEM}>) -> vector<64x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}}
"""
    module = parse_module(text, "mn_major.mlir", make_context())
    run_pipeline(module, "builtin.module(smalti-verify,smalti-infer-layouts)")
    function = module.regions[0].blocks[0].operations[0]
    with module.context:
        for op in function.regions[0].blocks[0].operations:
            if op.operation.name == "smalti.slice_smem" and op.results[0].type.shape == [128, 64]:
                op.attributes["out_transforms"] = ir.Attribute.parse(
                    "[[#smalti.tile<[64, 64]>, #smalti.swizzle<64>]]")
            if op.operation.name == "smalti.wgmma":
                del op.attributes["in_transforms"]
    with pytest.raises(DiagnosticError, match=r"mn_major.mlir:8:\d+: error: 'smalti.wgmma' op "
                                              r"reads B \(f8E4M3FN\) MN-major, but wgmma "
                                              r"transposes only bf16/f16 operands; store B as N x K"):
        compile_module(module, pipeline="builtin.module(smalti-tile,smalti-warpgroup)")


def test_inference_requires_k_major_f8_and_tf32_operands():
    from smalti.layout_inference.rules import wgmma_operand_problem
    from smalti.tiling import SwizzleTransform, TileTransform, TransposeTransform

    tiles = (TileTransform((64, 128)), SwizzleTransform(128))
    transposed = (TransposeTransform((1, 0)), *tiles)
    assert wgmma_operand_problem(tiles, (64, 128), 1, "A") is None
    assert wgmma_operand_problem(transposed, (128, 64), 1, "B") is None
    assert "store B as N x K" in wgmma_operand_problem(tiles, (64, 128), 1, "B")
    assert "store A as M x K" in wgmma_operand_problem(transposed, (128, 64), 1, "A")
    bf16_tiles = (TileTransform((64, 64)), SwizzleTransform(128))  # 16-bit: MN-major B is fine
    assert wgmma_operand_problem(bf16_tiles, (64, 128), 2) is None
