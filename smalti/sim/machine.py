"""The state of one launch: geometry, registers and memories, shared by all instructions."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smalti.sim.async_engine import AsyncEngine
from smalti.sim.errors import Fault
from smalti.sim.geometry import Geometry
from smalti.sim.lanes import Lanes
from smalti.sim.memory import GlobalMemory, ParamSpace, SharedMemory
from smalti.sim.registers import RegisterFile


@dataclass
class Machine:
    """Everything instruction semantics read or write while a kernel runs."""

    geometry: Geometry
    registers: RegisterFile
    global_memory: GlobalMemory
    shared: SharedMemory
    params: ParamSpace
    _specials: dict[str, np.ndarray] = field(default_factory=dict)
    # Per-thread CC.CF of add.cc/addc carry chains (ops/carry.py); created on first use.
    carry: np.ndarray | None = None
    # Which threads have not exited; the scheduler shares its array (warp ops read it).
    live: np.ndarray | None = None
    # TMA/wgmma queue, mbarriers and hazard trackers (sim/async_engine.py); set by the launch.
    async_engine: AsyncEngine | None = None

    def special(self, name: str, lanes: Lanes) -> np.ndarray:
        """Special register `name` (uint32) for the active lanes (0-d when uniform)."""
        value = self._specials.get(name)
        if value is None:
            value = self.geometry.special(name)
            if value is None:
                raise Fault(f"unsupported special register {name}")
            self._specials[name] = value
        if value.ndim == 0 or lanes.index is None:
            return value
        return value[lanes.index]
