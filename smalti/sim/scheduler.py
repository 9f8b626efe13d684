"""Runs a decoded program over all threads with min-PC scheduling.

Every thread has a PC. The scheduler always runs the lowest PC among runnable threads, with
exactly the threads at that PC as the active mask; diverged threads therefore reconverge at
the first instruction they share, for structured and unstructured control flow alike. The
running group keeps going while its PC stays below every parked thread's and absorbs parked
threads when it reaches their PC. `bar.sync` parks arriving threads until every live thread of
their block has arrived; a named barrier with a thread count (`bar.sync 1, 256`, `bar.arrive`)
completes once that many threads of the block arrived at it.

Independent thread scheduling (PTX ISA, "Independent Thread Scheduling" in the machine model,
and the `.sync` / `.aligned` instruction rules, sm_70 and later): the threads of a warp may
diverge and run their paths in any interleaving; nothing promises they reconverge except a
warp-synchronous instruction, which waits until every non-exited thread of its membermask
executed it (`bar.warp.sync`, `shfl.sync`, `vote.sync`, `elect.sync`, ...), and `.aligned`
instructions require the whole warp to execute them together. Against those rules, the
simulator guarantees:
- Every schedule it runs is one the ISA allows: min-PC order is one interleaving, and a
  thread blocked at an mbarrier wait sleeps while the others go on (forward progress, as a
  spinning `try_wait` loop gives on hardware).
- Warp-synchronous instructions are rendezvous, not convergence checks: lanes that arrive
  while members of their warp are elsewhere (diverged, or asleep at an mbarrier) are held at
  the instruction, and run it with those members when they arrive; members that exit release
  them. CUTLASS's producer warp relies on this: its elected leader waits on an mbarrier while
  the other lanes loop back to `elect.sync` and wait there.
- A rendezvous that cannot complete (members waiting at a different instruction, or gone to
  a barrier that needs the waiting lanes) is reported as an error naming a missing lane, not
  run on partial data. Whether code between two warp-synchronous instructions runs converged
  is not observable to a correct program, and the simulator does not promise it.
"""

from __future__ import annotations

import numpy as np

from smalti.sim.errors import Fault, NotConverged, SimError
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.program import Decoded, Program
from smalti.sim.registry import Barrier, Branch, Compute, Exit, Wait
from smalti.sim.spin import SpinWatch

NOWHERE = np.iinfo(np.int64).max
CTA_BARRIERS = 16  # barrier ids 0..15 per CTA (PTX ISA, "bar, barrier")


