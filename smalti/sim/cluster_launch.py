"""Which clusters of the grid run, wait to launch, finished or were canceled.

A GPU runs as many clusters as fit and launches the rest as running ones finish; Blackwell's
cluster launch control (`clusterlaunchcontrol.try_cancel`, sm_100a) lets a running CTA cancel
a cluster that has not started and do its work instead. The simulator runs `resident` clusters
of each device's grid from the start (all of them by default), in launch order: cluster ids
x fastest, as `%clusterid`. Whenever every thread of a running cluster has exited, the next
pending cluster of its device launches. A successful try_cancel takes the same one, the next
pending cluster in launch order, so which cluster a request gets is deterministic; it fails
once none is pending.
"""

from __future__ import annotations

import numpy as np

from smalti.sim.geometry import Geometry

PENDING, RUNNING, DONE, CANCELED = range(4)


class ClusterLaunch:
    """Per cluster of the launch: PENDING, RUNNING, DONE or CANCELED."""

    def __init__(self, geometry: Geometry, resident: int | None = None) -> None:
        if resident is not None and resident < 1:
            raise ValueError(f"resident_clusters must be at least 1, got {resident}")
        self.geometry = geometry
        self.per_device = geometry.device_blocks // geometry.cluster_size
        count = geometry.devices * self.per_device
        order = np.arange(count) % self.per_device  # position in its device's launch order
        running = order < (self.per_device if resident is None else resident)
        self.state = np.where(running, RUNNING, PENDING).astype(np.int8)
        self.cluster_of = geometry.cluster_id[geometry.block_of]  # per thread
        self.observed_failure: set[int] = set()  # blocks that decoded a failed request

    @property
    def none_pending(self) -> bool:
        """Whether every cluster has launched or was canceled (nothing is left to launch)."""
        return not (self.state == PENDING).any()

    def live(self) -> np.ndarray:
        """Which threads run from the start (their cluster is RUNNING)."""
        return self.state[self.cluster_of] == RUNNING

    def cancel(self, device: int) -> int | None:
        """Cancel the next pending cluster of `device` for a try_cancel: its id, or None
        when no cluster of the device is pending (the request fails)."""
        cluster = self._next_pending(device)
        if cluster is not None:
            self.state[cluster] = CANCELED
        return cluster

    def observe(self, blocks: np.ndarray) -> None:
        """Blocks `blocks` decoded a failed request (after which another is undefined)."""
        self.observed_failure.update(int(b) for b in np.unique(blocks))

    def settle(self, live: np.ndarray) -> np.ndarray | None:
        """Running clusters none of whose threads is live are DONE; as many pending clusters
        launch (RUNNING). The threads to start, or None when none launched."""
        alive = np.bincount(self.cluster_of[live], minlength=self.state.size)
        finished = np.flatnonzero((self.state == RUNNING) & (alive == 0))
        if finished.size == 0:
            return None
        self.state[finished] = DONE
        launched = []
        for cluster in finished.tolist():
            following = self._next_pending(cluster // self.per_device)
            if following is not None:
                self.state[following] = RUNNING
                launched.append(following)
        if not launched:
            return None
        return np.isin(self.cluster_of, launched)

    def first_ctaid(self, cluster: int) -> tuple[int, int, int]:
        """%ctaid of the first CTA (cluster rank 0) of `cluster`, in its device's grid."""
        block = int(self.geometry.cluster_members[cluster, 0]) % self.geometry.device_blocks
        gx, gy, _ = self.geometry.grid
        return block % gx, block // gx % gy, block // (gx * gy)

    def _next_pending(self, device: int) -> int | None:
        first = device * self.per_device
        pending = np.flatnonzero(self.state[first:first + self.per_device] == PENDING)
        return None if pending.size == 0 else first + int(pending[0])
