"""Tensor memory (TMEM, sm_100a) and the register layouts of its accesses.

Facts, from the PTX ISA (8.6+) section 9.7.16 "TensorCore 5th Generation Family Instructions":

* TMEM is a per-CTA 2-D memory of 128 lanes (rows) by 512 columns of 32-bit cells
  (section "Tensor Memory" of 9.7.16.2); it is allocated in columns, and lane and column
  make a 32-bit address (lane in the upper, column in the lower 16 bits).
* A warp reaches only its own quarter of the lanes: warp w of a warpgroup (the CTA's warp
  id modulo 4) reaches lanes 32 * (w % 4) to 32 * (w % 4) + 31 (9.7.16.8.1 "Access
  restrictions": warp 0 lanes 0-31, warp 1 32-63, warp 2 64-95, warp 3 96-127).
* `tcgen05.ld` / `tcgen05.st` move data between a warp's registers and its lanes in one of
  five shapes, `lanes x bits` (9.7.16.2.3 "Data Movement Shape"), repeated `.num` = .x1 to
  .x128 times along the columns (sections `tcgen05.ld` / `tcgen05.st`; Table 49 gives the
  registers of each shape and .num):
  `.32x32b`, `.16x64b`, `.16x128b`, `.16x256b`, and `.16x32bx2` (16 lanes at two column
  offsets, the second `immHalfSplitoff` columns after the first). The register fragments
  are the figures of 9.7.16.2.3.1 "Matrix fragments for shape ..." (figure 183 for
  .32x32b, 184 for .16x64b, and the next ones in the order above);
  `fragment` encodes them.
* `.pack::16b` (ld) / `.unpack::16b` (st) pack two 16-bit elements of adjacent columns into
  one 32-bit register: the instruction then spans twice the columns (`tcgen05.ld`).

The registers of a warpgroup that runs one access on all four warps form a register layout
of the same algebra as every other value (`smalti.tiling.layouts.TiledLayout`): a value of
`(rows, columns)` elements, row r held in TMEM lane r (rows = 128: every lane; the
16-lane shapes then take two instructions per warp, one per 16-lane half of its quarter) or,
for the 16-lane shapes, rows = 64 and row r in lane 32 * (r // 16) + r % 16 (one instruction
per warp, the M = 64 data path). So inference's equations, relayout costs and shuffle plans
apply to TMEM values unchanged. Elements narrower than 32 bits pack into a register as the
lowering packs every vector: a register's `32 // bitwidth` adjacent columns, lowest first.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import numpy as np

from smalti.tiling.layouts import (
    WARP_SIZE,
    WARPGROUP_SIZE,
    WARPS_PER_WARPGROUP,
    Layout,
    LayoutError,
    Shape,
    TiledLayout,
    Tiling,
    check_layout_fits,
)

TMEM_LANES = 128
"""Lanes (rows) of a CTA's tensor memory (PTX ISA 9.7.16.2, "Tensor Memory")."""
TMEM_COLUMNS = 512
"""Columns of a CTA's tensor memory (PTX ISA 9.7.16.2, "Tensor Memory")."""
TMEM_CELL_BITS = 32
"""Bits of one TMEM cell (lane x column) (PTX ISA 9.7.16.2, "Tensor Memory")."""
TMEM_ALLOCATION_COLUMNS = (32, 64, 128, 256, 512)
"""Column counts `tcgen05.alloc` takes: a power of 2, at least 32 (PTX ISA tcgen05.alloc)."""
LANES_PER_WARP = TMEM_LANES // WARPS_PER_WARPGROUP
"""Lanes one warp reaches: warp w (modulo 4) reaches lanes 32w..32w+31 (PTX ISA 9.7.16.8.1)."""

TmemShape = Literal["32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2"]
TMEM_SHAPES: tuple[TmemShape, ...] = ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")
"""The data movement shapes of tcgen05.ld / tcgen05.st (PTX ISA 9.7.16.2.3)."""
TMEM_NUMS = (1, 2, 4, 8, 16, 32, 64, 128)
"""The `.num` repetitions .x1 to .x128 (PTX ISA `tcgen05.ld`, `.num`)."""
MAX_ACCESS_REGISTERS = 128
"""The most 32-bit registers one tcgen05.ld/st moves per thread (PTX ISA `tcgen05.ld`,
Table 49: .32x32b and .16x64b up to .x128, .16x128b up to .x64, .16x256b up to .x32)."""

