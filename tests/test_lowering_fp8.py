"""fp8 (f8E4M3FN, f8E5M2) vectors in registers through the simulator, against ml_dtypes:
arith.truncf from f32 and 16-bit floats (round to nearest even, saturating to the largest
finite value, NaN to the canonical 0x7F), arith.extf (exact), vector_load/vector_store of
global and shared memory in layouts that put 4, 2 or 1 fp8 values in a register, accesses
narrower than a register, splat constants and selects; and the located errors of what PTX
cannot do in fp8."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.dialect.attributes import layout_to_text
from smalti.runtime import compile_mlir, run_simulated
from smalti.tiling import (
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_TF32_A,
    Layout,
    WGStridedLayout,
)

FP8 = {"f8E4M3FN": (np.dtype(ml_dtypes.float8_e4m3fn), 448.0),
       "f8E5M2": (np.dtype(ml_dtypes.float8_e5m2), 57344.0)}
WIDE = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16),
        "f16": np.dtype(np.float16)}
# Layouts by how many fp8 values share a register: 4 (.b32), 2 (.b16), 1 (a .b16's low byte).
LAYOUTS = {"quads-8bit-a": WGMMA_LAYOUT_8BIT, "quads-strided": WGStridedLayout(16),
           "pairs-wgmma": WGMMA_LAYOUT, "bytes-tf32-a": WGMMA_LAYOUT_TF32_A,
           "bytes-strided": WGStridedLayout(1)}
SHAPE = (64, 64)
SMEM = "#gpu.address_space<workgroup>"


def cast(value: str, vector: str, layout: Layout | None) -> tuple[str, str]:
    """(a layout_cast of `value` to `layout`, the cast value), or nothing and the value."""
    if layout is None:
        return "", value
    return (f'  %cast = "smalti.layout_cast"({value}) {{new_layout = '
            f"#smalti.{layout_to_text(layout)}}} : ({vector}) -> {vector}\n", "%cast")


def convert_kernel(source: str, target: str, op: str, layout: Layout | None) -> str:
    """out = op(a) over a 64x64 array, the operand in `layout` (inferred when None)."""
    src, dst = f"vector<64x64x{source}>", f"vector<64x64x{target}>"
    text, operand = cast("%x", src, layout)
    return f"""
