"""Shape-free view of a tiled layout: which index digit each tiled dim carries.

A tiled dim of a `Tiling` is identified, without knowing the array shape, by the array
dim it comes from, its multiplier and its extent (None where the extent depends on the
shape: the outermost piece of each dim). Two tiled layouts that send the same digits to
the same warp, lane and vector places hold the same elements, whatever their tilings; the
layout algebra rewrites tilings and then finds the digits again by these symbols.
"""

from __future__ import annotations

from dataclasses import dataclass

from smalti.tiling.layouts import Dim, LayoutError, Replicated, TiledLayout, Tiling

Symbol = tuple[int, int, int | None]  # (array dim, multiplier, extent or None)
Place = Symbol | Replicated


def symbolic_entries(tiling: Tiling, rank: int) -> list[Symbol]:
    """The tiled dims of `tiling` over an array of `rank` dims, as symbols, in order."""
    entries: list[Symbol] = [(d, 1, None) for d in range(rank)]
    for tile in tiling.tiles:
        k = len(tile)
        if k > rank:
            raise LayoutError(f"tile {list(tile)} has more dimensions than rank {rank}")
        head, tail = entries[:-k], entries[-k:]
        outer, inner = [], []
        for (d, mult, extent), t in zip(tail, tile, strict=True):
            if extent is not None and extent % t:
                raise LayoutError(f"tile {list(tile)} does not divide a tiled dim of {extent}")
            outer.append((d, mult * t, None if extent is None else extent // t))
            inner.append((d, mult, t))
        entries = head + outer + inner
    return entries


def trivial(symbol: Symbol) -> bool:
    """A tiled dim of extent 1 carries no digit."""
    return symbol[2] == 1


@dataclass(frozen=True)
class Placement:
    """Where a tiled layout puts each digit: warp and lane parts (major first) and vector."""

    warp: tuple[Place, ...]
    lane: tuple[Place, ...]
    vector: Symbol


def placement(layout: TiledLayout, rank: int) -> tuple[list[Symbol], Placement]:
    """The symbols of `layout`'s tiled dims and where the layout places them."""
    entries = symbolic_entries(layout.tiling, rank)

    def place(dim: Dim) -> Place:
        if isinstance(dim, Replicated):
            return dim
        if -dim > len(entries):
            raise LayoutError(f"dim {dim} is out of range for a tiled shape of rank {len(entries)}")
        return entries[dim]

    return entries, Placement(tuple(place(d) for d in layout.warp_dims),
                              tuple(place(d) for d in layout.lane_dims),
                              place(layout.vector_dim))  # type: ignore[arg-type]


def rename(place: Place, dims: dict[int, int]) -> Place:
    """The same digit with its array dim renamed (a Replicated factor stays as it is)."""
    if isinstance(place, Replicated):
        return place
    d, mult, extent = place
    return (dims[d], mult, extent)


def build(tiles: tuple[tuple[int, ...], ...], rank: int, target: Placement,
          digits: set[Symbol]) -> TiledLayout | None:
    """The tiled layout over `tiles` that places digits as `target` says, if it exists.

    `digits` are the non-trivial symbols the new tiling must carry, no more and no fewer
    (so that the remaining ones, the register dims, hold the same elements); the tiling is
    simplified first and used as given where the simplification loses a digit.
    """
    for candidate in dict.fromkeys((simplify(tiles), tiles)):
        layout = _build_exact(candidate, rank, target, digits)
        if layout is not None:
            return layout
    return None


def _build_exact(tiles: tuple[tuple[int, ...], ...], rank: int, target: Placement,
                 digits: set[Symbol]) -> TiledLayout | None:
    try:
        entries = symbolic_entries(Tiling(tiles), rank)
    except LayoutError:
        return None
    if {s for s in entries if not trivial(s)} != digits:
        return None
    position = {s: i - len(entries) for i, s in enumerate(entries) if not trivial(s)}

    def dims(places: tuple[Place, ...]) -> tuple[Dim, ...] | None:
        out: list[Dim] = []
        for place in places:
            if isinstance(place, Replicated):
                if place.times == 1:
                    continue
                if out and isinstance(out[-1], Replicated):
                    out[-1] = Replicated(out[-1].times * place.times)
                else:
                    out.append(place)
            elif not trivial(place):
                if place not in position:
                    return None
                out.append(position[place])
        return tuple(out)

    warp, lane = dims(target.warp), dims(target.lane)
    if warp is None or lane is None:
        return None
    if not trivial(target.vector):
        if target.vector not in position:
            return None
        return TiledLayout(Tiling(tiles), warp, lane, position[target.vector])
    used = {d for d in (*warp, *lane) if isinstance(d, int)}
    spare = [i - len(entries) for i, s in enumerate(entries)
             if trivial(s) and i - len(entries) not in used]
    if spare:
        return TiledLayout(Tiling(tiles), warp, lane, spare[-1])
    return _build_exact((*tiles, (1,)), rank, target, digits)


def pad_tiles(tiles: tuple[tuple[int, ...], ...], rank: int) -> tuple[tuple[int, ...], ...]:
    """Every tile widened to `rank` dims with leading 1s (the same digits when nested)."""
    return tuple((1,) * (rank - len(tile)) + tuple(tile) for tile in tiles)


def simplify(tiles: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    """Drop leading 1s no later tile needs, and tiles that repeat their predecessor's tail."""
    stripped: list[tuple[int, ...]] = []
    needed = 1
    for tile in reversed(tiles):
        start = 0
        while start < len(tile) - needed and tile[start] == 1:
            start += 1
        stripped.append(tuple(tile[start:]))
        needed = max(needed, len(tile) - start)
    stripped.reverse()
    kept: list[tuple[int, ...]] = []
    for tile in stripped:
        if kept and len(tile) <= len(kept[-1]) and kept[-1][len(kept[-1]) - len(tile):] == tile:
            continue
        kept.append(tile)
    return tuple(kept)
