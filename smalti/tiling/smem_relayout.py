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
STATIC_SMEM_BYTES = 49152
"""The most static shared memory a kernel may declare (ptxas: "uses too much shared data
(0x... bytes, 0xc000 max)")."""
ROUND_BYTES = 16384
"""The most scratch one round of a relayout takes (per warpgroup): three warpgroups' copies
fit the static limit; larger values go in rounds (kernels where more warpgroups run
relayouts plan smaller rounds, `round_bytes_for`)."""
BANKS = 32
BANK_BYTES = 4
SMEM_BITWIDTHS = (8, 16, 32)


@dataclass(frozen=True)
class ThreadFunction:
    """A per-thread value: the sum (`combine` "add") or XOR ("xor") of `coefficients[i]`
    over the set bits i of the thread's index in its warpgroup (0..127), and `constant`."""

    coefficients: tuple[int, ...]
    combine: Literal["add", "xor"]
    constant: int = 0

    def evaluate(self, threads: np.ndarray) -> np.ndarray:
        value = np.full(threads.shape, self.constant, dtype=np.int64)
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


@functools.lru_cache(maxsize=4096)
def smem_relayout_problem(src: Layout, dst: Layout, shape: Shape, bitwidth: int) -> str | None:
    """Why a relayout through shared memory cannot be done, or None. Cheaper than planning
    it (inference asks it of candidates): the layouts, the element width and whether the
    value fits the scratch at once or in rounds. Memoised."""
    try:
        _feasible(src, dst, tuple(shape), bitwidth)
    except LayoutError as error:
        return str(error)
    return None


@functools.lru_cache(maxsize=1024)
def plan_smem_relayout(src: Layout, dst: Layout, shape: Shape, bitwidth: int,
                       round_bytes: int = ROUND_BYTES) -> SmemRelayoutPlan:
    """The plan of a relayout from `src` to `dst` of a `shape` value of `bitwidth`-bit
    elements through shared memory, in rounds of at most `round_bytes` of scratch;
    LayoutError when there is none."""
    shape = tuple(shape)
    src_map, dst_map, src_bits, dst_bits, rounds = _feasible(src, dst, shape, bitwidth,
                                                             round_bytes)
    element_bytes = bitwidth // 8
    size = math.prod(shape)
    mask = src.distribution(shape).replica_mask if isinstance(src, TiledLayout) else 0
    packs = (_pack(src, shape, element_bytes), _pack(dst, shape, element_bytes))
    if src_bits is not None and dst_bits is not None:
        return _linear_plan(src_bits, dst_bits, rounds, size, element_bytes, mask, packs)
    store = _row_major_side(src_map, element_bytes)
    load = _row_major_side(dst_map, element_bytes)
    return SmemRelayoutPlan(element_bytes, size * element_bytes, (Round(store, load),),
                            "row-major", mask)


def round_bytes_for(copies: int) -> int:
    """The round size when `copies` warpgroups each need a copy of the scratch: the largest
    power of two at most ROUND_BYTES whose copies fit the static limit."""
    size = ROUND_BYTES
    while size * copies > STATIC_SMEM_BYTES and size > 128:
        size //= 2
    return size


def _feasible(src: Layout, dst: Layout, shape: Shape, bitwidth: int,
              round_bytes: int = ROUND_BYTES
              ) -> tuple[np.ndarray, np.ndarray, _Bits | None, _Bits | None, list[int]]:
    """(the two local maps, their bit permutations (None: not linear), the round bits);
    LayoutError when the relayout cannot go through shared memory."""
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
    n = size.bit_length() - 1
    linear = not size & (size - 1)
    src_bits = _bits(src_map, n) if linear else None
    dst_bits = _bits(dst_map, n) if linear else None
    rounds: list[int] = []
    if src_bits is not None and dst_bits is not None:
        common = [b for b in range(n) if b in src_bits.local and b in dst_bits.local]
        spare = list(reversed(common))  # round bits: the common bits accesses span last
        while (size >> len(rounds)) * element_bytes > round_bytes and spare:
            rounds.append(spare.pop(0))
    if (size >> len(rounds)) * element_bytes > round_bytes:
        raise LayoutError(f"a relayout through shared memory of {size * element_bytes} bytes "
                          f"does not split into rounds of at most {round_bytes} bytes (too "
                          "few element bits both layouts hold in registers)")
    return src_map, dst_map, src_bits, dst_bits, rounds


