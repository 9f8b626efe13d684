"""Write a scene as SVG text (no dependencies; monospace text, one <g> per group)."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from smalti.tools.pictures.scene import Group, Item, Rect, Scene, Text

_STYLE = "text { font-family: ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace; }"


def scene_to_svg(scene: Scene) -> str:
    """The SVG document of `scene`."""
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{scene.width}" '
        f'height="{scene.height}" viewBox="0 0 {scene.width} {scene.height}">',
        f"<style>{_STYLE}</style>",
        f'<rect x="0" y="0" width="{scene.width}" height="{scene.height}" fill="#ffffff"/>',
    ]
    lines.extend(_item(item) for item in scene.items)
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def _item(item: Item) -> str:
    match item:
        case Rect():
            return _rect(item)
        case Text():
            return _text(item)
        case Group():
            return _group(item)
    raise TypeError(f"not a scene item: {item!r}")


def _number(value: float) -> str:
    """A coordinate without a needless fraction (12 rather than 12.0)."""
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _class(css_class: str | None) -> str:
    return f" class={quoteattr(css_class)}" if css_class else ""


def _rect(rect: Rect) -> str:
    return (f'<rect{_class(rect.css_class)} x="{_number(rect.x)}" y="{_number(rect.y)}" '
            f'width="{_number(rect.width)}" height="{_number(rect.height)}" '
            f'fill="{rect.fill}"/>')


def _text(text: Text) -> str:
    anchor = "" if text.anchor == "start" else f' text-anchor="{text.anchor}"'
    return (f'<text{_class(text.css_class)} x="{_number(text.x)}" y="{_number(text.y)}" '
            f'font-size="{_number(text.size)}" fill="{text.fill}"{anchor}>'
            f"{escape(text.text)}</text>")


def _group(group: Group) -> str:
    attributes = "".join(f" {name}={quoteattr(value)}" for name, value in group.attributes)
    if group.dx or group.dy:
        attributes += f' transform="translate({_number(group.dx)},{_number(group.dy)})"'
    body = [f"<title>{escape(group.tooltip)}</title>"] if group.tooltip else []
    body.extend(_item(item) for item in group.items)
    return f"<g{attributes}>" + "".join(body) + "</g>"
