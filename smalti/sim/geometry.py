"""Launch geometry: grid and block shapes, thread ids, and the special registers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

WARP_SIZE = 32


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
    """A launch of `grid` blocks of `block` threads; thread t is in block t // block_threads."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    @property
    def block_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads(self) -> int:
        return self.blocks * self.block_threads

    @cached_property
    def block_of(self) -> np.ndarray:
        """Linear block index of every thread."""
        return np.repeat(np.arange(self.blocks, dtype=np.int64), self.block_threads)

    @cached_property
    def _local(self) -> np.ndarray:
        return np.tile(np.arange(self.block_threads, dtype=np.int64), self.blocks)

    def special(self, name: str) -> np.ndarray | None:
        """Value (uint32 per thread, or a 0-d uint32) of special register `name`, or None."""
        nx, ny, _ = self.block
        gx, gy, _ = self.grid
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
            case "%ctaid.x":
                return (self.block_of % gx).astype(u32)
            case "%ctaid.y":
                return (self.block_of // gx % gy).astype(u32)
            case "%ctaid.z":
                return (self.block_of // (gx * gy)).astype(u32)
            case "%nctaid.x" | "%nctaid.y" | "%nctaid.z":
                return np.array(self.grid["xyz".index(name[-1])], u32)
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

    def describe(self, thread: int) -> str:
        """`block (x, y, z) thread (x, y, z)` of launch-wide thread id `thread`."""
        b, t = divmod(int(thread), self.block_threads)
        nx, ny, _ = self.block
        gx, gy, _ = self.grid
        block = (b % gx, b // gx % gy, b // (gx * gy))
        local = (t % nx, t // nx % ny, t // (nx * ny))
        return (f"block ({block[0]}, {block[1]}, {block[2]}) "
                f"thread ({local[0]}, {local[1]}, {local[2]})")
