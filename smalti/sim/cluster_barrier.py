"""The cluster barrier (`barrier.cluster.arrive` / `.wait`): one per cluster of CTAs.

PTX ISA, "Parallel Synchronization and Communication Instructions: barrier.cluster": every
non-exited thread of every CTA in the cluster arrives; a thread's wait returns once the phase
it arrived on has completed, and a thread arrives again only after waiting.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.sim.errors import Fault
from smalti.sim.geometry import Geometry

NOT_ARRIVED = -1


class ClusterBarrier:
    """Arrivals and phases of each cluster's barrier; `on_complete(blocks)` runs per phase."""

    def __init__(self, geometry: Geometry, on_complete: Callable[[np.ndarray], None]) -> None:
        self.cluster_of = geometry.cluster_id[geometry.block_of]
        self.clusters = geometry.blocks // geometry.cluster_size
        self.block_cluster = geometry.cluster_id
        self.phase = np.zeros(self.clusters, np.int64)
        self.arrived = np.zeros(geometry.threads, np.bool_)  # arrived on the current phase
        self.target = np.full(geometry.threads, NOT_ARRIVED, np.int64)  # phase a wait awaits
        self.on_complete = on_complete
        self.version = 0  # bumped per completed phase, so sleeping waits poll again

    def arrive(self, ids: np.ndarray, live: np.ndarray) -> None:
        """Threads `ids` arrive on their cluster's current phase."""
        again = self.target[ids] != NOT_ARRIVED
        if again.any():
            raise Fault("barrier.cluster.arrive twice with no barrier.cluster.wait in between",
                        int(ids[np.argmax(again)]))
        self.arrived[ids] = True
        self.target[ids] = self.phase[self.cluster_of[ids]] + 1
        self.settle(live)

    def settle(self, live: np.ndarray) -> None:
        """Complete the phase of every cluster whose live threads have all arrived."""
        waiting = np.bincount(self.cluster_of[live & ~self.arrived], minlength=self.clusters)
        arrived = np.bincount(self.cluster_of[self.arrived], minlength=self.clusters)
        done = (arrived > 0) & (waiting == 0)
        if not done.any():
            return
        self.phase[done] += 1
        self.arrived[done[self.cluster_of]] = False
        self.version += 1
        self.on_complete(done[self.block_cluster])

    def wait(self, ids: np.ndarray) -> np.ndarray:
        """Which of threads `ids` may go on past barrier.cluster.wait (the others block)."""
        target = self.target[ids]
        missing = target == NOT_ARRIVED
        if missing.any():
            raise Fault("barrier.cluster.wait with no barrier.cluster.arrive before it",
                        int(ids[np.argmax(missing)]))
        ok = self.phase[self.cluster_of[ids]] >= target
        self.target[ids[ok]] = NOT_ARRIVED
        return ok
