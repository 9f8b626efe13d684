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
from smalti.lowering import int8_floats, packing, subbyte
from smalti.lowering.constants import value_bits
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.elementwise import FP8_NAMES, unpack
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar
from smalti.lowering.values import (
    ElementType,
    FragmentedArray,
    ScalarValue,
    element_type,
    fragment_geometry,
    register_bits,
    vector_element_type,
)
from smalti.ptx import Immediate, Register

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
    """fp8 values have no PTX comparisons or integer conversions: a located error (also for
    4-bit values, which are only widened)."""
    subbyte.refuse(op, *elements)
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
    elements_a, elements_b = _Elements(ctx, a), _Elements(ctx, b)
    builder = ctx.builder
    if floats:
        if predicate not in CMPF:
            raise error_at(op, "the always-false and always-true predicates are not supported")
        opcode = f"setp.{CMPF[predicate]}.f32"

        def make(v: int, i: int) -> Register:
            x, y = elements_a(v, i), elements_b(v, i)
            return builder.compute(opcode, "pred", _as_f32(ctx, a, x), _as_f32(ctx, b, y))
    elif a.element.scalar == "pred":
        def make(v: int, i: int) -> Register:
            return compare_predicates(ctx, predicate, elements_a(v, i), elements_b(v, i))
    else:
        comparison, signed = CMPI[predicate]
        kind = "s" if signed else "u"
        opcode = f"setp.{comparison}.{kind}{max(a.element.bits, 16)}"  # no 8-bit setp

        def make(v: int, i: int) -> Register:
            x, y = elements_a(v, i), elements_b(v, i)
            if a.element.bits == 8:
                x, y = _widen_byte(ctx, x, kind), _widen_byte(ctx, y, kind)
            return builder.compute(opcode, "pred", x, y)

    _build(ctx, op, make)


def _widen_byte(ctx: LoweringContext, byte: Register, kind: str) -> Register:
    """An i8 element (the low byte of a .b16) sign- ("s") or zero-extended to 16 bits."""
    if kind == "s":
        return ctx.builder.compute("cvt.s16.s8", "b16", byte)
    return ctx.builder.compute("and.b16", "b16", byte, 0xFF)


def compare_predicates(ctx: LoweringContext, predicate: int, x: Register, y: Register
                       ) -> Register:
    """arith.cmpi of two i1 values (true is 1 unsigned, -1 signed), by predicate logic."""
    b = ctx.builder
    comparison, signed = CMPI[predicate]
    if comparison in ("eq", "ne"):
        differ = b.compute("xor.pred", "pred", x, y)
        return differ if comparison == "ne" else b.compute("not.pred", "pred", differ)
    if signed:  # as signed values true (-1) < false (0): compare the operands swapped
        x, y = y, x
    # unsigned: x < y is !x & y; x <= y is !x | y; x > y is x & !y; x >= y is x | !y
    if comparison in ("lt", "le"):
        x, y = b.compute("not.pred", "pred", x), y
    else:
        y = b.compute("not.pred", "pred", y)
    return b.compute(f"{'and' if comparison in ('lt', 'gt') else 'or'}.pred", "pred", x, y)


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
        if predicate.constant is not None:
            ctx.set(op.result, a if predicate.constant else b)
            return
        if a.element.scalar == "pred":
            mask = FragmentedArray(a.layout, a.shape, a.element,
                                   tuple((predicate.operand,) * len(v) for v in a.vectors),
                                   a.vector_length)
            _select_predicates(ctx, op, mask, a, b)
            return
        vectors = tuple(tuple(ctx.builder.compute(f"selp.b{register_bits(a.element, a.pack)}",
                                                  a.register_type, x, y, predicate.operand)
                              for x, y in zip(va, vb, strict=True))
                        for va, vb in zip(a.vectors, b.vectors, strict=True))
        ctx.set(op.result, FragmentedArray(a.layout, a.shape, a.element, vectors,
                                           a.vector_length))
        return
    mask = ctx.array(op, condition)
    if a.element.scalar == "pred":
        _select_predicates(ctx, op, mask, a, b)
        return
    elements_a, elements_b = _Elements(ctx, a), _Elements(ctx, b)

    def make(v: int, i: int) -> Register:
        return ctx.builder.compute(opcode, register_type, elements_a(v, i), elements_b(v, i),
                                   mask.vectors[v][i])

    _build(ctx, op, make)


def _select_predicates(ctx: LoweringContext, op: arith.SelectOp, mask: FragmentedArray,
                       a: FragmentedArray, b: FragmentedArray) -> None:
    """select of i1 vectors (PTX has no selp.pred): (c & a) | (!c & b)."""
    builder = ctx.builder

    def make(v: int, i: int) -> Register:
        c = mask.vectors[v][i]
        chosen = builder.compute("and.pred", "pred", c, a.vectors[v][i])
        other = builder.compute("and.pred", "pred", builder.compute("not.pred", "pred", c),
                                b.vectors[v][i])
        return builder.compute("or.pred", "pred", chosen, other)

    _build(ctx, op, make)


