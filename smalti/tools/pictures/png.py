"""Rasterise a scene into a PNG (numpy canvas, the 3x5 bitmap font, zlib; no dependencies)."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from smalti.tools.pictures.font import GLYPH_ADVANCE, GLYPH_HEIGHT, glyph_mask
from smalti.tools.pictures.scene import Group, Item, Rect, Scene, Text, png_scale

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def scene_to_png(scene: Scene) -> bytes:
    """The PNG file (8-bit RGB) of `scene`."""
    canvas = np.full((scene.height, scene.width, 3), 255, dtype=np.uint8)
    for item in scene.items:
        _paint(canvas, item, 0.0, 0.0)
    return encode_png(canvas)


def parse_colour(colour: str) -> tuple[int, int, int]:
    """(r, g, b) of a '#rrggbb' colour."""
    if len(colour) != 7 or not colour.startswith("#"):
        raise ValueError(f"expected a #rrggbb colour, got {colour!r}")
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def encode_png(canvas: np.ndarray) -> bytes:
    """PNG bytes of an [height, width, 3] uint8 image (filter type 0 on every row)."""
    height, width, _ = canvas.shape
    rows = np.concatenate([np.zeros((height, 1), dtype=np.uint8),
                           canvas.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (_SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def _paint(canvas: np.ndarray, item: Item, dx: float, dy: float) -> None:
    match item:
        case Rect():
            _paint_rect(canvas, item, dx, dy)
        case Text():
            _paint_text(canvas, item, dx, dy)
        case Group():
            for child in item.items:
                _paint(canvas, child, dx + item.dx, dy + item.dy)


def _paint_rect(canvas: np.ndarray, rect: Rect, dx: float, dy: float) -> None:
    x0, y0 = round(rect.x + dx), round(rect.y + dy)
    x1, y1 = round(rect.x + dx + rect.width), round(rect.y + dy + rect.height)
    height, width, _ = canvas.shape
    canvas[max(y0, 0):min(y1, height), max(x0, 0):min(x1, width)] = parse_colour(rect.fill)


def _paint_text(canvas: np.ndarray, text: Text, dx: float, dy: float) -> None:
    scale = png_scale(text.size)
    drawn = len(text.text) * GLYPH_ADVANCE * scale - scale
    left = text.x + dx - {"start": 0.0, "middle": drawn / 2, "end": drawn}[text.anchor]
    top = round(text.y + dy) - GLYPH_HEIGHT * scale
    colour = parse_colour(text.fill)
    for i, char in enumerate(text.text):
        _paint_mask(canvas, glyph_mask(char, scale),
                    round(left) + i * GLYPH_ADVANCE * scale, top, colour)


def _paint_mask(canvas: np.ndarray, mask: np.ndarray, x: int, y: int,
                colour: tuple[int, int, int]) -> None:
    height, width, _ = canvas.shape
    mh, mw = mask.shape
    if x < 0 or y < 0 or x + mw > width or y + mh > height:
        return
    canvas[y:y + mh, x:x + mw][mask] = colour
