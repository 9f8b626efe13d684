"""Spin loops: threads that poll memory in a loop sleep until another thread has run.

A thread waiting for a flag another thread sets (`ld.acquire.sys` or `ld.volatile` in a loop)
would, under min-PC scheduling, keep the lowest PC and starve the thread that sets the flag.
The scheduler therefore asks `SpinWatch` at every backward branch which of the jumping lanes
*spin*: the loop body (the instructions from the branch target to the branch) writes nothing
(only loads, `multimem.ld_reduce` among them, compares, moves and arithmetic: `PURE`, and
atomics that changed nothing since the lane last took the branch), and the lane's registers
are the same as when it last took this branch. Such a lane's next iteration would repeat the
last one exactly unless memory it reads changes, which only another thread can do: it sleeps at the
loop head, and the other threads run (one of the schedules the PTX ISA allows, since a
polling loop promises no progress of its own).

When nothing else can run the sleepers are woken to poll again. Deadlock (`deadlock_error`)
is a round in which every sleeper was woken and went back to sleep at its first backward
branch, at the loop it slept in, with unchanged registers, and no other thread ran (none
could: the scheduler wakes sleepers only when nothing else is runnable, and no thread woken
in the round left its loop, exited or fell asleep anew): nothing left can ever change what
they read. The rule is sound because a pure loop body with unchanged registers and unchanged
memory repeats itself forever. Loops not proven to spin also sleep, every YIELD_AFTER
iterations, so that a poll by atomics or with a counter lets the others run; while such a
loop runs no deadlock is declared.
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import LabelDef
from smalti.sim.async_engine import AsyncEngine
from smalti.sim.errors import SimError
from smalti.sim.machine import Machine
from smalti.sim.program import Program

# Instruction bases that write no memory and synchronise with no other thread: a loop made of
# these (and loads) is a polling loop. Warp-synchronous, barrier, atomic and store
# instructions are absent on purpose; `mov` of %clock changes registers, so a timeout loop
# never looks like a spin.
PURE = frozenset({
    "ld", "ldu", "setp", "selp", "set", "mov", "cvt", "cvta", "bra", "nanosleep", "add", "sub",
    "mul", "mad", "and", "or", "xor", "not", "cnot", "shl", "shr", "min", "max", "abs", "neg",
    "slct", "prmt", "bfe", "bfi", "lop3", "popc", "clz", "brev", "isspacep", "mapa", "fence",
    "membar", "getctarank",
})


YIELD_AFTER = 16  # iterations of a loop that may write before its lanes let others run


# Atomics are polls while they change nothing (`atom.or 0`, a failing `atom.cas`): a loop of
# PURE instructions and these spins when, besides its registers, the count of its atomics
# that changed memory (Machine.atomic_writes) is unchanged.
POLLING_ATOMICS = frozenset({"atom", "red"})
WRITES = "<atomic writes>"  # the snapshot entry of that count
POLLS = frozenset({"ld", "ldu"}) | POLLING_ATOMICS  # what a deadlock report names
# multimem.ld_reduce reads every device's copy of a location and writes none: a poll, like
# `ld` (multimem.st and multimem.red write, so a loop with them does not spin).
MULTIMEM_LOAD = "ld_reduce"


def _is_load(inst) -> bool:
    """Whether `inst` only reads memory: ld/ldu, or multimem.ld_reduce."""
    return inst.base in ("ld", "ldu") or (inst.base == "multimem"
                                          and MULTIMEM_LOAD in inst.modifiers)


def _instructions(program: Program) -> list:
    """The kernel's instructions, one per step (labels dropped, as the decoder does)."""
    return [s for s in program.kernel.body if not isinstance(s, LabelDef)]


