"""Comparisons, selects and int <-> float and int <-> int conversions on vectors, one
element at a time.

A vector of i1 lives in predicate registers (one per element). 16-bit float operands are
compared after an exact widening to f32, so no packed predicate forms are needed. fp8
vectors only select (their bytes move as they are); compare or convert them after
arith.extf.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dialect.diagnostics import error_at
from smalti.lowering import packing
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.elementwise import FP8_NAMES, unpack
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import (
    FragmentedArray,
    ScalarValue,
    fragment_geometry,
    register_bits,
    vector_element_type,
)
from smalti.ptx import Register

# MLIR's arith.cmpf predicates (by enum value) as PTX setp comparisons ("ordered" ones fail
# on NaN, the "u" ones hold on NaN; PTX ISA, "setp").
CMPF = {1: "eq", 2: "gt", 3: "ge", 4: "lt", 5: "le", 6: "ne", 7: "num", 8: "equ", 9: "gtu",
        10: "geu", 11: "ltu", 12: "leu", 13: "neu", 14: "nan"}
# arith.cmpi predicates: (comparison, signed).
CMPI = {0: ("eq", True), 1: ("ne", True), 2: ("lt", True), 3: ("le", True), 4: ("gt", True),
        5: ("ge", True), 6: ("lt", False), 7: ("le", False), 8: ("gt", False), 9: ("ge", False)}
CONVERSIONS: dict[type[ir.OpView], tuple[str, bool]] = {  # (the cvt's rounding, signed?)
    arith.SIToFPOp: ("rn", True), arith.UIToFPOp: ("rn", False),
    arith.FPToSIOp: ("rzi", True), arith.FPToUIOp: ("rzi", False),
}
TO_FLOAT = (arith.SIToFPOp, arith.UIToFPOp)


class _Elements:
    """Element i of register vector v of an array, as a scalar register (unpacking each
    packed register once) — the element-wise view the ops here need."""

    def __init__(self, ctx: LoweringContext, array: FragmentedArray) -> None:
        self.ctx, self.array = ctx, array
        self.parts: dict[tuple[int, int], list[Register]] = {}

    def __call__(self, v: int, i: int) -> Register:
        array = self.array
        if array.pack == 1:
            return array.vectors[v][i]
        key = (v, i // array.pack)
        if key not in self.parts:
            self.parts[key] = unpack(self.ctx, array, array.vectors[v][key[1]])
        return self.parts[key][i % array.pack]


def _no_fp8(op: ir.OpView, *elements) -> None:
    """fp8 values have no PTX comparisons or integer conversions: a located error."""
    for element in elements:
        if element is not None and element.name in FP8_NAMES:
            raise error_at(op, f"has no lowering for vectors of {element.name}; arith.extf "
                               "them to f32 first")


def _as_f32(ctx: LoweringContext, array: FragmentedArray, register: Register) -> Register:
    if array.element.bits == 32:
        return register
    return ctx.builder.compute(f"cvt.f32.{array.element.scalar}", "f32", register)


def _build(ctx: LoweringContext, op: ir.OpView, make) -> None:
    """The op's vector result, element by element (`make(v, i)`), packed as its type is."""
    result = op.operation.result
    shape = tuple(ir.VectorType(result.type).shape)
    element = vector_element_type(ir.VectorType(result.type).element_type)
    if element is None:
        raise error_at(op, f"vectors of {result.type} are not supported")
    layout = layouts_of(op, "out_layouts", 1)[0]
    count, length = fragment_geometry(layout, shape)
    pack = FragmentedArray(layout, shape, element, (), length).pack
    vectors = []
    for v in range(count):
        values = [make(v, i) for i in range(length)]
        vectors.append(tuple(packing.join(ctx, element, values[i:i + pack], 1)
                             for i in range(0, length, pack)))
    ctx.set(result, FragmentedArray(layout, shape, element, tuple(vectors), length))


@lowering_rule(arith.CmpFOp)
def _cmpf(ctx: LoweringContext, op: arith.CmpFOp) -> None:
    if not isinstance(op.result.type, ir.VectorType):
        raise error_at(op, "scalar float comparisons are not supported yet")
    lower_vector_compare(ctx, op)


