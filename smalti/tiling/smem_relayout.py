"""Relayouts across warps: a round trip through a shared-memory scratch buffer.

Every thread stores the elements it holds in the source layout to the scratch buffer, the
warpgroup meets at a barrier, and every thread loads the elements the target layout gives
it. The plan fixes where each element lives in the scratch (a bijection from the array's
elements to byte offsets) and, for each side, the accesses one thread makes: per access a
thread-dependent base (computed once per thread) plus a byte immediate, and the thread's
own elements the access moves, in address order. The lowering emits exactly these
accesses; inference costs relayouts by them.

Element placement. A thread's elements are named by their *local index*
`register * vector_length + slot` (register vector and slot of the layout). For tiled and
strided layouts an element's row-major flat index is `T(t) + C(local)`: a thread part and a
register part that add (the layout algebra's separable form; strided layouts flatten).

* Linear placement (every extent a power of two, the common case): flat index bits are
  then a permutation of thread, register and slot bits. The scratch address of an element
  is an invertible GF(2)-linear map of its flat index bits, chosen so that (1) the lowest
  address bits are element bits both layouts hold in registers (16-byte vector accesses on
  both sides when four 32-bit elements are common), (2) the address bits that pick a
  shared-memory bank are, on each side, a bijective function of the lanes that access in
  one phase (an XOR swizzle of the source's lane bits with the target's), so that no access
  has bank conflicts, and (3) thread and register parts of an address overlap in few bits:
  a thread computes one base per distinct overlap value and every access is then
  `[base + immediate]`.
* Row-major placement (anything else): the scratch is the flat array; an access is a run
  of a thread's elements that are adjacent in memory (up to 16 bytes, aligned).

A plan may move the value in several rounds (each a store, a barrier and a load of part of
the elements) when the whole would need more scratch than `ROUND_BYTES`: rounds split on
element bits that both layouts hold in registers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from smalti.tiling.layouts import (
    WARP_SIZE,
    WARPGROUP_SIZE,
    Layout,
    LayoutError,
    Shape,
    TiledLayout,
    WGStridedLayout,
    check_layout_fits,
)

THREAD_BITS = WARPGROUP_SIZE.bit_length() - 1
MAX_ACCESS_BYTES = 16  # ld/st.shared.v4.b32
ROUND_BYTES = 16384
"""The most scratch one round of a relayout takes (per warpgroup). A kernel's static shared
memory is limited to 48 KiB (ptxas: "too much shared data (0xc000 max)"), which three
warpgroups' copies of one round then fit; larger values go in rounds."""
BANKS = 32
BANK_BYTES = 4
SMEM_BITWIDTHS = (8, 16, 32)


@dataclass(frozen=True)
class ThreadFunction:
    """A per-thread value: the sum (`combine` "add") or XOR ("xor") of `coefficients[i]`
    over the set bits i of the thread's index in its warpgroup (0..127)."""

    coefficients: tuple[int, ...]
    combine: Literal["add", "xor"]

    def evaluate(self, threads: np.ndarray) -> np.ndarray:
        value = np.zeros(threads.shape, dtype=np.int64)
        for bit, c in enumerate(self.coefficients):
            part = ((threads >> bit) & 1) * c
            value = value ^ part if self.combine == "xor" else value + part
        return value


@dataclass(frozen=True)
class Access:
    """One ld/st.shared of a thread: at byte `bases[base](t) + offset`, the thread's
    elements `elements` (local indices) in address order, each `element_bytes` wide."""

    base: int
    offset: int
    elements: tuple[int, ...]


@dataclass(frozen=True)
class Side:
    """The accesses of one side (the stores of the source, or the loads of the target)."""

    bases: tuple[ThreadFunction, ...]
    accesses: tuple[Access, ...]

    def addresses(self, access: Access) -> np.ndarray:
        """[thread] byte offsets of `access` in the scratch buffer."""
        return self.bases[access.base].evaluate(np.arange(WARPGROUP_SIZE)) + access.offset


@dataclass(frozen=True)
class Round:
    store: Side
    load: Side


@dataclass(frozen=True, eq=False)
class SmemRelayoutPlan:
    """How a relayout goes through shared memory: `scratch_bytes` of scratch per
    warpgroup, the rounds in order, the placement used ("linear" or "row-major")."""

    element_bytes: int
    scratch_bytes: int
    rounds: tuple[Round, ...]
    placement: str
    store_replica_mask: int  # thread-index bits over which source threads hold copies

    @property
    def accesses(self) -> int:
        """ld/st.shared instructions a thread executes."""
        return sum(len(r.store.accesses) + len(r.load.accesses) for r in self.rounds)

    @property
    def bases(self) -> int:
        return sum(len(r.store.bases) + len(r.load.bases) for r in self.rounds)


def smem_relayout_problem(src: Layout, dst: Layout, shape: Shape, bitwidth: int) -> str | None:
    """Why a relayout through shared memory cannot be done, or None."""
    try:
        plan_smem_relayout(src, dst, tuple(shape), bitwidth)
    except LayoutError as error:
        return str(error)
    return None


