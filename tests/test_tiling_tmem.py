"""TMEM access layouts (smalti.tiling.tmem) against the PTX ISA's tcgen05 data-path figures.

The expected tables are written here from the figures of PTX ISA 9.7.16.2.3.1 ("Matrix
fragments for shape .32x32b / .16x64b / .16x128b / .16x256b / .16x32bx2"), as grids of the
warp lane that holds each (data-path lane, 32-bit column) cell of one .x1 instruction, and
which of its registers; .xN repeats the .x1 grid N times to the right (the figures'
"repeated .num times"). They are not computed by the module under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from smalti.dialect.attributes import attr_to_layouts, layout_to_text, text_to_layout
from smalti.dialect.context import make_context, parse_module
from smalti.passes import run_pipeline
from smalti.runtime.compiler import compile_mlir
from smalti.runtime.simulate import run_simulated
from smalti.tiling import (
    TMEM_LAYOUT,
    TMEM_LAYOUT_16X256B,
    TMEM_LAYOUT_M64,
    TMEM_SHAPES,
    WGMMA_LAYOUT,
    WGMMA_ROW_LAYOUT,
    LayoutError,
    TmemAccess,
    broadcast_layout,
    is_tmem_layout,
    reduce_layout,
    relayout_cost,
    same_elements,
    tmem_accesses,
    tmem_layout,
)
from smalti.tiling.tmem import fragment


def _grid(rows: list[str]) -> list[list[tuple[int, int]]]:
    """Cells written 'T<lane>r<register>' separated by spaces, one string per data-path lane."""
    out = []
    for row in rows:
        cells = []
        for cell in row.split():
            lane, register = cell[1:].split("r")
            cells.append((int(lane), int(register)))
        out.append(cells)
    return out


# Figure 183 (.32x32b.x1): lane i of the warp holds data-path lane i, one column.
FIG_32X32B = _grid([f"T{i}r0" for i in range(32)])

# Figure 184 (.16x64b.x1): 16 data-path lanes x 2 columns, one register per thread.
FIG_16X64B = _grid([
    "T0r0 T2r0", "T4r0 T6r0", "T8r0 T10r0", "T12r0 T14r0",
    "T16r0 T18r0", "T20r0 T22r0", "T24r0 T26r0", "T28r0 T30r0",
    "T1r0 T3r0", "T5r0 T7r0", "T9r0 T11r0", "T13r0 T15r0",
    "T17r0 T19r0", "T21r0 T23r0", "T25r0 T27r0", "T29r0 T31r0",
])

# Figure 185 (.16x128b.x1): 16 lanes x 4 columns; rows 0-7 register 0, rows 8-15 register 1.
FIG_16X128B = _grid(
    [" ".join(f"T{4 * g + q}r0" for q in range(4)) for g in range(8)]
    + [" ".join(f"T{4 * g + q}r1" for q in range(4)) for g in range(8)])

# Figure 186 (.16x256b.x1): 16 lanes x 8 columns; row g: T(4g+q) holds columns 2q, 2q+1
# in r0, r1; row g + 8 the same columns in r2, r3.
FIG_16X256B = _grid(
    [" ".join(f"T{4 * g + q}r{s}" for q in range(4) for s in range(2)) for g in range(8)]
    + [" ".join(f"T{4 * g + q}r{2 + s}" for q in range(4) for s in range(2))
       for g in range(8)])

# Figure 187 (.16x32bx2.x1): 16 lanes, one column at the base and one immHalfSplitoff on;
# threads 0-15 the first half, 16-31 the second.
FIG_16X32BX2 = _grid([f"T{i}r0 T{16 + i}r0" for i in range(16)])

FIGURES = {"32x32b": FIG_32X32B, "16x64b": FIG_16X64B, "16x128b": FIG_16X128B,
           "16x256b": FIG_16X256B, "16x32bx2": FIG_16X32BX2}
REGISTERS_X1 = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}


def _expected(shape: str, num: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(warp lane, isa register) -> (data-path lane, value column) of `.<shape>.x<num>`:
    the x1 figure repeated `num` times along the columns (for .16x32bx2 each half grows)."""
    figure = FIGURES[shape]
    width = len(figure[0])
    regs = REGISTERS_X1[shape]
    table = {}
    for rep in range(num):
        for dp, row in enumerate(figure):
            for c, (lane, register) in enumerate(row):
                # .16x32bx2: each half holds num adjacent columns
                column = c * num + rep if shape == "16x32bx2" else rep * width + c
                table[(lane, rep * regs + register)] = (dp, column)
    return table


