"""Scenes of register layouts: the array as a grid of cells, coloured by warp, labelled with
lane and register, in the manner of the PTX ISA's fragment figures."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from smalti.dialect.attributes import layout_to_text
from smalti.tiling import (
    WARP_SIZE,
    Layout,
    RelayoutCost,
    check_layout_fits,
    relayout_cost,
)
from smalti.tiling.layouts import Shape
from smalti.tools.pictures.scene import Group, Item, Rect, Scene, Text, text_width

WARP_COLOURS = ("#56b4e9", "#e69f00", "#3cb58e", "#d98cb8")
"""Fill colour of the cells each warp (0..3) holds: colour-blind-safe hues, light enough for
black labels."""

WINDOW = 64
CELL_WIDTH = 50
CELL_HEIGHT = 34
MARGIN = 16
ROW_HEADER = 30
COLUMN_HEADER = 16
LABEL_SIZE = 11
HEADER_SIZE = 9
TITLE_SIZE = 14
NOTE_SIZE = 12
LINE = 20
INK = "#1a1a1a"
GRID_INK = "#404040"
GAP = 48
CELL_NOTE = "each cell: lane Tn of the warp, register r<register>.<slot in its vector>"

Holder = tuple[int, int, int]


@dataclass(frozen=True)
class Window:
    """The part of the array a picture shows: rows x columns of the last two dims at `prefix`."""

    shape: Shape
    rows: int
    columns: int
    prefix: tuple[int, ...]

    def element(self, row: int, column: int) -> tuple[int, ...]:
        """The array index drawn in cell (row, column)."""
        return (column,) if len(self.shape) == 1 else (*self.prefix, row, column)

    def is_whole(self) -> bool:
        return self.rows * self.columns == math.prod(self.shape)


def window_of(shape: Shape) -> Window:
    """The top-left WINDOW x WINDOW window of the last two dims (at leading index 0)."""
    if len(shape) == 1:
        return Window(shape, 1, min(shape[0], WINDOW), ())
    return Window(shape, min(shape[-2], WINDOW), min(shape[-1], WINDOW),
                  (0,) * (len(shape) - 2))


def shape_text(shape: Shape) -> str:
    return "x".join(map(str, shape))


def lane_label(holders: tuple[Holder, ...]) -> str:
    """T5 for one lane; T4-7, T2+4k (every 4th lane from 2) or T5.. for several."""
    lanes = sorted({t % WARP_SIZE for t, _, _ in holders})
    first, last = lanes[0], lanes[-1]
    if len(lanes) == 1:
        return f"T{first}"
    step = lanes[1] - first
    if lanes != list(range(first, last + 1, step)):
        return f"T{first}.."
    return f"T{first}-{last}" if step == 1 else f"T{first}+{step}k"


def register_label(holders: tuple[Holder, ...]) -> str:
    """r3.1 (register 3, slot 1 of its vector); r3.1.. when the holders differ."""
    places = sorted({(r, s) for _, r, s in holders})
    register, slot = places[0]
    return f"r{register}.{slot}" + (".." if len(places) > 1 else "")


def holder_text(holders: tuple[Holder, ...]) -> str:
    """A tooltip listing the holders (the first 8)."""
    shown = ", ".join(f"thread {t} (W{t // WARP_SIZE} T{t % WARP_SIZE} r{r}.{s})"
                      for t, r, s in holders[:8])
    return f"held by {len(holders)} threads: {shown}" + (", ..." if len(holders) > 8 else "")


def cell_item(window: Window, row: int, column: int, holders: tuple[Holder, ...],
              left: float, top: float) -> Group:
    """One element: a stripe per warp holding it, the lane label and the register label."""
    warps = sorted({t // WARP_SIZE for t, _, _ in holders})
    stripe = (CELL_WIDTH - 2) / len(warps)
    items: list[Item] = [Rect(1 + k * stripe, 1, stripe, CELL_HEIGHT - 2, WARP_COLOURS[w], "warp")
                         for k, w in enumerate(warps)]
    items.append(Text(CELL_WIDTH / 2, 15, lane_label(holders), LABEL_SIZE, "middle", INK, "lane"))
    items.append(Text(CELL_WIDTH / 2, 29, register_label(holders), LABEL_SIZE, "middle", INK,
                      "reg"))
    element = window.element(row, column)
    attributes = (("class", "cell"), ("data-row", str(row)), ("data-col", str(column)),
                  ("data-element", ",".join(map(str, element))),
                  ("data-threads", " ".join(str(t) for t, _, _ in holders)))
    tooltip = holder_text(holders) if len(holders) > 1 else None
    return Group(tuple(items), left + column * CELL_WIDTH, top + row * CELL_HEIGHT, attributes,
                 tooltip)


def holders_of(layout: Layout, shape: Shape, window: Window) -> np.ndarray:
    """[row, column, copy] -> (thread, register, slot) for the cells of the window."""
    owners = layout.owners(shape)
    if len(shape) == 1:
        return owners[None, :window.columns]
    return owners[window.prefix][:window.rows, :window.columns]


def grid_items(layout: Layout, shape: Shape, window: Window, left: float,
               top: float) -> list[Item]:
    """Column and row numbers, the cells, and a rule every 8 rows and columns."""
    holders = holders_of(layout, shape, window)
    items: list[Item] = [
        Text(left + (c + 0.5) * CELL_WIDTH, top - 5, str(c), HEADER_SIZE, "middle", GRID_INK)
        for c in range(window.columns)]
    items += [Text(left - 5, top + (r + 0.5) * CELL_HEIGHT + 3, str(r), HEADER_SIZE, "end",
                   GRID_INK) for r in range(window.rows)]
    for r in range(window.rows):
        for c in range(window.columns):
            cell_holders = tuple(tuple(int(v) for v in h) for h in holders[r, c])
            items.append(cell_item(window, r, c, cell_holders, left, top))
    items += rules(window, left, top)
    return items


def rules(window: Window, left: float, top: float) -> list[Item]:
    """Lines at every 8th row and column boundary, and around the grid."""
    width, height = window.columns * CELL_WIDTH, window.rows * CELL_HEIGHT
    columns = sorted({*range(0, window.columns, 8), window.columns})
    rows = sorted({*range(0, window.rows, 8), window.rows})
    lines: list[Item] = [Rect(left + c * CELL_WIDTH - 1, top - 1, 2, height + 2, GRID_INK, "rule")
                         for c in columns]
    lines += [Rect(left - 1, top + r * CELL_HEIGHT - 1, width + 2, 2, GRID_INK, "rule")
              for r in rows]
    return lines


def legend_items(left: float, baseline: float) -> tuple[list[Item], float]:
    """A swatch per warp; returns the items and their width."""
    items: list[Item] = []
    x = left
    for warp, colour in enumerate(WARP_COLOURS):
        items.append(Rect(x, baseline - 12, 14, 14, colour, "swatch"))
        label = f"warp {warp} (threads {warp * WARP_SIZE}-{warp * WARP_SIZE + WARP_SIZE - 1})"
        items.append(Text(x + 19, baseline, label, NOTE_SIZE, "start", INK))
        x += 19 + text_width(label, NOTE_SIZE) + 14
    return items, x - 14 - left


def wrap(text: str, width: float, size: float) -> list[str]:
    """`text` in lines no wider than `width` (at least 60 characters), broken after ', '."""
    limit = max(60, int(width // text_width("x", size)))
    lines = [""]
    for piece in re.split(r"(?<=, )", text):
        if lines[-1] and len(lines[-1]) + len(piece) > limit:
            lines[-1] = lines[-1].rstrip()
            lines.append("    ")
        lines[-1] += piece
    return lines


def summary(layout: Layout, shape: Shape) -> str:
    """Elements, registers per thread, and copies of each element."""
    table = layout.element_index(shape)
    _, registers, slots, _ = table.shape
    copies = table.shape[0] * registers * slots // math.prod(shape)
    text = (f"shape {shape_text(shape)}: {math.prod(shape)} elements; each thread holds "
            f"{registers} register{'s' if registers != 1 else ''} of {slots} "
            f"slot{'s' if slots != 1 else ''}")
    if copies > 1:
        text += f"; every element is held by {copies} threads (replicated)"
    return text


def window_note(window: Window) -> str | None:
    """The caption saying which part of a large array is drawn, if not all of it."""
    if window.is_whole():
        return None
    if len(window.shape) == 1:
        return f"showing elements 0-{window.columns - 1} of {window.shape[0]}"
    where = "".join(f"{p}, " for p in window.prefix)
    return (f"showing [{where}0:{window.rows}, 0:{window.columns}], the top-left "
            f"{window.rows}x{window.columns} window of {shape_text(window.shape)}")


def title_lines(layout: Layout, shape: Shape, heading: str = "") -> list[str]:
    """The title (layout attribute and shape), wrapped to the width of the grid."""
    window = window_of(shape)
    title = f"{heading}#smalti.{layout_to_text(layout)} on {shape_text(shape)}"
    return wrap(title, ROW_HEADER + window.columns * CELL_WIDTH, TITLE_SIZE)


def layout_scene(layout: Layout, shape: Shape, heading: str = "", title_rows: int = 0) -> Scene:
    """The picture of `layout` on an array of `shape`; the title takes >= `title_rows` lines."""
    check_layout_fits(layout, shape)
    if not shape:
        raise ValueError("a picture needs an array of rank 1 or more")
    window = window_of(shape)
    grid_width = ROW_HEADER + window.columns * CELL_WIDTH
    title = title_lines(layout, shape, heading)
    title += [""] * (title_rows - len(title))
    header = [(line, TITLE_SIZE, "title") for line in title]
    header.append((summary(layout, shape), NOTE_SIZE, "summary"))
    header.append((CELL_NOTE, NOTE_SIZE, "note"))
    items: list[Item] = [Text(MARGIN, MARGIN + TITLE_SIZE + i * LINE, line, size, "start", INK,
                              css_class) for i, (line, size, css_class) in enumerate(header)
                         if line]
    widths = [text_width(line, size) for line, size, _ in header]
    legend, legend_width = legend_items(MARGIN, MARGIN + TITLE_SIZE + len(header) * LINE + 4)
    items += legend
    grid_left = MARGIN + ROW_HEADER
    grid_top = MARGIN + TITLE_SIZE + (len(header) + 1) * LINE + COLUMN_HEADER
    items += grid_items(layout, shape, window, grid_left, grid_top)
    bottom = grid_top + window.rows * CELL_HEIGHT
    widths += [legend_width, grid_width]
    if note := window_note(window):
        items.append(Text(MARGIN, bottom + LINE, note, NOTE_SIZE, "start", INK, "window"))
        widths.append(text_width(note, NOTE_SIZE))
        bottom += LINE
    return Scene(math.ceil(max(widths) + 2 * MARGIN), math.ceil(bottom + MARGIN), tuple(items))


def cost_text(cost: RelayoutCost, bitwidth: int) -> str:
    """What the relayout costs, in words."""
    head = f"relayout of {bitwidth}-bit elements: "
    match cost.kind:
        case "none":
            return head + "free (every register already holds what the target needs)"
        case "registers":
            return head + (f"in registers only, {cost.registers_moved} registers per thread "
                           "rebuilt by moves and packing")
        case "shuffles":
            return head + (f"shuffles within each warp, {cost.shuffles} shfl.sync per warp, "
                           f"{cost.registers_moved} registers per thread rebuilt")
    return head + f"a round trip through shared memory ({cost.smem_bytes} bytes)"


def relayout_scene(source: Layout, target: Layout, shape: Shape, bitwidth: int) -> Scene:
    """The source and target pictures side by side, with the relayout cost as a caption."""
    cost = relayout_cost(source, target, shape, bitwidth)
    rows = max(len(title_lines(source, shape, "from ")), len(title_lines(target, shape, "to ")))
    left = layout_scene(source, shape, "from ", rows)
    right = layout_scene(target, shape, "to ", rows)
    height = max(left.height, right.height)
    captions = (cost_text(cost, bitwidth), f"relayout_cost(...) = {cost}")
    items: list[Item] = [
        Group(left.items, attributes=(("class", "picture"), ("data-role", "source"))),
        Text(left.width + GAP / 2, height / 2, "->", TITLE_SIZE + 4, "middle", INK, "arrow"),
        Group(right.items, left.width + GAP, 0, (("class", "picture"), ("data-role", "target"))),
    ]
    items += [Text(MARGIN, height + (i + 1) * LINE, line, NOTE_SIZE + 1, "start", INK, "cost")
              for i, line in enumerate(captions)]
    width = max(left.width + GAP + right.width,
                *(text_width(line, NOTE_SIZE + 1) + 2 * MARGIN for line in captions))
    return Scene(math.ceil(width), height + len(captions) * LINE + MARGIN, tuple(items))
