"""Layouts of reduced, broadcast and transposed values: the `Reduce`, `Broadcast` and
`Transpose` expressions of layout inference.

Each function takes the layout of a value of `shape` and returns the layout of the result,
or None when no layout describes it. The results hold data where it already is: reducing
keeps every surviving element with the threads that held its row (threads whose dims
disappear become `Replicated` copies of one another); transposing renames dims; a
broadcast result reduces back to its operand's layout.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from smalti.tiling import canonical
from smalti.tiling.layouts import (
    WARPGROUP_SIZE,
    Layout,
    LayoutError,
    Replicated,
    Shape,
    TiledLayout,
    WGSplatLayout,
    WGStridedLayout,
    check_layout_fits,
)
from smalti.tiling.symbolic import Place, Placement, build, pad_tiles, placement, rename, trivial


def reduce_layout(layout: Layout, shape: Shape, axes: Sequence[int]) -> Layout | None:
    """The layout of `layout`'s value of `shape` reduced over `axes` (a splat if all)."""
    return _reduce(layout, tuple(shape), tuple(axes))


# Layouts are frozen values: each of these maps is memoised on its (hashable) arguments, as
# inference asks the same few questions for every op of a program.
@functools.lru_cache(maxsize=8192)
def _reduce(layout: Layout, shape: Shape, axes: tuple[int, ...]) -> Layout | None:
    axes_ = _axes(axes, len(shape))
    if not _fits(layout, shape):
        return None
    if not axes_:
        return layout
    kept_shape = tuple(s for d, s in enumerate(shape) if d not in axes_)
    match layout:
        case WGSplatLayout():
            return layout
        case _ if not kept_shape:
            return WGSplatLayout()
        case WGStridedLayout(vec=vec):
            leading = axes_ == tuple(range(len(axes_)))
            result = WGStridedLayout(vec)
            if leading and math.prod(kept_shape) % (WARPGROUP_SIZE * vec) == 0:
                return result if _fits(result, kept_shape) else None
            return None
        case TiledLayout():
            return _reduce_tiled(layout, shape, axes_)
    raise TypeError(f"not a layout: {layout!r}")


def broadcast_layout(layout: Layout, shape: Shape, new_shape: Shape,
                     axes: Sequence[int] | None = None) -> Layout | None:
    """The layout of `layout`'s value broadcast to `new_shape`; `axes` are the new dims.

    Without `axes` the new dims lead (as in `vector.broadcast`), and dims of size 1 that
    grow are stretched. Canonical layouts (`canonical.BROADCAST_TARGETS`) are preferred, so
    a WGMMA row or column vector broadcasts back to the WGMMA layout; otherwise the new
    dims are held in registers by the threads that held the operand.
    """
    return _broadcast(layout, tuple(shape), tuple(new_shape),
                      None if axes is None else tuple(axes))


@functools.lru_cache(maxsize=8192)
def _broadcast(layout: Layout, shape: Shape, new_shape: Shape, axes: tuple[int, ...] | None
               ) -> Layout | None:
    if axes is None:
        if len(new_shape) < len(shape):
            return None
        axes = range(len(new_shape) - len(shape))
    axes_ = _axes(axes, len(new_shape))
    kept = [d for d in range(len(new_shape)) if d not in axes_]
    if len(kept) != len(shape) or not _fits(layout, shape):
        return None
    stretched = [i for i, d in enumerate(kept) if shape[i] != new_shape[d]]
    if any(shape[i] != 1 for i in stretched):
        return None
    if stretched:
        squeezed = reduce_layout(layout, shape, stretched)
        if squeezed is None:
            return None
        others = [d for i, d in enumerate(kept) if i not in stretched]
        return broadcast_layout(squeezed, tuple(new_shape[d] for d in others), new_shape,
                                sorted({*axes_, *(kept[i] for i in stretched)}))
    match layout:
        case WGSplatLayout():
            return layout
        case WGStridedLayout(vec=vec):
            leading = axes_ == tuple(range(len(axes_)))
            if leading and math.prod(shape) % (WARPGROUP_SIZE * vec) == 0:
                return layout if _fits(layout, new_shape) else None
            return None
        case TiledLayout():
            return _broadcast_tiled(layout, shape, new_shape, axes_)
    raise TypeError(f"not a layout: {layout!r}")


def transpose_layout(layout: Layout, shape: Shape, permutation: Sequence[int]
                     ) -> Layout | None:
    """The layout of the transpose (result dim j = operand dim permutation[j]) of the
    value, with every thread holding exactly the elements it held (a free transpose)."""
    return _transpose(layout, tuple(shape), tuple(permutation))


