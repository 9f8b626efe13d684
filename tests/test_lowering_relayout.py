"""smalti.layout_cast between distributed layouts, lowered in registers with shuffles within
warps (smalti.lowering.relayout): the simulator moves every element where the target layout
says (distinct values, so a misplaced one shows), the PTX has as many shuffles as the
planner's cost says, inference accepts the casts the lowering performs (and only those),
and a cast that needs shared memory goes through it (smalti.lowering.relayout_smem).

The main case is FlashAttention-3's: P = f8(S) from an f32 accumulator is in WGMMA_LAYOUT
(column pairs), but wgmma's 8-bit A from registers needs WGMMA_LAYOUT_8BIT (column quads).
"""

from __future__ import annotations

import re
from functools import cache

import ml_dtypes
import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.dialect.attributes import layout_to_text
from smalti.passes.registry import run_pipeline
from smalti.ptx.toolchain import compile_ptx
from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.compiler import compile_module, make_context, parse_module
from smalti.tiling import (
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_TF32_A,
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    Replicated,
    TiledLayout,
    Tiling,
    WGStridedLayout,
    relayout_cost,
)

DTYPES = {"f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
          "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
          "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32)}
BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32}
ROWS_QUAD_FIRST = TiledLayout(Tiling(((64,), (16,), (8,), (1,))), (-4,),
                              (Replicated(4), -2), -1)
ROWS_IN_REGISTERS = TiledLayout(Tiling(((64, 64), (16, 64), (8, 64), (1,))), (-7,),
                                (-3, Replicated(4)), -1)
# (source layout, target layout, shape, element type)
CASES = [
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (64, 64), "f8E4M3FN"),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (128, 96), "f8E5M2"),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (64, 256), "f8E4M3FN"),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (64, 32), "bf16"),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_8BIT, (128, 32), "f32"),
    (WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT, (64, 64), "f8E4M3FN"),
    (WGMMA_LAYOUT, WGMMA_LAYOUT_TF32_A, (64, 32), "f32"),
    (WGMMA_LAYOUT_UPCAST_2X, WGMMA_LAYOUT, (64, 64), "f8E4M3FN"),
    (ROWS_IN_REGISTERS, WGMMA_LAYOUT, (64, 64), "bf16"),  # in registers, no shuffle
    (WGMMA_ROW_LAYOUT, ROWS_QUAD_FIRST, (64,), "bf16"),  # one 16-bit value per register
    (WGMMA_ROW_LAYOUT, ROWS_QUAD_FIRST, (64,), "f8E4M3FN"),  # one byte per register
    # lone bytes (a vector of 1) gathered into quads: a word from four received ones
    (WGMMA_LAYOUT_TF32_A, WGMMA_LAYOUT_8BIT, (64, 64), "f8E4M3FN"),
    (WGMMA_LAYOUT_8BIT, WGMMA_LAYOUT_TF32_A, (64, 64), "f8E5M2"),
    (WGMMA_LAYOUT, WGStridedLayout(8), (64, 16), "bf16"),  # the README's relayout picture
]
NAMES = {WGMMA_LAYOUT: "wgmma", WGMMA_LAYOUT_8BIT: "8bit", WGMMA_LAYOUT_TF32_A: "tf32a",
         WGMMA_LAYOUT_UPCAST_2X: "upcast2x", WGMMA_ROW_LAYOUT: "row",
         ROWS_QUAD_FIRST: "row-quad-first", ROWS_IN_REGISTERS: "rows-in-registers",
         WGStridedLayout(8): "strided8"}
IDS = [f"{NAMES[s]}-to-{NAMES[d]}-{'x'.join(map(str, shape))}-{e}" for s, d, shape, e in CASES]


