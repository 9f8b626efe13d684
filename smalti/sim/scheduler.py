"""Runs a decoded program over all threads with min-PC scheduling.

Every thread has a PC. The scheduler always runs the lowest PC among runnable threads, with
exactly the threads at that PC as the active mask; diverged threads therefore reconverge at
the first instruction they share, for structured and unstructured control flow alike. The
running group keeps going while its PC stays below every parked thread's and absorbs parked
threads when it reaches their PC. `bar.sync` parks arriving threads until every live thread of
their block has arrived.
"""

from __future__ import annotations

import numpy as np

from smalti.sim.errors import Fault, SimError
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.program import Decoded, Program
from smalti.sim.registry import Barrier, Branch, Compute, Exit

NOWHERE = np.iinfo(np.int64).max


class _Threads:
    """Per-thread scheduling state: liveness, parked PCs, and barrier waits."""

    def __init__(self, machine: Machine) -> None:
        n = machine.geometry.threads
        self.block_of = machine.geometry.block_of
        self.blocks = machine.geometry.blocks
        self.live = np.ones(n, np.bool_)
        self.live_count = n
        self.parked = np.full(n, NOWHERE, np.int64)
        self.waiting = np.zeros(n, np.bool_)
        self.resume = np.zeros(n, np.int64)
        self.any_waiting = False

    def next_pc(self) -> int:
        return int(self.parked.min()) if self.parked.size else NOWHERE

    def park(self, mask: np.ndarray, pc: int) -> None:
        self.parked[mask] = pc

    def unpark(self, pc: int) -> np.ndarray:
        mask = self.parked == pc
        self.parked[mask] = NOWHERE
        return mask

    def retire(self, mask: np.ndarray) -> None:
        self.live &= ~mask
        self.live_count = int(self.live.sum())
        if self.any_waiting:
            self.release()

    def arrive(self, mask: np.ndarray, pc: int) -> None:
        self.waiting |= mask
        self.resume[mask] = pc + 1
        self.any_waiting = True
        self.release()

    def release(self) -> None:
        """Let the waiters of every block whose live threads have all arrived go on."""
        arrived = np.bincount(self.block_of[self.waiting], minlength=self.blocks)
        alive = np.bincount(self.block_of[self.live], minlength=self.blocks)
        complete = (arrived == alive) & (arrived > 0)
        released = self.waiting & complete[self.block_of]
        if released.any():
            self.parked[released] = self.resume[released]
            self.waiting &= ~released
            self.any_waiting = bool(self.waiting.any())


def _fail(program: Program, decoded: Decoded, machine: Machine, fault: Fault) -> SimError:
    thread = None if fault.thread is None else machine.geometry.describe(fault.thread)
    return SimError(fault.message, kernel=program.kernel.name, line=decoded.line,
                    text=decoded.text, thread=thread)


def _guarded(decoded: Decoded, machine: Machine, lanes: Lanes, group: np.ndarray) -> Lanes:
    """The lanes whose guard predicate holds."""
    guard = decoded.guard
    if guard is None:
        return lanes
    pred = machine.registers.read(guard.predicate.name, lanes.index).astype(np.bool_)
    if guard.negated:
        pred = ~pred
    if lanes.index is None:
        return Lanes(pred)
    mask = np.zeros_like(group)
    mask[lanes.index] = pred
    return Lanes(mask, everyone=False)


def execute(program: Program, machine: Machine) -> None:
    """Run `program` on `machine` until every thread has exited."""
    steps = program.steps
    end = len(steps)
    threads = _Threads(machine)
    group: np.ndarray | None = threads.live.copy()
    lanes = Lanes(group, everyone=True)
    pc = 0
    next_other = NOWHERE
    while True:
        if group is None:
            pc = threads.next_pc()
            if pc == NOWHERE:
                if threads.any_waiting:
                    raise _deadlock(program, machine, threads)
                return
            group = threads.unpark(pc)
            next_other = threads.next_pc()
            lanes = Lanes(group)
        elif pc == next_other:
            group = group | threads.unpark(pc)
            next_other = threads.next_pc()
            lanes = Lanes(group)
        elif pc > next_other:
            threads.park(group, pc)
            group = None
            continue
        if pc >= end:  # falling off the end of the kernel returns
            threads.retire(group)
            group = None
            continue
        decoded = steps[pc]
        try:
            active = _guarded(decoded, machine, lanes, group)
            match decoded.step:
                case Compute(run=run):
                    if active.count:
                        run(machine, active)
                    pc += 1
                case Branch(target=target):
                    taken = active.count
                    if taken == lanes.count:
                        pc = target
                    elif taken == 0:
                        pc += 1
                    else:
                        jumped = active.mask
                        stayed = group & ~jumped
                        run_mask, run_pc, park_mask, park_pc = (
                            (jumped, target, stayed, pc + 1) if target <= pc
                            else (stayed, pc + 1, jumped, target))
                        threads.park(park_mask, park_pc)
                        next_other = min(next_other, park_pc)
                        group, pc = run_mask, run_pc
                        lanes = Lanes(group, everyone=False)
                case Exit():
                    threads.retire(active.mask)
                    next_other = threads.next_pc()
                    group = group & ~active.mask
                    if group.any():
                        lanes = Lanes(group, everyone=False)
                        pc += 1
                    else:
                        group = None
                case Barrier():
                    if not threads.any_waiting and active.count == threads.live_count:
                        pc += 1  # the whole launch arrived together
                        continue
                    threads.arrive(active.mask, pc)
                    next_other = threads.next_pc()
                    rest = group & ~active.mask
                    if rest.any():
                        group, lanes = rest, Lanes(rest, everyone=False)
                        pc += 1
                    else:
                        group = None
        except Fault as fault:
            raise _fail(program, decoded, machine, fault) from None


def _deadlock(program: Program, machine: Machine, threads: _Threads) -> SimError:
    first = int(np.argmax(threads.waiting))
    decoded = program.steps[int(threads.resume[first]) - 1]
    return SimError("barrier deadlock: threads wait at bar.sync for threads of their block "
                    "that never arrive", kernel=program.kernel.name, line=decoded.line,
                    text=decoded.text, thread=machine.geometry.describe(first))
