"""Codecs between layout values (smalti.tiling) and their MLIR attributes.

    #smalti.splat
    #smalti.strided<vec = 4>
    #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2],
                  vector = -1>            (a replicated warp or lane factor is written r4)

and between SMEM transforms (smalti.tiling.smem) and theirs:

    #smalti.tile<[64, 64]>   #smalti.swizzle<128>   #smalti.transpose<[1, 0]>

The attributes are opaque to MLIR (the smalti dialect is unregistered), so parsing and
printing of their bodies happens here.
"""

from __future__ import annotations

import functools
import re

from jaxlib.mlir import ir

from smalti.tiling import (
    CANONICAL_LAYOUTS,
    Layout,
    LayoutError,
    Replicated,
    TiledLayout,
    Tiling,
    WGSplatLayout,
    WGStridedLayout,
)
from smalti.tiling.smem import SwizzleTransform, TileTransform, Transform, TransposeTransform

NAMESPACE = "smalti"


class LayoutAttrError(ValueError):
    """An attribute that should be a smalti layout is not one, or is malformed."""


def layout_to_text(layout: Layout) -> str:
    """The attribute body, e.g. 'strided<vec = 4>' (without the '#smalti.' prefix)."""
    match layout:
        case WGSplatLayout():
            return "splat"
        case WGStridedLayout(vec=vec):
            return f"strided<vec = {vec}>"
        case TiledLayout(tiling=tiling, warp_dims=warp, lane_dims=lane, vector_dim=vector):
            tiles = ", ".join("[" + ", ".join(map(str, t)) + "]" for t in tiling.tiles)
            return (f"tiled<tiling = [{tiles}], warp = {_dims_text(warp)}, "
                    f"lane = {_dims_text(lane)}, vector = {vector}>")
    raise TypeError(f"not a layout: {layout!r}")


def layout_to_attr(layout: Layout, context: ir.Context | None = None) -> ir.Attribute:
    context = context or ir.Context.current
    return ir.OpaqueAttr.get(NAMESPACE, layout_to_text(layout).encode(),
                             ir.NoneType.get(context), context=context)


def layouts_to_attr(layouts: list[Layout], context: ir.Context | None = None) -> ir.ArrayAttr:
    context = context or ir.Context.current
    return ir.ArrayAttr.get([layout_to_attr(layout, context) for layout in layouts], context)


def attr_to_layout(attr: ir.Attribute) -> Layout:
    """Decode a layout attribute; LayoutAttrError says what is wrong with it."""
    if not isinstance(attr, ir.OpaqueAttr) or attr.dialect_namespace != NAMESPACE:
        raise LayoutAttrError(f"expected a #smalti layout attribute, got {attr}")
    return text_to_layout(bytes(attr.data).decode())


def attr_to_layouts(attr: ir.Attribute) -> list[Layout]:
    if not isinstance(attr, ir.ArrayAttr):
        raise LayoutAttrError(f"expected an array of layouts, got {attr}")
    return [attr_to_layout(a) for a in attr]


_INT = r"-?\d+"
_STRIDED = re.compile(rf"strided<\s*vec\s*=\s*({_INT})\s*>")
_TILED = re.compile(
    r"tiled<\s*tiling\s*=\s*\[(?P<tiles>.*)\]\s*,\s*warp\s*=\s*\[(?P<warp>[^\]]*)\]\s*,"
    r"\s*lane\s*=\s*\[(?P<lane>[^\]]*)\]\s*,\s*vector\s*=\s*(?P<vector>-?\d+)\s*>"
)
_TILE = re.compile(r"\[([^\[\]]*)\]")


@functools.lru_cache(maxsize=1024)  # layouts are frozen values; kernels repeat a few
def text_to_layout(text: str) -> Layout:
    text = text.strip()
    try:
        if text == "splat":
            return WGSplatLayout()
        if match := _STRIDED.fullmatch(text):
            return WGStridedLayout(int(match.group(1)))
        if match := _TILED.fullmatch(text):
            tiles_text = match.group("tiles")
            tiles = tuple(_int_list(t) for t in _TILE.findall(tiles_text))
            if _TILE.sub("", tiles_text).replace(",", "").strip():
                raise LayoutAttrError(f"malformed tiling [{tiles_text}]")
            return TiledLayout(Tiling(tiles), _dims(match.group("warp")),
                               _dims(match.group("lane")), int(match.group("vector")))
    except LayoutError as error:
        raise LayoutAttrError(f"invalid layout #smalti.{text}: {error}") from None
    raise LayoutAttrError(
        f"unknown layout #smalti.{text}; expected #smalti.splat, #smalti.strided<vec = N> "
        "or #smalti.tiled<tiling = [...], warp = [...], lane = [...], vector = D>"
    )


