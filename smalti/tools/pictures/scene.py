"""A picture as data: rectangles and text in groups, shared by the SVG and PNG writers."""

from __future__ import annotations

from dataclasses import dataclass, field

from smalti.tools.pictures.font import GLYPH_ADVANCE


@dataclass(frozen=True)
class Rect:
    """A filled axis-aligned rectangle (pixels, y down)."""

    x: float
    y: float
    width: float
    height: float
    fill: str
    css_class: str | None = None


@dataclass(frozen=True)
class Text:
    """One line of monospace text; (x, y) is the baseline point its `anchor` names."""

    x: float
    y: float
    text: str
    size: float
    anchor: str = "start"
    fill: str = "#000000"
    css_class: str | None = None


@dataclass(frozen=True)
class Group:
    """Items drawn shifted by (dx, dy), with SVG attributes (e.g. data-row) and a tooltip."""

    items: tuple[Item, ...]
    dx: float = 0.0
    dy: float = 0.0
    attributes: tuple[tuple[str, str], ...] = ()
    tooltip: str | None = None


Item = Rect | Text | Group


@dataclass(frozen=True)
class Scene:
    """A whole picture: its size, a white background and the items on it."""

    width: int
    height: int
    items: tuple[Item, ...] = field(default=())


def png_scale(size: float) -> int:
    """How many pixels wide one font-bitmap pixel is when text of `size` is rasterised."""
    return max(1, round(size / 6))


def text_width(text: str, size: float) -> float:
    """An upper bound of the drawn width of `text`, in SVG (monospace) and in PNG."""
    per_char = max(0.62 * size, GLYPH_ADVANCE * png_scale(size))
    return len(text) * per_char
