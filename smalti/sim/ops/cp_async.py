"""Non-bulk asynchronous copies (sm_80's `cp.async`), as Triton pipelines global loads.

PTX ISA, "Data Movement and Conversion Instructions: cp.async":
`cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | ignore-src}` copies
cp-size bytes (4, 8 or 16; .cg only 16) from global to shared memory, of which only the first
src-size are read (the rest are zero; `ignore-src` true reads none). The copy is done by the
executing thread, as a weak generic-proxy write, at an unspecified time before the thread
waits for it: `cp.async.commit_group` closes the thread's open copies into a group,
`cp.async.wait_group N` waits until at most N of its groups are pending, `cp.async.wait_all`
is a commit followed by `wait_group 0`, and `cp.async.mbarrier.arrive{.noinc}` makes an
mbarrier track the thread's earlier copies.

Here the source is read at issue (a bounds fault names the copy's line); the bytes land when
the async engine's policy completes the copy, and stay owned by it (any access faults) until
the issuing thread waits for its group. Groups are kept per warp (one operation per warp and
instruction, so a launch of thousands of threads pays per warp): a warp's live threads must
commit and wait together, as compilers emit them (a commit or wait by part of a warp is
reported, not guessed at). They count as that thread's write, so another thread
reading them needs a barrier after the wait, and an async-proxy reader (wgmma, a TMA store) a
`fence.proxy.async` too. `cp.async.mbarrier.arrive` completes the thread's copies at once (a
schedule the ISA allows) and then arrives, or not (without .noinc the pending count is
raised first, so the arrival is not one of those the barrier expects).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smalti.ptx.module import Instruction, Register
from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.geometry import WARP_SIZE
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader
from smalti.sim.ops.memory import _address
from smalti.sim.ops.shared_address import shared_targets, space_of
from smalti.sim.registry import Compute, Step

SIZES = (4, 8, 16)
GROUP = "cp.async"


@dataclass(eq=False)
class CopyBatch:
    """The copies one cp.async instruction issued: operation `first + w` is those of the
    w-th warp, landing `data[rows]` at flat shared bytes `idx[rows]` for its rows
    `order[starts[w]:starts[w + 1]]`."""

    m: Machine
    first: int
    idx: np.ndarray  # (n, size) flat shared byte indices
    data: np.ndarray  # (n, size) uint8, zero past src-size
    order: np.ndarray  # lanes sorted by warp
    starts: np.ndarray  # each warp's first position in `order` (and the end)

    def rows(self, k: int) -> np.ndarray:
        return self.order[self.starts[k]:self.starts[k + 1]]

    def run(self, ops: list[AsyncOp]) -> None:
        ks = np.array([op.id for op in ops], np.int64) - self.first
        rows = np.concatenate([self.rows(int(k)) for k in ks])
        self.m.shared.data[self.idx[rows]] = self.data[rows]


def decode_cp_async(inst: Instruction, mods: Modifiers, env: DecodeEnv) -> Step:
    """Everything `cp.async.*` that is not bulk (the `cp` decoder hands it here)."""
    if mods.flag("commit_group"):
        mods.done()
        expect(inst.operands, 0)
        return Compute(_commit)
    if mods.flag("wait_group"):
        mods.done()
        [count] = expect(inst.operands, 1)
        keep = reader(count, "u32", env)
        return Compute(lambda m, lanes: _wait(m, lanes, int(keep(m, lanes))))
    if mods.flag("wait_all"):
        mods.done()
        expect(inst.operands, 0)
        return Compute(lambda m, lanes: (_commit(m, lanes), _wait(m, lanes, 0)))
    if mods.flag("mbarrier"):
        if not mods.flag("arrive"):
            raise Unsupported("cp.async.mbarrier takes .arrive")
        noinc = mods.flag("noinc")
        space = space_of(mods)
        mods.one_of(("b64",))
        mods.done()
        [address] = expect(inst.operands, 1)
        return _mbarrier_arrive(address, space, noinc, env)
    if mods.one_of(("ca", "cg")) is None:
        raise Unsupported("cp.async needs .ca or .cg")
    return _copy(inst, mods, env)


def _copy(inst: Instruction, mods: Modifiers, env: DecodeEnv) -> Step:
    dst_space = mods.one_of(("shared", "shared::cta"))
    src_space = mods.one_of(("global",))
    if dst_space is None or src_space is None:
        raise Unsupported("cp.async copies .global to .shared")
    mods.hints()  # .L2::cache_hint, .L2::128B, ...: no functional effect
    mods.done()
    operands = inst.operands
    if len(operands) < 3:
        raise Unsupported("cp.async takes [dst], [src], cp-size and an optional src-size")
    dst, src, size_op, *rest = operands
    size = getattr(size_op, "value", None)
    if size not in SIZES:
        raise Unsupported(f"cp.async copies 4, 8 or 16 bytes, not {size}")
    extra = None if not rest else _source_bytes(rest[0], size, env)
    dst_of = shared_targets(dst, "shared", env)
    src_of = _address(src, "global", env)
    what = f"the cp.async at line {inst.line}"

    def run(m: Machine, lanes: Lanes) -> None:
        engine = m.async_engine
        n = lanes.count
        blocks, offsets = dst_of(m, lanes)
        threads = thread_ids(lanes)
        if (offsets % size).any():
            bad = np.flatnonzero(offsets % size)[0]
            raise Fault(f"cp.async destination {int(offsets[bad]):#x} is not {size}-byte "
                        "aligned", int(threads[bad]))
        sources = np.broadcast_to(src_of(m, lanes), (n,)).astype(np.uint64)
        reads = (np.full(n, size, np.int64) if extra is None
                 else np.broadcast_to(np.asarray(extra(m, lanes)), (n,)).astype(np.int64))
        if ((reads < 0) | (reads > size)).any():
            bad = int(np.argmax((reads < 0) | (reads > size)))
            raise Fault(f"cp.async src-size {int(reads[bad])} exceeds its cp-size {size}",
                        int(threads[bad]))
        data = _read_sources(m, sources, reads, size, lanes)
        idx = (blocks * m.shared.size + offsets)[:, None] + np.arange(size)
        engine.shared.write(idx[:, 0], size, threads)
        warps = warp_of(m, threads)
        order = np.argsort(warps, kind="stable")
        cuts = np.flatnonzero(np.diff(warps[order])) + 1
        starts = np.concatenate([[0], cuts, [n]])
        count = starts.size - 1
        first = engine.new_id(count)
        batch = CopyBatch(m, first, idx, data, order, starts)
        ops = [AsyncOp(first + k, what, None, batch=batch) for k in range(count)]
        for k, op in enumerate(ops):
            engine.own(op, idx[batch.rows(k)].reshape(-1), reads=True)
        engine.issue_many(ops, [(GROUP, int(warps[order[starts[k]]])) for k in range(count)])

    return Compute(run)


def _source_bytes(op, size: int, env: DecodeEnv):
    """A reader of how many bytes each lane reads: src-size (an integer operand), or 0 / size
    from ignore-src (a predicate operand)."""
    if isinstance(op, Register) and env.register_bits(op) == 1:
        ignore = reader(op, "pred", env)

        def from_predicate(m: Machine, lanes: Lanes) -> np.ndarray:
            return np.where(ignore(m, lanes), 0, size)

        return from_predicate
    return reader(op, "u32", env)


def _read_sources(m: Machine, sources: np.ndarray, reads: np.ndarray, size: int,
                  lanes: Lanes) -> np.ndarray:
    """(n, size) bytes: each lane's first reads[i] bytes from global memory, then zeros."""
    data = np.zeros((sources.size, size), np.uint8)
    full = reads == size
    ids = thread_ids(lanes)
    if full.any():
        sub = _lanes_of(lanes, ids[full])
        data[full] = m.global_memory.load(sources[full], 1, size, sub)
    for row in np.flatnonzero((reads > 0) & ~full):  # partial reads: byte by byte
        count = int(reads[row])
        sub = _lanes_of(lanes, ids[row:row + 1])
        start = np.array([sources[row]], np.uint64) + np.arange(count, dtype=np.uint64)
        data[row, :count] = m.global_memory.load(start, 1, 1, sub).reshape(-1)
    return data