def lower_vector_compare(ctx: LoweringContext, op: arith.CmpFOp | arith.CmpIOp) -> None:
    """arith.cmpf / arith.cmpi on vectors: one setp per element, into predicates."""
    a, b = ctx.array(op, op.lhs), ctx.array(op, op.rhs)
    _no_fp8(op, a.element)
    predicate = ir.IntegerAttr(op.predicate).value
    floats = isinstance(op, arith.CmpFOp)
    if floats:
        if predicate not in CMPF:
            raise error_at(op, "the always-false and always-true predicates are not supported")
        opcode = f"setp.{CMPF[predicate]}.f32"
    else:
        comparison, signed = CMPI[predicate]
        opcode = f"setp.{comparison}.{'s' if signed else 'u'}{a.element.bits}"
    elements_a, elements_b = _Elements(ctx, a), _Elements(ctx, b)

    def make(v: int, i: int) -> Register:
        x, y = elements_a(v, i), elements_b(v, i)
        if floats:
            x, y = _as_f32(ctx, a, x), _as_f32(ctx, b, y)
        return ctx.builder.compute(opcode, "pred", x, y)

    _build(ctx, op, make)


def lower_vector_select(ctx: LoweringContext, op: arith.SelectOp) -> None:
    """arith.select of vectors, by a vector of i1 (per element) or an i1 scalar (uniform)."""
    condition = op.condition
    a, b = ctx.array(op, op.true_value), ctx.array(op, op.false_value)
    bits = register_bits(a.element, 1)  # a lone byte is selected as its .b16
    opcode = f"selp.b{bits}" if a.element.scalar != "f32" else "selp.f32"
    register_type = a.element.scalar
    if not isinstance(condition.type, ir.VectorType):  # one uniform predicate
        predicate = ctx.get(condition)
        if not isinstance(predicate, ScalarValue):
            raise error_at(op, "expects an i1 condition")
        vectors = tuple(tuple(ctx.builder.compute(f"selp.b{register_bits(a.element, a.pack)}",
                                                  a.register_type, x, y, predicate.operand)
                              for x, y in zip(va, vb, strict=True))
                        for va, vb in zip(a.vectors, b.vectors, strict=True))
        ctx.set(op.result, FragmentedArray(a.layout, a.shape, a.element, vectors,
                                           a.vector_length))
        return
    mask = ctx.array(op, condition)
    elements_a, elements_b = _Elements(ctx, a), _Elements(ctx, b)

    def make(v: int, i: int) -> Register:
        return ctx.builder.compute(opcode, register_type, elements_a(v, i), elements_b(v, i),
                                   mask.vectors[v][i])

    _build(ctx, op, make)


@lowering_rule(*CONVERSIONS)
def _convert(ctx: LoweringContext, op: arith.SIToFPOp | arith.UIToFPOp | arith.FPToSIOp
             | arith.FPToUIOp) -> None:
    source = ctx.array(op, op.in_)
    target = vector_element_type(ir.VectorType(op.out.type).element_type)
    if target is None:
        raise error_at(op, f"vectors of {op.out.type} are not supported")
    _no_fp8(op, source.element, target)
    rounding, signed = CONVERSIONS[type(op)]
    to_float = isinstance(op, TO_FLOAT)
    integer = source.element if to_float else target
    int_type = f"{'s' if signed else 'u'}{integer.bits}"
    opcode = (f"cvt.{rounding}.{target.scalar}.{int_type}" if to_float
              else f"cvt.{rounding}.{int_type}.{source.element.scalar}")
    elements = _Elements(ctx, source)

    def make(v: int, i: int) -> Register:
        return ctx.builder.compute(opcode, target.scalar if to_float else int_type,
                                   elements(v, i))

    _build(ctx, op, make)


@lowering_rule(arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp)
def _integer_width(ctx: LoweringContext, op: arith.ExtSIOp | arith.ExtUIOp | arith.TruncIOp
                   ) -> None:
    """Integer widening (sign- or zero-extending) and narrowing (keeping the low bits); an i1
    widens to -1/0 (extsi) or 1/0 (extui) and narrows from the lowest bit."""
    source = ctx.array(op, op.in_)
    target = vector_element_type(ir.VectorType(op.out.type).element_type)
    if target is None or target.is_float or source.element.is_float:
        raise error_at(op, f"vectors of {op.out.type} are not supported")
    b = ctx.builder
    elements = _Elements(ctx, source)
    sign_extends = isinstance(op, arith.ExtSIOp)
    signed = "s" if sign_extends else "u"
    if target.scalar == "pred":  # trunci to i1: the lowest bit
        def make(v: int, i: int) -> Register:
            low = b.compute(f"and.b{source.element.bits}", f"b{source.element.bits}",
                            elements(v, i), 1)
            return b.compute(f"setp.ne.b{source.element.bits}", "pred", low, 0)
    elif source.element.scalar == "pred":
        true = -1 if sign_extends else 1

        def make(v: int, i: int) -> Register:
            return b.compute(f"selp.b{target.bits}", target.scalar, true, 0, elements(v, i))
    else:
        def make(v: int, i: int) -> Register:
            return b.compute(f"cvt.{signed}{target.bits}.{signed}{source.element.bits}",
                             target.scalar, elements(v, i))

    _build(ctx, op, make)
