"""Where tcgen05.ld / tcgen05.st move each register: the data-path layouts.

PTX ISA, "tcgen05 Matrix fragments" (the figures for the shapes .32x32b, .16x64b, .16x128b,
.16x256b and .16x32bx2) and "Data Movement Shape": a warp accesses 32 lanes (.32x32b) or 16
lanes (the others) of tensor memory, and `.num` (.x1 .. .x128) repeats the base shape along
the columns. For lane t of the warp and register r of the instruction, relative to the lane
and column of the address operand:

- .32x32b:  lane t, column r (one register per repetition).
- .16x64b:  lane t//4 + 8*(t%2), column (t//2)%2 + 2r.
- .16x128b: lane t//4 + 8*(r%2), column t%4 + 4*(r//2) (two registers per repetition).
- .16x256b: lane t//4 + 8*((r//2)%2), column r%2 + 2*(t%4) + 8*(r//4) (four per repetition).
- .16x32bx2: two 16x32b accesses, the second `immHalfSplitoff` columns after the first:
  lane t%16, column r, plus immHalfSplitoff for t >= 16.

With `.pack::16b` (ld) / `.unpack::16b` (st) each register holds two 16-bit elements from
adjacent columns (column 2c in its low half, 2c+1 in its high half, c being the column above),
so the instruction spans twice the columns.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SHAPES = ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")
# registers per repetition, and the largest .num, of each shape (PTX ISA, tcgen05.ld/st)
REGISTERS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
MAX_NUM = {"32x32b": 128, "16x64b": 128, "16x128b": 64, "16x256b": 32, "16x32bx2": 128}
WARP = 32


def register_count(shape: str, num: int) -> int:
    """Registers per thread of `shape` repeated `num` times."""
    return REGISTERS[shape] * num


def lanes_spanned(shape: str) -> int:
    """Lanes one instruction reaches from its address's lane."""
    return 32 if shape == "32x32b" else 16


@lru_cache(maxsize=64)
def fragment(shape: str, num: int, split: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(lane, column) offsets (32 threads x registers) of `shape`.x`num` (unpacked), `split`
    being .16x32bx2's immHalfSplitoff."""
    t = np.arange(WARP)[:, None]
    r = np.arange(register_count(shape, num))[None, :]
    match shape:
        case "32x32b":
            lane, column = t + 0 * r, r + 0 * t
        case "16x64b":
            lane, column = t // 4 + 8 * (t % 2) + 0 * r, (t // 2) % 2 + 2 * r
        case "16x128b":
            lane, column = t // 4 + 8 * (r % 2), t % 4 + 4 * (r // 2)
        case "16x256b":
            lane, column = t // 4 + 8 * ((r // 2) % 2), r % 2 + 2 * (t % 4) + 8 * (r // 4)
        case "16x32bx2":
            lane, column = t % 16 + 0 * r, r + split * (t // 16)
        case _:
            raise ValueError(f"unknown tcgen05.ld/st shape {shape}")
    lane, column = np.broadcast_arrays(lane, column)
    lane, column = lane.copy(), column.copy()
    lane.flags.writeable = column.flags.writeable = False
    return lane, column