def cast_kernel(src, dst, shape: tuple[int, ...], element: str) -> str:
    """out = in, loaded in `src`, cast to `dst` and stored from it."""
    v = f"vector<{'x'.join(map(str, shape))}x{element}>"
    ref = f"memref<{'x'.join(map(str, shape))}x{element}>"
    zeros = ", ".join(["%c0"] * len(shape))
    index = ", ".join(["index"] * len(shape))
    return f"""
func.func @cast(%a: {ref}, %out: {ref}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, {zeros}) {{out_layouts = [#smalti.{layout_to_text(src)}]}} : ({ref}, {index}) -> {v}
  %y = "smalti.layout_cast"(%x) {{new_layout = #smalti.{layout_to_text(dst)}}} : ({v}) -> {v}
  "smalti.vector_store"(%y, %out, {zeros}) {{in_layouts = [#smalti.{layout_to_text(dst)}]}} : ({v}, {ref}, {index}) -> ()
  return
}}
"""


@cache
def compiled(case: tuple):
    return compile_mlir(cast_kernel(*case), "cast.mlir")


def distinct_inputs(shape: tuple[int, ...], element: str) -> list[np.ndarray]:
    """Arrays of `element` bit patterns that together tell every element apart: one array of
    distinct finite values for 16 and 32 bits; for 8 bits, whose 256 patterns are too few,
    one array per dimension holding each element's index along it, and one random array."""
    dtype = DTYPES[element]
    bits = BITS[dtype.itemsize * 8]
    rng = np.random.default_rng(sum(shape))
    size = int(np.prod(shape))
    if dtype.itemsize > 1:
        finite = 0x7F00 if dtype.itemsize == 2 else 0x7F000000  # below the inf/NaN exponent
        return [rng.choice(finite, size, replace=False).astype(bits).reshape(shape).view(dtype)]
    codes = [np.broadcast_to(np.arange(n).reshape([-1 if i == d else 1
                                                   for i in range(len(shape))]), shape)
             for d, n in enumerate(shape)]
    codes.append(rng.integers(0, 256, shape))
    return [np.ascontiguousarray(c).astype(bits).view(dtype) for c in codes]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_element_lands_where_the_target_layout_says(case):
    for data in distinct_inputs(case[2], case[3]):
        got = run_simulated(compiled(case), data, np.zeros_like(data))[-1]
        bits = BITS[data.dtype.itemsize * 8]
        np.testing.assert_array_equal(got.view(bits), data.view(bits))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_shuffles_are_those_the_planner_counts(case):
    src, dst, shape, element = case
    cost = relayout_cost(src, dst, shape, DTYPES[element].itemsize * 8)
    ptx = compiled(case).ptx
    assert ptx.count("shfl.sync.bfly.b32") == cost.shuffles
    assert "st.shared" not in ptx and "bar.sync" not in ptx


def test_accumulator_to_8bit_a_is_one_shuffle_and_one_prmt_per_a_register():
    """(64, 64) f8: each thread ends with 8 A registers (4 bytes each); every one arrives by
    a shuffle of a whole source word and is assembled by one prmt from two of them."""
    case = CASES[0]
    assert relayout_cost(*case[:3], 8).shuffles == 8
    ptx = compiled(case).ptx
    assert ptx.count("shfl.sync.bfly.b32") == 8
    assert ptx.count("prmt.b32") == 8
    # Lane-dependent choices are selects on the two quad bits of the thread index only.
    assert set(re.findall(r"and\.b32 %r\d+, %r0, (\d+);", ptx)) >= {"1", "2"}
    assert ptx.count("setp.ne.b32") == 2


@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=[IDS[0], IDS[3]])
def test_ptxas_takes_the_relayout(case):
    result = compile_ptx(compiled(case).ptx, arch="sm_90a")
    assert not re.search(r"C75\d\d", result.log), result.log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", result.log), result.log