class SpinWatch:
    """Which threads sleep in spin loops, and the register snapshots that tell spins apart."""

    def __init__(self, program: Program, machine: Machine) -> None:
        self.program = program
        self.machine = machine
        n = machine.geometry.threads
        instructions = _instructions(program)
        self.bases = [inst.base for inst in instructions]
        self.polling = [base in PURE or base in POLLING_ATOMICS or _is_load(inst)
                        for base, inst in zip(self.bases, instructions, strict=True)]
        self.polls = [base in POLLS or _is_load(inst)
                      for base, inst in zip(self.bases, instructions, strict=True)]
        machine.atomic_writes = np.zeros(n, np.int64)
        self.snapshots: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
        self.sleeping = np.zeros(n, np.bool_)
        self.loop_pc = np.zeros(n, np.int64)  # the backward branch a sleeper spins at
        self.resume = np.zeros(n, np.int64)  # the loop head it resumes at
        self.fresh = np.zeros(n, np.bool_)  # woken, and no backward branch taken since
        self.quiet = np.zeros(n, np.bool_)  # woken, then slept again at its first chance
        self.woken = np.zeros(n, np.bool_)  # the sleepers the last wake woke
        self.streak = np.zeros(n, np.int64)  # iterations of loops that may write, in a row

    def _polling_body(self, target: int, pc: int) -> bool:
        """Whether the loop body writes nothing but through atomics (checked per lane)."""
        return all(self.polling[target:pc + 1])

    def check(self, pc: int, target: int, jumped: np.ndarray) -> np.ndarray:
        """Lanes of `jumped` (a mask) taking the backward branch at `pc` to `target` that
        sleep: those that spin, and those that looped YIELD_AFTER times in a row without
        being proven to spin (a loop that may write, such as an atomic poll, or one that
        counts its iterations), so that others run, as hardware's fairness gives; the
        latter are never quiet, so no deadlock is declared while they loop. The caller
        drops the sleepers from the running group."""
        spinning = self._spinning(pc, target, jumped)
        looping = jumped & ~spinning
        self.streak[looping] += 1
        tired = looping & (self.streak >= YIELD_AFTER)
        fresh = jumped & self.fresh
        self.quiet[fresh] = spinning[fresh] & (self.loop_pc[fresh] == pc)
        self.fresh[fresh] = False
        asleep = spinning | tired
        if asleep.any():
            self.streak[asleep] = 0
            self.sleeping |= asleep
            self.loop_pc[asleep] = pc
            self.resume[asleep] = target
        return asleep

    def _spinning(self, pc: int, target: int, jumped: np.ndarray) -> np.ndarray:
        """Which lanes of `jumped` spin: the loop body is PURE (or polls by atomics that
        changed nothing), and their registers (and count of atomics that changed memory) are
        the ones they had when they last took this branch (updated for the next check)."""
        spinning = np.zeros_like(jumped)
        if not self._polling_body(target, pc):
            return spinning
        current = dict(self.machine.registers.current())
        current[WRITES] = self.machine.atomic_writes
        ids = np.flatnonzero(jumped)
        seen = self.snapshots.get(pc)
        if seen is None:
            seen = (np.zeros_like(jumped), {})
            self.snapshots[pc] = seen
        taken, values = seen
        same = taken[ids].copy()
        for name, now in current.items():
            before = values.get(name)
            if before is None:
                before = values[name] = np.zeros_like(now)
                same[:] = False
            same &= before[ids] == now[ids]
            before[ids] = now[ids]
        taken[ids] = True
        spinning[ids[same]] = True
        return spinning

    def wake(self, parked: np.ndarray, engine: AsyncEngine | None = None) -> bool:
        """Nothing else can run: park the sleepers at their loop heads to poll again, unless
        every one of them already did so since the last wake and saw nothing new, and no
        queued asynchronous work (a bulk copy that may write what they poll) is left to
        complete (False)."""
        sleepers = self.sleeping
        if not sleepers.any():
            return False
        if np.array_equal(sleepers, self.woken) and self.quiet[sleepers].all() and not (
                engine is not None and engine.advance()):
            return False  # the last wake changed nothing: every woken thread spun in place
        parked[sleepers] = self.resume[sleepers]
        self.woken = sleepers.copy()
        self.fresh = sleepers.copy()
        self.quiet = np.zeros_like(sleepers)
        self.sleeping = np.zeros_like(sleepers)
        return True

    def deadlock_error(self, others: str) -> SimError:
        """The report of sleepers no thread will ever release: each (device, block, loop)
        with the PTX lines of the loads it polls."""
        geometry = self.machine.geometry
        ids = np.flatnonzero(self.sleeping)
        places: dict[tuple[int, int], list[int]] = {}
        for thread in ids:
            block = int(geometry.block_of[thread])
            places.setdefault((block, int(self.loop_pc[thread])), []).append(int(thread))
        steps = self.program.steps
        lines, polls = [], []
        for (_, pc), threads in sorted(places.items()):
            head = int(self.resume[threads[0]])
            loads = [steps[i] for i in range(head, pc + 1) if self.polls[i]]
            loads = loads or [steps[pc]]
            polls.append(loads[0])
            polled = ", ".join(f"line {d.line} `{d.text}`" for d in loads)
            lines.append(f"{geometry.describe(threads[0]).rsplit(' thread', 1)[0]} "
                         f"({len(threads)} thread(s)) polls {polled}")
        first = places[min(places)][0]
        return SimError(
            f"spin deadlock: {ids.size} thread(s) poll memory that no thread left can change"
            f"{others}", kernel=self.program.kernel.name, line=polls[0].line,
            text=polls[0].text, thread=geometry.describe(first), detail="; ".join(lines))