@functools.lru_cache(maxsize=8192)
def _transpose(layout: Layout, shape: Shape, perm: tuple[int, ...]) -> Layout | None:
    if sorted(perm) != list(range(len(shape))) or not _fits(layout, shape):
        return None
    match layout:
        case WGSplatLayout():
            return layout
        case WGStridedLayout():
            return layout if perm == tuple(range(len(shape))) else None
        case TiledLayout():
            return _transpose_tiled(layout, shape, perm)
    raise TypeError(f"not a layout: {layout!r}")


def same_elements(a: Layout, b: Layout, shape: Shape) -> bool:
    """True when both layouts put every element in the same thread, register and slot."""
    return _same_elements(a, b, tuple(shape))


@functools.lru_cache(maxsize=8192)
def _same_elements(a: Layout, b: Layout, shape: Shape) -> bool:
    if not (_fits(a, shape) and _fits(b, shape)):
        return False
    if isinstance(a, WGSplatLayout) or isinstance(b, WGSplatLayout):
        return a == b
    ia, ib = a.element_index(shape), b.element_index(shape)
    return ia.shape == ib.shape and bool(np.array_equal(ia, ib))


def _reduce_tiled(layout: TiledLayout, shape: Shape, axes: tuple[int, ...]) -> Layout | None:
    rank = len(shape)
    entries, placed = placement(layout, rank)
    extents = {s: e for s, (_, _, e) in zip(entries, layout.tiling.tiled_entries(shape),
                                             strict=True)}
    names = {d: d - sum(a < d for a in axes) for d in range(rank) if d not in axes}

    def survive(place: Place) -> Place:
        if isinstance(place, Replicated) or place[0] not in axes:
            return rename(place, names)
        return Replicated(extents[place])

    vector = placed.vector
    target = Placement(tuple(map(survive, placed.warp)), tuple(map(survive, placed.lane)),
                       (0, 1, 1) if vector[0] in axes else rename(vector, names))  # type: ignore[arg-type]
    tiles = []
    for tile in layout.tiling.tiles:
        first = rank - len(tile)
        kept = tuple(t for i, t in enumerate(tile) if first + i not in axes)
        if kept:
            tiles.append(kept)
    digits = {rename(s, names) for s in entries if not trivial(s) and s[0] not in axes}
    return build(tuple(tiles), rank - len(axes), target, digits)  # type: ignore[arg-type]


def _broadcast_tiled(layout: TiledLayout, shape: Shape, new_shape: Shape,
                     axes: tuple[int, ...]) -> Layout | None:
    for candidate in canonical.BROADCAST_TARGETS:
        if (_fits(candidate, new_shape)
                and (reduced := reduce_layout(candidate, new_shape, axes)) is not None
                and same_elements(reduced, layout, shape)):
            return candidate
    rank, new_rank = len(shape), len(new_shape)
    entries, placed = placement(layout, rank)
    kept = [d for d in range(new_rank) if d not in axes]
    names = dict(enumerate(kept))
    tiles = []
    for tile in pad_tiles(layout.tiling.tiles, rank):
        widened = [1] * new_rank
        for d, t in enumerate(tile):
            widened[kept[d]] = t
        tiles.append(tuple(widened))
    target = Placement(tuple(rename(p, names) for p in placed.warp),
                       tuple(rename(p, names) for p in placed.lane),
                       rename(placed.vector, names))  # type: ignore[arg-type]
    digits = {rename(s, names) for s in entries if not trivial(s)}
    digits |= {(d, 1, None) for d in axes}
    result = build(tuple(tiles), new_rank, target, digits)  # type: ignore[arg-type]
    return result if result is not None and _fits(result, new_shape) else None


def _transpose_tiled(layout: TiledLayout, shape: Shape, perm: tuple[int, ...]
                     ) -> Layout | None:
    rank = len(shape)
    entries, placed = placement(layout, rank)
    names = {old: new for new, old in enumerate(perm)}
    tiles = tuple(tuple(tile[perm[j]] for j in range(rank))
                  for tile in pad_tiles(layout.tiling.tiles, rank))
    target = Placement(tuple(rename(p, names) for p in placed.warp),
                       tuple(rename(p, names) for p in placed.lane),
                       rename(placed.vector, names))  # type: ignore[arg-type]
    digits = {rename(s, names) for s in entries if not trivial(s)}
    result = build(tiles, rank, target, digits)  # type: ignore[arg-type]
    new_shape = tuple(shape[p] for p in perm)
    return result if result is not None and _fits(result, new_shape) else None


def _axes(axes: Sequence[int] | range, rank: int) -> tuple[int, ...]:
    given = tuple(axes)
    normalised = tuple(sorted({a % rank for a in given if -rank <= a < rank}))
    if len(normalised) != len(given):
        raise LayoutError(f"axes {list(axes)} are not distinct dims of a rank-{rank} array")
    return normalised


def _fits(layout: Layout, shape: Shape) -> bool:
    try:
        check_layout_fits(layout, shape)
    except LayoutError:
        return False
    return True