# Per shape: lanes a warp's instruction reaches, 32-bit registers per thread and 32-bit
# columns per repetition (PTX ISA 9.7.16.2.3.1, its figures, and Table 49).
_LANES = {"32x32b": 32, "16x64b": 16, "16x128b": 16, "16x256b": 16, "16x32bx2": 16}
_REGISTERS_PER_REPEAT = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
_CELLS_PER_REPEAT = {"32x32b": 1, "16x64b": 2, "16x128b": 4, "16x256b": 8, "16x32bx2": 2}


def fragment(shape: TmemShape, num: int, lane: int, register: int) -> tuple[int, int]:
    """(data-path lane, 32-bit column) that register `register` of warp lane `lane` holds in
    one `tcgen05.ld/st.<shape>.x<num>`, relative to the warp's first lane and the
    instruction's first column (PTX ISA 9.7.16.2.3.1, figures 183 on). For `.16x32bx2`
    the column is the value's: lanes 16-31 hold columns num..2num-1, which the instruction
    finds `immHalfSplitoff` columns after the first half."""
    r = register
    match shape:
        case "32x32b":  # figure 183: lane i of the warp holds TMEM lane i, column r
            return lane, r
        case "16x64b":  # figure 184: 16 lanes x 64 bits, lane pairs share a row's 2 columns
            return lane // 4 + 8 * (lane % 2), (lane // 2) % 2 + 2 * r
        case "16x128b":  # rows g and g + 8, column lane % 4 of each 4
            return lane // 4 + 8 * (r % 2), lane % 4 + 4 * (r // 2)
        case "16x256b":  # the wgmma accumulator's pattern over 16 rows x 8 columns
            return lane // 4 + 8 * ((r // 2) % 2), r % 2 + 2 * (lane % 4) + 8 * (r // 4)
        case "16x32bx2":  # lanes 0-15 the first half, 16-31 the second
            return lane % 16, r + num * (lane // 16)
    raise LayoutError(f"unknown tcgen05 data movement shape {shape!r}")


@dataclass(frozen=True)
class TmemAccess:
    """One `tcgen05.ld` / `tcgen05.st` form, run by all four warps of a warpgroup, over a
    value of `rows` x columns elements of `bitwidth` bits.

    `pack`: `.pack::16b` / `.unpack::16b` (16-bit elements one per TMEM column, two per
    register); without it, narrow elements lie in TMEM as they lie in registers
    (`32 // bitwidth` per cell). `split`: `.16x32bx2`'s immHalfSplitoff, in TMEM columns
    (default: the half's own width, so the two halves are adjacent). `rows`: 128 (row r in
    TMEM lane r) or, for the 16-lane shapes, 64 (row r in lane 32 * (r // 16) + r % 16)."""

    shape: TmemShape
    num: int = 1
    bitwidth: int = 32
    pack: bool = False
    split: int | None = None
    rows: int = TMEM_LANES

    def __post_init__(self) -> None:
        if self.shape not in TMEM_SHAPES:
            raise LayoutError(f"unknown tcgen05 data movement shape {self.shape!r}; "
                              f"known: {', '.join(TMEM_SHAPES)}")
        if self.num not in TMEM_NUMS:
            raise LayoutError(f".num must be one of .x{', .x'.join(map(str, TMEM_NUMS))}, "
                              f"got {self.num}")
        if self.registers > MAX_ACCESS_REGISTERS:
            raise LayoutError(f"tcgen05.ld/st .{self.shape}.x{self.num} would move "
                              f"{self.registers} registers per thread (at most "
                              f"{MAX_ACCESS_REGISTERS})")
        if self.bitwidth not in (4, 8, 16, 32):
            raise LayoutError(f"TMEM accesses move 32-, 16-, 8- or 4-bit elements, got "
                              f"{self.bitwidth}-bit")
        if self.pack and self.bitwidth != 16:
            raise LayoutError(f".pack::16b packs 16-bit elements, not {self.bitwidth}-bit")
        if self.split is not None and (self.shape != "16x32bx2"
                                       or self.split < self._half_columns):
            raise LayoutError("immHalfSplitoff belongs to .16x32bx2 and must be at least "
                              f"its half's {self._half_columns} columns, got {self.split}")
        if self.rows not in (TMEM_LANES, TMEM_LANES // 2):
            raise LayoutError(f"a TMEM access covers 128 or 64 rows, got {self.rows}")
        if self.rows != TMEM_LANES and self.lanes_per_warp == LANES_PER_WARP:
            raise LayoutError(f".{self.shape} reaches all 32 lanes of each warp: 128 rows, "
                              f"not {self.rows}")

    @property
    def lanes_per_warp(self) -> int:
        """TMEM lanes one warp's instruction reaches (32 or 16)."""
        return _LANES[self.shape]

    @property
    def registers(self) -> int:
        """32-bit registers per thread of one instruction (PTX ISA Table 49)."""
        return _REGISTERS_PER_REPEAT[self.shape] * self.num

    @property
    def elements_per_register(self) -> int:
        return TMEM_CELL_BITS // self.bitwidth

    @property
    def cells(self) -> int:
        """32-bit register columns of the value one instruction moves per lane."""
        return _CELLS_PER_REPEAT[self.shape] * self.num

    @property
    def tile_shape(self) -> Shape:
        """(rows, columns) of the value one access moves: one instruction per warp, two for
        a 16-lane shape over 128 rows. The layout applies to any multiple of the columns."""
        return (self.rows, self.cells * self.elements_per_register)

    @property
    def instructions_per_warp(self) -> int:
        """Instructions a warp runs to cover its rows of `tile_shape`."""
        return self.rows // WARPS_PER_WARPGROUP // self.lanes_per_warp

    @property
    def _half_columns(self) -> int:
        """TMEM columns one half of a .16x32bx2 spans (.num registers)."""
        return self.num * (2 if self.pack else 1)

    @property
    def _split(self) -> int:
        return self._half_columns if self.split is None else self.split

    @property
    def columns(self) -> int:
        """TMEM columns one instruction spans (both halves of .16x32bx2, and the gap)."""
        if self.shape == "16x32bx2":
            return self._split + self._half_columns
        return self.cells * (2 if self.pack else 1)

    def tmem_lane(self, row: int) -> int:
        """The TMEM lane (from the access's base lane) that holds `row` of the value."""
        if self.rows == TMEM_LANES:
            return row
        return LANES_PER_WARP * (row // self.lanes_per_warp) + row % self.lanes_per_warp

    def tmem_column(self, column: int) -> int:
        """The TMEM column (from the instruction's first) of element `column` of one
        instruction's columns (0 <= column < tile_shape[1])."""
        cell, part = divmod(column, self.elements_per_register)
        offset = 0
        if self.shape == "16x32bx2" and cell >= self.num:
            cell, offset = cell - self.num, self._split
        return offset + (2 * cell + part if self.pack else cell)

    @property
    def layout(self) -> TiledLayout:
        """The warpgroup's register layout of the value (see the module docstring)."""
        return _layout(self.shape, self.num if self.shape == "16x32bx2" else 1,
                       self.elements_per_register, self.rows)

    def _elements(self, shape: Shape) -> tuple[np.ndarray, np.ndarray]:
        """(rows, columns) of the value's elements, each [instruction, thread, isa register,
        element]: instruction i = (column block, lane half) in row-major order, isa register
        r the r-th register of the instruction's vector (PTX ISA 9.7.16.2.3.1), element e
        its e-th packed element (lowest bits first). LayoutError if the value is not a
        whole number of `tile_shape`s."""
        rows, columns = self.tile_shape
        if len(shape) != 2 or shape[0] != rows or shape[1] % columns:
            raise LayoutError(f"a .{self.shape} access of {self.rows} rows moves values of "
                              f"{rows} x (a multiple of {columns}) elements, not {list(shape)}")
        halves, per_register = self.instructions_per_warp, self.elements_per_register
        warp, lane = np.divmod(np.arange(WARPGROUP_SIZE), WARP_SIZE)
        dp, cell = fragment(self.shape, self.num, lane[:, None],
                            np.arange(self.registers)[None, :])  # [thread, isa register]
        block = np.arange(shape[1] // columns)[:, None, None, None, None]
        half = np.arange(halves)[None, :, None, None, None]
        row = (warp[:, None] * halves * self.lanes_per_warp + dp)[None, None, :, :, None] \
            + half * self.lanes_per_warp
        column = block * columns + (cell * per_register)[None, None, :, :, None] \
            + np.arange(per_register)
        full = np.broadcast_shapes(row.shape, column.shape)
        target = (-1, WARPGROUP_SIZE, self.registers, per_register)
        return (np.broadcast_to(row, full).reshape(target),
                np.broadcast_to(column, full).reshape(target))

    def instruction_registers(self, shape: Shape, layout: Layout | None = None
                              ) -> np.ndarray:
        """[instruction, thread, isa register, element] (as `_elements`) -> (layout
        register, slot) of a value of `shape` in `layout` (default: the access's own).
        LayoutError if the value is not a whole number of `tile_shape`s, or if the layout
        puts an element in another thread than the ISA does."""
        rows, columns = self._elements(tuple(shape))
        holders = (layout or self.layout).owners(tuple(shape))[rows, columns, 0]
        threads = np.arange(WARPGROUP_SIZE)[None, :, None, None]
        wrong = np.argwhere(holders[..., 0] != threads)
        if wrong.size:
            i, t, r, e = (int(x) for x in wrong[0])
            raise LayoutError(f"the layout puts element ({rows[i, t, r, e]}, "
                              f"{columns[i, t, r, e]}) in thread {holders[i, t, r, e, 0]}, but "
                              f".{self.shape} in thread {t}")
        return holders[..., 1:]

    def realises(self, layout: Layout, shape: Shape) -> bool:
        """True when this access moves a `shape` value in `layout` register for register:
        every element in the thread the ISA puts it in, the threads' isa register r one
        register (vector, packed slot) of the layout in every thread, and a .b32 register's
        packed elements adjacent slots of one register vector. The layout may group the
        registers into vectors differently from `self.layout` (a row per thread with 8
        columns to a vector is realised by .32x32b, whose own layout has one)."""
        if not isinstance(layout, TiledLayout):
            return False
        try:
            table = self.instruction_registers(shape, layout)
            vector_length = layout.distribution(tuple(shape)).vector_length
        except LayoutError:
            return False
        per_register = self.elements_per_register
        slots = table[..., 1]
        return bool((table == table[:, :1]).all()
                    and (table[..., 0] == table[..., :1, 0]).all()
                    and (slots == slots[..., :1] + np.arange(per_register)).all()
                    and (slots[..., 0] % per_register == 0).all()
                    and vector_length % per_register == 0)


@functools.lru_cache(maxsize=256)
def _layout(shape: TmemShape, num: int, per_register: int, rows: int) -> TiledLayout:
    """The TiledLayout of a TMEM access (TmemAccess.layout), built from the fragment figure:
    warps over 32-lane (or, for 64 rows, 16-lane) quarters, lane halves and repetitions in
    registers, the figure's lane bits as lane dims, a register's packed elements as the
    vector (for .16x256b, whose registers pair up along columns, two registers' worth)."""
    k = per_register
    lanes = _LANES[shape]
    # inner tiles over one repetition (rows `lanes`, `width` columns), then where the warp
    # lane bits (most significant first) and the vector sit: (dim, multiplier, extent)
    match shape:
        case "32x32b":
            width, inner = k, []
            lane_dims, vector = [(0, 1, 32)], (1, 1, k)
        case "16x64b":
            width, inner = 2 * k, [(8, 2 * k), (1, k)]
            lane_dims, vector = [(0, 1, 8), (1, k, 2), (0, 8, 2)], (1, 1, k)
        case "16x128b":
            width, inner = 4 * k, [(8, 4 * k), (1, k)]
            lane_dims, vector = [(0, 1, 8), (1, k, 4)], (1, 1, k)
        case "16x256b":
            width, inner = 8 * k, [(8, 8 * k), (1, 2 * k)]
            lane_dims, vector = [(0, 1, 8), (1, 2 * k, 4)], (1, 1, 2 * k)
        case "16x32bx2":
            width, inner = 2 * num * k, [(16, num * k), (1, k)]
            lane_dims, vector = [(1, num * k, 2), (0, 1, 16)], (1, 1, k)
        case _:
            raise LayoutError(f"unknown tcgen05 data movement shape {shape!r}")
    quarter = rows // WARPS_PER_WARPGROUP  # rows per warp: 32, or 16 when rows = 64
    prefix = [(rows, width), (quarter, width)]
    if lanes < quarter:
        prefix.append((lanes, width))
    tiling = Tiling(tuple(prefix + inner))
    entries = tiling.tiled_entries((rows, width))

    def find(dim: int, mult: int, extent: int) -> int:
        matches = [i for i, e in enumerate(entries) if e == (dim, mult, extent)]
        if not matches:
            raise AssertionError(f"no tiled dim {(dim, mult, extent)} in {entries}")
        return matches[-1] - len(entries)

    return TiledLayout(
        tiling,
        warp_dims=(find(0, quarter, WARPS_PER_WARPGROUP),),
        lane_dims=tuple(find(*d) for d in lane_dims),
        vector_dim=find(*vector),
    )


def tmem_layout(shape: TmemShape, num: int = 1, bitwidth: int = 32, *, pack: bool = False,
                rows: int = TMEM_LANES) -> TiledLayout:
    """The register layout of a `tcgen05.ld/st.<shape>.x<num>` of `bitwidth`-bit elements
    run by a warpgroup (TmemAccess(...).layout); LayoutError for a form the ISA lacks."""
    return TmemAccess(shape, num, bitwidth, pack, rows=rows).layout


def tmem_accesses(layout: Layout, shape: Shape, bitwidth: int) -> tuple[TmemAccess, ...]:
    """The TMEM accesses (the widest `.num` of each shape and row count) that read or write
    a `shape` value of `bitwidth`-bit elements in `layout` directly (`TmemAccess.realises`:
    every element in the thread, register and slot the instruction moves it through, up
    to how the layout groups registers into vectors). Empty when the value must be relaid
    out first (the inverse of `tmem_layout`)."""
    check_layout_fits(layout, tuple(shape))
    if len(shape) != 2 or not isinstance(layout, TiledLayout):
        return ()
    return _tmem_accesses(layout, tuple(shape), bitwidth)


@functools.lru_cache(maxsize=1024)
def _tmem_accesses(layout: TiledLayout, shape: Shape, bitwidth: int) -> tuple[TmemAccess, ...]:
    found = []
    for access_shape in TMEM_SHAPES:
        for rows in (TMEM_LANES, TMEM_LANES // 2):
            for num in reversed(TMEM_NUMS):
                try:
                    access = TmemAccess(access_shape, num, bitwidth, rows=rows)
                    columns = access.tile_shape[1]
                except LayoutError:
                    continue
                if shape[0] != rows or shape[1] % columns:
                    continue
                if access.realises(layout, tuple(shape)):
                    found.append(access)
                    break
    return tuple(found)


def tmem_row_layout(vector: int, bitwidth: int = 32) -> TiledLayout:
    """The .32x32b thread map (thread t holds row t of a 128-row value) with `vector`
    consecutive columns to a register vector: what `.32x32b` moves register for register
    (`TmemAccess.realises`), and what a row-major store wants (16 bytes a vector). Its own
    layout (`tmem_layout("32x32b")`) has one 32-bit register's columns to a vector."""
    per_register = TMEM_CELL_BITS // bitwidth
    if vector <= 0 or vector % per_register:
        raise LayoutError(f"a vector of {bitwidth}-bit elements loaded by .32x32b spans whole "
                          f"registers ({per_register} columns), got {vector}")
    return TiledLayout(Tiling(((TMEM_LANES, vector), (LANES_PER_WARP, vector))),
                       warp_dims=(-4,), lane_dims=(-2,), vector_dim=-1)


def is_tmem_layout(layout: Layout, shape: Shape, bitwidth: int) -> bool:
    """True when some tcgen05.ld/st moves a `shape` value in `layout` without a relayout."""
    return bool(tmem_accesses(layout, shape, bitwidth))
