"""Bitwidth-aware inference: layouts for narrow (4- and 8-bit) values that are widened.

Widening 4- or 8-bit integers (or 4-bit floats) costs a few `prmt`/`lop3` per .b32
register of narrow elements (smalti/lowering/subbyte.py, int8_floats.py), but only when
each register holds 32 bits of consecutive elements: eight 4-bit or four 8-bit ones. In a
layout whose vector is narrower (the WGMMA layout's pair of columns) a 4-bit value does not
lower at all and an 8-bit one converts element by element (two `cvt` each). So the narrow
operand of a widening op is required to fill whole registers, and hinted into the layouts
made for conversion (Mosaic GPU's "upcast" layouts, smalti.tiling.canonical).

Where one layout cannot serve both sides (the wide value is wgmma's A operand, in the WGMMA
layout; or the narrow one was cast to pairs), inference inserts the relayout where it costs
least (smalti.layout_inference.cuts) among values the lowering moves: before the widening,
by shuffles of the narrow registers, when the wide side is free; else after it, on the
narrowest wide value (bf16 rather than f32): from WGMMA_LAYOUT_UPCAST_2X one bfly-1 shuffle
per four columns (each lane keeps half of its words), from WGMMA_LAYOUT_UPCAST_4X three per
eight. When the widened value (directly or through elementwise ops) is stored, the first
hint is the conversion layout whose vector fills a 16-byte store of the stored width.

These are a second set of rules keyed by op class (`BITWIDTH_RULES`), applied after each
op's own rule (smalti.layout_inference.rules).
"""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dialect.checks import bitwidth
from smalti.dialect.registry import OpRegistry
from smalti.layout_inference.rules import (
    PREFERRED,
    STORE_VECTOR_BITS,
    Rule,
    RuleContext,
    _stored_bits,
    is_vector,
)
from smalti.layout_inference.solver import fits, widest_strided_layout
from smalti.tiling import (
    WGMMA_LAYOUT_UPCAST_2X,
    WGMMA_LAYOUT_UPCAST_4X,
    Layout,
    LayoutError,
    TiledLayout,
    WGStridedLayout,
)
from smalti.tiling.canonical import UPCAST_STORE_LAYOUT

REGISTER_BITS = 32
UPCAST_LAYOUTS: tuple[TiledLayout, ...] = (
    WGMMA_LAYOUT_UPCAST_2X, WGMMA_LAYOUT_UPCAST_4X, UPCAST_STORE_LAYOUT)
"""The conversion layouts (smalti.tiling.canonical): those that reach the WGMMA layout
within warps, narrowest vector first (4, then 8 consecutive columns), then the one made
for row-major stores."""

CONVERTED = PREFERRED + 1
"""The priority of a conversion layout for a value widened in registers (not stored): over
a load's wide strided hint, whose relayout to the WGMMA layout moves more (or crosses
warps)."""

BITWIDTH_RULES: OpRegistry[Rule] = OpRegistry("bitwidth-aware inference rules")

WIDENING_OPS: tuple[type[ir.OpView], ...] = (
    arith.ExtSIOp, arith.ExtUIOp, arith.SIToFPOp, arith.UIToFPOp, arith.ExtFOp,
)


def converts_by_register(element: ir.Type, bits: int) -> bool:
    """Whether widening these elements works on whole .b32 registers: 4- and 8-bit integers
    and 4-bit floats (bit tricks). 8-bit floats convert in pairs (`cvt.rn.f16x2.e4m3x2`),
    so any vector of 2 serves them."""
    return bits == 4 or (bits == 8 and isinstance(element, ir.IntegerType))


def vector_bits(layout: Layout, shape: tuple[int, ...], bits: int) -> int | None:
    """The bits of consecutive elements in one register vector of `layout` (None: a splat,
    which converts one value for all)."""
    match layout:
        case TiledLayout() | WGStridedLayout():
            return layout.distribution(shape).vector_length * bits
    return None


def packing_problem(shape: tuple[int, ...], bits: int) -> Callable[[object], str | None]:
    """A test of a narrow value's layout: its vectors fill whole .b32 registers (8 4-bit or
    4 8-bit consecutive elements each), so that it converts a register at a time."""

    def test(layout: object) -> str | None:
        try:
            held = vector_bits(layout, shape, bits)
        except LayoutError as error:
            return str(error)
        if held is None or held % REGISTER_BITS == 0:
            return None
        return (f"a {bits}-bit value converts a .b32 register at a time: its layout's vector "
                f"of {held // bits} elements ({held} bits) does not fill whole registers")

    return test


def upcast_hints(shape: tuple[int, ...], bits: int, stored: int | None) -> list[TiledLayout]:
    """The conversion layouts for a narrow value of `shape`, best first: those whose
    vectors fill registers; when the widened value is stored with `stored`-bit elements,
    those filling a 16-byte store first (the store layout before the others), else the
    narrowest (whose relayout to the WGMMA layout moves least)."""
    usable = [layout for layout in UPCAST_LAYOUTS
              if fits(layout, shape) and packing_problem(shape, bits)(layout) is None]
    if stored is not None:
        wanted = STORE_VECTOR_BITS // stored
        usable.sort(key=lambda layout: (layout.distribution(shape).vector_length != wanted,
                                        layout != UPCAST_STORE_LAYOUT))
    return usable


@BITWIDTH_RULES.register(*WIDENING_OPS)
def _widening(ctx: RuleContext, op: ir.OpView) -> None:
    """A narrow operand converted to a wider type: registers of consecutive elements, in a
    conversion (upcast) layout when nothing else decides."""
    operand, result = op.operation.operands[0], op.operation.results[0]
    if not (is_vector(operand) and is_vector(result)):
        return
    var = ctx.var(operand)
    element = ir.VectorType(operand.type).element_type
    bits, wide = var.bitwidth, bitwidth(ir.VectorType(result.type).element_type)
    if not converts_by_register(element, bits) or wide <= bits:
        return
    strided = widest_strided_layout(var.shape, bits)
    if strided is None or strided.vec * bits < REGISTER_BITS:
        return  # no layout fills a register: element by element is all there is
    ctx.require(operand, packing_problem(var.shape, bits),
                f"{op.operation.name} converts {bits}-bit elements a .b32 register at a time")
    stored = _stored_bits(result)
    for layout in upcast_hints(var.shape, bits, stored):
        ctx.hint(operand, layout, PREFERRED if stored else CONVERTED,
                 f"{op.operation.name} widens {bits}-bit elements fastest in a conversion "
                 "layout")


def apply_bitwidth_rule(ctx: RuleContext, op: ir.Operation) -> None:
    """The op's bitwidth-aware rule, if its class has one (after its own rule)."""
    rule = BITWIDTH_RULES.get(op)
    if rule is not None:
        rule(ctx, op.opview)