func.func @convert(%a: memref<64x64x{source}>, %out: memref<64x64x{target}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64x{source}>, index, index) -> {src}
{text}  %y = {op} {operand} : {src} to {dst}
  "smalti.vector_store"(%y, %out, %c0, %c0) : ({dst}, memref<64x64x{target}>, index, index) -> ()
  return
}}
"""


def fp8_codes(x: np.ndarray, fmt: str) -> np.ndarray:
    """cvt.rn.satfinite per the PTX ISA, through ml_dtypes: clamp to the largest finite
    value, round to nearest even; NaN becomes the canonical 0x7F."""
    dtype, biggest = FP8[fmt]
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        codes = np.clip(x, -biggest, biggest).astype(np.float32).astype(dtype).view(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), codes)


def interesting(fmt: str, dtype: np.dtype, seed: int) -> np.ndarray:
    """64x64 values of `dtype`: every fp8 value and the midpoints between neighbours (ties
    to even), random magnitudes across the range and beyond it, ±inf and NaN."""
    fp8, biggest = FP8[fmt]
    grid = np.unique(np.arange(256, dtype=np.uint8).view(fp8).astype(np.float64))
    grid = grid[np.isfinite(grid)]
    midpoints = (grid[1:] + grid[:-1]) / 2
    rng = np.random.default_rng(seed)
    count = SHAPE[0] * SHAPE[1]
    spread = count - grid.size - midpoints.size - 4
    random = rng.choice([-1.0, 1.0], spread) * 2.0 ** rng.uniform(-20, np.log2(biggest) + 3,
                                                                   spread)
    values = np.concatenate([grid, midpoints, random, [np.inf, -np.inf, np.nan, -np.nan]])
    with np.errstate(over="ignore"):  # f16 holds no e5m2 magnitude past 65504: inf
        values = values.astype(dtype)  # midpoints stay exact in f32, bf16 and f16 ones round
    return rng.permutation(values).reshape(SHAPE)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("fmt", FP8)
def test_truncf_from_f32_rounds_to_nearest_even_and_saturates(fmt, layout):
    x = interesting(fmt, WIDE["f32"], 1)
    compiled = compile_mlir(convert_kernel("f32", fmt, "arith.truncf", LAYOUTS[layout]),
                            "truncf.mlir")
    out = run_simulated(compiled, x, np.zeros(SHAPE, FP8[fmt][0]))[-1]
    np.testing.assert_array_equal(out.view(np.uint8), fp8_codes(x, fmt))


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("fmt", FP8)
def test_extf_to_f32_is_exact_for_every_code(fmt, layout):
    codes = np.tile(np.arange(256, dtype=np.uint8), SHAPE[0] * SHAPE[1] // 256)
    x = np.random.default_rng(2).permutation(codes).reshape(SHAPE).view(FP8[fmt][0])
    compiled = compile_mlir(convert_kernel(fmt, "f32", "arith.extf", LAYOUTS[layout]),
                            "extf.mlir")
    out = run_simulated(compiled, x, np.zeros(SHAPE, np.float32))[-1]
    expected = x.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(out[finite], expected[finite])


@pytest.mark.parametrize("wide", ["bf16", "f16"])
@pytest.mark.parametrize("fmt", FP8)
def test_16bit_floats_convert_through_f32(fmt, wide):
    """truncf rounds a 16-bit value once (its f32 widening is exact); extf to 16 bits is
    exact (every fp8 value is a bf16 and an f16 value)."""
    x = interesting(fmt, WIDE[wide], 3)
    narrowed = compile_mlir(convert_kernel(wide, fmt, "arith.truncf", None), "truncf.mlir")
    out = run_simulated(narrowed, x, np.zeros(SHAPE, FP8[fmt][0]))[-1]
    np.testing.assert_array_equal(out.view(np.uint8), fp8_codes(x.astype(np.float64), fmt))
    widened = compile_mlir(convert_kernel(fmt, wide, "arith.extf", WGMMA_LAYOUT), "extf.mlir")
    back = run_simulated(widened, out, np.zeros(SHAPE, WIDE[wide]))[-1]
    expected = out.astype(WIDE[wide])
    finite = ~np.isnan(expected.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(back.astype(np.float32)), ~finite)
    np.testing.assert_array_equal(back[finite].view(np.uint16), expected[finite].view(np.uint16))


def offset_copy_kernel(fmt: str, shared: bool, layout: Layout | None) -> str:
    """out[:, j:j+64] = a[:, j:j+64] for a column offset j only known at run time (so only
    single-byte accesses are provably aligned), through shared memory when `shared`, the
    copied value in `layout` (inferred when None)."""
    wide, part = f"memref<64x128x{fmt}>", f"vector<64x64x{fmt}>"
    text, operand = cast("%x", part, layout)
    if shared:
        smem = f"memref<64x128x{fmt}, {SMEM}>"
        body = f"""  %s = "smalti.slice_smem"(%c0) : (index) -> {smem}
  "smalti.vector_store"({operand}, %s, %c0, %j) : ({part}, {smem}, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %y = "smalti.vector_load"(%s, %c0, %j) : ({smem}, index, index) -> {part}
"""
    else:  # a uniform select moves whole registers
        body = f"  %y = arith.select %true, {operand}, {operand} : {part}\n"
    return f"""
func.func @offset_copy(%a: {wide}, %j32: i32, %out: {wide})
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %j = arith.index_cast %j32 : i32 to index
  %x = "smalti.vector_load"(%a, %c0, %j) : ({wide}, index, index) -> {part}
{text}{body}  "smalti.vector_store"(%y, %out, %c0, %j) : ({part}, {wide}, index, index) -> ()
  return
}}
"""


@pytest.mark.parametrize("layout", ["quads-strided", "pairs-wgmma"])
@pytest.mark.parametrize("shared", [False, True], ids=["global", "shared"])
@pytest.mark.parametrize("offset", [0, 1, 2, 3, 37, 64])
def test_accesses_narrower_than_a_register_join_and_split_bytes(offset, shared, layout):
    fmt = "f8E4M3FN"
    compiled = compile_mlir(offset_copy_kernel(fmt, shared, LAYOUTS[layout]), "offset.mlir")
    space = "shared" if shared else "global"
    assert f"ld.{space}.b8" in compiled.ptx and f"st.{space}.b8" in compiled.ptx
    rng = np.random.default_rng(offset)
    a = rng.integers(0, 256, (64, 128), dtype=np.uint8).view(FP8[fmt][0])
    out = run_simulated(compiled, a, np.int32(offset), np.zeros((64, 128), FP8[fmt][0]))[-1]
    expected = np.zeros((64, 128), np.uint8)
    expected[:, offset:offset + 64] = a.view(np.uint8)[:, offset:offset + 64]
    np.testing.assert_array_equal(out.view(np.uint8), expected)


def test_broadcast_and_transpose_regather_bytes():
    """A column vector broadcast and transposed into the WGMMA layout: each .b16 pair of
    the result is joined from two copies of the one byte a row-layout register holds."""
    fmt = "f8E4M3FN"
    v, wgmma = f"vector<64x64x{fmt}>", f"#smalti.{layout_to_text(WGMMA_LAYOUT)}"
    kernel = f"""
