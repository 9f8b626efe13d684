"""Pictures of layouts: every cell's colour and labels against `element_index`, PNG, CLI."""

from __future__ import annotations

import math
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from collections import defaultdict

import numpy as np
import pytest

from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    WGSplatLayout,
    WGStridedLayout,
    relayout_cost,
)
from smalti.tools.layout_picture import draw_layout, draw_relayout, main
from smalti.tools.pictures import WARP_COLOURS

SVG = "{http://www.w3.org/2000/svg}"


def cells_of(svg_text: str, role: str | None = None) -> dict[tuple[int, ...], ET.Element]:
    """The cell groups of a picture (of one side of a relayout), keyed by array index."""
    root = ET.fromstring(svg_text)
    if role is not None:
        root = next(g for g in root.iter(f"{SVG}g") if g.get("data-role") == role)
    cells = [g for g in root.iter(f"{SVG}g") if g.get("class") == "cell"]
    keyed = {tuple(int(v) for v in g.get("data-element").split(",")): g for g in cells}
    assert len(keyed) == len(cells), "two cells draw the same element"
    return keyed


def fills(cell: ET.Element) -> list[str]:
    return [r.get("fill") for r in cell.findall(f"{SVG}rect") if r.get("class") == "warp"]


def label(cell: ET.Element, kind: str) -> str:
    (text,) = [t.text for t in cell.findall(f"{SVG}text") if t.get("class") == kind]
    return text


def holders_from_index(layout, shape) -> dict[tuple[int, ...], list[tuple[int, int, int]]]:
    """element -> [(thread, register, slot)], read straight off `element_index`."""
    table = layout.element_index(shape)
    holders = defaultdict(list)
    for t, r, s in np.ndindex(*table.shape[:3]):
        holders[tuple(int(v) for v in table[t, r, s])].append((t, r, s))
    return holders


def test_warp_colours_are_four_distinct_colours():
    assert len(set(WARP_COLOURS)) == 4
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in WARP_COLOURS)


@pytest.mark.parametrize(("layout", "shape"), [
    (WGMMA_LAYOUT, (64, 16)),
    (WGStridedLayout(4), (8, 64)),
    (WGMMA_TRANSPOSED_LAYOUT, (16, 64)),
])
def test_each_cell_shows_the_thread_element_index_names(layout, shape):
    cells = cells_of(draw_layout(layout, shape))
    assert len(cells) == math.prod(shape)
    table = layout.element_index(shape)
    for t, r, s in np.ndindex(*table.shape[:3]):
        cell = cells[tuple(int(v) for v in table[t, r, s])]
        assert fills(cell) == [WARP_COLOURS[t // 32]]
        assert label(cell, "lane") == f"T{t % 32}"
        assert label(cell, "reg") == f"r{r}.{s}"
        assert cell.get("data-threads") == str(t)


def test_wgmma_picture_matches_the_ptx_isa_figure():
    """Row 16w + g + 8h, columns 8j + 2q + (0, 1): thread 32w + 4g + q, register 2j + h."""
    cells = cells_of(draw_layout(WGMMA_LAYOUT, (64, 16)))
    assert label(cells[(0, 0)], "lane") == "T0" and label(cells[(0, 1)], "reg") == "r0.1"
    assert label(cells[(8, 0)], "reg") == "r1.0" and label(cells[(0, 8)], "reg") == "r2.0"
    assert label(cells[(17, 3)], "lane") == "T5" and fills(cells[(17, 3)]) == [WARP_COLOURS[1]]


def test_title_names_the_layout_attribute_and_shape():
    root = ET.fromstring(draw_layout(WGStridedLayout(4), (8, 64)))
    titles = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "title"]
    assert "".join(titles) == "#smalti.strided<vec = 4> on 8x64"


def test_large_arrays_draw_the_top_left_window_and_say_so():
    layout, shape = WGStridedLayout(1), (128, 256)
    text = draw_layout(layout, shape)
    cells = cells_of(text)
    assert set(cells) == {(i, j) for i in range(64) for j in range(64)}
    for element, [(t, r, s)] in holders_from_index(layout, shape).items():
        if element in cells:
            assert label(cells[element], "lane") == f"T{t % 32}"
            assert label(cells[element], "reg") == f"r{r}.{s}"
    root = ET.fromstring(text)
    (note,) = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "window"]
    assert "top-left 64x64 window of 128x256" in note


