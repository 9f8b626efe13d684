"""The state of one launch: geometry, registers and memories, shared by all instructions."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smalti.sim.async_engine import AsyncEngine
from smalti.sim.cluster_launch import ClusterLaunch
from smalti.sim.errors import Fault
from smalti.sim.geometry import Geometry
from smalti.sim.lanes import Lanes
from smalti.sim.memory import GlobalMemory, LocalMemory, ParamSpace, SharedMemory
from smalti.sim.multicast import MulticastGroup
from smalti.sim.peers import PeerOrder
from smalti.sim.registers import RegisterFile

CYCLES_PER_READ = 32


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
    # Which clusters run, wait to launch or were canceled (sim/cluster_launch.py).
    cluster_launch: ClusterLaunch | None = None

    # Each thread's .local memory, and device addresses (0-d uint64, or per thread: each
    # device has its own copies) of module variables; read them with `symbol`.
    local: LocalMemory | None = None
    symbols: dict[str, np.ndarray] = field(default_factory=dict)
    # Reads of %clock/%clock64/%globaltimer so far: each read sees a later time.
    ticks: int = 0
    # Register count each warpgroup's last setmaxnreg set (ops/setmaxnreg.py).
    register_budgets: dict[int, int] = field(default_factory=dict)
    # Instructions (their store_check.Site) that already warned in this launch.
    warned: set = field(default_factory=set)
    # Tensor maps read from device memory, by their 128 bytes (tensormap_memory.py).
    device_maps: dict = field(default_factory=dict)
    # A launch over several devices: the race checker of their symmetric buffers (peers.py).
    peers: PeerOrder | None = None
    # ... and the buffers its multicast address reaches (multicast.py, ops/multimem.py).
    multicast: MulticastGroup | None = None
    # Per thread, how many atom/red updates changed memory (kept while spin loops are
    # watched, sim/spin.py: an atomic that changes nothing is a poll).
    atomic_writes: np.ndarray | None = None

    def symbol(self, name: str, lanes: Lanes) -> np.ndarray:
        """The device address of module variable `name`: 0-d, or one per active lane (its
        device's copy) in a launch over several devices."""
        value = self.symbols[name]
        return value if value.ndim == 0 or lanes.index is None else value[lanes.index]

    def special(self, name: str, lanes: Lanes) -> np.ndarray:
        """Special register `name` (uint32, or uint64 for 64-bit counters) for the active lanes
        (0-d when uniform)."""
        if name.startswith(("%clock", "%globaltimer")):
            return self._timer(name)
        value = self._specials.get(name)
        if value is None:
            value = self.geometry.special(name)
            if value is None:
                raise Fault(f"unsupported special register {name}")
            self._specials[name] = value
        if value.ndim == 0 or lanes.index is None:
            return value
        return value[lanes.index]

    def _timer(self, name: str) -> np.ndarray:
        """Monotone counters (PTX ISA, "Special Registers"): %clock/%clock_hi are the halves of
        %clock64 (cycles), %globaltimer counts nanoseconds; here one cycle is one nanosecond
        and every read advances the clock by CYCLES_PER_READ."""
        self.ticks += 1
        cycles = self.ticks * CYCLES_PER_READ
        match name:
            case "%clock64" | "%globaltimer":
                return np.array(cycles, np.uint64)
            case "%clock" | "%globaltimer_lo":
                return np.array(cycles & 0xFFFFFFFF, np.uint32)
            case "%clock_hi" | "%globaltimer_hi":
                return np.array(cycles >> 32, np.uint32)
        raise Fault(f"unsupported special register {name}")