class _Threads:
    """Per-thread scheduling state: liveness, parked PCs, and barrier waits."""

    def __init__(self, machine: Machine) -> None:
        n = machine.geometry.threads
        self.block_of = machine.geometry.block_of
        self.blocks = machine.geometry.blocks
        # Threads of clusters still waiting to launch are not live (sim/cluster_launch.py);
        # they start at pc 0 when a running cluster finishes.
        self.launch = machine.cluster_launch
        self.live = np.ones(n, np.bool_) if self.launch is None else self.launch.live()
        self.live_count = int(self.live.sum())
        self.parked = np.full(n, NOWHERE, np.int64)
        self.waiting = np.zeros(n, np.bool_)
        self.resume = np.zeros(n, np.int64)
        self.any_waiting = False
        # Named barriers: which barrier each waiter waits at; per (block, barrier) the threads
        # arrived so far and the count the barrier expects (0: every live thread of the block).
        self.barrier_of = np.zeros(n, np.int64)
        self.arrivals = np.zeros((self.blocks, CTA_BARRIERS), np.int64)
        self.expected = np.zeros((self.blocks, CTA_BARRIERS), np.int64)
        machine.live = self.live  # updated in place; warp ops skip exited threads
        machine.shared.live = self.live  # remote shared accesses check their CTA still runs
        # mbarrier waits (`Wait` steps): blocked threads sleep at their wait until the async
        # engine's state changes; `on_sync` tells the hazard tracker a block synchronised.
        self.sleeping = np.zeros(n, np.bool_)
        self.sleep_pc = np.zeros(n, np.int64)
        self.engine = machine.async_engine
        self.seen_version = -1
        self.on_sync = None if self.engine is None else self.engine.shared.sync
        # Warp-synchronous waits: lanes held at a .sync instruction until the rest of their
        # warp's members arrive there (NOWHERE: not held); the fault to report per pc if they
        # never do; and the state at the last retry (to tell progress from a deadlock).
        self.held = np.full(n, NOWHERE, np.int64)
        self.any_held = False
        self.hold_faults: dict[int, Fault] = {}
        self.retried: tuple | None = None

    def hold(self, mask: np.ndarray, pc: int, fault: Fault) -> None:
        self.held[mask] = pc
        self.any_held = True
        self.hold_faults[pc] = fault

    def held_from(self, pc: int) -> int:
        """The lowest pc >= `pc` where lanes are held (NOWHERE if none)."""
        if not self.any_held:
            return NOWHERE
        later = self.held[self.held >= pc]
        return int(later.min()) if later.size else NOWHERE

    def unhold(self, pc: int) -> np.ndarray:
        mask = self.held == pc
        self.held[mask] = NOWHERE
        self.any_held = bool((self.held != NOWHERE).any())
        return mask

    def retry_held(self) -> bool:
        """Nothing else can run: let held lanes try their instruction again (members they
        waited for may have exited), unless nothing changed since the last retry."""
        state = (self.held.tobytes(), self.live_count,
                 None if self.engine is None else self.engine.version)
        if not self.any_held or state == self.retried:
            return False
        self.retried = state
        held = self.held != NOWHERE
        self.parked[held] = self.held[held]
        self.held[held] = NOWHERE
        self.any_held = False
        return True

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
        if self.engine is not None and self.engine.clusters is not None:
            self.engine.clusters.settle(self.live)  # exited threads no longer arrive
        if self.launch is not None and not self.launch.none_pending:
            started = self.launch.settle(self.live)
            if started is not None:  # finished clusters make room for pending ones
                self.live |= started
                self.parked[started] = 0
                self.live_count = int(self.live.sum())

    def arrive(self, mask: np.ndarray, pc: int, ident: np.ndarray | int = 0,
               count: np.ndarray | int | None = None, wait: bool = True) -> None:
        """Threads of `mask` arrive at barrier `ident` (per thread or one for all); `wait`
        parks them until it completes, `count` sets the threads it expects."""
        blocks = self.block_of[mask]
        np.add.at(self.arrivals, (blocks, ident), 1)
        if count is not None:
            self.expected[blocks, ident] = count
        if wait:
            self.waiting |= mask
            self.resume[mask] = pc + 1
            self.barrier_of[mask] = ident
            self.any_waiting = True
        self.release()

    def pending(self) -> bool:
        """Whether some barrier has arrivals but has not completed."""
        return bool(self.arrivals.any())

    def release(self) -> None:
        """Complete every barrier whose expected threads (default: the block's live threads)
        have arrived, and let its waiters go on."""
        alive = np.bincount(self.block_of[self.live], minlength=self.blocks)
        need = np.where(self.expected > 0, self.expected, alive[:, None])
        complete = (self.arrivals >= need) & (self.arrivals > 0)
        if not complete.any():
            return
        self.arrivals[complete] = 0
        self.expected[complete] = 0
        if self.on_sync is not None:
            self.on_sync(complete.any(axis=1))
        released = self.waiting & complete[self.block_of, self.barrier_of]
        if released.any():
            self.parked[released] = self.resume[released]
            self.waiting &= ~released
            self.any_waiting = bool(self.waiting.any())


def _fail(program: Program, decoded: Decoded, machine: Machine, fault: Fault) -> SimError:
    thread = None if fault.thread is None else machine.geometry.describe(fault.thread)
    return SimError(fault.message, kernel=program.kernel.name, line=decoded.line,
                    text=decoded.text, thread=thread, source=decoded.source)


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


def _plain_runs(steps: tuple[Decoded, ...]) -> tuple[list, list[int]]:
    """The `run` of each unguarded Compute step (None for other steps) and, for each pc, how
    many such steps follow in a row from there: most steps, run with no dispatch."""
    runs = [d.step.run if d.guard is None and type(d.step) is Compute else None
            for d in steps]
    lengths = [0] * (len(steps) + 1)
    for pc in range(len(steps) - 1, -1, -1):
        if runs[pc] is not None:
            lengths[pc] = lengths[pc + 1] + 1
    return runs, lengths


