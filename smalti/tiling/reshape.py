"""Tiled layouts across reshapes that only add or drop unit dims (`x[:, 0]` of a loaded
(n, 1) vector, `v[:, None]`): the same elements in the same threads and registers, with the
tiling and the warp, lane and vector dims renumbered around the unit dims.

Every tile of a tiling covers a suffix of the array's dims, so a unit dim inserted at
position p joins each tile that covers the dims on both sides of it (as a tile entry of 1),
and a unit dim removed leaves the tiles that held it. The result is checked against the
original element by element: a reshape this cannot express returns None.
"""

from __future__ import annotations

import numpy as np

from smalti.tiling.layouts import LayoutError, Replicated, Shape, TiledLayout, Tiling


def reshape_tiled(layout: TiledLayout, shape: Shape, new_shape: Shape) -> TiledLayout | None:
    """`layout` of `shape` as a layout of `new_shape`, when the two differ only in unit dims
    and the elements stay where they are; else None."""
    shape, new_shape = tuple(shape), tuple(new_shape)
    if shape == new_shape:
        return layout
    if [n for n in shape if n != 1] != [n for n in new_shape if n != 1]:
        return None
    current: TiledLayout | None = layout
    current_shape = shape
    for position in reversed([p for p, n in enumerate(shape) if n == 1]):
        squeezed = current_shape[:position] + current_shape[position + 1:]
        dims = {d: d - (d > position) for d in range(len(current_shape)) if d != position}
        current = _moved(current, current_shape, squeezed,
                         _without(current.tiling, position, len(current_shape)), dims)
        if current is None:
            return None
        current_shape = squeezed
    for position in [p for p, n in enumerate(new_shape) if n == 1]:
        grown = (*current_shape[:position], 1, *current_shape[position:])
        dims = {d: d + (d >= position) for d in range(len(current_shape))}
        current = _moved(current, current_shape, grown,
                         _with(current.tiling, position, len(current_shape)), dims)
        if current is None:
            return None
        current_shape = grown
    return current if _same_elements(layout, shape, current, new_shape) else None


def _without(tiling: Tiling, position: int, rank: int) -> Tiling | None:
    """The tiling without unit dim `position` (of `rank` dims); None if a tile splits it."""
    tiles = []
    for tile in tiling.tiles:
        start = rank - len(tile)
        if position < start:
            tiles.append(tile)
            continue
        if tile[position - start] != 1:
            return None
        rest = tile[:position - start] + tile[position - start + 1:]
        if rest:
            tiles.append(rest)
    return Tiling(tuple(tiles))


def _with(tiling: Tiling, position: int, rank: int) -> Tiling:
    """The tiling with a unit dim inserted before dim `position` (of `rank` dims): every tile
    reaching past it takes a 1 there."""
    tiles = []
    for tile in tiling.tiles:
        start = rank - len(tile)
        tiles.append(tile if position <= start else
                     (*tile[:position - start], 1, *tile[position - start:]))
    return Tiling(tuple(tiles))


def _moved(layout: TiledLayout, shape: Shape, new_shape: Shape, tiling: Tiling | None,
           dims: dict[int, int]) -> TiledLayout | None:
    """`layout` with `tiling` for `new_shape`: its warp, lane and vector dims pointed at the
    tiled dims of the new shape that hold the same (array dim, multiplier, extent); `dims`
    maps the array dims of `shape` to those of `new_shape` (a dropped one is absent)."""
    if tiling is None:
        return None
    try:
        old, new = layout.tiling.tiled_entries(shape), tiling.tiled_entries(new_shape)
    except LayoutError:
        return None

    def key(entries: list[tuple[int, int, int]], index: int) -> tuple[object, ...]:
        dim, mult, extent = entries[index]
        return (dims.get(dim) if entries is old else dim, mult, extent)

    new_keys = [key(new, i) for i in range(len(new))]

    def renumber(dim: int | Replicated) -> int | Replicated | None:
        if isinstance(dim, Replicated):
            return dim
        wanted = key(old, len(old) + dim)
        if wanted[0] is None:  # an entry of a dropped unit dim: any unit entry will do
            matches = [i for i, (_, _, extent) in enumerate(new) if extent == 1]
        else:
            matches = [i for i, k in enumerate(new_keys) if k == wanted]
        return matches[0] - len(new) if matches else None

    warp = tuple(renumber(d) for d in layout.warp_dims)
    lane = tuple(renumber(d) for d in layout.lane_dims)
    vector = renumber(layout.vector_dim)
    if None in warp or None in lane or vector is None:
        return None
    try:
        return TiledLayout(tiling, warp, lane, vector)
    except LayoutError:
        return None


def _same_elements(layout: TiledLayout, shape: Shape, other: TiledLayout, other_shape: Shape
                   ) -> bool:
    """Whether both put every element (unit dims aside) in the same thread, register and
    slot."""
    try:
        a, b = layout.element_index(shape), other.element_index(other_shape)
    except LayoutError:
        return False
    keep_a = [d for d, n in enumerate(shape) if n != 1]
    keep_b = [d for d, n in enumerate(other_shape) if n != 1]
    return a.shape[:3] == b.shape[:3] and np.array_equal(a[..., keep_a], b[..., keep_b])