def named_layout(text: str) -> Layout:
    """A canonical layout's name ("wgmma", "wgmma-row", ...: CANONICAL_LAYOUTS) or a layout's
    attribute text, "#smalti." optional; LayoutAttrError naming both forms otherwise."""
    name = text.strip().lower().replace("_", "-")
    if name in CANONICAL_LAYOUTS:
        return CANONICAL_LAYOUTS[name]
    try:
        return text_to_layout(text.strip().removeprefix("#smalti."))
    except LayoutAttrError as error:
        raise LayoutAttrError(f"{error} (or a canonical layout: "
                              f"{', '.join(CANONICAL_LAYOUTS)})") from None


def _int_list(text: str) -> tuple[int, ...]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not all(re.fullmatch(_INT, t) for t in items):
        raise LayoutAttrError(f"expected a list of integers, got [{text}]")
    return tuple(int(t) for t in items)


def _dims(text: str) -> tuple[int | Replicated, ...]:
    dims: list[int | Replicated] = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        if re.fullmatch(r"r\d+", item):
            dims.append(Replicated(int(item[1:])))
        elif re.fullmatch(_INT, item):
            dims.append(int(item))
        else:
            raise LayoutAttrError(f"expected a dim (negative integer) or rN, got {item!r}")
    return tuple(dims)


def _dims_text(dims: tuple[int | Replicated, ...]) -> str:
    return "[" + ", ".join(f"r{d.times}" if isinstance(d, Replicated) else str(d)
                           for d in dims) + "]"


def transform_to_text(transform: Transform) -> str:
    """The attribute body of an SMEM transform, e.g. 'swizzle<128>'."""
    match transform:
        case TileTransform(tiling=tiling):
            return f"tile<[{', '.join(map(str, tiling))}]>"
        case SwizzleTransform(swizzle_bytes=span):
            return f"swizzle<{span}>"
        case TransposeTransform(permutation=perm):
            return f"transpose<[{', '.join(map(str, perm))}]>"
    raise TypeError(f"not an SMEM transform: {transform!r}")


_TRANSFORM = re.compile(r"(?P<kind>tile|swizzle|transpose)<\s*(?P<body>.*?)\s*>")


def text_to_transform(text: str) -> Transform:
    """Decode an SMEM transform body; LayoutAttrError says what is wrong with it."""
    text = text.strip()
    match = _TRANSFORM.fullmatch(text)
    if match is None:
        raise LayoutAttrError(
            f"unknown SMEM transform #smalti.{text}; expected #smalti.tile<[...]>, "
            "#smalti.swizzle<N> or #smalti.transpose<[...]>")
    kind, body = match.group("kind"), match.group("body")
    try:
        if kind == "swizzle":
            if not re.fullmatch(r"\d+", body):
                raise LayoutAttrError(f"expected a swizzle span in bytes, got {body!r}")
            return SwizzleTransform(int(body))
        if not (body.startswith("[") and body.endswith("]")):
            raise LayoutAttrError(f"expected a list of integers, got {body!r}")
        values = _int_list(body[1:-1])
        return TileTransform(values) if kind == "tile" else TransposeTransform(values)
    except LayoutError as error:
        raise LayoutAttrError(f"invalid SMEM transform #smalti.{text}: {error}") from None


def transform_to_attr(transform: Transform, context: ir.Context | None = None) -> ir.Attribute:
    context = context or ir.Context.current
    return ir.OpaqueAttr.get(NAMESPACE, transform_to_text(transform).encode(),
                             ir.NoneType.get(context), context=context)


def transforms_to_attr(transforms: list[Transform], context: ir.Context | None = None
                       ) -> ir.ArrayAttr:
    context = context or ir.Context.current
    return ir.ArrayAttr.get([transform_to_attr(t, context) for t in transforms], context)


def attr_to_transform(attr: ir.Attribute) -> Transform:
    """Decode a transform attribute; LayoutAttrError says what is wrong with it."""
    if not isinstance(attr, ir.OpaqueAttr) or attr.dialect_namespace != NAMESPACE:
        raise LayoutAttrError(f"expected a #smalti SMEM transform attribute, got {attr}")
    return text_to_transform(bytes(attr.data).decode())


def attr_to_transforms(attr: ir.Attribute) -> list[Transform]:
    if not isinstance(attr, ir.ArrayAttr):
        raise LayoutAttrError(f"expected an array of SMEM transforms, got {attr}")
    return [attr_to_transform(a) for a in attr]