@lowering_rule(*CONVERSIONS)
def _convert(ctx: LoweringContext, op: arith.SIToFPOp | arith.UIToFPOp | arith.FPToSIOp
             | arith.FPToUIOp) -> None:
    """int <-> float, one cvt per element (integers rounded to nearest even, floats toward
    zero). i1 converts by selection and by the lowest bit; i8 <-> bf16 goes through 32-bit
    integers (PTX has no cvt between them; both steps are exact or saturate)."""
    source = ctx.array(op, op.in_)
    target = vector_element_type(ir.VectorType(op.out.type).element_type)
    if target is None:
        raise error_at(op, f"vectors of {op.out.type} are not supported")
    rounding, signed = CONVERSIONS[type(op)]
    to_float = isinstance(op, TO_FLOAT)
    if to_float and source.element.bits == 4:  # i4: a few bit operations per register
        ctx.set(op.out, subbyte.widen(ctx, op, source, target, signed))
        return
    _no_fp8(op, source.element, target)
    if to_float and int8_floats.applies(source, target):  # magic numbers, not cvt
        ctx.set(op.out, int8_floats.convert(ctx, source, target, signed))
        return
    integer, number = (source.element, target) if to_float else (target, source.element)
    kind = "s" if signed else "u"
    elements = _Elements(ctx, source)
    b = ctx.builder
    if integer.scalar == "pred" and to_float:
        true = -1.0 if signed else 1.0  # a signed i1 that is set is -1
        if number.name in ("f32", "f64"):
            opcode, values = f"selp.{number.name}", (Immediate(true, number.name),
                                                      Immediate(0.0, number.name))
        else:  # 16-bit floats: their bit patterns
            opcode, values = "selp.b16", (Immediate(value_bits(number, true)), Immediate(0))

        def make(v: int, i: int) -> Register:
            return b.compute(opcode, number.scalar, *values, elements(v, i))
    elif integer.scalar == "pred":  # fptosi/fptoui to i1: the lowest bit of the integer
        def make(v: int, i: int) -> Register:
            whole = b.compute(f"cvt.rzi.{kind}32.{number.scalar}", "b32", elements(v, i))
            low = b.compute("and.b32", "b32", whole, 1)
            return b.compute("setp.ne.b32", "pred", low, 0)
    elif integer.bits == 8 and number.name == "bf16":
        def make(v: int, i: int) -> Register:
            if to_float:
                wide = b.compute(f"cvt.{kind}32.{kind}8", "b32", elements(v, i))
                return b.compute(f"cvt.rn.bf16.{kind}32", "bf16", wide)
            wide = b.compute(f"cvt.rzi.{kind}32.bf16", "b32", elements(v, i))
            return b.compute(f"cvt.{kind}8.{kind}32", "b16", wide)
    else:
        int_type = f"{kind}{integer.bits}"
        opcode = (f"cvt.{rounding}.{target.scalar}.{int_type}" if to_float
                  else f"cvt.{rounding}.{int_type}.{source.element.scalar}")

        def make(v: int, i: int) -> Register:
            return b.compute(opcode, target.scalar if to_float else int_type, elements(v, i))

    _build(ctx, op, make)


@lowering_rule(arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp)
def _integer_width(ctx: LoweringContext, op: arith.ExtSIOp | arith.ExtUIOp | arith.TruncIOp
                   ) -> None:
    """Integer widening (sign- or zero-extending) and narrowing (keeping the low bits); an i1
    widens to -1/0 (extsi) or 1/0 (extui) and narrows from the lowest bit. On vectors, or on
    uniform scalars (folded when constant)."""
    if not isinstance(op.out.type, ir.VectorType):
        _scalar_width(ctx, op)
        return
    source = ctx.array(op, op.in_)
    target = vector_element_type(ir.VectorType(op.out.type).element_type)
    if target is None or target.is_float or source.element.is_float:
        raise error_at(op, f"vectors of {op.out.type} are not supported")
    elements = _Elements(ctx, source)
    _build(ctx, op, lambda v, i: _resize(ctx, op, source.element, target, elements(v, i)))


def _resize(ctx: LoweringContext, op: arith.ExtSIOp | arith.ExtUIOp | arith.TruncIOp,
            source: ElementType, target: ElementType, value: Register) -> Register:
    """One integer (an i8 in the low byte of a .b16, an i1 in a predicate) of `source`
    type as `target`."""
    b = ctx.builder
    if target.scalar == "pred":  # trunci to i1: the lowest bit
        bits = max(source.bits, 16)
        low = b.compute(f"and.b{bits}", f"b{bits}", value, 1)
        return b.compute(f"setp.ne.b{bits}", "pred", low, 0)
    if source.scalar == "pred":
        true = -1 if isinstance(op, arith.ExtSIOp) else 1
        bits = max(target.bits, 16)
        return b.compute(f"selp.b{bits}", f"b{bits}", true, 0, value)
    kind = "s" if isinstance(op, arith.ExtSIOp) else "u"
    return b.compute(f"cvt.{kind}{target.bits}.{kind}{source.bits}", target.scalar, value)


def _scalar_width(ctx: LoweringContext, op: arith.ExtSIOp | arith.ExtUIOp | arith.TruncIOp
                  ) -> None:
    """extsi / extui / trunci of a uniform integer (canonicalization makes extui of an i1
    from a select of 1 and 0)."""
    source = ctx.scalar(op, op.in_)
    target = element_type(op.out.type)
    if target is None or target.is_float or source.type.is_float:
        raise error_at(op, f"scalars of {op.out.type} are not supported")
    if source.constant is not None:
        value = int(source.constant) % (1 << source.type.bits)
        if isinstance(op, arith.ExtSIOp) and value >> (source.type.bits - 1):
            value -= 1 << source.type.bits
        value %= 1 << target.bits
        if target.bits > 1 and value >> (target.bits - 1):
            value -= 1 << target.bits
        ctx.set(op.out, constant_scalar(value, target))
        return
    register = _resize(ctx, op, source.type, target, source.operand)
    ctx.set(op.out, ScalarValue(register, target, 1))
