"""Warp-level ops: shfl.sync, vote.sync, redux.sync, match.sync, activemask, bar.warp.sync.

All of them exchange data among the threads of a warp. PTX ISA, "Parallel Synchronization and
Communication Instructions: bar.warp.sync" and the `.sync` ops (sm_70 and later): the
executing thread waits until all non-exited threads of membermask have executed the same
instruction. The min-PC scheduler runs exactly the threads at one PC together; when a member
is not among the active lanes (it diverged, or sleeps at an mbarrier wait), the lanes that
arrived wait at the instruction (`NotConverged`, held by the scheduler) and execute with the
others when they arrive; a member that never arrives is reported as a deadlock naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smalti.ptx.module import Instruction, PredicatePair
from smalti.sim.errors import Fault, NotConverged, Unsupported
from smalti.sim.geometry import WARP_SIZE
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, Reader, expect, reader, writer
from smalti.sim.registry import Compute, Step, semantics

FULL = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True)
class WarpView:
    """Where the active threads sit in their warps, with per-warp lane masks (uint64)."""

    ids: np.ndarray  # launch-wide ids of the active threads, ascending
    lane: np.ndarray  # lane of each active thread
    base: np.ndarray  # launch-wide id of lane 0 of its warp
    exists: np.ndarray  # lanes of its warp that exist (a block's last warp may be partial)
    live: np.ndarray  # lanes of its warp that have not exited
    active: np.ndarray  # lanes of its warp executing this instruction
    position: np.ndarray  # launch-wide id -> index into `ids`, or -1


def _lane_bits(flags: np.ndarray, warp_of: np.ndarray, lane: np.ndarray,
               warps: int) -> np.ndarray:
    """For a bool per launch thread, the uint64 mask of set lanes of every warp."""
    weights = np.ldexp(1.0, lane[flags])  # distinct powers of two: float64 sums are exact
    return np.bincount(warp_of[flags], weights=weights, minlength=warps).astype(np.uint64)


def warp_view(m: Machine, lanes: Lanes) -> WarpView:
    """The warp geometry of the active lanes of `m`."""
    geometry = m.geometry
    n = geometry.threads
    per_block = geometry.block_threads
    warps_per_block = -(-per_block // WARP_SIZE)
    everyone = np.arange(n, dtype=np.int64)
    local = everyone % per_block
    lane_all = local % WARP_SIZE
    warp_of = everyone // per_block * warps_per_block + local // WARP_SIZE
    warps = geometry.blocks * warps_per_block
    ids = everyone if lanes.index is None else lanes.index.astype(np.int64)
    lane = lane_all[ids]
    in_warp = np.minimum(WARP_SIZE, per_block - (local[ids] - lane))
    exists = (np.uint64(1) << in_warp.astype(np.uint64)) - np.uint64(1)
    live_flags = np.ones(n, np.bool_) if m.live is None else m.live
    live = _lane_bits(live_flags, warp_of, lane_all, warps)[warp_of[ids]]
    active = _lane_bits(lanes.mask, warp_of, lane_all, warps)[warp_of[ids]]
    position = np.full(n, -1, np.int64)
    position[ids] = np.arange(ids.size)
    return WarpView(ids, lane, ids - lane, exists, live, active, position)


def require_converged(view: WarpView, members: np.ndarray, what: str) -> None:
    """Fault unless each active thread is in its membermask; raise NotConverged (the lanes
    wait here) while a live member has not reached the instruction yet."""
    members = np.broadcast_to(np.asarray(members).astype(np.uint64), view.ids.shape)
    own = np.uint64(1) << view.lane.astype(np.uint64)
    outside = (members & own) == 0
    if outside.any():
        k = int(np.argmax(outside))
        raise Fault(f"{what}: the executing thread (lane {int(view.lane[k])}) is not in its "
                    f"membermask {int(members[k]):#010x}", int(view.ids[k]))
    missing = members & view.exists & view.live & ~view.active
    bad = missing != 0
    if bad.any():
        k = int(np.argmax(bad))
        other = int(missing[k]) & -int(missing[k])
        fault = Fault(f"{what}: lane {other.bit_length() - 1} of membermask "
                      f"{int(members[k]):#010x} never reached this instruction, where lane "
                      f"{int(view.lane[k])} waits for it (the warp does not reconverge)",
                      int(view.ids[k]))
        waiting = np.zeros(view.position.size, np.bool_)
        waiting[view.ids[bad]] = True
        raise NotConverged(waiting, fault)


def require_whole_warp(view: WarpView, what: str) -> None:
    """`.aligned` ops: every live thread of the warp must execute the instruction."""
    require_converged(view, np.broadcast_to(FULL, view.ids.shape), what)


def _per_lane(values: np.ndarray, view: WarpView) -> np.ndarray:
    return np.broadcast_to(np.asarray(values), view.ids.shape)


def _dests(op) -> tuple:
    match op:
        case PredicatePair(first=d, second=p):
            return d, p
    return op, None


def gather_lanes(values: np.ndarray, view: WarpView, source_lane: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:
    """(values at `source_lane` of each thread's warp, whether that lane is active)."""
    source = view.base + source_lane
    inside = (view.exists >> source_lane.astype(np.uint64)) & np.uint64(1) == 1
    index = np.where(inside, view.position[np.where(inside, source, view.ids)], -1)
    valid = index >= 0
    return values[np.where(valid, index, 0)], valid


SHUFFLE_MODES = ("up", "down", "bfly", "idx")


def shuffle_source(mode: str, lane: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:
    """(source lane j, predicate p) of shfl.sync, per the PTX ISA pseudo-code.

    PTX ISA, "Data Movement and Conversion Instructions: shfl.sync": c packs the segment mask
    (c[12:8]) and the clamp value (c[4:0]); a lane outside its segment's range copies its own
    value and gets p = false.
    """
    lane = lane.astype(np.int64)
    b = b.astype(np.int64) & 31
    c = c.astype(np.int64)
    segmask = (c >> 8) & 31
    cval = c & 31
    max_lane = (lane & segmask) | (cval & ~segmask & 31)
    min_lane = lane & segmask
    match mode:
        case "up":
            j = lane - b
            p = j >= max_lane
        case "down":
            j = lane + b
            p = j <= max_lane
        case "bfly":
            j = lane ^ b
            p = j <= max_lane
        case _:
            j = min_lane | (b & ~segmask & 31)
            p = j <= max_lane
    return np.where(p, j, lane), p


@semantics("shfl")
def decode_shfl(inst: Instruction, env: DecodeEnv) -> Step:
    """shfl.sync.mode.b32 d[|p], a, b, c, membermask.

    A source lane that is not executing (exited, or beyond a partial warp) gives an undefined
    value in the ISA; the simulator gives the thread its own `a`.
    """
    mods = Modifiers(inst)
    if not mods.flag("sync"):
        raise Unsupported("shfl without .sync does not exist on sm_70 and later")
    mode = mods.one_of(SHUFFLE_MODES)
    [ptx_type] = mods.types()
    mods.done()
    if mode is None or ptx_type != "b32":
        raise Unsupported("shfl.sync needs a mode and .b32")
    dest, a, b, c, membermask = expect(inst.operands, 5)
    d, p = _dests(dest)
    write_d = writer(d, "b32", env)
    write_p = None if p is None else writer(p, "pred", env)
    read_a, read_b, read_c, read_mask = (reader(op, "b32", env) for op in (a, b, c, membermask))

    def run(m: Machine, lanes: Lanes) -> None:
        view = warp_view(m, lanes)
        require_converged(view, read_mask(m, lanes), "shfl.sync")
        values = _per_lane(read_a(m, lanes), view)
        j, pred = shuffle_source(mode, view.lane, _per_lane(read_b(m, lanes), view),
                                 _per_lane(read_c(m, lanes), view))
        fetched, valid = gather_lanes(values, view, j)
        write_d(m, lanes, np.where(valid, fetched, values))
        if write_p is not None:
            write_p(m, lanes, pred)

    return Compute(run)


def _member_values(values: np.ndarray, view: WarpView, members: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:
    """(n, 32) values of every lane of each thread's warp, and which lanes take part."""
    lanes32 = np.arange(WARP_SIZE, dtype=np.int64)
    grid, valid = gather_lanes(values, view, np.broadcast_to(lanes32, (view.ids.size, 32)).T)
    takes_part = valid & ((members[None, :] >> lanes32[:, None].astype(np.uint64))
                          & np.uint64(1) == 1)
    return grid.T, takes_part.T


def _member_grid(values: np.ndarray, view: WarpView, members: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:
    return _member_values(values, view, members)


VOTE_MODES = ("all", "any", "uni", "ballot")


@semantics("vote")
def decode_vote(inst: Instruction, env: DecodeEnv) -> Step:
    """vote.sync.{all,any,uni}.pred d, a, membermask; vote.sync.ballot.b32 d, a, membermask.

    PTX ISA, "vote.sync": the reduction is over the non-exited threads of membermask; ballot
    sets bit i when lane i is such a thread and its predicate holds.
    """
    mods = Modifiers(inst)
    if not mods.flag("sync"):
        raise Unsupported("vote without .sync does not exist on sm_70 and later")
    mode = mods.one_of(VOTE_MODES)
    [ptx_type] = mods.types()
    mods.done()
    if mode is None or ptx_type != ("b32" if mode == "ballot" else "pred"):
        raise Unsupported("vote.sync.{all,any,uni}.pred or vote.sync.ballot.b32")
    dest, a, membermask = expect(inst.operands, 3)
    write = writer(dest, ptx_type, env)
    read_a = reader(a, "pred", env)
    read_mask = reader(membermask, "b32", env)

    def run(m: Machine, lanes: Lanes) -> None:
        view = warp_view(m, lanes)
        members = _per_lane(read_mask(m, lanes), view).astype(np.uint64)
        require_converged(view, members, "vote.sync")
        grid, takes_part = _member_grid(_per_lane(read_a(m, lanes), view), view, members)
        match mode:
            case "all":
                result = np.all(grid | ~takes_part, axis=1)
            case "any":
                result = np.any(grid & takes_part, axis=1)
            case "uni":
                result = np.all(grid | ~takes_part, axis=1) | ~np.any(grid & takes_part, axis=1)
            case _:
                bits = np.uint64(1) << np.arange(WARP_SIZE, dtype=np.uint64)
                result = np.bitwise_or.reduce(np.where(grid & takes_part, bits, np.uint64(0)),
                                              axis=1).astype(np.uint32)
        write(m, lanes, result)

    return Compute(run)


REDUX_OPS = {"add": ("u32", "s32"), "min": ("u32", "s32"), "max": ("u32", "s32"),
             "and": ("b32",), "or": ("b32",), "xor": ("b32",)}


def _reduce(op: str, grid: np.ndarray, takes_part: np.ndarray) -> np.ndarray:
    """Reduce each row of `grid` over the lanes that take part."""
    dtype = grid.dtype
    match op:
        case "add":
            return np.where(takes_part, grid, 0).astype(np.int64).sum(axis=1).astype(dtype)
        case "min":
            return np.where(takes_part, grid, np.iinfo(dtype).max).min(axis=1).astype(dtype)
        case "max":
            return np.where(takes_part, grid, np.iinfo(dtype).min).max(axis=1).astype(dtype)
        case "and":
            return np.bitwise_and.reduce(np.where(takes_part, grid, ~dtype.type(0)), axis=1)
        case "or":
            return np.bitwise_or.reduce(np.where(takes_part, grid, 0), axis=1).astype(dtype)
    return np.bitwise_xor.reduce(np.where(takes_part, grid, 0), axis=1).astype(dtype)


@semantics("redux")
def decode_redux(inst: Instruction, env: DecodeEnv) -> Step:
    """redux.sync.op.type d, a, membermask over the non-exited threads of membermask."""
    mods = Modifiers(inst)
    if not mods.flag("sync"):
        raise Unsupported("redux needs .sync")
    op = mods.one_of(tuple(REDUX_OPS))
    [ptx_type] = mods.types()
    mods.done()
    if op is None or ptx_type not in REDUX_OPS[op]:
        raise Unsupported(f"redux.sync.{op}.{ptx_type} is not a valid form")
    dest, a, membermask = expect(inst.operands, 3)
    write = writer(dest, ptx_type, env)
    read_a = reader(a, ptx_type, env)
    read_mask = reader(membermask, "b32", env)

    def run(m: Machine, lanes: Lanes) -> None:
        view = warp_view(m, lanes)
        members = _per_lane(read_mask(m, lanes), view).astype(np.uint64)
        require_converged(view, members, "redux.sync")
        grid, takes_part = _member_grid(_per_lane(read_a(m, lanes), view), view, members)
        write(m, lanes, _reduce(op, grid, takes_part))

    return Compute(run)


@semantics("match")
def decode_match(inst: Instruction, env: DecodeEnv) -> Step:
    """match.any.sync.T d, a, membermask; match.all.sync.T d[|p], a, membermask.

    PTX ISA, "match.sync": .any gives the mask of member lanes holding the same value as the
    thread; .all gives the member mask if all members hold one value (p true), else 0.
    """
    mods = Modifiers(inst)
    mode = mods.one_of(("any", "all"))
    if not mods.flag("sync"):
        raise Unsupported("match needs .sync")
    [ptx_type] = mods.types()
    mods.done()
    if mode is None or ptx_type not in ("b32", "b64"):
        raise Unsupported("match.{any,all}.sync.{b32,b64}")
    dest, a, membermask = expect(inst.operands, 3)
    d, p = _dests(dest)
    if p is not None and mode == "any":
        raise Unsupported("match.any has no predicate destination")
    write_d = writer(d, "b32", env)
    write_p = None if p is None else writer(p, "pred", env)
    read_a = reader(a, ptx_type, env)
    read_mask = reader(membermask, "b32", env)
    bits = np.uint64(1) << np.arange(WARP_SIZE, dtype=np.uint64)

    def run(m: Machine, lanes: Lanes) -> None:
        view = warp_view(m, lanes)
        members = _per_lane(read_mask(m, lanes), view).astype(np.uint64)
        require_converged(view, members, "match.sync")
        values = _per_lane(read_a(m, lanes), view)
        grid, takes_part = _member_grid(values, view, members)
        equal = takes_part & (grid == values[:, None])
        same = np.bitwise_or.reduce(np.where(equal, bits, np.uint64(0)), axis=1)
        if mode == "any":
            write_d(m, lanes, same.astype(np.uint32))
            return
        present = np.bitwise_or.reduce(np.where(takes_part, bits, np.uint64(0)), axis=1)
        uniform = same == present
        write_d(m, lanes, np.where(uniform, present, np.uint64(0)).astype(np.uint32))
        if write_p is not None:
            write_p(m, lanes, uniform)

    return Compute(run)


@semantics("activemask")
def decode_activemask(inst: Instruction, env: DecodeEnv) -> Step:
    """activemask.b32 d: the lanes of the warp executing this instruction (guard included)."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type != "b32":
        raise Unsupported("activemask.b32")
    (dest,) = expect(inst.operands, 1)
    write = writer(dest, "b32", env)

    def run(m: Machine, lanes: Lanes) -> None:
        write(m, lanes, warp_view(m, lanes).active.astype(np.uint32))

    return Compute(run)


def warp_sync_step(read_mask: Reader, what: str) -> Compute:
    """A step that checks that the members named by `read_mask` are converged.

    For the shared-memory race checker it also counts as a barrier of every block whose live
    threads all take part (a one-warp block's `__syncwarp()`); ordering among the threads of
    a warp in a bigger block is not modelled there.
    """

    def run(m: Machine, lanes: Lanes) -> None:
        view = warp_view(m, lanes)
        members = np.broadcast_to(np.asarray(read_mask(m, lanes)).astype(np.uint64),
                                  view.ids.shape)
        require_converged(view, members, what)
        engine = getattr(m, "async_engine", None)
        if engine is None:
            return
        block_of = m.geometry.block_of
        live = np.ones(m.geometry.threads, np.bool_) if m.live is None else m.live
        own = np.uint64(1) << view.lane.astype(np.uint64)
        joined = np.zeros(m.geometry.threads, np.bool_)
        joined[view.ids] = (members & view.live) == (view.live & FULL)
        joined[view.ids] &= (members & own) != 0
        alive = np.bincount(block_of[live], minlength=m.geometry.blocks)
        taking_part = np.bincount(block_of[joined & live], minlength=m.geometry.blocks)
        covered = (alive == taking_part) & (alive > 0)
        if covered.any():
            engine.shared.sync(covered)

    return Compute(run)


def decode_bar_warp(inst: Instruction, env: DecodeEnv) -> Step:
    """bar.warp.sync membermask: the member threads must arrive together (no data moves)."""
    (membermask,) = expect(inst.operands, 1)
    return warp_sync_step(reader(membermask, "b32", env), "bar.warp.sync")
