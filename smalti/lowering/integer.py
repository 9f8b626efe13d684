"""Integer arithmetic, elementwise on vectors and on uniform scalars.

Vectors of i16, i32 and i64 compute in their own width, one element per register. i8
elements (packed four to a .b32, `elements_per_register`) are unpacked, widened to 16 bits
(PTX has no 8-bit arithmetic) the way the op reads them (sign- or zero-extended, or not at
all where only the low bits matter), computed, and their low bytes packed again. i1 vectors
(predicates) have the ops that are logic on one bit. Scalars (index, i32, ...) use the same
instructions; constant operands fold.

Results MLIR leaves undefined, and what smalti gives:
- division (div, rem, ceildiv, floordiv) by zero, and the signed ones of the most negative
  value by -1: undefined behaviour in MLIR; the lowering emits PTX's `div`/`rem`, whose
  result is unspecified there (the simulator gives all ones and the dividend). By a
  constant power of two it emits shifts and masks instead (ptxas keeps a `div` by a
  constant a division routine: a call for 64 bits);
- shifts by the bit width or more (poison in MLIR): PTX clamps the amount, so shli and
  shrui give 0 and shrsi the sign (0 or -1), as numpy's `<<` and `>>` do; amounts are read
  unsigned, so a negative amount is a large one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith
from jaxlib.mlir.dialects import math as math_ops

from smalti.dialect.diagnostics import error_at
from smalti.lowering import packing, subbyte
from smalti.lowering.context import LoweringContext
from smalti.lowering.elementwise import result_array, vector_operands
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar, scalar_add, scalar_mul, scalar_sub
from smalti.lowering.values import ElementType, ScalarValue, vector_element_type
from smalti.ptx import Immediate, KernelBuilder, Register

Operand = Register | Immediate
Emit = Callable[[KernelBuilder, int, list[Operand]], Register]


@dataclass(frozen=True)
class IntegerOp:
    """How an op computes on `width`-bit operands (16, 32 or 64), and how an i8 operand is
    widened to 16 bits first: "s" sign-extended, "u" zero-extended, "" as it is (the op's low
    bits depend only on the operands' low bits)."""

    widen: tuple[str, ...]
    emit: Emit
    fold: Callable[..., int | None]  # on the operands' signed values; None: do not fold


def _binary(opcode: str) -> Emit:
    """One instruction, `opcode` with {s}/{u}/{b} standing for the width's types."""
    return lambda b, w, xs: b.compute(opcode.format(s=f"s{w}", u=f"u{w}", b=f"b{w}"),
                                      f"b{w}", *xs)


def _remainder(b: KernelBuilder, w: int, a: Operand, c: Operand, q: Register) -> Register:
    """a - q * c: the remainder of a quotient q truncated toward zero (cheaper than rem)."""
    return b.compute(f"sub.s{w}", f"b{w}", a, b.compute(f"mul.lo.s{w}", f"b{w}", q, c))


def _adjusted(b: KernelBuilder, w: int, q: Register, condition: Register, step: int
              ) -> Register:
    """q + step where `condition` holds, else q."""
    moved = b.compute(f"add.s{w}", f"b{w}", q, step)
    return b.compute(f"selp.b{w}", f"b{w}", moved, q, condition)


def _ceildivsi(b: KernelBuilder, w: int, xs: list[Operand]) -> Register:
    """Rounded toward +inf: the truncated quotient, plus one when the remainder is nonzero
    and the operands have the same sign (the exact quotient is positive)."""
    a, c = xs
    q = b.compute(f"div.s{w}", f"b{w}", a, c)
    inexact = b.compute(f"setp.ne.s{w}", "pred", _remainder(b, w, a, c, q), 0)
    same_sign = b.compute(f"setp.ge.s{w}", "pred", b.compute(f"xor.b{w}", f"b{w}", a, c), 0)
    return _adjusted(b, w, q, b.compute("and.pred", "pred", inexact, same_sign), 1)


def _floordivsi(b: KernelBuilder, w: int, xs: list[Operand]) -> Register:
    """Rounded toward -inf: the truncated quotient, minus one when the remainder is nonzero
    and its sign differs from the divisor's (the exact quotient is negative)."""
    a, c = xs
    q = b.compute(f"div.s{w}", f"b{w}", a, c)
    r = _remainder(b, w, a, c, q)
    inexact = b.compute(f"setp.ne.s{w}", "pred", r, 0)
    signs_differ = b.compute(f"setp.lt.s{w}", "pred", b.compute(f"xor.b{w}", f"b{w}", r, c), 0)
    return _adjusted(b, w, q, b.compute("and.pred", "pred", inexact, signs_differ), -1)


def _ceildivui(b: KernelBuilder, w: int, xs: list[Operand]) -> Register:
    """Unsigned, rounded up: the quotient plus one when the remainder is nonzero."""
    a, c = xs
    q = b.compute(f"div.u{w}", f"b{w}", a, c)
    inexact = b.compute(f"setp.ne.b{w}", "pred", _remainder(b, w, a, c, q), 0)
    return _adjusted(b, w, q, inexact, 1)


def _power_of_two(divisor: Operand) -> int | None:
    """k when `divisor` is the constant 2^k (k >= 0), else None."""
    if not isinstance(divisor, Immediate):
        return None
    value = int(divisor.value)
    return value.bit_length() - 1 if value > 0 and value & (value - 1) == 0 else None


def _truncating_bias(b: KernelBuilder, w: int, a: Operand, k: int) -> Register:
    """a plus 2^k - 1 when a is negative (else a): shifted right by k arithmetically, the
    quotient rounded toward zero."""
    if k == 0:
        return a
    sign = b.compute(f"shr.s{w}", f"b{w}", a, w - 1)  # 0 or -1
    return b.compute(f"add.s{w}", f"b{w}", a, b.compute(f"shr.u{w}", f"b{w}", sign, w - k))


def _quotient_by_shift(how: str) -> Callable[[KernelBuilder, int, Operand, int], Register]:
    """a / 2^k rounded as `how` says ("floor", "trunc", "ceil"), signed, with shifts: ptxas
    keeps `div` by a constant a division routine (a call, for 64 bits). (Unsigned `div` and
    `rem` by 2^k the PTX builder reduces itself.)"""
    def emit(b: KernelBuilder, w: int, a: Operand, k: int) -> Register:
        match how:
            case "floor":
                return b.compute(f"shr.s{w}", f"b{w}", a, k)
            case "trunc":
                return b.compute(f"shr.s{w}", f"b{w}", _truncating_bias(b, w, a, k), k)
            case _:  # ceil: the floor, plus one when bits below 2^k are set
                floor = b.compute(f"shr.s{w}", f"b{w}", a, k)
                if k == 0:
                    return floor
                low = b.compute(f"and.b{w}", f"b{w}", a, (1 << k) - 1)
                return _adjusted(b, w, floor, b.compute(f"setp.ne.b{w}", "pred", low, 0), 1)
    return emit


def _by_power_of_two(general: Emit, how: str) -> Emit:
    """`general`, or shifts and masks when the divisor is the constant 2^k: signed quotients
    rounded as `how` says (`_quotient_by_shift`), or the truncated remainder ("rem")."""
    def emit(b: KernelBuilder, w: int, xs: list[Operand]) -> Register:
        a, c = xs
        k = _power_of_two(c)
        if k is None:
            return general(b, w, xs)
        if how == "rem":  # a - trunc(a / 2^k) * 2^k
            rounded = b.compute(f"and.b{w}", f"b{w}", _truncating_bias(b, w, a, k),
                                -(1 << k))
            return b.compute(f"sub.s{w}", f"b{w}", a, rounded)
        return _quotient_by_shift(how)(b, w, a, k)
    return emit


def _amount(b: KernelBuilder, w: int, amount: Operand) -> Operand:
    """A shift amount as PTX's .u32 operand, read unsigned and clamped (a 64-bit amount of
    2^32 must not become 0)."""
    if isinstance(amount, Immediate):
        return Immediate(min(int(amount.value) % (1 << w), w))
    if w == 16:
        return b.compute("cvt.u32.u16", "b32", amount)
    if w == 64:
        return b.compute("cvt.u32.u64", "b32", b.compute("min.u64", "b64", amount, 64))
    return amount


def _shift(opcode: str) -> Emit:
    def emit(b: KernelBuilder, w: int, xs: list[Operand]) -> Register:
        value, amount = xs
        return b.compute(opcode.format(s=f"s{w}", u=f"u{w}", b=f"b{w}"), f"b{w}", value,
                         _amount(b, w, amount))

    return emit


def _truncated(a: int, c: int) -> int | None:
    if c == 0:
        return None
    q = abs(a) // abs(c)
    return q if (a < 0) == (c < 0) else -q


def _floor_div(a: int, c: int) -> int | None:
    return None if c == 0 else a // c


def _ceil_div(a: int, c: int) -> int | None:
    return None if c == 0 else -(-a // c)


def _signed_rem(a: int, c: int) -> int | None:
    q = _truncated(a, c)
    return None if q is None else a - q * c


# fold functions take (bits, *signed values) and return a value to wrap to `bits`.
INTEGER_OPS: dict[type[ir.OpView], IntegerOp] = {
    arith.AddIOp: IntegerOp(("", ""), _binary("add.{s}"), lambda n, a, c: a + c),
    arith.SubIOp: IntegerOp(("", ""), _binary("sub.{s}"), lambda n, a, c: a - c),
    arith.MulIOp: IntegerOp(("", ""), _binary("mul.lo.{s}"), lambda n, a, c: a * c),
    arith.AndIOp: IntegerOp(("", ""), _binary("and.{b}"), lambda n, a, c: a & c),
    arith.OrIOp: IntegerOp(("", ""), _binary("or.{b}"), lambda n, a, c: a | c),
    arith.XOrIOp: IntegerOp(("", ""), _binary("xor.{b}"), lambda n, a, c: a ^ c),
    arith.MaxSIOp: IntegerOp(("s", "s"), _binary("max.{s}"), lambda n, a, c: max(a, c)),
    arith.MinSIOp: IntegerOp(("s", "s"), _binary("min.{s}"), lambda n, a, c: min(a, c)),
    arith.MaxUIOp: IntegerOp(("u", "u"), _binary("max.{u}"),
                             lambda n, a, c: max(a % (1 << n), c % (1 << n))),
    arith.MinUIOp: IntegerOp(("u", "u"), _binary("min.{u}"),
                             lambda n, a, c: min(a % (1 << n), c % (1 << n))),
    arith.DivSIOp: IntegerOp(("s", "s"), _by_power_of_two(_binary("div.{s}"), "trunc"),
                             lambda n, a, c: _truncated(a, c)),
    arith.RemSIOp: IntegerOp(("s", "s"), _by_power_of_two(_binary("rem.{s}"), "rem"),
                             lambda n, a, c: _signed_rem(a, c)),
    arith.DivUIOp: IntegerOp(("u", "u"), _binary("div.{u}"),
                             lambda n, a, c: _floor_div(a % (1 << n), c % (1 << n))),
    arith.RemUIOp: IntegerOp(("u", "u"), _binary("rem.{u}"),
                             lambda n, a, c: None if c % (1 << n) == 0
                             else a % (1 << n) % (c % (1 << n))),
    arith.CeilDivSIOp: IntegerOp(("s", "s"), _by_power_of_two(_ceildivsi, "ceil"),
                                 lambda n, a, c: _ceil_div(a, c)),
    arith.CeilDivUIOp: IntegerOp(("u", "u"), _ceildivui,
                                 lambda n, a, c: _ceil_div(a % (1 << n), c % (1 << n))),
    arith.FloorDivSIOp: IntegerOp(("s", "s"), _by_power_of_two(_floordivsi, "floor"),
                                  lambda n, a, c: _floor_div(a, c)),
    arith.ShLIOp: IntegerOp(("", "u"), _shift("shl.{b}"),
                            lambda n, a, c: 0 if c % (1 << n) >= n else a << (c % (1 << n))),
    arith.ShRSIOp: IntegerOp(("s", "u"), _shift("shr.{s}"),
                             lambda n, a, c: a >> min(c % (1 << n), n)),
    arith.ShRUIOp: IntegerOp(("u", "u"), _shift("shr.{u}"),
                             lambda n, a, c: 0 if c % (1 << n) >= n
                             else (a % (1 << n)) >> (c % (1 << n))),
    math_ops.AbsIOp: IntegerOp(("s",), _binary("abs.{s}"), lambda n, a: abs(a)),
}

# The ops on one bit (i1 vectors and scalars, in predicates): true is -1 when signed.
PREDICATE_OPS: dict[type[ir.OpView], str] = {
    arith.AndIOp: "and", arith.OrIOp: "or", arith.XOrIOp: "xor", arith.AddIOp: "xor",
    arith.SubIOp: "xor", arith.MulIOp: "and", arith.MaxSIOp: "and", arith.MinSIOp: "or",
    arith.MaxUIOp: "or", arith.MinUIOp: "and",
}
PREDICATE_FOLDS = {"and": lambda a, c: a & c, "or": lambda a, c: a | c,
                   "xor": lambda a, c: a ^ c}


def _widen(b: KernelBuilder, element: ElementType, value: Register, how: str) -> Register:
    """An i8 element (the low byte of a .b16, its upper byte unspecified) as 16 bits."""
    if element.bits != 8 or not how:
        return value
    if how == "s":
        return b.compute("cvt.s16.s8", "b16", value)
    return b.compute("and.b16", "b16", value, 0xFF)


def lower_vector_integer(ctx: LoweringContext, op: ir.OpView) -> None:
    """An integer op on vectors, element by element in the element's width (i8 in 16 bits)."""
    element = vector_element_type(ir.VectorType(op.result.type).element_type)
    if element is None or element.is_float:
        raise error_at(op, f"vectors of {op.result.type} are not supported")
    subbyte.refuse(op, element)
    operands = vector_operands(ctx, op)
    b = ctx.builder
    if element.scalar == "pred":
        if type(op) not in PREDICATE_OPS:
            raise error_at(op, "has no lowering for vectors of i1")
        opcode = f"{PREDICATE_OPS[type(op)]}.pred"

        def make(v: int, k: int) -> Register:
            return b.compute(opcode, "pred", *(a.vectors[v][k] for a in operands))
    else:
        rule = INTEGER_OPS[type(op)]
        width = max(element.bits, 16)
        pack = operands[0].pack

        def make(v: int, k: int) -> Register:
            parts = [packing.elements(ctx, element, a.vectors[v][k], pack) for a in operands]
            results = [rule.emit(b, width, [_widen(b, element, part[i], how)
                                            for part, how in zip(parts, rule.widen,
                                                                 strict=True)])
                       for i in range(pack)]
            return packing.join(ctx, element, results, 1)
    ctx.set(op.result, result_array(ctx, op, element, make))


def _wrap(value: int, bits: int) -> int:
    """`value` as a signed `bits`-bit integer."""
    value %= 1 << bits
    return value - (1 << bits) if value >> (bits - 1) else value


def lower_scalar_integer(ctx: LoweringContext, op: ir.OpView) -> None:
    """An integer op on uniform scalars: folded when its operands are constants."""
    operands = [ctx.scalar(op, v) for v in op.operation.operands]
    element = operands[0].type
    b = ctx.builder
    if element.scalar == "pred":
        if type(op) not in PREDICATE_OPS:
            raise error_at(op, "has no lowering for i1 scalars")
        how = PREDICATE_OPS[type(op)]
        if all(o.constant is not None for o in operands):
            value = PREDICATE_FOLDS[how](*(int(o.constant) & 1 for o in operands))
            ctx.set(op.result, constant_scalar(value, element))
            return
        result = b.compute(f"{how}.pred", "pred", *(_predicate(b, o) for o in operands))
        ctx.set(op.result, ScalarValue(result, element))
        return
    if element.bits < 16:
        raise error_at(op, f"has no lowering for {element.name} scalars")
    rule = INTEGER_OPS[type(op)]
    if all(o.constant is not None for o in operands):
        value = rule.fold(element.bits, *(_wrap(int(o.constant), element.bits)
                                          for o in operands))
        if value is not None:
            ctx.set(op.result, constant_scalar(_wrap(value, element.bits), element))
            return
    xs: list[Operand] = [o.operand for o in operands]  # PTX takes an immediate second source
    if isinstance(xs[0], Immediate):
        xs[0] = b.compute(f"mov.b{element.bits}", f"b{element.bits}", xs[0])
    ctx.set(op.result, ScalarValue(rule.emit(b, element.bits, xs), element,
                                   _divisor(op, operands)))


def _predicate(b: KernelBuilder, value: ScalarValue) -> Register:
    if isinstance(value.operand, Register):
        return value.operand
    return b.compute("setp.ne.u32", "pred", Immediate(int(value.operand.value) & 1), 0)


def _divisor(op: ir.OpView, operands: list[ScalarValue]) -> int:
    """A known divisor of the result (for the alignment of addresses made from it)."""
    match op, operands:
        case arith.ShLIOp(), [value, ScalarValue(constant=int() as amount)] if 0 <= amount < 32:
            return value.divisor << amount
        case (arith.DivSIOp() | arith.DivUIOp() | arith.FloorDivSIOp() | arith.CeilDivSIOp()
              | arith.CeilDivUIOp()), [value, ScalarValue(constant=int() as c)] if (
                c > 0 and value.divisor % c == 0):
            return value.divisor // c  # an exact division
    return 1


# Index arithmetic keeps its known divisors and simplifications (smalti.lowering.scalar).
SCALAR_ARITHMETIC = {arith.AddIOp: scalar_add, arith.SubIOp: scalar_sub,
                     arith.MulIOp: scalar_mul}


@lowering_rule(*INTEGER_OPS)
def _integer(ctx: LoweringContext, op: ir.OpView) -> None:
    if isinstance(op.operation.results[0].type, ir.VectorType):
        lower_vector_integer(ctx, op)
    elif type(op) in SCALAR_ARITHMETIC and ctx.scalar(op, op.lhs).type.scalar != "pred":
        lhs, rhs = ctx.scalar(op, op.lhs), ctx.scalar(op, op.rhs)
        ctx.set(op.result, SCALAR_ARITHMETIC[type(op)](ctx, lhs, rhs))
    else:
        lower_scalar_integer(ctx, op)


__all__ = ["INTEGER_OPS", "PREDICATE_OPS", "lower_scalar_integer", "lower_vector_integer"]
