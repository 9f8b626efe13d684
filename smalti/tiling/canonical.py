"""Named register layouts of Hopper kernels, each encoding a PTX ISA fragment figure.

Notation: warp w = t // 32, g = (t % 32) // 4 (row in an 8-row group), q = t % 4 (lane in
its quad). Figures are those of the PTX ISA section "Register fragments and shared memory
matrix layouts" of `wgmma.mma_async` (9.7.15.5.1).

16-bit values use the *same* layouts as 32-bit ones, vector length included: the WGMMA
layout's vector of 2 holds two horizontally adjacent elements, which for 16-bit types are
exactly the two halves (low = lower column) of one packed .b32 register of the ISA's
16-bit fragments (f16/bf16 accumulator D, and A from registers), and for f32 two .f32
registers. So there is no separate packed layout: the lowering packs a vector of 2 16-bit
elements into one register (`elements_per_register`), and converting between f32 and bf16
in the WGMMA layout moves no data between threads. 8-bit values use a vector of 4 (one
.b32 register of four bytes, lowest column in the lowest byte). wgmma's A operand from
registers has one layout per element width (WGMMA_A_LAYOUTS); for f32 (tf32) it is not the
accumulator's.
"""

from __future__ import annotations

from smalti.tiling.layouts import WGMMA_LAYOUT, Replicated, TiledLayout, Tiling
from smalti.tiling.tmem import tmem_layout

WGMMA_LAYOUT_16BIT = WGMMA_LAYOUT
"""The WGMMA layout of 16-bit values (figure "WGMMA .m64nNk16 register fragment layout for
accumulator matrix D", .f16 accumulators, and for matrix A): identical to WGMMA_LAYOUT,
the vector of 2 being one packed .b32 register."""

WGMMA_ROW_LAYOUT = TiledLayout(
    Tiling(((64,), (16,), (8,), (1,))),
    warp_dims=(-4,),
    lane_dims=(-2, Replicated(4)),
    vector_dim=-1,
)
"""A vector<64k> of per-row values of a WGMMA-laid-out (64k, N) array (its reduction over
N): row 16w + g + 8h + 64j sits in register 2j + h of thread t, and the four lanes of a
quad hold the same rows (the ISA accumulator figure with its columns removed)."""

WGMMA_COL_LAYOUT = TiledLayout(
    Tiling(((8,), (2,))),
    warp_dims=(Replicated(4),),
    lane_dims=(Replicated(8), -2),
    vector_dim=-1,
)
"""A vector<N> of per-column values of a WGMMA-laid-out (64k, N) array (its reduction over
rows): columns 8j + 2q and 8j + 2q + 1 are the vector of register j of every thread with
lane quad index q (the ISA accumulator figure with its rows removed)."""

WGMMA_TRANSPOSED_LAYOUT = TiledLayout(
    Tiling(((8, 64), (8, 16), (8, 8), (2, 1))),
    warp_dims=(-7,),
    lane_dims=(-3, -4),
    vector_dim=-2,
)
"""The WGMMA layout of the transposed array: a (N, 64k) value whose element (c, r) lives
where WGMMA_LAYOUT keeps element (r, c) of the (64k, N) array, so `vector.transpose` of a
WGMMA-laid-out value moves no data. Its vector of 2 runs down the columns."""

WGMMA_LAYOUT_8BIT = TiledLayout(
    Tiling(((64, 16), (16, 16), (8, 16), (4,))),
    warp_dims=(-7,),
    lane_dims=(-3, -2),
    vector_dim=-1,
)
"""The 8-bit A operand of wgmma .m64nNk32 (.e4m3/.e5m2/.s8/.u8; figure "WGMMA .m64nNk32
register fragment layout for matrix A"): element i (0..15) of thread t is at row
16w + g + 8*((i >> 2) & 1), column 4q + (i & 3) + 16*(i >> 3); one .b32 register holds a
vector of 4 adjacent columns."""

WGMMA_LAYOUT_TF32_A = TiledLayout(
    Tiling(((64, 4), (16, 4), (8, 4), (1,))),
    warp_dims=(-7,),
    lane_dims=(-3, -2),
    vector_dim=-1,
)
"""The 32-bit A operand of wgmma .m64nNk8 (.tf32; figure "WGMMA .m64nNk8 register fragment
layout for matrix A"): register i (0..3) of thread t holds row 16w + g + 8*(i & 1), column
q + 4*(i >> 1), one element per .b32 register. Unlike the accumulator's (WGMMA_LAYOUT), a
thread's two columns are 4 apart, so an f32 value feeds wgmma as tf32 A only in this
layout."""

WGMMA_A_LAYOUTS = {8: WGMMA_LAYOUT_8BIT, 16: WGMMA_LAYOUT_16BIT, 32: WGMMA_LAYOUT_TF32_A}
"""The layout of wgmma's A operand in registers, by element bit width: each thread's four
.b32 registers per 64 rows and 32 bytes of K hold rows g and g + 8 at bytes 4q..4q+3 of
each 16-byte half of K (the same figure for every width, in the element's units)."""

