"""`smalti-layout`: draw a register layout (or a relayout) as an SVG or PNG picture.

    smalti-layout '#smalti.tiled<...>' --shape 64x16 -o wgmma.svg
    smalti-layout wgmma --shape 64x16 --to 'strided<vec = 8>' --bitwidth 16 -o relayout.png

Cells are coloured by the warp that holds the element and labelled with the lane (T0..T31)
and the register and slot (r3.1), like the PTX ISA's fragment figures.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from smalti.dialect.attributes import LayoutAttrError, named_layout
from smalti.tiling import (
    CANONICAL_LAYOUTS,
    Layout,
    LayoutError,
)
from smalti.tiling.layouts import Shape
from smalti.tools.cli_common import EXIT_OK, ToolArgumentParser, ToolError, run_tool, write_output
from smalti.tools.pictures import Scene, layout_scene, relayout_scene, scene_to_png, scene_to_svg

TOOL = "smalti-layout"

def draw_layout(layout: Layout, shape: Sequence[int], *, path: str | Path | None = None) -> str:
    """SVG text of `layout` on an array of `shape`; also written to `path` (PNG for .png)."""
    scene = layout_scene(layout, tuple(shape))
    return _emit(scene, path)


def draw_relayout(source: Layout, target: Layout, shape: Sequence[int], bitwidth: int, *,
                  path: str | Path | None = None) -> str:
    """SVG text of source and target side by side, captioned with the relayout cost."""
    scene = relayout_scene(source, target, tuple(shape), bitwidth)
    return _emit(scene, path)


def _emit(scene: Scene, path: str | Path | None) -> str:
    """The scene's SVG; written to `path` as SVG, or as PNG when its suffix is .png."""
    svg = scene_to_svg(scene)
    if path is not None:
        path = Path(path)
        if path.suffix.lower() == ".png":
            path.write_bytes(scene_to_png(scene))
        else:
            path.write_text(svg, encoding="utf-8")
    return svg


def parse_layout(text: str) -> Layout:
    """A canonical layout name (wgmma, wgmma-row, ...) or attribute text, '#smalti.' optional."""
    try:
        return named_layout(text)
    except LayoutAttrError as error:
        raise ToolError(str(error)) from None


def parse_shape(text: str) -> Shape:
    """'64x16' -> (64, 16); every dim a positive integer."""
    if not re.fullmatch(r"\s*\d+(\s*x\s*\d+)*\s*", text):
        raise ToolError(f"expected a shape like 64x16, got {text!r}")
    shape = tuple(int(d) for d in text.split("x"))
    if any(d <= 0 for d in shape):
        raise ToolError(f"every dim of shape {text!r} must be positive")
    return shape


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of smalti-layout."""
    parser = ToolArgumentParser(
        prog=TOOL,
        description="Draw a register layout as a picture: the array's elements coloured by "
                    "warp, labelled with lane and register; with --to, a relayout.",
        epilog="Exit status: 0 success, 1 bad input, 2 internal error.",
    )
    parser.add_argument("layout", metavar="LAYOUT",
                        help="'#smalti.tiled<...>', 'strided<vec = 4>', 'splat', or a canonical "
                             f"name ({', '.join(CANONICAL_LAYOUTS)})")
    parser.add_argument("--shape", required=True, metavar="RxC",
                        help="the array shape, e.g. 64x16 (larger than 64x64: the top-left "
                             "64x64 window is drawn)")
    parser.add_argument("--to", metavar="LAYOUT", help="draw the relayout to this layout")
    parser.add_argument("--bitwidth", type=int, default=32,
                        help="element bit width for the relayout cost (default 32)")
    parser.add_argument("-o", dest="output", metavar="OUT",
                        help="output file, .svg or .png (default: SVG on stdout)")
    return parser


def _run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    source, shape = parse_layout(args.layout), parse_shape(args.shape)
    target = parse_layout(args.to) if args.to is not None else None
    try:
        scene = (layout_scene(source, shape) if target is None
                 else relayout_scene(source, target, shape, args.bitwidth))
    except LayoutError as error:
        raise ToolError(str(error)) from None
    png = args.output is not None and args.output.lower().endswith(".png")
    write_output(args.output, scene_to_png(scene) if png else scene_to_svg(scene))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `smalti-layout`; returns the exit status."""
    return run_tool(TOOL, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