def execute(program: Program, machine: Machine) -> None:
    """Run `program` on `machine` until every thread has exited. Lanes polling memory in a
    loop sleep while other threads run, and a poll nothing can satisfy is a deadlock
    (sim/spin.py): blocks that wait for other blocks, of their device or of another."""
    watch = SpinWatch(program, machine)
    steps = program.steps
    end = len(steps)
    plain, plain_lengths = _plain_runs(steps)
    threads = _Threads(machine)
    group: np.ndarray | None = threads.live.copy()
    lanes = Lanes(group)
    pc = 0
    next_other = NOWHERE
    while True:
        if group is None:
            pc = threads.next_pc()
            if pc == NOWHERE and threads.sleeping.any() and _wake(threads):
                continue
            if pc == NOWHERE and threads.retry_held():
                continue
            if pc == NOWHERE and watch.wake(threads.parked,
                                                                  threads.engine):
                continue
            if pc == NOWHERE:
                if watch.sleeping.any():
                    raise watch.deadlock_error(_also_blocked(threads))
                if threads.any_held:
                    raise _hold_deadlock(program, machine, threads)
                if threads.sleeping.any():
                    raise _wait_deadlock(program, machine, threads)
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
        next_held = threads.held_from(pc)
        if next_held == pc:  # lanes wait here for their warp: they go on with this group
            group = group | threads.unhold(pc)
            lanes = Lanes(group)
            next_held = threads.held_from(pc + 1)
        if pc >= end:  # falling off the end of the kernel returns
            threads.retire(group)
            group = None
            continue
        count = plain_lengths[pc]
        if count:  # straight-line steps up to the next parked thread's pc, with no dispatch
            stop = pc + min(count, next_other - pc, next_held - pc)
            if lanes.count:
                for at in range(pc, stop):
                    try:
                        plain[at](machine, lanes)
                    except Fault as fault:
                        raise _fail(program, steps[at], machine, fault) from None
                    except NotConverged as wait:
                        group = _hold(threads, machine, steps[at], lanes, group, at, wait,
                                      program)
                        stop = at + 1
                        break
            pc = stop
            if group is not None:
                lanes = Lanes(group, everyone=None if group.all() else False)
            continue
        decoded = steps[pc]
        try:
            active = _guarded(decoded, machine, lanes, group)
            match decoded.step:
                case Compute(run=run):
                    if active.count:
                        try:
                            run(machine, active)
                        except NotConverged as wait:
                            group = _hold(threads, machine, decoded, active, group, pc, wait,
                                          program)
                            if group is not None:
                                lanes = Lanes(group, everyone=False)
                    pc += 1
                case Branch(target=target):
                    if target <= pc and active.count:
                        asleep = watch.check(pc, target, active.mask)
                        if asleep.any():  # spinning lanes sleep; the others go on
                            group = group & ~asleep
                            if not group.any():
                                group = None
                                continue
                            lanes = Lanes(group, everyone=False)
                            active = Lanes(active.mask & ~asleep, everyone=False)
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
                case Wait(poll=poll):
                    blocked = np.zeros_like(group)
                    if active.count:
                        blocked[active.mask] = ~poll(machine, active)
                    if not blocked.any():
                        pc += 1
                        continue
                    threads.sleeping |= blocked
                    threads.sleep_pc[blocked] = pc
                    rest = group & ~blocked
                    if rest.any():
                        group, lanes = rest, Lanes(rest, everyone=False)
                        pc += 1
                    else:
                        group = None
                case Barrier() as barrier:
                    if (barrier.wait and barrier.ident == 0 and barrier.count is None
                            and not threads.any_waiting and not threads.pending()
                            and active.count == threads.live_count):
                        pc += 1  # the whole launch arrived together
                        if threads.on_sync is not None:
                            threads.on_sync(slice(None))
                        continue
                    if active.count:
                        threads.arrive(active.mask, pc, *_barrier_operands(barrier, machine,
                                                                           active))
                    next_other = threads.next_pc()
                    rest = group & ~active.mask if barrier.wait else group
                    if rest.any():
                        group, lanes = rest, Lanes(rest, everyone=False)
                        pc += 1
                    else:
                        group = None
        except Fault as fault:
            raise _fail(program, decoded, machine, fault) from None


