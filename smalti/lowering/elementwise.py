"""Elementwise vector ops: one PTX instruction per register, packed x2 forms for 16 bits;
float conversions, fp8 ones through PTX's pair conversions (.e4m3x2 / .e5m2x2)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith
from jaxlib.mlir.dialects import math as math_ops

from smalti.dialect.diagnostics import error_at
from smalti.lowering import packing
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar, scalar_add, scalar_mul, scalar_sub
from smalti.lowering.values import (
    ELEMENT_TYPES,
    ElementType,
    FragmentedArray,
    ScalarValue,
    element_type,
    elements_per_register,
    fragment_geometry,
    register_bits,
    register_type,
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
    math_ops.ExpOp: _scaled("ex2.approx", LOG2_E, None),
    math_ops.Exp2Op: _f32("ex2.approx"),
    math_ops.LogOp: _scaled("lg2.approx", None, LN_2),
    math_ops.Log2Op: _f32("lg2.approx"),
}
INTEGER_OPS: dict[type[ir.OpView], str] = {
    arith.AddIOp: "add.{s}",
    arith.SubIOp: "sub.{s}",
    arith.MulIOp: "mul.lo.{s}",
    arith.MaxSIOp: "max.{s}",
    arith.MinSIOp: "min.{s}",
    arith.MaxUIOp: "max.{u}",
    arith.MinUIOp: "min.{u}",
    arith.AndIOp: "and.{b}",
    arith.OrIOp: "or.{b}",
    arith.XOrIOp: "xor.{b}",
}
LOGICAL_OPS = (arith.AndIOp, arith.OrIOp, arith.XOrIOp)  # the integer ops i1 vectors have
# Index arithmetic the scalar rules fold (smalti.lowering.scalar); on vectors, elementwise.
SCALAR_INTEGER_OPS = {arith.AddIOp: scalar_add, arith.SubIOp: scalar_sub,
                      arith.MulIOp: scalar_mul}
FP8_NAMES = {"f8E4M3FN": "e4m3x2", "f8E5M2": "e5m2x2"}  # PTX's pair type of each fp8 format


def _result_array(ctx: LoweringContext, op: ir.OpView, element: ElementType,
                  make_register) -> FragmentedArray:
    """Build the result array of `op` register by register with `make_register(v, k)`."""
    result = op.result
    shape = tuple(ir.VectorType(result.type).shape)
    layout = layouts_of(op, "out_layouts", 1)[0]
    count, length = fragment_geometry(layout, shape)
    per_vector = length // elements_per_register(element, length)
    vectors = tuple(tuple(make_register(v, k) for k in range(per_vector)) for v in range(count))
    return FragmentedArray(layout, shape, element, vectors, length)


def _operands(ctx: LoweringContext, op: ir.OpView) -> list[FragmentedArray]:
    arrays = [ctx.array(op, v) for v in op.operation.operands]
    layout = layouts_of(op, "out_layouts", 1)[0]
    for i, array in enumerate(arrays):
        if array.layout != layout:
            raise error_at(op, f"operand #{i} has layout {array.layout} but the result has "
                               f"{layout}; run smalti-infer-layouts or insert a layout_cast")
    return arrays


def lower_elementwise(ctx: LoweringContext, op: ir.OpView) -> None:
    """Lower an elementwise arith/math op on vectors."""
    kind = type(op)
    element = vector_element_type(ir.VectorType(op.result.type).element_type)
    if element is None:
        raise error_at(op, f"vectors of {op.result.type} are not supported")
    if element.name in FP8_NAMES:
        raise error_at(op, f"has no lowering for vectors of {element.name}: PTX computes "
                           "nothing in fp8; arith.extf to f32 first")
    operands = _operands(ctx, op)
    b = ctx.builder
    if element.scalar == "pred" and kind not in LOGICAL_OPS:
        raise error_at(op, "vectors of i1 support only andi, ori and xori")
    if kind in INTEGER_OPS and not element.is_float:
        bits = "pred" if element.scalar == "pred" else f"b{element.bits}"
        opcode = INTEGER_OPS[kind].format(s=element.scalar, b=bits, u=f"u{element.bits}")

        def make(v: int, k: int) -> Register:
            return b.compute(opcode, element.scalar, *(a.vectors[v][k] for a in operands))
    elif kind in FLOAT_NATIVE and element.is_float:
        def make(v: int, k: int) -> Register:
            rtype = operands[0].register_type
            return b.compute(f"{FLOAT_NATIVE[kind]}.{rtype}", rtype,
                             *(a.vectors[v][k] for a in operands))
    elif kind in FLOAT_VIA_F32 and element.is_float:
        def make(v: int, k: int) -> Register:
            return _via_f32(ctx, FLOAT_VIA_F32[kind], operands, v, k)
    else:
        raise error_at(op, f"has no lowering for vectors of {element.name}")
    ctx.set(op.result, _result_array(ctx, op, element, make))


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


@lowering_rule(*(c for c in (*FLOAT_NATIVE, *FLOAT_VIA_F32, *INTEGER_OPS)
                 if c not in SCALAR_INTEGER_OPS))
def _elementwise(ctx: LoweringContext, op: ir.OpView) -> None:
    lower_elementwise(ctx, op)


@lowering_rule(*SCALAR_INTEGER_OPS)
def _integer_binary(ctx: LoweringContext, op: arith.AddIOp | arith.SubIOp | arith.MulIOp
                    ) -> None:
    """Index arithmetic on uniform scalars (folded where it can be); elementwise on vectors."""
    if isinstance(op.result.type, ir.VectorType):
        lower_elementwise(ctx, op)
        return
    lhs, rhs = ctx.scalar(op, op.lhs), ctx.scalar(op, op.rhs)
    ctx.set(op.result, SCALAR_INTEGER_OPS[type(op)](ctx, lhs, rhs))


@lowering_rule(arith.ConstantOp)
def _constant(ctx: LoweringContext, op: arith.ConstantOp) -> None:
    """A scalar constant is an immediate; a vector constant a splat register."""
    result, attr = op.result, op.value
    if isinstance(result.type, ir.VectorType):
        splat_constant(ctx, op, attr)
        return
    element = element_type(result.type)
    if element is None:
        raise error_at(op, f"constants of type {result.type} are not supported")
    if isinstance(attr, ir.IntegerAttr):
        ctx.set(result, constant_scalar(ir.IntegerAttr(attr).value, element))
    elif isinstance(attr, ir.FloatAttr):
        ctx.set(result, ScalarValue(Immediate(ir.FloatAttr(attr).value, element.scalar),
                                    element, 0))
    else:
        raise error_at(op, f"unsupported constant {attr}")


@lowering_rule(arith.ExtFOp, arith.TruncFOp)
def _float_cast(ctx: LoweringContext, op: arith.ExtFOp | arith.TruncFOp) -> None:
    """Conversions between f32, bf16/f16 and fp8, through f32: widening is exact, and
    narrowing rounds once (to nearest even; to fp8 also saturating to the largest finite
    value, `.satfinite`). The layout stays; only the packing changes."""
    source = ctx.array(op, op.in_)
    target = vector_element_type(ir.VectorType(op.out.type).element_type)
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


def splat_constant(ctx: LoweringContext, op: arith.ConstantOp, attr: ir.Attribute) -> None:
    """A splat vector constant: one register (per packing) shared by every element."""
    if not (isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat):
        raise error_at(op, "non-splat vector constants are not supported yet")
    vector_type = ir.VectorType(op.result.type)
    element = vector_element_type(vector_type.element_type)
    if element is None:
        raise error_at(op, f"vector constants of {vector_type.element_type} are not supported")
    layout = layouts_of(op, "out_layouts", 1)[0]
    shape = tuple(vector_type.shape)
    count, length = fragment_geometry(layout, shape)
    pack = elements_per_register(element, length)
    bits = constant_bits(element, ir.DenseElementsAttr(attr).get_splat_value())
    bits = sum(bits << (element.bits * i) for i in range(pack))
    reg = ctx.builder.reg(register_type(element, pack))
    move = ("mov.pred" if element.scalar == "pred"
            else f"mov.b{register_bits(element, pack)}")
    ctx.builder.emit(move, reg, Immediate(bits))
    vectors = tuple((reg,) * (length // pack) for _ in range(count))
    ctx.set(op.result, FragmentedArray(layout, shape, element, vectors, length))


def constant_bits(element: ElementType, attr: ir.Attribute) -> int:
    """The bit pattern of a scalar constant attribute of `element` type."""
    if isinstance(attr, ir.BoolAttr):
        return int(ir.BoolAttr(attr).value)
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value & ((1 << element.bits) - 1)
    value = ir.FloatAttr(attr).value
    match element.name:
        case "f32":
            return struct.unpack("<I", struct.pack("<f", value))[0]
        case "f64":
            return struct.unpack("<Q", struct.pack("<d", value))[0]
        case "bf16":
            return int(np.array(value, dtype=ml_dtypes.bfloat16).view(np.uint16))
        case "f16":
            return int(np.array(value, dtype=np.float16).view(np.uint16))
        case "f8E4M3FN":
            return int(np.array(value, dtype=ml_dtypes.float8_e4m3fn).view(np.uint8))
        case "f8E5M2":
            return int(np.array(value, dtype=ml_dtypes.float8_e5m2).view(np.uint8))
    raise ValueError(f"no constant encoding for {element.name}")


__all__ = ["ELEMENT_TYPES", "FP8_NAMES", "lower_elementwise", "narrow_from_f32", "splat_constant",
           "unpack", "widen_to_f32"]
