"""What converting a value between two register layouts costs, derived from element maps.

Three tiers, cheapest first: every thread already holds every element it needs (register
moves and packing only); every element a thread needs is held by a thread of its own warp
(`shfl.sync`, 32 bits each); otherwise a round trip through shared memory
(`smalti.tiling.smem_relayout`: its scratch bytes and shared accesses). The shuffle count
is that of the plan the lowering emits (`plan_shuffles`): the fewest 32-bit words any exchange
moves.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from smalti.tiling.layouts import (
    WARP_SIZE,
    Layout,
    LayoutError,
    Shape,
    WGSplatLayout,
    check_layout_fits,
)
from smalti.tiling.shuffles import plan_shuffles
from smalti.tiling.smem_relayout import plan_smem_relayout, smem_relayout_problem

RelayoutKind = Literal["none", "registers", "shuffles", "smem"]
REGISTER_BITS = 32


@dataclass(frozen=True)
class RelayoutCost:
    """The cheapest way to relayout, and its size per thread (shuffles: per warp).

    `registers_moved`: destination .b32 registers of a thread that are not already one of
    its source registers (built by moves, packing or shuffles), the most over all threads.
    `shuffles`: `shfl.sync` instructions a warp executes (each moves 32 bits per lane), as
    many as the most words a lane receives or sends (`plan_shuffles`).
    `smem_bytes`: shared memory the round trip takes at once (per warpgroup; a large value
    goes in several rounds), `smem_accesses`: the ld/st.shared a thread executes,
    `smem_rounds`: store-barrier-load rounds (`smalti.tiling.smem_relayout`); all 0 when the
    relayout needs shared memory but cannot be done (`smem_relayout_problem`).
    """

    kind: RelayoutKind
    registers_moved: int = 0
    shuffles: int = 0
    smem_bytes: int = 0
    smem_accesses: int = 0
    smem_rounds: int = 0


def relayout_cost(src: Layout, dst: Layout, shape: Shape, bitwidth: int) -> RelayoutCost:
    """The cost of converting a `shape` value of `bitwidth`-bit elements from src to dst."""
    return _planned_cost(src, dst, tuple(shape), bitwidth)


@functools.lru_cache(maxsize=4096)
def _planned_cost(src: Layout, dst: Layout, shape: Shape, bitwidth: int) -> RelayoutCost:
    """relayout_cost, memoised: inference's search for relayouts to insert prices the same
    few pairs again and again (smalti.layout_inference.cuts)."""
    return _cost(src, dst, shape, bitwidth, count_shuffles=True)


def lowers_without_smem(src: Layout, dst: Layout, shape: Shape, bitwidth: int) -> bool:
    """True when the relayout needs no shared memory (registers and shuffles only)."""
    return relayout_kind(src, dst, shape, bitwidth) != "smem"


@functools.lru_cache(maxsize=4096)
def relayout_kind(src: Layout, dst: Layout, shape: Shape, bitwidth: int) -> RelayoutKind:
    """The cheapest way to relayout (relayout_cost's kind) without planning shuffles, the
    dear part: what inference asks of every candidate layout. Memoised."""
    return _cost(src, dst, tuple(shape), bitwidth, count_shuffles=False).kind


def _cost(src: Layout, dst: Layout, shape: Shape, bitwidth: int, count_shuffles: bool
          ) -> RelayoutCost:
    """relayout_cost, but planning the shuffles (the dear part) only if `count_shuffles`."""
    check_layout_fits(src, shape)
    check_layout_fits(dst, shape)
    if bitwidth <= 0 or (bitwidth > REGISTER_BITS and bitwidth % REGISTER_BITS):
        raise LayoutError(f"cannot relayout {bitwidth}-bit elements")
    registers_per_word = max(1, bitwidth // REGISTER_BITS)
    if isinstance(dst, WGSplatLayout):
        if isinstance(src, WGSplatLayout):
            return RelayoutCost("none")
        raise LayoutError(f"a value laid out as {src} cannot become a splat")
    dst_map = _flat(dst.element_index(shape), shape)
    dst_words = _words(dst_map, bitwidth)
    if isinstance(src, WGSplatLayout):
        return RelayoutCost("registers", registers_moved=dst_words.shape[1] * registers_per_word)
    src_map = _flat(src.element_index(shape), shape)
    threads = np.arange(dst_map.shape[0])[:, None, None, None]
    holders = src.owners(shape).reshape(math.prod(shape), -1, 3)[dst_map]
    in_warp = holders[..., 0] // WARP_SIZE == threads // WARP_SIZE
    if not in_warp.any(axis=-1).all():
        if not count_shuffles or smem_relayout_problem(src, dst, shape, bitwidth) is not None:
            return RelayoutCost("smem")
        plan = plan_smem_relayout(src, dst, shape, bitwidth)
        return RelayoutCost("smem", smem_bytes=plan.scratch_bytes,
                            smem_accesses=plan.accesses, smem_rounds=len(plan.rounds))
    local = (holders[..., 0] == threads).any(axis=-1)
    if not local.all() and not count_shuffles:
        return RelayoutCost("shuffles")  # relayout_kind: the registers moved are not asked
    moved = _words_not_held(_words(src_map, bitwidth), dst_words) * registers_per_word
    if local.all():
        return RelayoutCost("registers" if moved else "none", registers_moved=moved)
    plan = plan_shuffles(_words(src_map, bitwidth), dst_words)
    return RelayoutCost("shuffles", registers_moved=moved,
                        shuffles=plan.rounds * registers_per_word)


def _flat(index: np.ndarray, shape: Shape) -> np.ndarray:
    return np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), shape)


def _elements_per_word(bitwidth: int) -> int:
    return max(1, REGISTER_BITS // bitwidth)


def _words(flat: np.ndarray, bitwidth: int) -> np.ndarray:
    """[thread, word, element] of each .b32 register a layout's vectors pack into (-1 pads)."""
    threads, registers, length = flat.shape
    per_word = _elements_per_word(bitwidth)
    words = -(-length // per_word)
    padded = np.full((threads, registers, words * per_word), -1, dtype=np.int64)
    padded[:, :, :length] = flat
    return padded.reshape(threads, registers * words, per_word)


def _words_not_held(src_words: np.ndarray, dst_words: np.ndarray) -> int:
    """The most destination words any thread lacks among its own source words."""
    threads, per_word = src_words.shape[0], src_words.shape[2]
    rows = np.concatenate([src_words.reshape(-1, per_word), dst_words.reshape(-1, per_word)])
    ids = _row_ids(rows)
    kinds = int(ids.max()) + 1 if ids.size else 1
    src_ids = ids[:src_words.shape[0] * src_words.shape[1]].reshape(threads, -1)
    dst_ids = ids[src_words.shape[0] * src_words.shape[1]:].reshape(threads, -1)
    owner = np.arange(threads)[:, None] * kinds  # a word held by thread t: key t * kinds + id
    lacking = ~np.isin(dst_ids + owner, src_ids + owner)
    return int(lacking.sum(axis=1).max()) if lacking.size else 0


def _row_ids(rows: np.ndarray) -> np.ndarray:
    """An id per row of a 2-D array of elements (-1 or more), equal exactly for equal rows:
    the rows as numbers in base (largest + 2) where they fit 63 bits (np.unique over rows
    sorts them lexically, which is slow), else by np.unique."""
    base = int(rows.max()) + 2 if rows.size else 2
    if base ** rows.shape[1] < 2 ** 63:
        keys = np.zeros(rows.shape[0], dtype=np.int64)
        for column in range(rows.shape[1]):
            keys = keys * base + (rows[:, column] + 1)
        return np.unique(keys, return_inverse=True)[1].reshape(-1)
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
