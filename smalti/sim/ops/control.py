"""Control flow and synchronisation: `bra`, `ret`, `exit`, `bar.sync`/`barrier.sync`."""

from __future__ import annotations

from smalti.ptx.module import Immediate, Instruction
from smalti.sim.errors import Unsupported
from smalti.sim.operands import DecodeEnv, Modifiers, label_target
from smalti.sim.registry import Barrier, Branch, Exit, Step, semantics


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
    """bar.sync / barrier.sync a: a CTA-wide barrier over all live threads of the block.

    PTX ISA, "Parallel Synchronization and Communication Instructions: bar, barrier": without
    the thread-count operand every thread of the CTA participates.
    """
    mods = Modifiers(inst)
    if not mods.flag("sync"):
        raise Unsupported("only bar.sync / barrier.sync are supported")
    mods.flag("aligned")
    mods.done()
    match inst.operands:
        case (Immediate(value=int()),):
            return Barrier()
        case (Immediate(), _):
            raise Unsupported("barriers with a thread count are not supported yet")
    raise Unsupported("the barrier id must be an immediate")