@pytest.mark.parametrize("shape", TMEM_SHAPES)
@pytest.mark.parametrize("num", [1, 2, 4, 8])
def test_fragment_matches_the_figures(shape, num):
    expected = _expected(shape, num)
    access = TmemAccess(shape, num)
    assert len(expected) == 32 * access.registers
    for (lane, register), cell in expected.items():
        assert fragment(shape, num, lane, register) == cell, (lane, register)


def _case_id(case):
    shape, num, bitwidth, rows = case
    return f"{shape}.x{num}.b{bitwidth}.rows{rows}"


CASES = [(shape, num, bitwidth, rows)
         for shape in TMEM_SHAPES for num in (1, 2, 4) for bitwidth in (32, 16, 8)
         for rows in (128, 64) if not (rows == 64 and shape == "32x32b")]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_layout_element_map_matches_the_figures(case):
    """Every register of every instruction of the warpgroup, read from the layout's
    element map, holds the element the figure puts there."""
    shape, num, bitwidth, rows = case
    access = TmemAccess(shape, num, bitwidth, rows=rows)
    per_register = 32 // bitwidth
    value = (rows, 2 * access.tile_shape[1])  # two column blocks
    index = access.layout.element_index(value)
    registers = access.instruction_registers(value)
    expected = _expected(shape, num)
    lanes = 32 if shape == "32x32b" else 16
    halves = rows // 4 // lanes
    for instruction in range(registers.shape[0]):
        block, half = divmod(instruction, halves)
        for thread in range(128):
            warp, lane = divmod(thread, 32)
            for r in range(access.registers):
                dp, cell = expected[(lane, r)]
                row = warp * (rows // 4) + half * lanes + dp
                for e in range(per_register):
                    column = block * access.tile_shape[1] + cell * per_register + e
                    reg, slot = registers[instruction, thread, r, e]
                    assert tuple(index[thread, reg, slot]) == (row, column)


@pytest.mark.parametrize("shape", TMEM_SHAPES)
def test_warps_reach_only_their_quarter_of_the_lanes(shape):
    """PTX ISA 9.7.16.2.2: warp w of the warpgroup reaches TMEM lanes 32w..32w+31."""
    for rows in (128, 64):
        try:
            access = TmemAccess(shape, rows=rows)
        except LayoutError:
            continue
        index = access.layout.element_index(access.tile_shape)
        lanes = np.vectorize(access.tmem_lane)(index[..., 0])
        warp = np.arange(128)[:, None, None] // 32
        assert np.all(lanes // 32 == warp)


def test_num_does_not_change_the_layout_except_for_the_split_shape():
    for shape in ("32x32b", "16x64b", "16x128b", "16x256b"):
        assert len({tmem_layout(shape, num) for num in (1, 2, 4, 8, 16, 32)}) == 1
    assert tmem_layout("16x32bx2", 1) != tmem_layout("16x32bx2", 2)


def test_named_layouts():
    assert tmem_layout("32x32b") == TMEM_LAYOUT
    assert tmem_layout("16x256b") == TMEM_LAYOUT_16X256B
    index = TMEM_LAYOUT.element_index((128, 16))  # thread t holds row t, column r
    assert np.array_equal(index[:, :, 0, 0], np.repeat(np.arange(128)[:, None], 16, 1))
    assert np.array_equal(index[:, :, 0, 1], np.tile(np.arange(16), (128, 1)))
    # the M = 64 data path is the wgmma accumulator's layout
    for n in (8, 64, 256):
        assert same_elements(TMEM_LAYOUT_M64, WGMMA_LAYOUT, (64, n))


def test_16bit_values_pack_adjacent_columns():
    layout = tmem_layout("32x32b", 4, 16, pack=True)
    index = layout.element_index((128, 8))
    assert index.shape == (128, 4, 2, 2)  # 4 registers of 2 columns
    assert np.array_equal(index[5, 1, :, :], [[5, 2], [5, 3]])
    packed = TmemAccess("32x32b", 4, 16, pack=True)
    unpacked = TmemAccess("32x32b", 4, 16)
    assert packed.tile_shape == unpacked.tile_shape == (128, 8)
    assert packed.columns == 8 and unpacked.columns == 4  # one element per column, or two
    assert [packed.tmem_column(c) for c in range(8)] == list(range(8))
    assert [unpacked.tmem_column(c) for c in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_split_half_columns():
    access = TmemAccess("16x32bx2", 4, split=16)
    assert access.columns == 20
    assert [access.tmem_column(c) for c in range(8)] == [0, 1, 2, 3, 16, 17, 18, 19]
    assert TmemAccess("16x32bx2", 4).columns == 8
    packed = TmemAccess("16x32bx2", 2, 16, pack=True, split=8)
    assert packed.columns == 12  # 4 columns a half (two 16-bit elements per register)
    assert [packed.tmem_column(c) for c in range(8)] == [0, 1, 2, 3, 8, 9, 10, 11]
    with pytest.raises(LayoutError, match="at least its half's 4 columns"):
        TmemAccess("16x32bx2", 2, 16, pack=True, split=2)


@pytest.mark.parametrize("bad", [
    dict(shape="8x32b"), dict(shape="32x32b", num=3), dict(shape="16x256b", num=64),
    dict(shape="16x128b", num=128), dict(shape="32x32b", bitwidth=64),
    dict(shape="32x32b", bitwidth=8, pack=True), dict(shape="32x32b", rows=64),
    dict(shape="16x64b", split=4), dict(shape="16x32bx2", num=4, split=2),
])
def test_forms_the_isa_lacks_are_rejected(bad):
    with pytest.raises(LayoutError):
        TmemAccess(**bad)


def test_inverse():
    assert [a.shape for a in tmem_accesses(TMEM_LAYOUT, (128, 64), 32)] == ["32x32b"]
    found = tmem_accesses(TMEM_LAYOUT_16X256B, (128, 64), 32)
    assert [(a.shape, a.num, a.rows) for a in found] == [("16x256b", 8, 128)]
    assert [(a.shape, a.rows) for a in tmem_accesses(WGMMA_LAYOUT, (64, 64), 32)] == [
        ("16x256b", 64)]
    assert not is_tmem_layout(WGMMA_LAYOUT, (128, 64), 32)  # wgmma's warps own other rows
    assert is_tmem_layout(tmem_layout("16x128b", bitwidth=16), (128, 64), 16)


@pytest.mark.parametrize("shape", TMEM_SHAPES)
def test_layouts_roundtrip_through_attributes(shape):
    layout = tmem_layout(shape, 2)
    assert text_to_layout(layout_to_text(layout)) == layout


def test_inference_expressions_apply():
    """Reduce and broadcast (inference's expressions) treat TMEM layouts like any other:
    a row reduction of the 32x32b layout keeps row t in thread t, and broadcasts back."""
    rows = reduce_layout(TMEM_LAYOUT, (128, 64), [1])
    assert rows is not None
    index = rows.element_index((128,))
    assert np.array_equal(index[:, 0, 0, 0], np.arange(128))
    back = broadcast_layout(rows, (128,), (128, 64), [1])
    assert back is not None and same_elements(back, TMEM_LAYOUT, (128, 64))
    # the 16x256b layout reduces like the wgmma accumulator: 4 lanes per row
    reduced = reduce_layout(TMEM_LAYOUT_M64, (64, 32), [1])
    assert same_elements(reduced, WGMMA_ROW_LAYOUT, (64,))


def test_relayout_costs_between_tmem_and_wgmma_layouts():
    """TMEM 32x32b <-> WGMMA_LAYOUT over 128 rows crosses warps (warp w holds rows
    32w.. in one, 16w.. and 64 + 16w.. in the other): a shared-memory round trip of the
    whole value, 64 accesses per thread for 128 x 128 f32, in both directions."""
    for src, dst in ((TMEM_LAYOUT, WGMMA_LAYOUT), (WGMMA_LAYOUT, TMEM_LAYOUT)):
        cost = relayout_cost(src, dst, (128, 128), 32)
        assert cost.kind == "smem"
        assert 0 < cost.smem_bytes <= 128 * 128 * 4
        assert 0 < cost.smem_accesses <= 2 * 128  # at most one load and store per element
    # the M = 64 data path is free; 32x32b -> 16x256b stays within each warp
    assert relayout_cost(TMEM_LAYOUT_M64, WGMMA_LAYOUT, (64, 128), 32).kind == "none"
    within = relayout_cost(TMEM_LAYOUT, TMEM_LAYOUT_16X256B, (128, 64), 32)
    assert within.kind == "shuffles" and 0 < within.shuffles <= 64
    bf16 = relayout_cost(tmem_layout("32x32b", bitwidth=16), WGMMA_LAYOUT, (128, 128), 16)
    assert bf16.kind == "smem" and bf16.smem_bytes <= 128 * 128 * 2


TMEM_PROGRAM = """
func.func @k(%a: memref<128x64xf32>, %out: memref<128x64xf32>, %rows: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %t = "smalti.layout_cast"(%v) {new_layout = #smalti.LAYOUT} : (vector<128x64xf32>) -> vector<128x64xf32>
  %w = arith.mulf %t, %t : vector<128x64xf32>
  %zero = arith.constant dense<0.0> : vector<128xf32>
  %s = vector.multi_reduction <add>, %w, %zero [1] : vector<128x64xf32> to vector<128xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  "smalti.vector_store"(%s, %rows, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}
"""


@pytest.mark.parametrize("shape", ["32x32b", "16x256b"])
def test_inference_carries_a_tmem_layout_and_the_kernel_computes(shape):
    """A value cast to a TMEM access layout keeps it through elementwise ops (inference's
    equations), its row reduction takes the reduced layout, and the kernel, compiled for
    sm_100a, computes the right numbers in the simulator."""
    layout = tmem_layout(shape)
    text = TMEM_PROGRAM.replace("LAYOUT", layout_to_text(layout))
    module = parse_module(text, "tmem.mlir", make_context())
    with module.context:
        run_pipeline(module, "builtin.module(smalti-infer-layouts)")
        layouts = {}
        for op in module.regions[0].blocks[0].operations[0].regions[0].blocks[0].operations:
            if "out_layouts" in op.attributes:
                layouts[op.name] = attr_to_layouts(op.attributes["out_layouts"])
    assert layouts["arith.mulf"] == [layout]
    assert layouts["vector.multi_reduction"] == [reduce_layout(layout, (128, 64), [1])]
    compiled = compile_mlir(text, arch="sm_100a")
    assert ".target sm_100a" in compiled.ptx
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 1024
    _, out, rows = run_simulated(compiled, a, np.zeros_like(a), np.zeros(128, np.float32))
    np.testing.assert_allclose(out, a * a)
    np.testing.assert_allclose(rows, (a * a).sum(axis=1), rtol=1e-5)
