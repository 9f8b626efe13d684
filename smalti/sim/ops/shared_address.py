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
Targets = Callable[[Machine, Lanes], tuple[np.ndarray, np.ndarray]]


def space_of(mods: Modifiers) -> str:
    """Consume a shared state-space modifier: "shared" (.shared, .shared::cta), "cluster"
    (.shared::cluster) or, when absent, "generic"."""
    space = mods.one_of(SHARED_SPACES)
    if space is None:
        return "generic"
    return "cluster" if space == "shared::cluster" else "shared"


def shared_targets(op: Operand, space: str, env: DecodeEnv) -> Targets:
    """Per-lane (blocks, offsets) (int64, one per active lane) of a shared operand: the CTA
    the address names (the executing one, or another of its cluster for .shared::cluster and
    generic addresses `mapa` produced) and the byte offset into its shared memory."""
    address_of = _address(op, "generic" if space == "generic" else "shared", env)

    def run(m: Machine, lanes: Lanes) -> tuple[np.ndarray, np.ndarray]:
        raw = np.broadcast_to(address_of(m, lanes), (lanes.count,)).astype(np.uint64)
        if space == "generic":
            outside = ~m.shared.in_window(raw)
            if outside.any():
                raise Fault(f"address {int(raw[np.argmax(outside)]):#x} is not in the "
                            "shared window", lanes.first(outside))
            raw = raw - np.uint64(SHARED_WINDOW)
        flat = m.shared.flat(raw, 1, lanes, "access", space != "shared").astype(np.int64)
        return np.divmod(flat, max(m.shared.size, 1))

    return run


def shared_offsets(op: Operand, space: str, env: DecodeEnv) -> Offsets:
    """Per-lane (int64, one per active lane) offsets into the executing block's shared memory;
    an address naming another CTA of the cluster is a fault."""
    targets_of = shared_targets(op, space, env)

    def run(m: Machine, lanes: Lanes) -> np.ndarray:
        blocks, offsets = targets_of(m, lanes)
        remote = blocks != m.geometry.block_of[thread_ids(lanes)]
        if remote.any():
            raise Fault("this operand must be in the executing CTA's shared memory, not in "
                        "another CTA of the cluster", lanes.first(remote))
        return offsets

    return run


def thread_ids(lanes: Lanes) -> np.ndarray:
    """Launch-wide ids of the active lanes."""
    return np.flatnonzero(lanes.mask) if lanes.index is None else lanes.index