@functools.lru_cache(maxsize=1024)
def plan_smem_relayout(src: Layout, dst: Layout, shape: Shape, bitwidth: int
                       ) -> SmemRelayoutPlan:
    """The plan of a relayout from `src` to `dst` of a `shape` value of `bitwidth`-bit
    elements through shared memory; LayoutError when there is none."""
    shape = tuple(shape)
    check_layout_fits(src, shape)
    check_layout_fits(dst, shape)
    for layout in (src, dst):
        if not isinstance(layout, TiledLayout | WGStridedLayout):
            raise LayoutError(f"a relayout through shared memory needs distributed layouts, "
                              f"not {layout}")
    if bitwidth not in SMEM_BITWIDTHS:
        raise LayoutError(f"{bitwidth}-bit elements do not go through shared memory "
                          f"(8-, 16- and 32-bit elements do)")
    element_bytes = bitwidth // 8
    size = math.prod(shape)
    src_map, dst_map = _local_map(src, shape), _local_map(dst, shape)
    mask = src.distribution(shape).replica_mask if isinstance(src, TiledLayout) else 0
    if size * element_bytes > ROUND_BYTES:
        raise LayoutError(f"a relayout through shared memory of {size * element_bytes} bytes "
                          f"needs rounds, which are not planned yet (at most {ROUND_BYTES} "
                          "bytes at once)")
    store = _row_major_side(src_map, element_bytes)
    load = _row_major_side(dst_map, element_bytes)
    return SmemRelayoutPlan(element_bytes, size * element_bytes, (Round(store, load),),
                            "row-major", mask)


def _local_map(layout: TiledLayout | WGStridedLayout, shape: Shape) -> np.ndarray:
    """[thread, local index] -> row-major flat index of the element."""
    index = layout.element_index(shape)
    flat = np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), shape)
    return flat.reshape(WARPGROUP_SIZE, -1)


def _additive(flat: np.ndarray) -> tuple[ThreadFunction, np.ndarray]:
    """flat[t, l] as T(t) + C(l), T a sum of per-thread-bit terms; LayoutError if not."""
    thread = flat[:, 0] - flat[0, 0]
    local = flat[0]
    if not np.array_equal(flat, thread[:, None] + local[None, :]):
        raise LayoutError("the layout's thread and register parts do not add")
    coefficients = tuple(int(thread[1 << bit]) for bit in range(THREAD_BITS))
    function = ThreadFunction(coefficients, "add")
    if not np.array_equal(function.evaluate(np.arange(WARPGROUP_SIZE)), thread):
        raise LayoutError("the layout's thread part is not a sum over thread-index bits")
    return function, local


def _row_major_side(flat: np.ndarray, element_bytes: int) -> Side:
    """Accesses of the flat array in row-major order: runs of a thread's elements adjacent
    in memory, as wide as alignment allows (at most 16 bytes)."""
    thread, local = _additive(flat)
    scaled = ThreadFunction(tuple(c * element_bytes for c in thread.coefficients), "add")
    nonzero = [c for c in scaled.coefficients if c]
    align = MAX_ACCESS_BYTES
    for c in nonzero:
        align = math.gcd(align, c)
    order = np.argsort(local, kind="stable")
    positions = local[order]
    accesses = []
    i = 0
    while i < len(order):
        start = int(positions[i]) * element_bytes
        count = 1
        for width in (16, 8, 4, 2, 1):
            n = width // element_bytes
            if n < 1 or width > align or start % width or i + n > len(order):
                continue
            if np.array_equal(positions[i:i + n] - positions[i], np.arange(n)):
                count = n
                break
        accesses.append(Access(0, start, tuple(int(x) for x in order[i:i + count])))
        i += count
    return Side((scaled,), tuple(accesses))


def bank_conflicts(side: Side, access: Access, element_bytes: int,
                   active: np.ndarray | None = None) -> int:
    """The bank-conflict degree of one access of a side: the most distinct 32-bit words
    one bank serves in one phase of a warp's request (1: conflict-free). A request of
    8-byte accesses is served in two phases of 16 lanes, of 16-byte accesses in four of 8
    lanes; threads reading one word share it. `active`: the threads that access."""
    width = len(access.elements) * element_bytes
    return conflict_degree(side.addresses(access), width, active)


def conflict_degree(addresses: np.ndarray, width: int, active: np.ndarray | None = None
                    ) -> int:
    """The bank-conflict degree of `width`-byte accesses of 128 threads at byte
    `addresses` (see bank_conflicts)."""
    lanes_per_phase = WARP_SIZE if width <= BANK_BYTES else WARP_SIZE * BANK_BYTES // width
    words = max(1, width // BANK_BYTES)
    worst = 1
    threads = np.arange(len(addresses))
    if active is None:
        active = np.ones(len(addresses), dtype=bool)
    for phase in range(0, len(addresses), lanes_per_phase):
        sel = threads[phase:phase + lanes_per_phase][active[phase:phase + lanes_per_phase]]
        if not len(sel):
            continue
        first = addresses[sel] // BANK_BYTES
        touched = (first[:, None] + np.arange(words)[None, :]).ravel()
        unique = np.unique(touched)
        counts = np.bincount(unique % BANKS, minlength=BANKS)
        worst = max(worst, int(counts.max()))
    return worst


__all__ = ["Access", "Round", "Side", "SmemRelayoutPlan", "ThreadFunction",
           "bank_conflicts", "conflict_degree", "plan_smem_relayout", "smem_relayout_problem"]