def _lanes_of(lanes: Lanes, ids: np.ndarray) -> Lanes:
    mask = np.zeros_like(lanes.mask)
    mask[ids] = True
    return Lanes(mask, everyone=False)


def warp_of(m: Machine, threads: np.ndarray) -> np.ndarray:
    """Launch-wide warp number of each thread (warps do not straddle blocks)."""
    per_block = m.geometry.block_threads
    return threads // per_block * -(-per_block // WARP_SIZE) + threads % per_block // WARP_SIZE


def _whole_warps(m: Machine, lanes: Lanes, what: str) -> np.ndarray:
    """The warps of the active lanes, checked to take part whole: groups are kept per warp,
    which is per thread as long as a warp's live threads commit and wait together."""
    threads = thread_ids(lanes)
    warps, counts = np.unique(warp_of(m, threads), return_counts=True)
    live = np.ones(m.geometry.threads, np.bool_) if m.live is None else m.live
    alive = np.bincount(warp_of(m, np.flatnonzero(live)), minlength=int(warps.max()) + 1)
    partial = counts != alive[warps]
    if partial.any():
        warp = int(warps[np.argmax(partial)])
        raise Fault(f"{what} by only some live threads of a warp: cp.async groups are "
                    "simulated per warp, so its threads must commit and wait together",
                    int(threads[np.argmax(warp_of(m, threads) == warp)]))
    return warps


def _commit(m: Machine, lanes: Lanes) -> None:
    for warp in _whole_warps(m, lanes, "cp.async.commit_group"):
        m.async_engine.commit((GROUP, int(warp)))
    m.async_engine.tick()


def _wait(m: Machine, lanes: Lanes, keep: int) -> None:
    warps = _whole_warps(m, lanes, "cp.async.wait_group")
    m.async_engine.wait_groups_many([(GROUP, int(w)) for w in warps], keep)


def _mbarrier_arrive(address, space: str, noinc: bool, env: DecodeEnv) -> Step:
    targets_of = shared_targets(address, space, env)

    def run(m: Machine, lanes: Lanes) -> None:
        engine = m.async_engine
        blocks, offsets = targets_of(m, lanes)
        for warp in _whole_warps(m, lanes, "cp.async.mbarrier.arrive"):
            state = engine.groups.get((GROUP, int(warp)))
            if state is not None:  # the copies land and are tracked by the barrier
                ops = [*state.open, *(op for group in state.committed for op in group)]
                state.open, state.committed = [], type(state.committed)()
                engine.retire_many(ops)
        if noinc:
            for i, thread in enumerate(thread_ids(lanes)):
                engine.barriers.arrive((int(blocks[i]), int(offsets[i])), 1, int(thread))
        engine.tick()

    return Compute(run)
