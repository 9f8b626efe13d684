"""Launch geometry: grid, cluster and block shapes, thread ids, and the special registers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

WARP_SIZE = 32
MAX_CLUSTER = 16  # CTAs per cluster on sm_90 (8 portable, 16 with the non-portable opt-in)


def as_dim3(value: tuple[int, ...] | int, what: str) -> tuple[int, int, int]:
    """Normalise a grid or block size to three positive extents."""
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise ValueError(f"{what} must be 1 to 3 positive extents, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


def lane_mask(relation: str, lane: np.ndarray) -> np.ndarray:
    """%lanemask_REL: bit j set for the lanes j that stand in `relation` to each thread's lane."""
    below = (np.uint64(1) << lane) - np.uint64(1)  # lanes < lane
    own = np.uint64(1) << lane
    full = np.uint64(0xFFFFFFFF)
    masks = {"eq": own, "lt": below, "le": below | own, "gt": full & ~(below | own),
             "ge": full & ~below}
    return masks[relation].astype(np.uint32)


@dataclass(frozen=True)
class Geometry:
    """A launch of `grid` blocks of `block` threads, grouped in clusters of `cluster` blocks;
    thread t is in block t // block_threads (blocks numbered x fastest, as %ctaid).

    `devices` > 1: the same grid on each of several devices at once (smalti.sim.devices), the
    devices' blocks numbered one device after another: block b is block b % device_blocks of
    device b // device_blocks, and a device's blocks see only its own grid (%ctaid, clusters).
    """

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int] = (1, 1, 1)
    explicit_cluster: bool = False
    devices: int = 1

    def __post_init__(self) -> None:
        """Check the cluster shape against the grid (CUDA: the grid is a whole number of
        clusters) and the hardware limit."""
        if any(g % c for g, c in zip(self.grid, self.cluster, strict=True)):
            raise ValueError(f"grid {self.grid} is not a whole number of clusters "
                             f"{self.cluster}")
        if self.cluster_size > MAX_CLUSTER:
            raise ValueError(f"a cluster of {self.cluster_size} CTAs exceeds sm_90's "
                             f"{MAX_CLUSTER}")

    @property
    def block_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def device_blocks(self) -> int:
        """Blocks of one device's grid."""
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def blocks(self) -> int:
        """Blocks of the launch, every device's."""
        return self.devices * self.device_blocks

    @property
    def threads(self) -> int:
        return self.blocks * self.block_threads

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    @cached_property
    def _block_xyz(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """%ctaid.{x,y,z} of every block."""
        gx, gy, _ = self.grid
        b = np.arange(self.blocks, dtype=np.int64) % self.device_blocks
        return b % gx, b // gx % gy, b // (gx * gy)

    @cached_property
    def cluster_rank(self) -> np.ndarray:
        """%cluster_ctarank of every block: its x-fastest position inside its cluster."""
        (x, y, z), (cx, cy, cz) = self._block_xyz, self.cluster
        return x % cx + cx * (y % cy + cy * (z % cz))

    @cached_property
    def cluster_id(self) -> np.ndarray:
        """Linear (x-fastest) cluster index of every block."""
        (x, y, z), (cx, cy, cz) = self._block_xyz, self.cluster
        nx, ny = self.grid[0] // cx, self.grid[1] // cy
        per_device = self.device_blocks // self.cluster_size
        device = np.arange(self.blocks, dtype=np.int64) // self.device_blocks
        return x // cx + nx * (y // cy + ny * (z // cz)) + device * per_device

    @cached_property
    def cluster_members(self) -> np.ndarray:
        """(clusters, cluster_size): the block of each rank of each cluster."""
        members = np.empty((self.blocks // self.cluster_size, self.cluster_size), np.int64)
        members[self.cluster_id, self.cluster_rank] = np.arange(self.blocks)
        return members

    def peer(self, block: np.ndarray | int, rank: np.ndarray | int) -> np.ndarray:
        """The block of rank `rank` in the cluster of `block`."""
        return self.cluster_members[self.cluster_id[block], rank]

    @cached_property
    def block_of(self) -> np.ndarray:
        """Linear block index of every thread."""
        return np.repeat(np.arange(self.blocks, dtype=np.int64), self.block_threads)

    @cached_property
    def device_of(self) -> np.ndarray:
        """The device of every thread (all 0 in a launch on one device)."""
        return self.block_of // self.device_blocks

    @cached_property
    def _local(self) -> np.ndarray:
        return np.tile(np.arange(self.block_threads, dtype=np.int64), self.blocks)

    def special(self, name: str) -> np.ndarray | None:
        """Value (uint32 per thread, or a 0-d uint32) of special register `name`, or None."""
        nx, ny, _ = self.block
        u32 = np.uint32
        match name:
            case "%tid.x":
                return (self._local % nx).astype(u32)
            case "%tid.y":
                return (self._local // nx % ny).astype(u32)
            case "%tid.z":
                return (self._local // (nx * ny)).astype(u32)
            case "%ntid.x" | "%ntid.y" | "%ntid.z":
                return np.array(self.block["xyz".index(name[-1])], u32)
            case "%ctaid.x" | "%ctaid.y" | "%ctaid.z":
                return self._block_xyz["xyz".index(name[-1])][self.block_of].astype(u32)
            case "%nctaid.x" | "%nctaid.y" | "%nctaid.z":
                return np.array(self.grid["xyz".index(name[-1])], u32)
        cluster = self._cluster_special(name)
        if cluster is not None:
            return cluster
        match name:
            case "%laneid":
                return (self._local % WARP_SIZE).astype(u32)
            case "%warpid":
                return (self._local // WARP_SIZE).astype(u32)
            case "%nwarpid":
                return np.array(-(-self.block_threads // WARP_SIZE), u32)
            case "%lanemask_eq" | "%lanemask_le" | "%lanemask_lt" | "%lanemask_ge" | \
                    "%lanemask_gt":
                return lane_mask(name[-2:], (self._local % WARP_SIZE).astype(np.uint64))
        return None

    def _cluster_special(self, name: str) -> np.ndarray | None:
        """The cluster special registers (PTX ISA, "Special Registers": %cluster_ctaid ...)."""
        u32 = np.uint32
        axis = "xyz".index(name[-1]) if name[-2:] in (".x", ".y", ".z") else None
        per_block = None
        match name.rsplit(".", 1)[0] if axis is not None else name:
            case "%cluster_ctaid":
                per_block = self._block_xyz[axis] % self.cluster[axis]
            case "%cluster_nctaid":
                return np.array(self.cluster[axis], u32)
            case "%clusterid":
                per_block = self._block_xyz[axis] // self.cluster[axis]
            case "%nclusterid":
                return np.array(self.grid[axis] // self.cluster[axis], u32)
            case "%cluster_ctarank":
                per_block = self.cluster_rank
            case "%cluster_nctarank":
                return np.array(self.cluster_size, u32)
            case "%is_explicit_cluster":
                return np.array(int(self.explicit_cluster), u32)
        return None if per_block is None else per_block[self.block_of].astype(u32)

    def describe(self, thread: int) -> str:
        """`block (x, y, z) thread (x, y, z)` of launch-wide thread id `thread`."""
        b, t = divmod(int(thread), self.block_threads)
        device, b = divmod(b, self.device_blocks)
        nx, ny, _ = self.block
        gx, gy, _ = self.grid
        block = (b % gx, b // gx % gy, b // (gx * gy))
        local = (t % nx, t // nx % ny, t // (nx * ny))
        where = f"device {device} " if self.devices > 1 else ""
        return (f"{where}block ({block[0]}, {block[1]}, {block[2]}) "
                f"thread ({local[0]}, {local[1]}, {local[2]})")