func.func @broadcast(%a: memref<64x{fmt}>, %out: memref<64x64x{fmt}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<64x{fmt}>, index) -> vector<64x{fmt}>
  %b = vector.broadcast %x : vector<64x{fmt}> to {v}
  %t = vector.transpose %b, [1, 0] : {v} to {v}
  %c = "smalti.layout_cast"(%t) {{new_layout = {wgmma}}} : ({v}) -> {v}
  "smalti.vector_store"(%c, %out, %c0, %c0) : ({v}, memref<64x64x{fmt}>, index, index) -> ()
  return
}}
"""
    compiled = compile_mlir(kernel, "broadcast.mlir")
    assert "shl.b16" in compiled.ptx  # bytes joined into pairs
    a = np.random.default_rng(7).integers(0, 256, 64, dtype=np.uint8).view(FP8[fmt][0])
    out = run_simulated(compiled, a, np.zeros(SHAPE, FP8[fmt][0]))[-1]
    np.testing.assert_array_equal(out.view(np.uint8),
                                  np.broadcast_to(a.view(np.uint8)[:, None], SHAPE))


@pytest.mark.parametrize("layout", ["quads-8bit-a", "pairs-wgmma", "bytes-strided"])
@pytest.mark.parametrize("fmt", FP8)
def test_swizzled_shared_memory_round_trip(fmt, layout):
    """truncf, a store to 128-byte swizzled shared memory in one layout, a load in another
    (strided, 16 per thread), extf: the rounded values come back."""
    v32, v8 = "vector<64x128xf32>", f"vector<64x128x{fmt}>"
    smem = f"memref<64x128x{fmt}, {SMEM}>"
    text, operand = cast("%x", v32, LAYOUTS[layout])
    strided = f"#smalti.{layout_to_text(WGStridedLayout(16))}"
    kernel = f"""
func.func @round_trip(%a: memref<64x128xf32>, %out: memref<64x128xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x128xf32>, index, index) -> {v32}
{text}  %y = arith.truncf {operand} : {v32} to {v8}
  %s0 = "smalti.slice_smem"(%c0) : (index) -> {smem}
  %s = "smalti.with_transforms"(%s0) {{transforms = [#smalti.tile<[64, 128]>, #smalti.swizzle<128>]}} : ({smem}) -> {smem}
  "smalti.vector_store"(%y, %s, %c0, %c0) : ({v8}, {smem}, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %z0 = "smalti.vector_load"(%s, %c0, %c0) : ({smem}, index, index) -> {v8}
  %z = "smalti.layout_cast"(%z0) {{new_layout = {strided}}} : ({v8}) -> {v8}
  %w = arith.extf %z : {v8} to {v32}
  "smalti.vector_store"(%w, %out, %c0, %c0) : ({v32}, memref<64x128xf32>, index, index) -> ()
  return
}}
"""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((64, 128)) * 2.0 ** rng.integers(-8, 8, (64, 128))).astype(
        np.float32)
    out = run_simulated(compile_mlir(kernel, "round_trip.mlir"), x,
                        np.zeros((64, 128), np.float32))[-1]
    expected = fp8_codes(x, fmt).view(FP8[fmt][0]).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("layout", ["quads-strided", "pairs-wgmma", "bytes-tf32-a"])
def test_splat_constant_and_select(layout):
    """where(x > 0, fp8(x), 1.5): a splat fp8 constant in each packing, selected per element
    by a mask from an f32 comparison."""
    fmt = "f8E5M2"
    v32, v8, mask = "vector<64x64xf32>", f"vector<64x64x{fmt}>", "vector<64x64xi1>"
    text, operand = cast("%x", v32, LAYOUTS[layout])
    kernel = f"""
func.func @select(%a: memref<64x64xf32>, %out: memref<64x64x{fmt}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf32>, index, index) -> {v32}
{text}  %zero = arith.constant dense<0.0> : {v32}
  %positive = arith.cmpf ogt, {operand}, %zero : {v32}
  %y = arith.truncf {operand} : {v32} to {v8}
  %c = arith.constant dense<1.5> : {v8}
  %r = arith.select %positive, %y, %c : {mask}, {v8}
  "smalti.vector_store"(%r, %out, %c0, %c0) : ({v8}, memref<64x64x{fmt}>, index, index) -> ()
  return
}}
"""
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32) * 100
    out = run_simulated(compile_mlir(kernel, "select.mlir"), x,
                        np.zeros(SHAPE, FP8[fmt][0]))[-1]
    expected = np.where(x > 0, fp8_codes(x, fmt), fp8_codes(np.float32(1.5), fmt))
    np.testing.assert_array_equal(out.view(np.uint8), expected)


def test_loop_carries_fp8_vectors():
    """An scf.for carries an fp8 vector: each iteration halves it (through f32)."""
    fmt = "f8E4M3FN"
    v32, v8 = "vector<64x64xf32>", f"vector<64x64x{fmt}>"
    kernel = f"""
