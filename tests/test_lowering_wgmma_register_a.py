"""smalti.wgmma with A from registers for f8 (e4m3, e5m2, mixed) and f32 (as tf32): the
simulator against numpy, and ptxas (sm_90a) taking register A operands (QGMMA / HGMMA whose
A is a register, not a descriptor).

A reaches registers three ways: computed (f32 loaded, scaled, and for f8 rounded by
arith.truncf: FlashAttention-3's P), loaded from global memory, or loaded from swizzled
shared memory that TMA filled. Layout inference gives it the A fragment layout of its bit
width (WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT_TF32_A). B^T (N x K) is TMA-loaded and viewed K-major.
"""

from __future__ import annotations

import re
from functools import cache

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect.attributes import layout_to_text
from smalti.passes.registry import run_pipeline
from smalti.ptx.toolchain import compile_ptx, disassemble
from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.compiler import make_context, parse_module
from smalti.tiling import WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT_TF32_A

SMEM = "#gpu.address_space<workgroup>"
DTYPES = {"f32": np.dtype(np.float32), "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
          "f8E5M2": np.dtype(ml_dtypes.float8_e5m2)}
LARGEST = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}
# (M, N, K, A type, B type, how A reaches registers)
CASES = [
    (64, 64, 64, "f8E4M3FN", "f8E4M3FN", "computed"),
    (128, 32, 128, "f8E5M2", "f8E5M2", "computed"),
    (64, 128, 32, "f8E4M3FN", "f8E5M2", "global"),
    (128, 64, 64, "f8E5M2", "f8E4M3FN", "shared"),
    (64, 64, 32, "f32", "f32", "computed"),
    (128, 32, 16, "f32", "f32", "global"),
    (64, 128, 64, "f32", "f32", "shared"),
]
IDS = [f"{m}x{n}x{k}-{a}-{b}-{how}" for m, n, k, a, b, how in CASES]
SCALE = 3.0


def _span(element: str, k: int) -> int:
    """The widest swizzle span that K bytes fill."""
    return next(s for s in (128, 64, 32) if k * DTYPES[element].itemsize % s == 0)


