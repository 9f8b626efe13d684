"""Layout expressions: how one value's layout follows from another's through an op.

Each expression maps a source layout forward to the target's, and, where the map is
invertible, a target layout back to the source's. `None` means no layout exists.
The layout algebra itself lives in smalti.tiling; these only name and orient it.
"""

from __future__ import annotations

from dataclasses import dataclass

from smalti.tiling import (
    Layout,
    TiledLayout,
    WGSplatLayout,
    WGStridedLayout,
    broadcast_layout,
    check_layout_fits,
    reduce_layout,
    transpose_layout,
)
from smalti.tiling.layouts import LayoutError
from smalti.tiling.reshape import reshape_tiled

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Reduce:
    """Reduce `axes` of a source of `shape` (vector.multi_reduction)."""

    shape: Shape
    axes: tuple[int, ...]
    invertible = False

    def forward(self, layout: Layout) -> Layout | None:
        return reduce_layout(layout, self.shape, self.axes)

    def backward(self, layout: Layout) -> Layout | None:
        del layout
        return None  # many sources reduce to one layout: left to the search

    def source_candidates(self, target: Layout) -> list[Layout]:
        """Source layouts worth trying once the result's layout is known."""
        candidate = broadcast_layout(target, _reduced(self.shape, self.axes), self.shape,
                                     self.axes)
        return [candidate] if candidate is not None and self.forward(candidate) == target else []

    def describe(self) -> str:
        return f"reduction of dims {list(self.axes)} of {list(self.shape)}"


@dataclass(frozen=True)
class Unbroadcast(Reduce):
    """The operand of a broadcast to `shape` along the new dims `axes`, from the result's
    layout: its reduction over them (every thread then holds the operand elements of the
    result elements it holds, so the broadcast moves no data)."""

    def describe(self) -> str:
        return (f"operand of the broadcast to {list(self.shape)} along dims "
                f"{list(self.axes)}")


@dataclass(frozen=True)
class Broadcast:
    """Broadcast a source of `shape` to `new_shape`: `axes` are the dims it adds (leading,
    as in vector.broadcast); `stretched` are its size-1 dims that grow."""

    shape: Shape
    new_shape: Shape
    axes: tuple[int, ...]
    stretched: tuple[int, ...] = ()

    @property
    def invertible(self) -> bool:
        return not self.stretched

    def forward(self, layout: Layout) -> Layout | None:
        if self.stretched:
            return self._stretched_forward(layout)
        return broadcast_layout(layout, self.shape, self.new_shape, self.axes)

    def _stretched_forward(self, layout: Layout) -> Layout | None:
        """Only a splat survives stretching a size-1 dim (the elements are all copies)."""
        return layout if isinstance(layout, WGSplatLayout) else None

    def backward(self, layout: Layout) -> Layout | None:
        source = reduce_layout(layout, self.new_shape, self.axes)
        return source if source is not None and self.forward(source) == layout else None

    def source_candidates(self, target: Layout) -> list[Layout]:
        source = self.backward(target) if self.invertible else None
        return [source] if source is not None else []

    def describe(self) -> str:
        return f"broadcast of {list(self.shape)} to {list(self.new_shape)}"


@dataclass(frozen=True)
class Transpose:
    """Permute the dims of a source of `shape`."""

    shape: Shape
    permutation: tuple[int, ...]

    invertible = True

    def forward(self, layout: Layout) -> Layout | None:
        return transpose_layout(layout, self.shape, self.permutation)

    def backward(self, layout: Layout) -> Layout | None:
        inverse = tuple(self.permutation.index(i) for i in range(len(self.permutation)))
        new_shape = tuple(self.shape[p] for p in self.permutation)
        return transpose_layout(layout, new_shape, inverse)

    def source_candidates(self, target: Layout) -> list[Layout]:
        source = self.backward(target)
        return [source] if source is not None else []

    def describe(self) -> str:
        return f"transpose {list(self.permutation)} of {list(self.shape)}"


@dataclass(frozen=True)
class Reshape:
    """The same elements, row-major, in `new_shape` (vector.shape_cast)."""

    shape: Shape
    new_shape: Shape

    invertible = True

    def forward(self, layout: Layout) -> Layout | None:
        return reshape_layout(layout, self.shape, self.new_shape)

    def backward(self, layout: Layout) -> Layout | None:
        return reshape_layout(layout, self.new_shape, self.shape)

    def source_candidates(self, target: Layout) -> list[Layout]:
        source = self.backward(target)
        return [source] if source is not None else []

    def describe(self) -> str:
        return f"reshape of {list(self.shape)} to {list(self.new_shape)}"


Expression = Reduce | Unbroadcast | Broadcast | Transpose | Reshape


def reshape_layout(layout: Layout, shape: Shape, new_shape: Shape) -> Layout | None:
    """Splat and strided layouts depend only on the row-major order, so they survive a
    reshape that keeps them fitting; tiled layouts survive reshapes of unit dims only."""
    match layout:
        case WGSplatLayout():
            return layout
        case WGStridedLayout():
            try:
                check_layout_fits(layout, new_shape)
            except LayoutError:
                return None
            return layout
        case TiledLayout():
            return reshape_tiled(layout, shape, new_shape)
    return None


def _reduced(shape: Shape, axes: tuple[int, ...]) -> Shape:
    return tuple(s for i, s in enumerate(shape) if i not in axes)