@dataclass(frozen=True)
class _Bits:
    """A layout's element map as a permutation of bits: the flat-index bit each thread-index
    bit and each local-index bit sets (-1: none, a replicated thread bit)."""

    thread: tuple[int, ...]
    local: tuple[int, ...]

    def role(self, bit: int) -> tuple[str, int]:
        """("t", thread bit) or ("l", local bit) that sets flat-index bit `bit`."""
        if bit in self.local:
            return ("l", self.local.index(bit))
        return ("t", self.thread.index(bit))


def _bits(flat: np.ndarray, n: int) -> _Bits | None:
    """The bit permutation of flat[t, l], or None when the map is not one."""
    locals_ = flat.shape[1]
    if locals_ & (locals_ - 1) or flat[0, 0] != 0:
        return None

    def image(value: int) -> int | None:
        if value == 0:
            return -1
        return value.bit_length() - 1 if value & (value - 1) == 0 else None

    thread = [image(int(flat[1 << i, 0])) for i in range(THREAD_BITS)]
    local = [image(int(flat[0, 1 << j])) for j in range(locals_.bit_length() - 1)]
    if None in thread or None in local or -1 in local:
        return None
    images = [b for b in (*thread, *local) if b >= 0]
    if sorted(images) != list(range(n)):
        return None
    bits = _Bits(tuple(thread), tuple(local))  # type: ignore[arg-type]
    threads = np.arange(WARPGROUP_SIZE)[:, None]
    ls = np.arange(locals_)[None, :]
    predicted = np.zeros(flat.shape, dtype=np.int64)
    for i, b in enumerate(bits.thread):
        if b >= 0:
            predicted |= ((threads >> i) & 1) << b
    for j, b in enumerate(bits.local):
        predicted |= ((ls >> j) & 1) << b
    return bits if np.array_equal(predicted, flat) else None


@dataclass(frozen=True)
class _Placement:
    """Rows of the address map: address bit p (in elements) is the XOR of the flat-index
    bits set in rows[p]; the lowest address bits are those one access spans."""

    rows: tuple[int, ...]
    unit: int  # address bits the wider side's accesses span
    shared: int  # of those, the lowest, which the other side's accesses span

    def column(self, bit: int) -> int:
        """The address bits flat-index bit `bit` toggles."""
        return self.columns[bit] if bit < len(self.columns) else 0

    @functools.cached_property
    def columns(self) -> tuple[int, ...]:
        width = max(row.bit_length() for row in self.rows) if self.rows else 0
        return tuple(sum(1 << p for p, row in enumerate(self.rows) if row >> bit & 1)
                     for bit in range(width))