func.func @loop(%a: memref<64x64x{fmt}>, %out: memref<64x64x{fmt}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %half = arith.constant dense<0.5> : {v32}
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64x{fmt}>, index, index) -> {v8}
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%v = %x) -> ({v8}) {{
    %w = arith.extf %v : {v8} to {v32}
    %h = arith.mulf %w, %half : {v32}
    %n = arith.truncf %h : {v32} to {v8}
    scf.yield %n : {v8}
  }}
  "smalti.vector_store"(%r, %out, %c0, %c0) : ({v8}, memref<64x64x{fmt}>, index, index) -> ()
  return
}}
"""
    x = (np.random.default_rng(6).standard_normal(SHAPE) * 64).astype(FP8[fmt][0])
    out = run_simulated(compile_mlir(kernel, "loop.mlir"), x, np.zeros(SHAPE, FP8[fmt][0]))[-1]
    expected = x.astype(np.float64)
    for _ in range(3):
        expected = fp8_codes(expected / 2, fmt).view(FP8[fmt][0]).astype(np.float64)
    np.testing.assert_array_equal(out.astype(np.float64), expected)


@pytest.mark.parametrize(("body", "result", "message"), [
    ("%y = arith.addf %x, %x : vector<64x64xf8E4M3FN>", "64x64xf8E4M3FN",
     "'arith.addf' op has no lowering for vectors of f8E4M3FN: PTX computes nothing in fp8; "
     "arith.extf to f32 first"),
    ("%y = arith.cmpf olt, %x, %x : vector<64x64xf8E4M3FN>", "64x64xi1",
     "'arith.cmpf' op has no lowering for vectors of f8E4M3FN; arith.extf them to f32 first"),
    ("%y = arith.fptosi %x : vector<64x64xf8E4M3FN> to vector<64x64xi32>", "64x64xi32",
     "'arith.fptosi' op has no lowering for vectors of f8E4M3FN"),
    ("%y = vector.multi_reduction <add>, %x, %z [1] : vector<64x64xf8E4M3FN> to "
     "vector<64xf8E4M3FN>", "64xf8E4M3FN",
     "'vector.multi_reduction' op has no lowering of <add> over f8E4M3FN"),
], ids=["addf", "cmpf", "fptosi", "reduction"])
def test_fp8_arithmetic_is_a_located_error(body, result, message):
    zeros = ", ".join(["%c0"] * result.count("x"))
    kernel = f"""
func.func @fp8_math(%a: memref<64x64xf8E4M3FN>, %out: memref<{result}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %z = arith.constant dense<0.0> : vector<64xf8E4M3FN>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf8E4M3FN>, index, index) -> vector<64x64xf8E4M3FN>
  {body}
  "smalti.vector_store"(%y, %out, {zeros}) : (vector<{result}>, memref<{result}>, {", ".join(["index"] * result.count("x"))}) -> ()
  return
}}
"""
    with pytest.raises(DiagnosticError,
                       match=rf"fp8_math.mlir:7:\d+: error: {re.escape(message)}"):
        compile_mlir(kernel, "fp8_math.mlir")
