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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from smalti.sim.barriers import BarrierTable
from smalti.sim.cluster_barrier import ClusterBarrier
from smalti.sim.hazards import Guard, RegisterGuards, SharedHazards

POLICIES = ("eager", "latest", "random")


@dataclass(eq=False)
class AsyncOp:
    """One queued operation: its effect, and the bytes and registers it owns until retired."""

    id: int
    what: str
    run: Callable[[], None]
    smem: np.ndarray | None = None  # flat shared byte indices it owns
    registers: bool = False
    done: bool = False
    retired: bool = False
    chain: object = None  # ops with the same chain complete in issue order


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
        self.shared.sync(np.array([block]), cluster=True)  # may order remote arrivals

    def new_id(self) -> int:
        self._ids += 1
        return self._ids

    def issue(self, op: AsyncOp, group: object | None = None) -> None:
        """Queue `op` (in the open group of `group`, if given) and apply the policy."""
        if group is not None:
            self.groups.setdefault(group, Groups()).open.append(op)
        self.pending.append(op)
        if self.policy == "eager":
            self._complete(op)
        else:
            self.tick()

    def tick(self) -> None:
        """Under `random`, complete a random prefix of the queue (keeps chains in order)."""
        if self.policy != "random" or not self.pending:
            return
        count = int(self.rng.integers(0, len(self.pending) + 1))
        for op in list(self.pending[:count]):
            self._complete(op)

    def _complete(self, op: AsyncOp) -> None:
        if op.done:
            return
        if op.chain is not None:  # an earlier op of the same chain completes first
            for earlier in self.pending:
                if earlier is op:
                    break
                if earlier.chain == op.chain:
                    self._complete(earlier)
        self.pending.remove(op)
        op.done = True
        self.completions += 1
        op.run()

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
        self._complete(op)
        if op.retired:
            return
        op.retired = True
        if op.smem is not None:
            self.shared.release(op.id, op.smem)
        if op.registers:
            self.registers.release(op.id)

    def own(self, op: AsyncOp, smem: np.ndarray, reads: bool) -> None:
        """Guard flat shared bytes `smem` for `op` (loads fault too when `reads`)."""
        op.smem = smem
        self.shared.own(smem, Guard(op.id, op.what, reads))

    def own_registers(self, op: AsyncOp, names: list[str], threads: np.ndarray,
                      reads: bool) -> None:
        """Guard registers `names` of `threads` (bool mask) for `op`."""
        op.registers = True
        guard = Guard(op.id, op.what, reads)
        for name in names:
            self.registers.own(name, threads, guard)

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
            for op in state.committed.popleft():
                self.retire(op)

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
