"""`elect.sync d|p, membermask`: one leader thread per warp (sm_90).

PTX ISA, "Parallel Synchronization and Communication Instructions: elect.sync": elects one
active thread of membermask as leader, deterministically (the same leader for the same
membermask every time); d gets the leader's lane id (the sink `_` may stand for it) and p is
true only for the leader. The executing thread must be in membermask (undefined otherwise), and
`.sync` waits for all threads of membermask to execute it, so they must be converged, checked
as for the other `.sync` warp ops. The leader here is the lowest active lane of membermask, the
choice the hardware makes.
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction, PredicatePair
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, writer
from smalti.sim.ops.warp import require_converged, warp_view
from smalti.sim.registry import Compute, Step, semantics


@semantics("elect")
def decode_elect(inst: Instruction, env: DecodeEnv) -> Step:
    mods = Modifiers(inst)
    if not mods.flag("sync"):
        raise Unsupported("elect needs .sync")
    mods.done()
    dests, membermask = expect(inst.operands, 2)
    if not isinstance(dests, PredicatePair):
        raise Unsupported("elect.sync writes d|p")
    write_d = writer(dests.first, "b32", env)
    write_p = writer(dests.second, "pred", env)
    read_mask = reader(membermask, "b32", env)

    def run(m: Machine, lanes: Lanes) -> None:
        view = warp_view(m, lanes)
        members = np.broadcast_to(np.asarray(read_mask(m, lanes)).astype(np.uint64),
                                  view.ids.shape)
        require_converged(view, members, "elect.sync")
        candidates = members & view.active
        lowest = candidates & (~candidates + np.uint64(1))  # the lowest set bit
        leader = np.log2(lowest.astype(np.float64)).astype(np.uint32)
        write_d(m, lanes, leader)
        write_p(m, lanes, leader == view.lane)

    return Compute(run)