WGMMA_LAYOUT_UPCAST_2X = TiledLayout(
    Tiling(((64, 16), (16, 16), (8, 16), (8,), (4,))),
    warp_dims=(-8,),
    lane_dims=(-4, -2, -3),
    vector_dim=-1,
)
"""Loads 8-bit data that will be widened 2x into WGMMA_LAYOUT_16BIT (e.g. e4m3 -> bf16).

Per 16 columns, lane q holds the 4 adjacent columns 8*(q & 1) + 4*(q >> 1) + (0..3) in one
.b32 register. Widened, those are two column pairs of the ISA's 16-bit fragment: one this
thread keeps and one that belongs to lane q ^ 1 (e.g. lane 0 holds 0..3 and needs 0, 1,
8, 9; lane 1 holds 8..11). So one `shfl.sync.bfly 1` per register reaches WGMMA_LAYOUT."""

WGMMA_LAYOUT_UPCAST_4X = TiledLayout(
    Tiling(((64, 32), (16, 32), (8, 32), (8,))),
    warp_dims=(-7,),
    lane_dims=(-3, -2),
    vector_dim=-1,
)
"""Loads 4-bit data that will be widened 4x: per 32 columns, lane q holds the 8 adjacent
columns 8q + (0..7) in one .b32 register; a bfly-2 shuffle reaches WGMMA_LAYOUT_UPCAST_2X
(lanes q and q ^ 2 swap halves) and a bfly-1 shuffle then reaches WGMMA_LAYOUT."""

UPCAST_STORE_LAYOUT = TiledLayout(
    Tiling(((32, 32), (8, 32), (1, 8))),
    warp_dims=(-6,),
    lane_dims=(-4, -3),
    vector_dim=-1,
)
"""Loads narrow data that will be widened and stored row by row (e.g. int4 or int8 weights
converted to bf16 and written to shared memory for wgmma): per 32 x 32 block, warp w holds
rows 8w..8w+7, lane (g, q) row 8w + g, columns 8q..8q+7 in one register vector (one .b32 of
4-bit elements, two of 8-bit ones; widened to 16 bits, one 16-byte store). Its lanes are
WGMMA_LAYOUT_UPCAST_4X's (8 rows by 4 groups of 8 columns), but a warp keeps to 8 of every
32 rows where UPCAST_4X gives it 16 of every 64: either stores 16 bytes per register
vector, but only UPCAST_4X reaches WGMMA_LAYOUT within warps."""

CANONICAL_LAYOUTS: dict[str, TiledLayout] = {
    "wgmma": WGMMA_LAYOUT,
    "wgmma-16bit": WGMMA_LAYOUT,
    "wgmma-row": WGMMA_ROW_LAYOUT,
    "wgmma-col": WGMMA_COL_LAYOUT,
    "wgmma-transposed": WGMMA_TRANSPOSED_LAYOUT,
    "wgmma-8bit": WGMMA_LAYOUT_8BIT,
    "wgmma-upcast-2x": WGMMA_LAYOUT_UPCAST_2X,
    "wgmma-upcast-4x": WGMMA_LAYOUT_UPCAST_4X,
}
"""The layouts users may name instead of writing their attribute text (smalti-layout, the
DSL's layout_cast and custom_primitive)."""

BROADCAST_TARGETS: tuple[TiledLayout, ...] = (
    WGMMA_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    WGMMA_LAYOUT_8BIT,
)
"""Layouts a broadcast prefers, in order, when one of them reduces back to the operand's
layout (so `x - rowmax(x)[:, None]` keeps the accumulator layout)."""

TMEM_LAYOUT = tmem_layout("32x32b")
"""A (128, N) value of 32-bit elements as `tcgen05.ld/st.32x32b` moves it (sm_100a): thread
t holds row t (TMEM lane t: warp w reaches lanes 32w..32w+31), one column per register
(PTX ISA 9.7.16.2.3.1, figure 183 "Matrix Fragment for shape .32x32b"). Narrower elements
use `tmem_layout("32x32b", bitwidth=...)`: a register's adjacent columns as the vector."""

TMEM_LAYOUT_16X256B = tmem_layout("16x256b")
"""A (128, N) value of 32-bit elements as `tcgen05.ld/st.16x256b` moves it, two
instructions per warp (lane halves 0-15 and 16-31 of its quarter): within each 16 rows the
wgmma accumulator's pattern (PTX ISA 9.7.16.2.3.1, "Matrix fragments for shape .16x256b")."""

TMEM_LAYOUT_M64 = tmem_layout("16x256b", rows=64)
"""A (64, N) value as one `tcgen05.ld/st.16x256b` per warp moves it (the M = 64 data path:
row r in TMEM lane 32 * (r // 16) + r % 16): the same elements in the same registers as
WGMMA_LAYOUT, so a Hopper accumulator and a Blackwell M = 64 one relayout for free."""
