"""Register layouts of warpgroup-owned arrays: which thread and register hold each element.

A layout is shape-free: it is applied to the shape of a vector value. Every layout gives
the same two views of itself:

* `element_index(shape)`: a numpy table [thread, register, slot] -> element index, used by
  tests (against the PTX ISA's fragment figures) and by anything that needs the full map;
* `distribution(shape)`: the same map in the separable form the lowering needs,
  index(t, r, s) = thread_part(t) + register_origin(r) + s * vector_step, where
  thread_part is a sum of `ThreadTerm`s that PTX computes once per thread.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

WARPGROUP_SIZE = 128
WARP_SIZE = 32
WARPS_PER_WARPGROUP = WARPGROUP_SIZE // WARP_SIZE

Shape = tuple[int, ...]


class LayoutError(ValueError):
    """A layout does not apply to a shape, or a layout value is malformed."""


@dataclass(frozen=True)
class ThreadTerm:
    """index[dim] += ((thread // divisor) % modulus) * scale, for a thread of the warpgroup."""

    dim: int
    divisor: int
    modulus: int
    scale: int

    def evaluate(self, threads: np.ndarray) -> np.ndarray:
        return ((threads // self.divisor) % self.modulus) * self.scale


@dataclass(frozen=True)
class Distribution:
    """A layout applied to one shape, in separable form (see the module docstring).

    `separable` is False when thread part + register origin can carry from one dimension
    into the next (a strided layout over a ragged row length); then the lowering computes
    each register's index from the flat position instead of adding the parts.
    """

    shape: Shape
    thread_terms: tuple[ThreadTerm, ...]
    register_origins: tuple[tuple[int, ...], ...]
    vector_length: int
    vector_dim: int
    vector_step: int
    separable: bool = True
    # Bits of the thread index (0..127) over which threads hold copies of the same data: the
    # thread whose index has none of them set holds the first copy (the one a store writes).
    replica_mask: int = 0

    @property
    def num_registers(self) -> int:
        return len(self.register_origins)


@dataclass(frozen=True)
class Tiling:
    """Multi-level tiling: each tile splits the trailing dimensions of the previous level."""

    tiles: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        for tile in self.tiles:
            if not tile or any(t <= 0 for t in tile):
                raise LayoutError(f"tile {list(tile)} must be a non-empty list of positive sizes")

    def tiled_entries(self, shape: Shape) -> list[tuple[int, int, int]]:
        """(original dim, multiplier, extent) of every dimension of the tiled shape."""
        entries = [(d, 1, size) for d, size in enumerate(shape)]
        for tile in self.tiles:
            k = len(tile)
            if k > len(shape):
                raise LayoutError(f"tile {list(tile)} has more dimensions than shape {list(shape)}")
            head, tail = entries[:-k], entries[-k:]
            outer, inner = [], []
            for (d, mult, extent), t in zip(tail, tile, strict=True):
                if extent % t:
                    raise LayoutError(
                        f"tile {list(tile)} does not divide shape {list(shape)} (tiling "
                        f"{[list(t) for t in self.tiles]})"
                    )
                outer.append((d, mult * t, extent // t))
                inner.append((d, mult, t))
            entries = head + outer + inner
        return entries

    def tile_shape(self, shape: Shape) -> Shape:
        return tuple(extent for _, _, extent in self.tiled_entries(shape))


@dataclass(frozen=True)
class Replicated:
    """A factor of the warp or lane index over which every thread holds the same data."""

    times: int

    def __post_init__(self) -> None:
        if self.times <= 0:
            raise LayoutError(f"replication factor must be positive, got {self.times}")


Dim = int | Replicated


@dataclass(frozen=True)
class TiledLayout:
    """Tiled dims of the array mapped to the 4 warps, the 32 lanes and the register vector.

    Dims are negative indices into the tiled shape. Warp and lane dims are listed from the
    most significant to the least significant part of the warp (lane) index.
    """

    tiling: Tiling
    warp_dims: tuple[Dim, ...]
    lane_dims: tuple[Dim, ...]
    vector_dim: int

    def __post_init__(self) -> None:
        named = [d for d in (*self.warp_dims, *self.lane_dims) if isinstance(d, int)]
        named.append(self.vector_dim)
        if any(d >= 0 for d in named):
            raise LayoutError("tiled layout dims must be negative indices into the tiled shape")
        if len(set(named)) != len(named):
            raise LayoutError(f"tiled layout uses a dim twice: {named}")

    def _entry(self, entries: list[tuple[int, int, int]], dim: Dim) -> tuple[int, int, int]:
        if isinstance(dim, Replicated):
            return (-1, 0, dim.times)
        if -dim > len(entries):
            raise LayoutError(f"dim {dim} is out of range for a tiled shape of rank {len(entries)}")
        return entries[dim]

    def distribution(self, shape: Shape) -> Distribution:
        return _distribution(self, tuple(shape))

    def _distribution(self, shape: Shape) -> Distribution:
        entries = self.tiling.tiled_entries(shape)
        warp = [self._entry(entries, d) for d in self.warp_dims]
        lane = [self._entry(entries, d) for d in self.lane_dims]
        if math.prod(e for _, _, e in warp) != WARPS_PER_WARPGROUP:
            raise LayoutError(f"warp dims of shape {list(shape)} span "
                              f"{math.prod(e for _, _, e in warp)} warps, not 4")
        if math.prod(e for _, _, e in lane) != WARP_SIZE:
            raise LayoutError(f"lane dims of shape {list(shape)} span "
                              f"{math.prod(e for _, _, e in lane)} lanes, not 32")
        terms: list[ThreadTerm] = []
        replica_mask = 0
        for group, base in ((lane, 1), (warp, WARP_SIZE)):
            divisor = base
            for d, mult, extent in reversed(group):
                if d >= 0 and extent > 1:
                    terms.append(ThreadTerm(d, divisor, extent, mult))
                elif d < 0:
                    replica_mask |= (extent - 1) * divisor
                divisor *= extent
        thread_positions = {len(entries) + d for d in (*self.warp_dims, *self.lane_dims)
                            if isinstance(d, int)}
        vector_position = len(entries) + self.vector_dim
        register_entries = [e for i, e in enumerate(entries)
                            if i not in thread_positions and i != vector_position]
        origins = []
        for coords in np.ndindex(*(e for _, _, e in register_entries)):
            index = [0] * len(shape)
            for (d, mult, _), c in zip(register_entries, coords, strict=True):
                index[d] += c * mult
            origins.append(tuple(index))
        vd, vmult, vlen = entries[self.vector_dim]
        return Distribution(tuple(shape), tuple(terms), tuple(origins), vlen, vd, vmult,
                            replica_mask=replica_mask)

    def element_index(self, shape: Shape) -> np.ndarray:
        return _element_index(self.distribution(shape))

    def owners(self, shape: Shape) -> np.ndarray:
        """[*shape, copy] -> (thread, register, slot): the inverse of `element_index`."""
        return _owners(self.element_index(shape), shape)


@dataclass(frozen=True)
class WGStridedLayout:
    """Flatten the array, then deal out `vec` consecutive elements per thread, round-robin."""

    vec: int

    def __post_init__(self) -> None:
        if self.vec <= 0:
            raise LayoutError(f"strided layout vector length must be positive, got {self.vec}")

    def check_shape(self, shape: Shape) -> None:
        size = math.prod(shape)
        if not shape or shape[-1] % self.vec or size % (WARPGROUP_SIZE * self.vec):
            raise LayoutError(
                f"strided layout with vec = {self.vec} needs the last dim to be a multiple of "
                f"{self.vec} and {WARPGROUP_SIZE * self.vec} to divide the element count; "
                f"shape {list(shape)} is neither"
            )

    def distribution(self, shape: Shape) -> Distribution:
        return _distribution(self, tuple(shape))

    def _distribution(self, shape: Shape) -> Distribution:
        self.check_shape(shape)
        strides = _row_major_strides(shape)
        terms = []
        for d, (size, stride) in enumerate(zip(shape, strides, strict=True)):
            term = (ThreadTerm(d, 1, size // self.vec, self.vec) if stride == 1
                    else ThreadTerm(d, stride // self.vec, size, 1))
            if term.divisor < WARPGROUP_SIZE and term.modulus > 1:  # else always 0
                terms.append(term)
        chunk = WARPGROUP_SIZE * self.vec
        origins = tuple(tuple(int(i) for i in np.unravel_index(r * chunk, shape))
                        for r in range(math.prod(shape) // chunk))
        thread_max = [0] * len(shape)
        for term in terms:
            thread_max[term.dim] += max(term.evaluate(np.arange(WARPGROUP_SIZE)))
        separable = all(o[d] + thread_max[d] < shape[d] for o in origins for d in range(len(shape)))
        return Distribution(tuple(shape), tuple(terms), origins, self.vec, len(shape) - 1, 1,
                            separable)

    def element_index(self, shape: Shape) -> np.ndarray:
        self.check_shape(shape)
        t = np.arange(WARPGROUP_SIZE)[:, None, None]
        r = np.arange(math.prod(shape) // (WARPGROUP_SIZE * self.vec))[None, :, None]
        s = np.arange(self.vec)[None, None, :]
        flat = (r * WARPGROUP_SIZE + t) * self.vec + s
        return unravel(flat, shape)

    def owners(self, shape: Shape) -> np.ndarray:
        """[*shape, 1] -> (thread, register, slot): the inverse of `element_index`."""
        return _owners(self.element_index(shape), shape)


@dataclass(frozen=True)
class WGSplatLayout:
    """One value, held by every thread in a single register."""

    def check_shape(self, shape: Shape) -> None:
        del shape

    def element_index(self, shape: Shape) -> np.ndarray:
        """Every thread's one register holds the value, written as element (0, ..., 0)."""
        return np.zeros((WARPGROUP_SIZE, 1, 1, len(shape)), dtype=np.int64)

    def owners(self, shape: Shape) -> np.ndarray:
        """Every element equals the splat value, so every thread owns it (register 0, slot 0)."""
        copies = np.zeros((WARPGROUP_SIZE, 3), dtype=np.int64)
        copies[:, 0] = np.arange(WARPGROUP_SIZE)
        return np.broadcast_to(copies, (*shape, WARPGROUP_SIZE, 3)).copy()


Layout = TiledLayout | WGStridedLayout | WGSplatLayout


def check_layout_fits(layout: Layout, shape: Shape) -> None:
    """Raise LayoutError unless `layout` applies to an array of `shape`."""
    problem = _misfit(layout, tuple(shape))
    if problem is not None:
        raise LayoutError(problem)


# Layouts and shapes are frozen values, and inference asks about the same few pairs again
# and again (every value of a class, every expression through it): both questions are
# memoised. A Distribution is immutable, so one object can be shared by every caller.
@functools.lru_cache(maxsize=4096)
def _distribution(layout: TiledLayout | WGStridedLayout, shape: Shape) -> Distribution:
    return layout._distribution(shape)


@functools.lru_cache(maxsize=16384)
def _misfit(layout: Layout, shape: Shape) -> str | None:
    """Why `layout` does not apply to `shape`, or None when it does."""
    try:
        match layout:
            case TiledLayout():
                layout.distribution(shape)
            case WGStridedLayout() | WGSplatLayout():
                layout.check_shape(shape)
    except LayoutError as error:
        return str(error)
    return None


def unravel(flat: np.ndarray, shape: Shape) -> np.ndarray:
    """Row-major multi-indices of `flat` (any shape), stacked on a new last axis.

    Goes through a 1-D array: numpy 2.4's `unravel_index` returns wrong indices for some
    multi-dimensional inputs (e.g. a (128, 128, 1) array of offsets into (128, 128))."""
    flat = np.asarray(flat)
    parts = np.unravel_index(flat.reshape(-1), shape)
    return np.stack(parts, axis=-1).reshape(*flat.shape, len(shape))


def _row_major_strides(shape: Shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return tuple(reversed(strides))


def _element_index(dist: Distribution) -> np.ndarray:
    threads = np.arange(WARPGROUP_SIZE)
    thread_part = np.zeros((WARPGROUP_SIZE, len(dist.shape)), dtype=np.int64)
    for term in dist.thread_terms:
        thread_part[:, term.dim] += term.evaluate(threads)
    origins = np.array(dist.register_origins, dtype=np.int64).reshape(-1, len(dist.shape))
    slots = np.zeros((dist.vector_length, len(dist.shape)), dtype=np.int64)
    slots[:, dist.vector_dim] = np.arange(dist.vector_length) * dist.vector_step
    return thread_part[:, None, None, :] + origins[None, :, None, :] + slots[None, None, :, :]


def _owners(index: np.ndarray, shape: Shape) -> np.ndarray:
    """Invert a [thread, register, slot] -> element table: each element's holders, in order.

    Tiled layouts replicate uniformly, so every element has the same number of holders;
    anything else is not a layout and raises LayoutError.
    """
    size = math.prod(shape)
    flat = np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), shape).ravel()
    counts = np.bincount(flat, minlength=size)
    copies = int(counts[0]) if size else 0
    if size and (copies == 0 or np.any(counts != copies)):
        raise LayoutError(f"layout does not hold every element of shape {list(shape)} "
                          "equally often")
    order = np.argsort(flat, kind="stable")
    holders = unravel(order, index.shape[:-1])
    return holders.reshape(*shape, copies, 3)


WGMMA_LAYOUT = TiledLayout(
    Tiling(((64, 8), (16, 8), (8, 8), (2,))),
    warp_dims=(-7,),
    lane_dims=(-3, -2),
    vector_dim=-1,
)
"""The wgmma .m64nNk16 f32 accumulator (PTX ISA, "Matrix fragments for wgmma.mma_async")."""