def p_kernel(cast: bool) -> str:
    """P = f8(S) of a wgmma accumulator, fed to wgmma as A (with or without a layout_cast);
    B is the transposed view of an (N, K) tile, as f8 needs."""
    f8, smem = "f8E4M3FN", "#gpu.address_space<workgroup>"
    ref = f"memref<64x64x{f8}, {smem}>"
    tiles = "#smalti.tile<[64, 64]>, #smalti.swizzle<64>"
    a8 = f"#smalti.{layout_to_text(WGMMA_LAYOUT_8BIT)}"
    cast_line = (f'  %pa = "smalti.layout_cast"(%p) {{new_layout = {a8}}} : '
                 f"(vector<64x64x{f8}>) -> vector<64x64x{f8}>\n" if cast else "")
    return f"""
func.func @p(%out: memref<64x64xf32>) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %c4k = arith.constant 4096 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %a = "smalti.slice_smem"(%c0) : (index) -> {ref}
  %bt = "smalti.slice_smem"(%c4k) : (index) -> {ref}
  %b = "smalti.with_transforms"(%bt) {{transforms = [#smalti.transpose<[1, 0]>, {tiles}]}} : ({ref}) -> {ref}
  %s = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, {ref}, {ref}) -> vector<64x64xf32>
  %p = arith.truncf %s : vector<64x64xf32> to vector<64x64x{f8}>
{cast_line}  %o = "smalti.wgmma"(%acc, {"%pa" if cast else "%p"}, %b) : (vector<64x64xf32>, vector<64x64x{f8}>, {ref}) -> vector<64x64xf32>
  "smalti.vector_store"(%o, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}}
"""


def test_inference_accepts_the_cast_the_conflict_asks_for():
    """Without the cast, inference inserts the same one (smalti.layout_inference.cuts)."""
    inferred = compile_mlir(p_kernel(cast=False), "p.mlir").ptx
    assert inferred.count("shfl.sync.bfly.b32") == 8
    module = parse_module(p_kernel(cast=True), "p.mlir", make_context())
    run_pipeline(module, "builtin.module(smalti-verify,smalti-infer-layouts)")
    cast = next(line for line in str(module).splitlines() if '"smalti.layout_cast"' in line)
    assert f"in_layouts = [#smalti.{layout_to_text(WGMMA_LAYOUT)}]" in cast
    assert f"out_layouts = [#smalti.{layout_to_text(WGMMA_LAYOUT_8BIT)}]" in cast
    ptx = compile_mlir(p_kernel(cast=True), "p.mlir").ptx
    assert ptx.count("shfl.sync.bfly.b32") == 8


def test_inference_accepts_a_cast_across_warps_and_refuses_64_bit_elements():
    """A cast across warps goes through shared memory (smalti.lowering.relayout_smem); 64-bit
    elements relayout neither way."""
    compiled = compile_mlir(cast_kernel(WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "f32"),
                            "cast.mlir")
    data = distinct_inputs((64, 64), "f32")[0]
    np.testing.assert_array_equal(run_simulated(compiled, data, np.zeros_like(data))[-1], data)
    text = cast_kernel(WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "i64")
    with pytest.raises(DiagnosticError, match=r"cast.mlir:5:\d+: error: 'smalti.layout_cast' op "
                                              r"cannot be given a layout: this relayout is not "
                                              r"supported \(only splat broadcasts, no-op casts "
                                              r"and relayouts of 8-, 16- and 32-bit elements "
                                              r"between distributed layouts are\)"):
        compile_mlir(text, "cast.mlir")


def test_lowering_performs_a_cast_across_warps_laid_out_by_hand():
    """Laid out by hand (no inference), a cast that needs shared memory lowers too."""
    text = cast_kernel(WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "f32")
    module = parse_module(text, "cast.mlir", make_context())
    function = module.regions[0].blocks[0].operations[0]
    with module.context:
        for op in function.regions[0].blocks[0].operations:
            if op.operation.name == "smalti.layout_cast":
                op.attributes["in_layouts"] = op.operands[0].owner.attributes["out_layouts"]
                op.attributes["out_layouts"] = op.attributes["new_layout"].__class__.parse(
                    f"[#smalti.{layout_to_text(WGMMA_TRANSPOSED_LAYOUT)}]")
    compiled = compile_module(module, pipeline="builtin.module(smalti-tile,smalti-warpgroup)")
    assert "bar.sync" in compiled.ptx and "st.shared" in compiled.ptx
    data = distinct_inputs((64, 64), "f32")[0]
    np.testing.assert_array_equal(run_simulated(compiled, data, np.zeros_like(data))[-1], data)
