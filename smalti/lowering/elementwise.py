"""Elementwise vector ops: one PTX instruction per register, packed x2 forms for 16 bits;
float conversions, fp8 ones through PTX's pair conversions (.e4m3x2 / .e5m2x2)."""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith
from jaxlib.mlir.dialects import math as math_ops

from smalti.dialect.diagnostics import error_at
from smalti.lowering import float_math, packing, subbyte
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import (
    ELEMENT_TYPES,
    ElementType,
    FragmentedArray,
    elements_per_register,
    fragment_geometry,
    vector_element_type,
)
from smalti.ptx import Immediate, KernelBuilder, Register

F32Computation = Callable[[KernelBuilder, list[Register]], Register]

# Ops whose PTX form exists for f32 and for 16-bit floats (scalar and packed x2).
FLOAT_NATIVE: dict[type[ir.OpView], str] = {
    arith.AddFOp: "add.rn",
    arith.SubFOp: "sub.rn",
    arith.MulFOp: "mul.rn",
    arith.MaximumFOp: "max.NaN",
    arith.MinimumFOp: "min.NaN",
    arith.MaxNumFOp: "max",
    arith.MinNumFOp: "min",
    arith.NegFOp: "neg",
    math_ops.AbsFOp: "abs",
    math_ops.FmaOp: "fma.rn",
}
LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453


def _f32(opcode: str) -> F32Computation:
    return lambda b, xs: b.compute(f"{opcode}.f32", "f32", *xs)


def _scaled(opcode: str, before: float | None, after: float | None) -> F32Computation:
    """`opcode` on x * before, times after: exp(x) = 2^(x log2 e), log(x) = log2(x) ln 2.
    (The .approx unit's relative error is about 2^-22; see the PTX ISA for ex2 and lg2.)"""

    def compute(b: KernelBuilder, xs: list[Register]) -> Register:
        (x,) = xs
        if before is not None:
            x = b.compute("mul.rn.f32", "f32", x, Immediate(before, "f32"))
        y = b.compute(f"{opcode}.f32", "f32", x)
        return y if after is None else b.compute("mul.rn.f32", "f32", y, Immediate(after, "f32"))

    return compute


# Ops PTX has for f32 only: 16-bit operands are widened, computed, and rounded once.
FLOAT_VIA_F32: dict[type[ir.OpView], F32Computation] = {
    arith.DivFOp: _f32("div.rn"),
    math_ops.SqrtOp: _f32("sqrt.rn"),
    math_ops.RsqrtOp: _f32("rsqrt.approx"),
    math_ops.TanhOp: _f32("tanh.approx"),
    # .ftz: one MUFU.EX2 (without it ptxas adds a range check and two scalings around it);
    # results below 2^-126 become 0, as XLA flushes f32 subnormals on GPUs
    math_ops.ExpOp: _scaled("ex2.approx.ftz", LOG2_E, None),
    math_ops.Exp2Op: _f32("ex2.approx.ftz"),
    math_ops.LogOp: _scaled("lg2.approx", None, LN_2),
    math_ops.Log2Op: _f32("lg2.approx"),
    math_ops.FloorOp: float_math.rounded("rmi"),
    math_ops.CeilOp: float_math.rounded("rpi"),
    math_ops.TruncOp: float_math.rounded("rzi"),
    math_ops.RoundEvenOp: float_math.rounded("rni"),
    math_ops.RoundOp: float_math.round_half_away,
    math_ops.CopySignOp: float_math.copysign,
    math_ops.SinOp: float_math.trigonometric("sin"),
    math_ops.CosOp: float_math.trigonometric("cos"),
    math_ops.PowFOp: float_math.powf,
    arith.RemFOp: float_math.remf,
}
FP8_NAMES = {"f8E4M3FN": "e4m3x2", "f8E5M2": "e5m2x2"}  # PTX's pair type of each fp8 format


def result_array(ctx: LoweringContext, op: ir.OpView, element: ElementType,
                  make_register) -> FragmentedArray:
    """Build the result array of `op` register by register with `make_register(v, k)`."""
    result = op.result
    shape = tuple(ir.VectorType(result.type).shape)
    layout = layouts_of(op, "out_layouts", 1)[0]
    count, length = fragment_geometry(layout, shape)
    per_vector = length // elements_per_register(element, length)
    vectors = tuple(tuple(make_register(v, k) for k in range(per_vector)) for v in range(count))
    return FragmentedArray(layout, shape, element, vectors, length)


def vector_operands(ctx: LoweringContext, op: ir.OpView) -> list[FragmentedArray]:
    """The op's vector operands, each checked to have the result's layout."""
    arrays = [ctx.array(op, v) for v in op.operation.operands]
    layout = layouts_of(op, "out_layouts", 1)[0]
    for i, array in enumerate(arrays):
        if array.layout != layout:
            raise error_at(op, f"operand #{i} has layout {array.layout} but the result has "
                               f"{layout}; run smalti-infer-layouts or insert a layout_cast")
    return arrays


def lower_elementwise(ctx: LoweringContext, op: ir.OpView) -> None:
    """Lower an elementwise float arith/math op on vectors (integer ops: integer.py)."""
    kind = type(op)
    element = vector_element_type(ir.VectorType(op.result.type).element_type)
    if element is None:
        raise error_at(op, f"vectors of {op.result.type} are not supported")
    if element.name in FP8_NAMES:
        raise error_at(op, f"has no lowering for vectors of {element.name}: PTX computes "
                           "nothing in fp8; arith.extf to f32 first")
    subbyte.refuse(op, element)
    if not element.is_float:
        raise error_at(op, f"has no lowering for vectors of {element.name}")
    operands = vector_operands(ctx, op)
    b = ctx.builder
    if kind in FLOAT_NATIVE:
        def make(v: int, k: int) -> Register:
            rtype = operands[0].register_type
            return b.compute(f"{FLOAT_NATIVE[kind]}.{rtype}", rtype,
                             *(a.vectors[v][k] for a in operands))
    else:
        def make(v: int, k: int) -> Register:
            return _via_f32(ctx, FLOAT_VIA_F32[kind], operands, v, k)
    ctx.set(op.result, result_array(ctx, op, element, make))


