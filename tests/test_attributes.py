"""Layout attributes: text <-> value codecs, and their errors."""

import pytest

from smalti.dialect import LayoutAttrError, attr_to_layout, layout_to_attr, make_context
from smalti.dialect.attributes import layout_to_text, text_to_layout
from smalti.tiling import (
    WGMMA_LAYOUT,
    Replicated,
    TiledLayout,
    Tiling,
    WGSplatLayout,
    WGStridedLayout,
)

LAYOUTS = [
    WGSplatLayout(),
    WGStridedLayout(8),
    WGMMA_LAYOUT,
    TiledLayout(Tiling(((8, 16), (1, 4))), (Replicated(4),), (-4, Replicated(2), -2), -1),
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_through_mlir(layout):
    context = make_context()
    with context:
        attr = layout_to_attr(layout)
        assert str(attr) == f"#smalti.{layout_to_text(layout)}"
        assert attr_to_layout(attr) == layout


def test_tiled_text():
    assert layout_to_text(WGMMA_LAYOUT) == (
        "tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], "
        "vector = -1>")


@pytest.mark.parametrize(("text", "message"), [
    ("strided<vec = 0>", "must be positive"),
    ("strided<vec = x>", "unknown layout"),
    ("tiled<tiling = [[8, 8]], warp = [-1], lane = [-1], vector = -2>", "twice"),
    ("tiled<tiling = [[8, 8]], warp = [q], lane = [-2], vector = -3>", "expected a dim"),
    ("blocked", "unknown layout"),
])
def test_malformed_layouts_are_reported(text, message):
    with pytest.raises(LayoutAttrError, match=message):
        text_to_layout(text)