def wgmma_kernel(m: int, n: int, k: int, a_type: str, b_type: str, how: str) -> str:
    """out = A @ (B^T)^T, A in registers (see the module docstring), one wgmma."""
    b_bytes, a_bytes = n * k * DTYPES[b_type].itemsize, m * k * DTYPES[a_type].itemsize
    source = "f32" if how == "computed" else a_type
    ga, gbt = f"memref<{m}x{k}x{source}>", f"memref<{n}x{k}x{b_type}>"
    va, va_source = f"vector<{m}x{k}x{a_type}>", f"vector<{m}x{k}x{source}>"
    sbt, sb = f"memref<{n}x{k}x{b_type}, {SMEM}>", f"memref<{k}x{n}x{b_type}, {SMEM}>"
    sa, bars, acc = f"memref<{m}x{k}x{a_type}, {SMEM}>", f"memref<1xi64, {SMEM}>", \
        f"vector<{m}x{n}xf32>"
    b_span, a_span = _span(b_type, k), _span(a_type, k)
    b_tiles = (f"#smalti.tile<[{n}, {b_span // DTYPES[b_type].itemsize}]>, "
               f"#smalti.swizzle<{b_span}>")
    a_tiles = (f"#smalti.tile<[{m}, {a_span // DTYPES[a_type].itemsize}]>, "
               f"#smalti.swizzle<{a_span}>")
    a_offset = 1024 + -(-b_bytes // 1024) * 1024
    expect = b_bytes + (a_bytes if how == "shared" else 0)
    if how == "computed":
        a_code = f"""  %x = "smalti.vector_load"(%a, %c0, %c0) : ({ga}, index, index) -> {va_source}
  %s = vector.broadcast %scale : f32 to {va_source}
  %scaled = arith.mulf %x, %s : {va_source}
""" + ("" if a_type == "f32" else f"  %af = arith.truncf %scaled : {va_source} to {va}\n")
        a_value = "%scaled" if a_type == "f32" else "%af"
    elif how == "global":
        a_code = f'  %af = "smalti.vector_load"(%a, %c0, %c0) : ({ga}, index, index) -> {va}\n'
        a_value = "%af"
    else:
        a_code = f"""  %oa = arith.constant {a_offset} : index
  %sa0 = "smalti.slice_smem"(%oa) : (index) -> {sa}
  %sa = "smalti.with_transforms"(%sa0) {{transforms = [{a_tiles}]}} : ({sa}) -> {sa}
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : ({ga}, {sa}, {bars}, index, index, index) -> ()
"""
        a_value = "%af"
    after_wait = (f'  %af = "smalti.vector_load"(%sa, %c0, %c0) : ({sa}, index, index) -> {va}\n'
                  if how == "shared" else "")
    return f"""
func.func @register_a(%a: {ga}, %scale: f32, %bt: {gbt}, %out: memref<{m}x{n}xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %ob = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> {bars}
  %sbt0 = "smalti.slice_smem"(%ob) : (index) -> {sbt}
  %sbt = "smalti.with_transforms"(%sbt0) {{transforms = [{b_tiles}]}} : ({sbt}) -> {sbt}
  %sb0 = "smalti.slice_smem"(%ob) : (index) -> {sb}
  %sb = "smalti.with_transforms"(%sb0) {{transforms = [#smalti.transpose<[1, 0]>, {b_tiles}]}} : ({sb}) -> {sb}
  "smalti.initialize_barrier"(%bars) {{arrival_count = 1 : i64}} : ({bars}) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {{bytes = {expect} : i64}} : ({bars}, index) -> ()
  "smalti.async_load"(%bt, %sbt, %bars, %c0, %c0, %c0) : ({gbt}, {sbt}, {bars}, index, index, index) -> ()
{a_code}  "smalti.wait"(%bars, %c0, %c0) : ({bars}, index, index) -> ()
{after_wait}  %zero = arith.constant dense<0.0> : {acc}
  %d = "smalti.wgmma"(%zero, {a_value}, %sb) : ({acc}, {va}, {sb}) -> {acc}
  "smalti.vector_store"(%d, %out, %c0, %c0) : ({acc}, memref<{m}x{n}xf32>, index, index) -> ()
  return
}}
"""


@cache
def compiled(case: tuple):
    return compile_mlir(wgmma_kernel(*case), "register_a.mlir")


def tf32(x: np.ndarray) -> np.ndarray:
    """The tf32 value wgmma reads from f32 bits: the 13 low mantissa bits dropped."""
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def operands(case: tuple, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A as passed, B^T as passed, A and B^T as wgmma multiplies them, in float64)."""
    m, n, k, a_type, b_type, how = case
    rng = np.random.default_rng(seed)

    def values(rows: int, element: str) -> np.ndarray:
        x = rng.standard_normal((rows, k)) * np.exp2(rng.integers(-3, 4, (rows, k)))
        return tf32(x) if element == "f32" else x.astype(DTYPES[element])

    bt = values(n, b_type)
    if how != "computed":
        a = values(m, a_type)
        return a, bt, a.astype(np.float64), bt.astype(np.float64)
    a = (rng.standard_normal((m, k)) * 20).astype(np.float32)  # scaled, some past e4m3's max
    scaled = a * np.float32(SCALE)
    if a_type == "f32":
        effective = tf32(scaled)
    else:
        big = LARGEST[a_type]
        effective = np.clip(scaled, -big, big).astype(DTYPES[a_type])  # .satfinite, rn
    return a, bt, effective.astype(np.float64), bt.astype(np.float64)


def error_bound(a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """f32 rounding of the partial sums (once per instruction)."""
    return 2.0**-20 * (np.abs(a) @ np.abs(bt).T) + 1e-30


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_simulator_matches_numpy(case):
    m, n = case[:2]
    a, bt, wide_a, wide_bt = operands(case, 11)
    out = run_simulated(compiled(case), a, np.float32(SCALE), bt, np.zeros((m, n), np.float32),
                        async_completion="random", seed=2)[-1]
    bound = error_bound(wide_a, wide_bt)
    error = np.abs(out - wide_a @ wide_bt.T)
    assert (error <= bound).all(), f"{int((error > bound).sum())} of {error.size} elements off"
    # Tight enough to tell a K permutation (a wrong fragment register order) or swapped rows.
    shuffled = wide_a @ np.roll(wide_bt, 1, axis=1).T
    assert (np.abs(out - shuffled) > bound).mean() > 0.9
    rows = wide_a[np.roll(np.arange(m), 8)] @ wide_bt.T
    assert (np.abs(out - rows) > bound).mean() > 0.9


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inference_gives_a_the_fragment_layout_of_its_width(case):
    module = parse_module(wgmma_kernel(*case), "register_a.mlir", make_context())
    run_pipeline(module, "builtin.module(smalti-verify,smalti-infer-layouts)")
    expected = WGMMA_LAYOUT_TF32_A if case[3] == "f32" else WGMMA_LAYOUT_8BIT
    wgmma = next(line for line in str(module).splitlines() if '"smalti.wgmma"' in line)
    assert f"in_layouts = [#smalti.{layout_to_text(WGMMA_LAYOUT)}, " \
           f"#smalti.{layout_to_text(expected)}]" in wgmma


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_ptxas_takes_register_a_for_sm_90a(case):
    m, _, k, a_type, _, _ = case
    result = compile_ptx(compiled(case).ptx, arch="sm_90a")
    assert not re.search(r"C75\d\d", result.log), result.log
    opcode = "HGMMA" if a_type == "f32" else "QGMMA"
    sass = disassemble(result.cubin)
    instructions = (m // 64) * (k * DTYPES[a_type].itemsize // 32)
    register_a = re.findall(rf"\b{opcode}\.\S+ R\d+, R\d+, gdesc\[", sass)
    assert len(register_a) == instructions, sass
    assert "wgmma.fence.sync.aligned" in compiled(case).ptx


def test_f8_a_from_the_accumulator_layout_is_relaid_out_within_warps():
    """P = f8(S) straight from an accumulator: the WGMMA layout holds column pairs, the 8-bit
    A layout column quads, so inference inserts a relayout before the second wgmma, within
    warps (numbers: tests/test_lowering_fp8_attention.py, where the user writes the cast)."""
    f8 = "f8E4M3FN"
    ref = f"memref<64x64x{f8}, {SMEM}>"
    text = f"""
func.func @p(%out: memref<64x64xf32>) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %c4096 = arith.constant 4096 : index
  %a0 = "smalti.slice_smem"(%c0) : (index) -> {ref}
  %a = "smalti.with_transforms"(%a0) {{transforms = [#smalti.tile<[64, 64]>, #smalti.swizzle<64>]}} : ({ref}) -> {ref}
  %b0 = "smalti.slice_smem"(%c4096) : (index) -> {ref}
  %b = "smalti.with_transforms"(%b0) {{transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 64]>, #smalti.swizzle<64>]}} : ({ref}) -> {ref}
  %s = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, {ref}, {ref}) -> vector<64x64xf32>
  %p = arith.truncf %s : vector<64x64xf32> to vector<64x64x{f8}>
  %o = "smalti.wgmma"(%acc, %p, %b) : (vector<64x64xf32>, vector<64x64x{f8}>, {ref}) -> vector<64x64xf32>
  "smalti.vector_store"(%o, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}}
"""
    compiled = compile_mlir(text, "p.mlir")
    context = make_context()
    module = parse_module(text, "p.mlir", context)
    with context:
        run_pipeline(module, "builtin.module(smalti-infer-layouts)")
    assert re.findall(r'"smalti.layout_cast"\(%\w+\) \{.*inferred = "(\w+)"', str(module)) in (
        ["registers"], ["shuffles"])
    assert "wgmma.mma_async" in compiled.ptx