def _via_f32(ctx: LoweringContext, compute: F32Computation, operands: list[FragmentedArray],
             v: int, k: int) -> Register:
    """Apply an f32-only computation to register k of vector v, widening 16-bit inputs first
    and rounding the result once."""
    b = ctx.builder
    first = operands[0]
    if first.element.bits == 32:
        return compute(b, [a.vectors[v][k] for a in operands])
    halves = [unpack(ctx, a, a.vectors[v][k]) for a in operands]
    narrow = first.element.scalar
    results = []
    for lane in range(len(halves[0])):
        wide = [b.compute(f"cvt.f32.{narrow}", "f32", h[lane]) for h in halves]
        results.append(compute(b, wide))
    return narrow_from_f32(ctx, first.element, results)


def unpack(ctx: LoweringContext, array: FragmentedArray, reg: Register) -> list[Register]:
    """The elements (low first) of a packed register, each in its own register, or [reg]."""
    return packing.elements(ctx, array.element, reg, array.pack)


@lowering_rule(*FLOAT_NATIVE, *FLOAT_VIA_F32)
def _elementwise(ctx: LoweringContext, op: ir.OpView) -> None:
    if not isinstance(op.operation.results[0].type, ir.VectorType):
        raise error_at(op, "float scalars are not supported; compute on vectors")
    lower_elementwise(ctx, op)


@lowering_rule(arith.ExtFOp, arith.TruncFOp)
def _float_cast(ctx: LoweringContext, op: arith.ExtFOp | arith.TruncFOp) -> None:
    """Conversions between f32, bf16/f16 and fp8, through f32: widening is exact, and
    narrowing rounds once (to nearest even; to fp8 also saturating to the largest finite
    value, `.satfinite`). The layout stays; only the packing changes."""
    source = ctx.array(op, op.in_)
    target = vector_element_type(ir.VectorType(op.out.type).element_type)
    if source.element.name == "f4E2M1FN" and target is not None:
        ctx.set(op.out, subbyte.widen(ctx, op, source, target))
        return
    floats = ("f32", "bf16", "f16", *FP8_NAMES)
    if target is None or source.element.name not in floats or target.name not in floats:
        raise error_at(op, f"converts only between f32, bf16, f16 and fp8 (f8E4M3FN, "
                           f"f8E5M2), not {source.element.name} -> {op.out.type}")
    pack = elements_per_register(target, source.vector_length)
    vectors = []
    for vector in source.vectors:
        wide = [w for r in vector for w in widen_to_f32(ctx, source, r)]
        vectors.append(tuple(narrow_from_f32(ctx, target, wide[i:i + pack])
                             for i in range(0, len(wide), pack)))
    ctx.set(op.out, FragmentedArray(source.layout, source.shape, target, tuple(vectors),
                                    source.vector_length))


def widen_to_f32(ctx: LoweringContext, array: FragmentedArray, reg: Register
                 ) -> list[Register]:
    """The elements of one register of `array` as f32 registers (exact), lowest first."""
    b = ctx.builder
    element = array.element
    if element.name == "f32":
        return [reg]
    if element.name not in FP8_NAMES:
        return [b.compute(f"cvt.f32.{element.scalar}", "f32", h) for h in unpack(ctx, array, reg)]
    # fp8 pairs (.b16) widen to f16x2 (exact), whose halves widen to f32
    pairs = packing.split(ctx, element, reg, array.pack, max(array.pack // 2, 1))
    wide = []
    for pair in pairs:
        halves = b.compute(f"cvt.rn.f16x2.{FP8_NAMES[element.name]}", "b32", pair)
        lo, hi = packing.elements(ctx, ELEMENT_TYPES["f16"], halves, 2)
        wide.extend(b.compute("cvt.f32.f16", "f32", h) for h in (lo, hi)[:array.pack])
    return wide


def narrow_from_f32(ctx: LoweringContext, element: ElementType, values: list[Register]
                    ) -> Register:
    """`values` (f32 registers, lowest first) rounded to `element` and packed into one
    register: two 16-bit floats, or one to four fp8 values (PTX converts fp8 in pairs)."""
    b = ctx.builder
    if element.name == "f32":
        (value,) = values
        return value
    if element.name in FP8_NAMES:  # cvt.rn.satfinite.e4m3x2.f32 d, a, b puts a in the upper byte
        opcode = f"cvt.rn.satfinite.{FP8_NAMES[element.name]}.f32"
        pairs = [b.compute(opcode, "b16", values[min(i + 1, len(values) - 1)], values[i])
                 for i in range(0, len(values), 2)]
        return packing.join(ctx, element, pairs, 2)
    if len(values) == 2:  # cvt.rn.bf16x2.f32 d, a, b puts a in the upper half
        return b.compute(f"cvt.rn.{element.packed}.f32", "b32", values[1], values[0])
    return b.compute(f"cvt.rn.{element.scalar}.f32", "b16", values[0])


__all__ = ["ELEMENT_TYPES", "FP8_NAMES", "lower_elementwise", "narrow_from_f32", "result_array",
           "unpack", "vector_operands", "widen_to_f32"]