def _linear_plan(src: _Bits, dst: _Bits, rounds: list[int], size: int, element_bytes: int,
                 mask: int, packs: tuple[int, int]) -> SmemRelayoutPlan:
    """The plan with a linear (swizzled) placement: the best of the candidate unit
    choices by `_score`."""
    n = size.bit_length() - 1
    common = [b for b in range(n) if b in src.local and b in dst.local]
    max_unit = (MAX_ACCESS_BYTES // element_bytes).bit_length() - 1
    common = [b for b in common if b not in rounds]
    address_bits = [b for b in range(n) if b not in rounds]
    active = (np.arange(WARPGROUP_SIZE) & mask) == 0
    best: tuple[float, int, SmemRelayoutPlan] | None = None
    candidates = _unit_candidates(src, dst, common, address_bits, max_unit)
    for order, (wide, unit_bits, shared) in enumerate(candidates):
        a, b = (src, dst) if wide == 0 else (dst, src)
        placement = _place(a, b, unit_bits, shared, address_bits, element_bytes)
        plan = _linear_sides(src, dst, placement, rounds, size, element_bytes, mask)
        score = _score(plan, active, packs)
        if best is None or (score, order) < best[:2]:
            best = (score, order, plan)
    assert best is not None
    return best[2]


def _unit_candidates(src: _Bits, dst: _Bits, common: list[int], address_bits: list[int],
                     max_unit: int) -> list[tuple[int, tuple[int, ...], int]]:
    """(the side whose accesses are wider: 0 source, 1 target; the flat-index bits its
    accesses span, lowest address bit first; how many of those lowest the other side's
    accesses span too, all held in registers by both layouts). Accesses as wide as the
    common bits allow (in either layout's register order), narrower ones, and one side's
    accesses widened with its own register bits (its lowest, in its order)."""
    candidates: list[tuple[int, tuple[int, ...], int]] = []
    orders = [tuple(sorted(common, key=lambda b: side.local.index(b))) for side in (src, dst)]
    for length in range(min(max_unit, len(common)), -1, -1):
        for order in orders:
            if (0, order[:length], length) not in candidates:
                candidates.append((0, order[:length], length))
    for wide, side in enumerate((src, dst)):
        own = [b for b in side.local if b in address_bits]
        shared = 0
        while shared < len(own) and own[shared] in common:
            shared += 1
        for length in range(shared + 1, min(max_unit, len(own)) + 1):
            candidates.append((wide, tuple(own[:length]), min(shared, length)))
    return candidates


def _lanes(width: int) -> int:
    """The lane bits of one phase of a warp's `width`-byte accesses."""
    return 5 if width <= BANK_BYTES else 7 - (width.bit_length() - 1)


def _place(a: _Bits, b: _Bits, unit_bits: tuple[int, ...], shared: int,
           address_bits: list[int], element_bytes: int) -> _Placement:
    """The address map: the unit bits lowest (side `a` accesses all of them, side `b` the
    lowest `shared`); on the address bits that choose `a`'s banks, the flat-index bits of
    `a`'s lanes of one phase; `b`'s phase lanes then take the bank bits of its own
    accesses no bit took yet, or are XORed onto ones `a`'s lanes took (so that each side's
    phase lanes choose distinct banks); the other bits above, in order."""
    unit = len(unit_bits)
    word = max(0, (BANK_BYTES // element_bytes).bit_length() - 1)  # address bits in a word
    positions = len(address_bits)
    width_a = (1 << unit) * element_bytes
    width_b = (1 << shared) * element_bytes
    bank_a = [p for p in range(max(unit, word), max(unit, word) + _lanes(width_a))
              if p < positions]
    bank_b = [p for p in range(max(shared, word), max(shared, word) + _lanes(width_b))
              if p < positions]
    base: dict[int, int] = dict(enumerate(unit_bits))
    xor: dict[int, int] = {}
    placed = set(unit_bits)
    lanes_a = [a.thread[i] for i in range(min(len(bank_a), THREAD_BITS))]
    lanes_b = [b.thread[i] for i in range(min(len(bank_b), THREAD_BITS))]
    for p, bit in zip(bank_a, lanes_a, strict=False):
        if bit >= 0 and bit in address_bits:
            base[p] = bit
            placed.add(bit)
    claimed = {p for p in bank_b if p in base and base[p] in lanes_b}
    pending = [bit for bit in lanes_b if bit >= 0 and bit in address_bits and bit not in placed]
    for p in bank_b:  # b's lane bits take the bank bits nothing took yet
        if p >= unit and p not in base and pending:
            base[p] = pending.pop(0)
            placed.add(base[p])
            claimed.add(p)
    for p in bank_b:  # the rest are XORed onto bank bits b's lanes do not reach
        if pending and p >= unit and p in base and p not in claimed:
            xor[p] = pending.pop(0)
            claimed.add(p)
    rest = iter([bit for bit in address_bits if bit not in placed])
    rows = []
    for p in range(positions):
        bit = base[p] if p in base else next(rest)
        rows.append((1 << bit) | ((1 << xor[p]) if p in xor else 0))
    return _Placement(tuple(rows), unit, shared)


def _linear_sides(src: _Bits, dst: _Bits, placement: _Placement, rounds: list[int],
                  size: int, element_bytes: int, mask: int) -> SmemRelayoutPlan:
    sides = []
    for bits in (src, dst):
        unit = placement.unit if _wide_side(bits, placement) else placement.shared
        sides.append([_linear_side(bits, placement, unit, rounds, k, element_bytes)
                      for k in range(1 << len(rounds))])
    scratch = (size >> len(rounds)) * element_bytes
    return SmemRelayoutPlan(element_bytes, scratch,
                            tuple(Round(s, d) for s, d in zip(*sides, strict=True)),
                            "linear", mask)


def _wide_side(bits: _Bits, placement: _Placement) -> bool:
    """Whether a side holds all unit bits in registers (accesses them all at once)."""
    return all(_placement_bit(placement, p) in bits.local for p in range(placement.unit))


def _linear_side(bits: _Bits, placement: _Placement, unit: int, rounds: list[int],
                 round_: int, element_bytes: int) -> Side:
    """One side's accesses of one round: a unit of elements per access, its address the
    thread's base (the thread bits' part, XOR the part of the access's own bits that
    overlaps it) plus an immediate (the rest)."""
    thread_columns = [placement.column(b) if b >= 0 else 0 for b in bits.thread]
    thread_support = 0
    for c in thread_columns:
        thread_support |= c
    coefficients = tuple(c * element_bytes for c in thread_columns)
    unit_locals = [bits.local.index(_placement_bit(placement, p)) for p in range(unit)]
    round_locals = [bits.local.index(b) for b in rounds]
    fixed = set(unit_locals) | set(round_locals)
    free = [j for j in range(len(bits.local)) if j not in fixed]
    locals_ = np.arange(1 << len(bits.local))
    addresses = np.zeros(locals_.shape, dtype=np.int64)
    for j, b in enumerate(bits.local):
        addresses ^= ((locals_ >> j) & 1) * placement.column(b)
    spans = [sum(((o >> p) & 1) << j for p, j in enumerate(unit_locals))
             for o in range(1 << unit)]
    round_part = sum(((round_ >> i) & 1) << j for i, j in enumerate(round_locals))
    bases: dict[int, int] = {}
    accesses = []
    for index in range(1 << len(free)):
        local = round_part | sum(((index >> i) & 1) << j for i, j in enumerate(free))
        address = int(addresses[local])
        overlap = address & thread_support
        base = bases.setdefault(overlap, len(bases))
        accesses.append(Access(base, (address & ~thread_support) * element_bytes,
                               tuple(local | span for span in spans)))
    functions = tuple(ThreadFunction(coefficients, "xor", overlap * element_bytes)
                      for overlap in bases)
    return Side(functions, tuple(accesses))


def _placement_bit(placement: _Placement, position: int) -> int:
    """The flat-index bit of a unit position (its row is that bit alone)."""
    row = placement.rows[position]
    return row.bit_length() - 1


def _score(plan: SmemRelayoutPlan, active: np.ndarray, packs: tuple[int, int]) -> float:
    """Shared-memory wavefronts (phases times conflict degree) weighted twice, plus the
    instructions: accesses, words assembled from parts of registers (a `prmt` each), and
    one per base beyond the first (an `xor` of the first)."""
    total = 0.0
    per_word = max(1, BANK_BYTES // plan.element_bytes)
    for round_ in plan.rounds:
        sides = ((round_.store, active, packs[0]), (round_.load, None, packs[1]))
        for side, act, pack in sides:
            degrees = side_conflicts(side, plan.element_bytes, act)
            for access, degree in zip(side.accesses, degrees, strict=True):
                width = len(access.elements) * plan.element_bytes
                phases = max(1, width // BANK_BYTES)
                total += 2 * phases * degree + 1
                total += _assembled_words(access.elements, per_word, pack, plan.element_bytes)
            total += len(side.bases) - 1
    return total


def side_conflicts(side: Side, element_bytes: int, active: np.ndarray | None = None
                   ) -> list[int]:
    """The bank-conflict degree of each access of a side (`bank_conflicts`), computed once
    per base, width and offset modulo a word (a whole-word offset moves every thread's
    banks alike)."""
    threads = np.arange(WARPGROUP_SIZE)
    values = [f.evaluate(threads) for f in side.bases]
    known: dict[tuple[int, int, int], int] = {}
    result = []
    for access in side.accesses:
        width = len(access.elements) * element_bytes
        key = (access.base, access.offset % BANK_BYTES, width)
        if key not in known:
            known[key] = conflict_degree(values[access.base] + access.offset, width, active)
        result.append(known[key])
    return result


def _assembled_words(elements: tuple[int, ...], per_word: int, pack: int,
                     element_bytes: int) -> int:
    """How many of an access's words are not whole words of the value's registers (a
    register pair for 16-bit elements one to a register)."""
    if len(elements) < per_word:  # free when it is one whole (16-bit) register
        whole = len(elements) == pack and elements[0] % pack == 0 and all(
            e == elements[0] + i for i, e in enumerate(elements))
        return 0 if whole and pack * element_bytes == 2 else 1
    if element_bytes == 1 and pack == 1:
        return len(elements) // per_word
    count = 0
    for first in range(0, len(elements), per_word):
        word = elements[first:first + per_word]
        natural = word[0] % per_word == 0 and all(
            e == word[0] + i for i, e in enumerate(word))
        count += not natural
    return count


def _pack(layout: TiledLayout | WGStridedLayout, shape: Shape, element_bytes: int) -> int:
    """Elements per register of a layout's vectors (smalti.lowering.values.
    elements_per_register, which tiling cannot import)."""
    length = layout.distribution(shape).vector_length
    if element_bytes == 1:
        return 4 if length % 4 == 0 else 2 if length % 2 == 0 else 1
    return 2 if element_bytes == 2 and length % 2 == 0 else 1


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
    """The bank-conflict degree of `width`-byte accesses of the threads of whole warps at
    byte `addresses` (see bank_conflicts)."""
    lanes_per_phase = WARP_SIZE if width <= BANK_BYTES else WARP_SIZE * BANK_BYTES // width
    words = max(1, width // BANK_BYTES)
    first = np.asarray(addresses, dtype=np.int64) // BANK_BYTES
    touched = first[:, None] + np.arange(words)[None, :]  # [thread, word]
    if active is not None:
        touched = np.where(np.asarray(active)[:, None], touched, -1)
    phases = touched.reshape(-1, lanes_per_phase * words)
    phases = np.sort(phases, axis=1)
    fresh = np.ones(phases.shape, dtype=bool)
    fresh[:, 1:] = phases[:, 1:] != phases[:, :-1]
    fresh &= phases >= 0
    rows = np.broadcast_to(np.arange(phases.shape[0])[:, None], phases.shape)
    counts = np.zeros((phases.shape[0], BANKS), dtype=np.int64)
    np.add.at(counts, (rows[fresh], phases[fresh] % BANKS), 1)
    return max(1, int(counts.max()))


__all__ = ["Access", "Round", "Side", "SmemRelayoutPlan", "ThreadFunction",
           "bank_conflicts", "conflict_degree", "plan_smem_relayout", "side_conflicts",
           "smem_relayout_problem"]
