"""The asynchronous engine: queues TMA and wgmma work and completes it when a policy says.

Each operation has a data effect (`run`) and a retirement: the point where the program has
synchronised with it (its mbarrier phase was observed by a wait, or its bulk / wgmma group was
waited for). Bytes and registers it owns stay guarded until retirement, whatever the policy,
so a missing wait is reported even when the data already landed. Policies:
`eager` completes at issue; `latest` only when forced (a wait_group, every thread blocked on a
wait, or the end of the kernel); `random` completes a random prefix of the queue at every
asynchronous instruction, from a seeded generator.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from smalti.sim.barriers import BarrierTable
from smalti.sim.cluster_barrier import ClusterBarrier
from smalti.sim.hazards import Guard, RegisterGuards, SharedHazards

POLICIES = ("eager", "latest", "random")


class Batch(Protocol):
    """The shared effect of operations one instruction issued together (one per warpgroup):
    completing several of them at once runs it once, for all of them."""

    def run(self, ops: list[AsyncOp]) -> None: ...


@dataclass(eq=False, slots=True)
class AsyncOp:
    """One queued operation: its effect, and the bytes and registers it owns until retired."""

    id: int
    what: str
    run: Callable[[], None] | None  # None: its effect is its batch's
    smem: bool = False  # whether it owns shared bytes (released by its id)
    registers: bool = False
    done: bool = False
    retired: bool = False
    chain: object = None  # ops with the same chain complete in issue order
    batch: Batch | None = None  # ops issued together whose effect runs for several at once
    # Run when the program synchronises with it (a bulk copy's race check between devices,
    # ops/bulk.py: its global accesses may happen any time up to then).
    on_retire: Callable[[], None] | None = None


@dataclass
class Groups:
    """Uncommitted operations and committed groups, oldest first (bulk or wgmma groups)."""

    open: list[AsyncOp] = field(default_factory=list)
    committed: deque[list[AsyncOp]] = field(default_factory=deque)


class AsyncEngine:
    """Pending asynchronous work of one launch, with its mbarriers and hazard trackers."""

    def __init__(self, shared: SharedHazards, policy: str = "eager", seed: int = 0,
                 spurious_waits: bool = False) -> None:
        if policy not in POLICIES:
            raise ValueError(f"async_completion must be one of {', '.join(POLICIES)}, "
                             f"got {policy!r}")
        self.policy = policy
        self.rng = np.random.default_rng(seed)
        self.spurious_waits = spurious_waits
        self.shared = shared
        self.registers = RegisterGuards()
        self.barriers = BarrierTable(self._phase_completed)
        self.pending: list[AsyncOp] = []
        self.groups: dict[object, Groups] = {}
        self._ids = 0
        self.waiting_on: dict[int, str] = {}  # thread -> what its blocked wait waits for
        self.completions = 0
        self.clusters: ClusterBarrier | None = None  # barrier.cluster state; set by the launch

    @property
    def version(self) -> int:
        """Changes whenever something a blocked wait may be waiting for has happened."""
        clusters = 0 if self.clusters is None else self.clusters.version
        return self.barriers.version + self.completions + clusters

    def _phase_completed(self, block: int) -> None:
        """A phase completing orders the block's accesses; other CTAs' accesses only once a
        wait acquires, at cluster scope, arrivals they released at cluster scope
        (smalti.sim.ops.mbarrier)."""
        self.shared.sync(np.array([block]))

    def new_id(self, count: int = 1) -> int:
        """A fresh operation id (the first of `count` consecutive ones)."""
        self._ids += count
        return self._ids - count + 1

    def issue(self, op: AsyncOp, group: object | None = None) -> None:
        """Queue `op` (in the open group of `group`, if given) and apply the policy."""
        if group is not None:
            self.groups.setdefault(group, Groups()).open.append(op)
        self.pending.append(op)
        if self.policy == "eager":
            self._complete(op)
        else:
            self.tick()

    def issue_many(self, ops: Sequence[AsyncOp], groups: Sequence[object]) -> None:
        """`issue` each op in its group, in order. Eager completion at issue touches nothing
        the next issue reads, so it is done for all of them at once (one batched effect)."""
        if self.policy != "eager":
            for op, group in zip(ops, groups, strict=True):
                self.issue(op, group)
            return
        for op, group in zip(ops, groups, strict=True):
            self.groups.setdefault(group, Groups()).open.append(op)
        self.pending.extend(ops)
        self._complete_many(ops)

    def tick(self) -> None:
        """Under `random`, complete a random prefix of the queue (keeps chains in order)."""
        if self.policy != "random" or not self.pending:
            return
        count = int(self.rng.integers(0, len(self.pending) + 1))
        for op in list(self.pending[:count]):
            self._complete(op)

    def _complete(self, op: AsyncOp) -> None:
        self._complete_many([op])

    def _complete_many(self, ops: Sequence[AsyncOp]) -> None:
        """Complete `ops` in order, each after the earlier pending ops of its chain; the
        effects run in that order, consecutive ops of one batch together."""
        finished: list[AsyncOp] = []
        for op in ops:
            self._finish(op, finished)
        start = 0
        for end in range(1, len(finished) + 1):
            batch = finished[start].batch
            if end < len(finished) and batch is not None and finished[end].batch is batch:
                continue
            if batch is None:
                finished[start].run()
            else:
                batch.run(finished[start:end])
            start = end

    def _finish(self, op: AsyncOp, finished: list[AsyncOp]) -> None:
        """Mark `op` (after its chain's earlier pending ops) done; its effect is due."""
        if op.done:
            return
        if op.chain is not None:  # an earlier op of the same chain completes first
            for earlier in self.pending:
                if earlier is op:
                    break
                if earlier.chain == op.chain:
                    self._finish(earlier, finished)
        self.pending.remove(op)
        op.done = True
        self.completions += 1
        finished.append(op)

    def advance(self) -> bool:
        """Every thread is blocked: complete the oldest pending op; False when none is left."""
        if not self.pending:
            return False
        self._complete(self.pending[0])
        return True

    def drain(self) -> None:
        """The kernel ended: everything still queued completes."""
        while self.pending:
            self._complete(self.pending[0])

    def unwaited_bulk_reads(self) -> list[tuple[object, AsyncOp]]:
        """(group, op) of bulk stores whose reads of shared memory the program never waited
        for: a CTA may not exit while TMA still reads its shared memory (PTX ISA,
        cp.async.bulk.wait_group: `.read` waits until the source has been read)."""
        return [(group, op) for group, state in self.groups.items() if group[0] == "bulk"
                for op in (*state.open, *(o for g in state.committed for o in g))
                if not op.retired]

    def retire(self, op: AsyncOp) -> None:
        """The program synchronised with `op`: it completes and stops owning anything."""
        self.retire_many([op])

    def retire_many(self, ops: Sequence[AsyncOp]) -> None:
        """`retire` each of `ops`, in order; the releases do not touch what completing reads,
        so they follow all the completions."""
        self._complete_many(ops)
        released = set()
        for op in ops:
            if op.retired:
                continue
            op.retired = True
            if op.on_retire is not None:
                op.on_retire()
            if op.smem:
                self.shared.release(op.id)
            if op.registers:
                released.add(op.id)
        if released:
            self.registers.release(released)

    def own(self, op: AsyncOp, smem: np.ndarray, reads: bool) -> None:
        """Guard flat shared bytes `smem` for `op` (loads fault too when `reads`)."""
        op.smem = True
        self.shared.own(smem, Guard(op.id, op.what, reads))

    def own_rows(self, ops: Sequence[AsyncOp], local: np.ndarray, blocks: np.ndarray,
                 reads: bool) -> None:
        """`own` shared bytes `local` (offsets within a block; one row for all ops or a row
        each) of block blocks[i] for ops[i] (issued together by one instruction), in order."""
        for op in ops:
            op.smem = True
        ids = np.array([op.id for op in ops], np.int64)
        self.shared.own_rows(local, ids, ops[0].what if ops else "", reads, blocks)

    def own_registers(self, op: AsyncOp, names: list[str], threads: np.ndarray,
                      reads: bool, wait: str = "wgmma.wait_group") -> None:
        """Guard registers `names` of `threads` (bool mask) for `op`, until `wait`."""
        op.registers = True
        owner = np.where(threads, op.id, 0).astype(np.int64)
        self.registers.own(names, owner, {op.id}, op.what, reads, wait)

    def own_registers_many(self, ops: Sequence[AsyncOp], names: list[str],
                           members: np.ndarray, reads: bool) -> None:
        """Guard registers `names` of threads members[i] (a row per op) for ops[i]; the ops
        do the same thing (one instruction), so they share one claim."""
        if not ops:
            return
        owner = np.zeros(self.shared.block_of.size, np.int64)
        owner[members] = np.array([op.id for op in ops], np.int64)[:, None]
        for op in ops:
            op.registers = True
        self.registers.own(names, owner, {op.id for op in ops}, ops[0].what, reads)

    def commit(self, group: object) -> None:
        """commit_group: the open operations of `group` become one committed group."""
        state = self.groups.setdefault(group, Groups())
        state.committed.append(state.open)
        state.open = []

    def wait_groups(self, group: object, keep: int) -> None:
        """wait_group N: all but the `keep` most recent committed groups complete and retire."""
        state = self.groups.get(group)
        if state is None:
            return
        while len(state.committed) > keep:
            self.retire_many(state.committed.popleft())

    def wait_groups_many(self, groups: Sequence[object], keep: int) -> None:
        """`wait_groups` for each group (wgmma warpgroups waiting together). Ops of different
        groups touch different registers and only read shared memory, so they retire in
        issue order, which keeps each chain's order and lets a batch complete together."""
        ops: list[AsyncOp] = []
        for group in groups:
            state = self.groups.get(group)
            while state is not None and len(state.committed) > keep:
                ops.extend(state.committed.popleft())
        ops.sort(key=lambda op: op.id)
        self.retire_many(ops)

    def observed(self, block: int, address: int) -> None:
        """A wait saw a completed phase of this mbarrier: its landed copies retire."""
        bar = self.barriers.table.get((block, address))
        if bar is not None and bar.completed:
            for op in bar.completed:
                self.retire(op)
            bar.completed.clear()

    def spurious(self, count: int) -> np.ndarray:
        """Which of `count` waits fail spuriously (never, unless the option is on)."""
        if not self.spurious_waits:
            return np.zeros(count, np.bool_)
        return self.rng.random(count) < 0.5
