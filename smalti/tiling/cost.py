"""What holding a value in a register layout costs each thread, and which layouts are too dear.

A layout that replicates its elements (`Replicated` warp or lane factors) multiplies the
registers a thread needs by the number of copies: a row or column vector of a WGMMA tile in
its per-row (4 copies) or per-column (32 copies) layout is cheap, but the same layouts on a
2-D tile hold the whole tile in every warp (a 64x128 f32 value in WGMMA_COL_LAYOUT needs 2048
registers per thread: ptxas spills 44 KB, fails register allocation or times out). Inference
orders its candidates by these costs and refuses layouts over the limit.
"""

from __future__ import annotations

import functools
import math

from smalti.tiling.layouts import (
    WARPGROUP_SIZE,
    Layout,
    Shape,
    TiledLayout,
    WGSplatLayout,
    WGStridedLayout,
    check_layout_fits,
)

REGISTER_BITS = 32
MAX_REGISTERS_PER_THREAD = 255
"""A thread's register file on sm_90 (PTX ISA, `.maxnreg`; CUDA C Programming Guide,
"Compute Capabilities", table "Technical Specifications": 255 32-bit registers per thread)."""

REPLICATED_REGISTER_LIMIT = MAX_REGISTERS_PER_THREAD
"""The most 32-bit registers per thread a value may take in a layout that replicates its
elements: what a thread has. A value without copies takes what its size asks (the user's
choice, spilled if need be); copies are inference's choice, and a layout whose copies alone
overflow a thread's registers cannot make a kernel that runs well (the 2-D tiles held whole
by every warp of issue 14 took 1,024 to 8,192). Row and column vectors of WGMMA tiles stay
far below it (the column vector of a 64x512 tile: 128)."""


@functools.lru_cache(maxsize=16384)
def registers_per_thread(layout: Layout, shape: Shape, bitwidth: int) -> int:
    """The 32-bit registers each thread needs to hold a `shape` value of `bitwidth`-bit
    elements in `layout` (vectors of narrow elements packed, as the lowering packs them)."""
    check_layout_fits(layout, shape)
    words_per_element = -(-bitwidth // REGISTER_BITS)
    match layout:
        case WGSplatLayout():
            return words_per_element
        case TiledLayout() | WGStridedLayout():
            dist = layout.distribution(shape)
            per_vector = -(-dist.vector_length * bitwidth // REGISTER_BITS)
            return dist.num_registers * per_vector
    raise TypeError(f"not a layout: {layout!r}")


@functools.lru_cache(maxsize=16384)
def copies(layout: Layout, shape: Shape) -> int:
    """How many threads hold each element (1 for layouts that do not replicate; a splat
    counts as 1: its one value is one element)."""
    check_layout_fits(layout, shape)
    if isinstance(layout, WGSplatLayout):
        return 1
    dist = layout.distribution(shape)
    held = WARPGROUP_SIZE * dist.num_registers * dist.vector_length
    return max(1, held // max(math.prod(shape), 1))


@functools.lru_cache(maxsize=16384)
def replication_problem(layout: Layout, shape: Shape, bitwidth: int) -> str | None:
    """Why `layout` is too dear for a `shape` value of `bitwidth`-bit elements, or None:
    a layout whose copies take more than REPLICATED_REGISTER_LIMIT registers per thread."""
    n = copies(layout, shape)
    if n == 1:
        return None
    registers = registers_per_thread(layout, shape, bitwidth)
    if registers <= REPLICATED_REGISTER_LIMIT:
        return None
    return (f"{n} copies of each element take {registers} registers per thread (a "
            f"replicated layout may take {REPLICATED_REGISTER_LIMIT}, one without copies "
            f"{minimum_registers(shape, bitwidth)})")


def minimum_registers(shape: Shape, bitwidth: int) -> int:
    """The registers per thread of a `shape` value spread over the warpgroup without copies."""
    return -(-math.prod(shape) * bitwidth // (REGISTER_BITS * WARPGROUP_SIZE))
