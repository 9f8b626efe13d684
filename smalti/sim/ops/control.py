"""Control flow and synchronisation: `bra`, `ret`, `exit`, `bar.sync`/`barrier.sync`
(`barrier.cluster` is in ops/cluster.py), `trap`, `brkpt`."""

from __future__ import annotations

from smalti.ptx.module import Immediate, Instruction, Operand
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, Reader, label_target, reader
from smalti.sim.ops.cluster import decode_barrier_cluster
from smalti.sim.ops.warp import decode_bar_warp
from smalti.sim.registry import Barrier, Branch, Compute, Exit, Step, semantics


@semantics("bra")
def decode_bra(inst: Instruction, env: DecodeEnv) -> Step:
    """bra{.uni} target: divergence is handled by the scheduler for any guard outcome."""
    mods = Modifiers(inst)
    mods.flag("uni")
    mods.done()
    if len(inst.operands) != 1:
        raise Unsupported("indirect branches are not supported")
    return Branch(label_target(inst.operands[0], env))


@semantics("ret")
@semantics("exit")
def decode_exit(inst: Instruction, env: DecodeEnv) -> Step:
    """ret from the kernel entry and exit both retire the executing threads."""
    mods = Modifiers(inst)
    mods.flag("uni")
    mods.done()
    return Exit()


@semantics("bar")
@semantics("barrier")
def decode_bar(inst: Instruction, env: DecodeEnv) -> Step:
    """bar{.cta}.sync / .arrive a{, b}, barrier{.cta}.sync / .arrive{.aligned}, bar.warp.sync.

    PTX ISA, "Parallel Synchronization and Communication Instructions: bar, barrier": without
    the thread-count operand b every thread of the CTA participates; `arrive` does not wait and
    needs b. Ids and counts may be immediates or registers.
    """
    mods = Modifiers(inst)
    if mods.flag("cluster"):
        return decode_barrier_cluster(inst, mods)
    if mods.flag("warp"):
        if not mods.flag("sync"):
            raise Unsupported("bar.warp needs .sync")
        mods.done()
        return decode_bar_warp(inst, env)
    mods.flag("cta")
    mode = mods.one_of(("sync", "arrive"))
    mods.flag("aligned")
    mods.done()
    if mode is None:
        raise Unsupported("only bar.sync / bar.arrive / bar.warp.sync are supported")
    ident, *count = inst.operands
    if len(count) > 1 or (mode == "arrive" and not count):
        raise Unsupported(f"bar.{mode} takes a barrier id{' and' if mode == 'arrive' else ','} "
                          "a thread count")
    return Barrier(_barrier_operand(ident, env), _barrier_operand(count[0], env) if count
                   else None, wait=mode == "sync")


def _barrier_operand(op: Operand, env: DecodeEnv) -> int | Reader:
    """An immediate stays an int; a register becomes a reader of its per-lane values."""
    match op:
        case Immediate(value=int() as value):
            return value
    return reader(op, "u32", env)


@semantics("trap")
@semantics("brkpt")
def decode_trap(inst: Instruction, env: DecodeEnv) -> Step:
    """trap (abort the kernel, an error reported to the host) and brkpt (suspend the kernel
    for a debugger; CUTLASS issues one when a pipeline invariant breaks): both end the run
    with an error naming the thread that reached them."""
    Modifiers(inst).done()
    what = ("the kernel executed trap (an abort)" if inst.base == "trap"
            else "the kernel hit a brkpt (breakpoint) instruction")

    def run(m: Machine, lanes: Lanes) -> None:
        raise Fault(what, lanes.first())

    return Compute(run)
