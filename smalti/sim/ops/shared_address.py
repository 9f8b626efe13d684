"""Shared-memory operands of asynchronous instructions, resolved to per-lane CTA offsets."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.ptx.module import Operand
from smalti.sim.errors import Fault
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.memory import SHARED_WINDOW
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.ops.memory import _address

SHARED_SPACES = ("shared", "shared::cta", "shared::cluster")
Offsets = Callable[[Machine, Lanes], np.ndarray]


def space_of(mods: Modifiers) -> str:
    """Consume a shared state-space modifier: "shared" or, when absent, "generic".

    A cluster of one CTA is all the simulator runs, so `.shared::cluster` addresses are the
    executing CTA's own shared memory.
    """
    return "shared" if mods.one_of(SHARED_SPACES) else "generic"


def shared_offsets(op: Operand, space: str, env: DecodeEnv) -> Offsets:
    """Per-lane (int64, one per active lane) offsets into the block's shared memory."""
    address_of = _address(op, "shared" if space == "shared" else "generic", env)

    def run(m: Machine, lanes: Lanes) -> np.ndarray:
        raw = np.broadcast_to(address_of(m, lanes), (lanes.count,)).astype(np.uint64)
        if space == "generic":
            window = np.uint64(SHARED_WINDOW)
            outside = (raw < window) | (raw >= window + np.uint64(m.shared.size))
            if outside.any():
                raise Fault(f"address {int(raw[np.argmax(outside)]):#x} is not in the "
                            "shared window", lanes.first(outside))
            raw = raw - window
        offsets = raw.astype(np.int64)
        if (offsets >= m.shared.size).any():
            bad = offsets >= m.shared.size
            raise Fault(f"shared address {int(offsets[np.argmax(bad)]):#x} is beyond the "
                        f"block's {m.shared.size} bytes", lanes.first(bad))
        return offsets

    return run


def thread_ids(lanes: Lanes) -> np.ndarray:
    """Launch-wide ids of the active lanes."""
    return np.flatnonzero(lanes.mask) if lanes.index is None else lanes.index