def test_higher_rank_arrays_draw_the_first_matrix():
    cells = cells_of(draw_layout(WGStridedLayout(2), (2, 16, 32)))
    assert set(cells) == {(0, i, j) for i in range(16) for j in range(32)}


@pytest.mark.parametrize(("layout", "shape"), [
    (WGMMA_ROW_LAYOUT, (64,)),
    (WGMMA_COL_LAYOUT, (16,)),
    (WGSplatLayout(), (4, 4)),
])
def test_replicated_elements_show_every_holder(layout, shape):
    cells = cells_of(draw_layout(layout, shape))
    holders = holders_from_index(layout, shape)
    if isinstance(layout, WGSplatLayout):  # every element is the one value
        holders = {e: holders[(0,) * len(shape)] for e in np.ndindex(*shape)}
    assert set(cells) == set(holders)
    for element, held in holders.items():
        cell = cells[element]
        assert cell.get("data-threads") == " ".join(str(t) for t, _, _ in held)
        assert fills(cell) == [WARP_COLOURS[w] for w in sorted({t // 32 for t, _, _ in held})]
        assert cell.find(f"{SVG}title").text.startswith(f"held by {len(held)} threads")


def test_replicated_lane_labels():
    rows = cells_of(draw_layout(WGMMA_ROW_LAYOUT, (64,)))
    assert label(rows[(0,)], "lane") == "T0-3" and label(rows[(9,)], "lane") == "T4-7"
    columns = cells_of(draw_layout(WGMMA_COL_LAYOUT, (16,)))
    assert label(columns[(2,)], "lane") == "T1+4k" and label(columns[(9,)], "reg") == "r1.1"
    assert fills(columns[(2,)]) == list(WARP_COLOURS)


def read_png(data: bytes) -> np.ndarray:
    """An 8-bit RGB PNG whose rows all use filter 0 (what the writer emits)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, idat, header = 8, b"", None
    while offset < len(data):
        (length,), kind = struct.unpack(">I", data[offset:offset + 4]), data[offset + 4:offset + 8]
        body = data[offset + 8:offset + 8 + length]
        crc = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])[0]
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    width, height, depth, colour_type, *_ = header
    assert (depth, colour_type) == (8, 2)
    rows = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, width * 3 + 1)
    assert not rows[:, 0].any()
    return rows[:, 1:].reshape(height, width, 3)


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def test_png_has_the_svg_size_and_cell_colours(tmp_path):
    path = tmp_path / "wgmma.png"
    text = draw_layout(WGMMA_LAYOUT, (64, 16), path=path)
    image = read_png(path.read_bytes())
    root = ET.fromstring(text)
    assert image.shape == (int(root.get("height")), int(root.get("width")), 3)
    table = WGMMA_LAYOUT.element_index((64, 16))
    for element, cell in cells_of(text).items():
        dx, dy = map(float, re.fullmatch(r"translate\((.*),(.*)\)", cell.get("transform")).groups())
        rect = cell.find(f"{SVG}rect")
        x, y = round(dx + float(rect.get("x"))) + 2, round(dy + float(rect.get("y"))) + 2
        thread = np.argwhere((table == element).all(axis=-1))[0][0]
        assert tuple(image[y, x]) == rgb(WARP_COLOURS[thread // 32])


def test_svg_file_is_what_is_returned(tmp_path):
    path = tmp_path / "strided.svg"
    assert draw_layout(WGStridedLayout(4), (8, 64), path=path) == path.read_text()


@pytest.mark.parametrize(("source", "target", "bitwidth"), [
    (WGMMA_LAYOUT, WGStridedLayout(8), 16),
    (WGMMA_LAYOUT, WGMMA_LAYOUT, 32),
    (WGStridedLayout(4), WGMMA_LAYOUT, 32),
])
def test_relayout_picture_shows_both_layouts_and_the_cost(source, target, bitwidth, tmp_path):
    shape = (64, 16)
    text = draw_relayout(source, target, shape, bitwidth, path=tmp_path / "relayout.svg")
    for role, layout in (("source", source), ("target", target)):
        cells = cells_of(text, role)
        table = layout.element_index(shape)
        assert len(cells) == math.prod(shape)
        t, r, s = 37, 0, 1
        cell = cells[tuple(int(v) for v in table[t, r, s])]
        assert label(cell, "lane") == "T5" and label(cell, "reg") == f"r{r}.{s}"
    root = ET.fromstring(text)
    captions = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "cost"]
    cost = relayout_cost(source, target, shape, bitwidth)
    assert captions[-1] == f"relayout_cost(...) = {cost}"
    assert captions[0].startswith(f"relayout of {bitwidth}-bit elements: ")


def run_cli(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("layout", [
    "#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>",
    "tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>",
    "wgmma",
    "WGMMA_16BIT",
])
def test_cli_accepts_attribute_text_and_canonical_names(layout, tmp_path, capsys):
    out = tmp_path / "wgmma.svg"
    code, _, err = run_cli([layout, "--shape", "64x16", "-o", str(out)], capsys)
    assert (code, err) == (0, "")
    assert out.read_text() == draw_layout(WGMMA_LAYOUT, (64, 16))


def test_cli_writes_svg_to_stdout_and_png_by_suffix(tmp_path, capsys):
    code, out, _ = run_cli(["strided<vec = 4>", "--shape", "8x64"], capsys)
    assert code == 0 and len(cells_of(out)) == 512
    png = tmp_path / "relayout.png"
    code, _, _ = run_cli(["wgmma", "--shape", "64x16", "--to", "#smalti.strided<vec = 8>",
                          "--bitwidth", "16", "-o", str(png)], capsys)
    assert code == 0 and read_png(png.read_bytes()).shape[2] == 3


@pytest.mark.parametrize(("args", "message"), [
    (["tiled<nonsense>", "--shape", "64x16"], "unknown layout"),
    (["strided<vec = 4>", "--shape", "8x60"], "strided layout with vec = 4"),
    (["wgmma", "--shape", "32x16"], "does not divide shape"),
    (["wgmma-row", "--shape", "64x16"], "does not divide shape"),
    (["wgmma", "--shape", "64by16"], "expected a shape like 64x16"),
    (["wgmma", "--shape", "0x16"], "must be positive"),
    (["wgmma", "--shape", "64x16", "--to", "splat"], "cannot become a splat"),
    (["wgmma", "--shape", "64x16", "--to", "wgmma", "--bitwidth", "0"], "0-bit"),
    (["wgmma"], "--shape"),
])
def test_cli_errors_are_one_line_and_exit_1(args, message, tmp_path, capsys):
    out = tmp_path / "never.svg"
    code, stdout, err = run_cli([*args, "-o", str(out)], capsys)
    assert code == 1 and stdout == ""
    assert err.startswith("smalti-layout: error: ") and err.count("\n") == 1
    assert message in err
    assert not out.exists()


def test_cli_as_a_process_exits_with_its_status(tmp_path):
    command = [sys.executable, "-m", "smalti.tools.layout_picture"]
    good = subprocess.run([*command, "wgmma", "--shape", "64x16", "-o", str(tmp_path / "a.svg")],
                          capture_output=True, text=True)
    assert good.returncode == 0 and (tmp_path / "a.svg").exists()
    bad = subprocess.run([*command, "strided<vec = 3", "--shape", "8x64"],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.startswith("smalti-layout: error: ") and bad.stderr.count("\n") == 1