def _hold(threads: _Threads, machine: Machine, decoded: Decoded, active: Lanes,
          group: np.ndarray, pc: int, wait: NotConverged, program: Program
          ) -> np.ndarray | None:
    """A warp-synchronous step at `pc` found members missing: hold the lanes that must wait
    for them, run the step for the other active lanes, and return the group that goes on
    (None when every lane waits)."""
    waiting = wait.waiting & active.mask
    threads.hold(waiting, pc, wait.fault)
    rest = active.mask & ~waiting
    if rest.any():
        try:
            decoded.step.run(machine, Lanes(rest, everyone=False))
        except Fault as fault:
            raise _fail(program, decoded, machine, fault) from None
    group = group & ~waiting
    return group if group.any() else None


def _hold_deadlock(program: Program, machine: Machine, threads: _Threads) -> SimError:
    """Lanes wait at a warp-synchronous instruction for members that never arrive."""
    pc = int(threads.held[threads.held != NOWHERE].min())
    return _fail(program, program.steps[pc], machine, threads.hold_faults[pc])


def _barrier_operands(barrier: Barrier, machine: Machine, active: Lanes) -> tuple[
        np.ndarray | int, np.ndarray | int | None, bool]:
    """(barrier ids, thread counts, wait) of a bar instruction for the active lanes, checked.

    PTX ISA, "bar, barrier": ids are 0..15; the thread count is a positive multiple of the warp
    size (32).
    """
    ident = barrier.ident if isinstance(barrier.ident, int) else barrier.ident(machine, active)
    count = barrier.count
    if count is not None and not isinstance(count, int):
        count = count(machine, active)
    ids = np.asarray(ident).astype(np.int64)
    if ((ids < 0) | (ids >= CTA_BARRIERS)).any():
        raise Fault(f"barrier id {int(ids.reshape(-1)[0])} is outside 0..{CTA_BARRIERS - 1}",
                    active.first())
    if count is not None:
        counts = np.asarray(count).astype(np.int64)
        if ((counts <= 0) | (counts % 32 != 0)).any():
            raise Fault(f"barrier thread count {int(counts.reshape(-1)[0])} is not a positive "
                        "multiple of the warp size", active.first())
        count = counts
    return ids, count, barrier.wait


def _wake(threads: _Threads) -> bool:
    """Nothing can run but threads sleep at mbarrier waits: wake them if the async state
    changed since they last polled, else let the engine complete queued work first."""
    engine = threads.engine
    if engine.version == threads.seen_version and not engine.advance():
        return False
    threads.seen_version = engine.version
    sleepers = threads.sleeping
    threads.parked[sleepers] = threads.sleep_pc[sleepers]
    threads.sleeping = np.zeros_like(sleepers)
    return True


def _wait_deadlock(program: Program, machine: Machine, threads: _Threads) -> SimError:
    """Every live thread is blocked and no queued work is left that could release one."""
    ids = np.flatnonzero(threads.sleeping)
    first = int(ids[0])
    decoded = program.steps[int(threads.sleep_pc[first])]
    barrier = threads.engine.waiting_on.get(first, "an mbarrier")
    others = ""
    if threads.waiting.any():
        others = f"; {int(threads.waiting.sum())} more thread(s) wait at bar.sync"
    return SimError(f"mbarrier deadlock: {ids.size} thread(s) wait on {barrier}, and nothing "
                    f"left can complete that phase{others}", kernel=program.kernel.name,
                    line=decoded.line, text=decoded.text,
                    thread=machine.geometry.describe(first), source=decoded.source)


def _also_blocked(threads: _Threads) -> str:
    """What else blocks, for a spin-deadlock report: threads asleep at mbarrier waits, at
    bar.sync, or held at warp-synchronous instructions."""
    parts = []
    for count, what in ((int(threads.sleeping.sum()), "wait on an mbarrier"),
                        (int(threads.waiting.sum()), "wait at bar.sync"),
                        (int((threads.held != NOWHERE).sum()), "wait for their warp")):
        if count:
            parts.append(f"{count} more thread(s) {what}")
    return "; " + ", ".join(parts) if parts else ""


def _deadlock(program: Program, machine: Machine, threads: _Threads) -> SimError:
    first = int(np.argmax(threads.waiting))
    decoded = program.steps[int(threads.resume[first]) - 1]
    return SimError("barrier deadlock: threads wait at bar.sync for threads of their block "
                    "that never arrive", kernel=program.kernel.name, line=decoded.line,
                    text=decoded.text, thread=machine.geometry.describe(first),
                    source=decoded.source)
