"""`setmaxnreg`: a checked no-op (the simulator has no register-file limit to change).

PTX ISA, "Miscellaneous Instructions: setmaxnreg": `setmaxnreg.{inc,dec}.sync.aligned.u32
N` asks for (inc) or releases (dec) per-thread registers of the executing warpgroup. N is an
immediate in [24, 256], a multiple of 8; `.sync.aligned` means every warp of the warpgroup
executes the same instruction together. Checked here: those rules, and that a warpgroup's
`.inc` never lowers, nor its `.dec` raises, the count its previous setmaxnreg set.
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Immediate, Instruction
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.registry import Compute, Step, semantics

WARPGROUP_THREADS = 128
MIN_REGISTERS, MAX_REGISTERS, REGISTER_STEP = 24, 256, 8


@semantics("setmaxnreg")
def decode_setmaxnreg(inst: Instruction, env: DecodeEnv) -> Step:
    del env
    mods = Modifiers(inst)
    direction = mods.one_of(("inc", "dec"))
    if direction is None:
        raise Unsupported("setmaxnreg needs .inc or .dec")
    for required in ("sync", "aligned", "u32"):
        if not mods.flag(required):
            raise Unsupported(f"setmaxnreg needs .{required}")
    mods.done()
    match inst.operands:
        case (Immediate(value=int() as count),):
            pass
        case _:
            raise Unsupported("setmaxnreg takes one immediate register count")
    if not MIN_REGISTERS <= count <= MAX_REGISTERS or count % REGISTER_STEP:
        raise Unsupported(f"setmaxnreg count {count} must be a multiple of {REGISTER_STEP} "
                          f"in [{MIN_REGISTERS}, {MAX_REGISTERS}]")

    def run(m: Machine, lanes: Lanes) -> None:
        _check_whole_warpgroups(m, lanes)
        budgets = m.register_budgets
        groups = np.unique(_warpgroup_of(m, np.flatnonzero(lanes.mask)))
        for group in groups.tolist():
            previous = budgets.get(group)
            if previous is not None and (count < previous if direction == "inc"
                                         else count > previous):
                raise Fault(f"setmaxnreg.{direction} {count} after this warpgroup set "
                            f"{previous}: .inc may only raise and .dec only lower the count",
                            int(group * WARPGROUP_THREADS))
            budgets[group] = count

    return Compute(run)


def _warpgroup_of(m: Machine, threads: np.ndarray) -> np.ndarray:
    """Launch-wide warpgroup number of each thread (per block, 128 threads each)."""
    per_block = m.geometry.block_threads
    groups_per_block = -(-per_block // WARPGROUP_THREADS)
    return threads // per_block * groups_per_block + threads % per_block // WARPGROUP_THREADS


def _check_whole_warpgroups(m: Machine, lanes: Lanes) -> None:
    """Every live thread of each warpgroup executing this must execute it now."""
    everyone = np.arange(m.geometry.threads)
    live = np.ones(everyone.size, np.bool_) if m.live is None else m.live
    groups = _warpgroup_of(m, everyone)
    touched = np.zeros(groups.max() + 1, np.bool_)
    touched[groups[lanes.mask]] = True
    missing = touched[groups] & live & ~lanes.mask
    if missing.any():
        thread = int(np.flatnonzero(missing)[0])
        raise Fault("setmaxnreg.sync.aligned: a thread of this warpgroup has not reached it "
                    "(every warp of the warpgroup must execute it together)", thread)
