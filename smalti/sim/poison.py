"""Undefined register values ("poison") through pure instructions.

PTX gives a register no thread wrote an unspecified value; reading it is not undefined
behaviour (CUTLASS reads the unwritten results of a predicated-off
`clusterlaunchcontrol.query_cancel.get_first_ctaid`, computes with them and uses the results
only when the request succeeded). So the simulator faults only when an undefined value
decides something observable. A pure instruction -- one whose only effect is writing its
destination registers from its source operands in the same thread -- propagates it: the
threads whose inputs were undefined get undefined results (sim/registers.py). Every other
instruction faults on reading one (an address, a stored value, an async operand, a branch
condition, a barrier operand, the guard of an instruction with effects), naming the line that
first read the unwritten register (the message) and its own (the error's line).
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Guard, Instruction
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.registry import Compute, Step

# Opcodes whose results depend only on the thread's own operands, with no other effect.
# (Carry-chain ops, shuffles, votes and anything touching memory or barriers are not.)
PURE = frozenset({
    "abs", "add", "and", "bfe", "bfi", "bfind", "brev", "clz", "copysign", "cos", "cvt",
    "cvta", "div", "ex2", "fma", "lg2", "lop3", "mad", "mapa", "max", "min", "mov", "mul",
    "neg", "not", "or", "popc", "prmt", "rcp", "rem", "rsqrt", "selp", "setp", "shf", "shl",
    "shr", "sin", "sqrt", "sub", "tanh", "testp", "xor",
})


def propagating(step: Step, inst: Instruction, line: int | None) -> tuple[Step, Guard | None]:
    """`step` and its guard, made to propagate undefined inputs to the results if `inst` is
    pure. A pure instruction evaluates its own guard: a thread whose guard is undefined runs
    it, and its results are undefined (what it would have left in place may be its old
    value, but which one is unknown)."""
    if type(step) is not Compute or inst.base not in PURE:
        return step, inst.guard
    run, guard = step.run, inst.guard

    def run_pure(m: Machine, lanes: Lanes) -> None:
        registers = m.registers
        registers.pure_line = line
        run(m, lanes)
        registers.pure_line = None
        registers.taint = None

    if guard is None:
        return Compute(run_pure), None
    predicate, negated = guard.predicate.name, guard.negated

    def run_guarded(m: Machine, lanes: Lanes) -> None:
        registers = m.registers
        registers.pure_line = line
        holds = registers.read(predicate, lanes.index).astype(np.bool_)
        if negated:
            holds = ~holds
        if registers.taint is not None:  # an undefined guard: run, with undefined results
            holds |= registers.taint if lanes.index is None else registers.taint[lanes.index]
        if holds.all():
            run(m, lanes)
        elif holds.any():
            mask = np.zeros_like(lanes.mask)
            mask[thread_ids(lanes)] = holds
            run(m, Lanes(mask, everyone=False))
        registers.pure_line = None
        registers.taint = None

    return Compute(run_guarded), None
