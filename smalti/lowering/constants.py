"""arith.constant: scalars become immediates, vectors registers in their inferred layout.

A splat vector is one register (per packing) that every element of every thread shares. A
non-splat vector (written so, or folded by canonicalization from splats: an
insert_strided_slice of constants, a shape_cast of one) holds different values in different
threads, in any layout inference gave it. When each of its registers holds the same value in
every thread (the elements differ only from register to register), each is a `mov` of an
immediate. Otherwise the kernel carries the constant as a read-only table in global memory
(`.global .align 16 .b8 __smalti_<kernel>_constant_<n>[] = {...}`, the elements row-major as
a buffer holds them, i1 as bytes) and each thread loads its elements from it exactly as a
`vector_load` of that buffer would: the same wide accesses, in any layout.
"""

from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import arith, func

from smalti.dialect.diagnostics import error_at
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.memory import load_global
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar
from smalti.lowering.values import (
    BufferValue,
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
from smalti.ptx import Immediate
from smalti.tiling import WGSplatLayout

TABLE_ALIGNMENT = 16  # as kernel buffers: vector_load's widest accesses need it
NUMPY_FLOATS = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
                "bf16": ml_dtypes.bfloat16, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
                "f8E5M2": ml_dtypes.float8_e5m2}


@lowering_rule(arith.ConstantOp)
def _constant(ctx: LoweringContext, op: arith.ConstantOp) -> None:
    """A scalar constant is an immediate; a vector constant registers (module docstring)."""
    result, attr = op.result, op.value
    if isinstance(result.type, ir.VectorType):
        if not isinstance(attr, ir.DenseElementsAttr):
            raise error_at(op, f"unsupported vector constant {attr}")
        if ir.DenseElementsAttr(attr).is_splat:
            splat_constant(ctx, op, attr)
        else:
            dense_constant(ctx, op, ir.DenseElementsAttr(attr))
        return
    element = element_type(result.type)
    if element is None:
        raise error_at(op, f"constants of type {result.type} are not supported")
    if isinstance(attr, ir.BoolAttr):  # i1 constants come back as BoolAttr
        ctx.set(result, constant_scalar(int(ir.BoolAttr(attr).value), element))
    elif isinstance(attr, ir.IntegerAttr):
        ctx.set(result, constant_scalar(ir.IntegerAttr(attr).value, element))
    elif isinstance(attr, ir.FloatAttr):
        ctx.set(result, ScalarValue(Immediate(ir.FloatAttr(attr).value, element.scalar),
                                    element, 0))
    else:
        raise error_at(op, f"unsupported constant {attr}")


def _vector_element(op: arith.ConstantOp) -> ElementType:
    element = vector_element_type(ir.VectorType(op.result.type).element_type)
    if element is None:
        raise error_at(op, f"vector constants of {ir.VectorType(op.result.type).element_type} "
                           "are not supported")
    return element


def splat_constant(ctx: LoweringContext, op: arith.ConstantOp, attr: ir.Attribute) -> None:
    """A splat vector constant: one register (per packing) shared by every element."""
    element = _vector_element(op)
    layout = layouts_of(op, "out_layouts", 1)[0]
    shape = tuple(ir.VectorType(op.result.type).shape)
    count, length = fragment_geometry(layout, shape)
    pack = elements_per_register(element, length)
    bits = constant_bits(element, ir.DenseElementsAttr(attr).get_splat_value())
    reg = _move(ctx, element, pack, sum(bits << (element.bits * i) for i in range(pack)))
    vectors = tuple((reg,) * (length // pack) for _ in range(count))
    ctx.set(op.result, FragmentedArray(layout, shape, element, vectors, length))


def _move(ctx: LoweringContext, element: ElementType, pack: int, bits: int):
    """A fresh register holding `bits` (pack elements), set with one mov."""
    reg = ctx.builder.reg(register_type(element, pack))
    move = ("mov.pred" if element.scalar == "pred"
            else f"mov.b{register_bits(element, pack)}")
    ctx.builder.emit(move, reg, Immediate(bits))
    return reg


def dense_constant(ctx: LoweringContext, op: arith.ConstantOp, attr: ir.DenseElementsAttr
                   ) -> None:
    """A non-splat vector constant: movs where a register is the same in every thread, else
    loads from a table of its elements."""
    element = _vector_element(op)
    layout = layouts_of(op, "out_layouts", 1)[0]
    if isinstance(layout, WGSplatLayout):
        raise error_at(op, "a non-splat constant cannot have a splat layout")
    shape = tuple(ir.VectorType(op.result.type).shape)
    bits = element_bits(attr, element).reshape(shape)
    index = layout.element_index(shape)  # [thread, register, slot, dim]
    held = bits[tuple(np.moveaxis(index, -1, 0))]  # [thread, register, slot]
    dist = layout.distribution(shape)
    pack = elements_per_register(element, dist.vector_length)
    packed = sum(held[:, :, i::pack].astype(object) << (element.bits * i) for i in range(pack))
    if (packed == packed[:1]).all():  # every register the same in every thread: movs
        moves: dict[int, object] = {}
        vectors = tuple(tuple(moves.setdefault(int(value), _move(ctx, element, pack,
                                                                  int(value)))
                              for value in registers) for registers in packed[0])
        ctx.set(op.result, FragmentedArray(layout, shape, element, vectors,
                                           dist.vector_length))
        return
    table = constant_table(ctx, element, bits)
    strides = tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))
    buffer = BufferValue(table, shape, strides, element)
    ctx.set(op.result, load_global(ctx, op, buffer, constant_scalar(0), layout, shape))


def constant_table(ctx: LoweringContext, element: ElementType, bits: np.ndarray):
    """The global address of a new read-only table holding `bits` (row-major elements; i1
    as one byte each, as in a buffer)."""
    width = max(element.bits, 8)
    data = np.ascontiguousarray(bits.ravel().astype(f"<u{width // 8}")).view(np.uint8)
    symbol = ctx.builder.variable(f"__smalti_{ctx.builder.name}_constant", "global",
                                  tuple(int(v) for v in data), align=TABLE_ALIGNMENT)
    return ctx.builder.compute("mov.u64", "u64", symbol)


def element_bits(attr: ir.DenseElementsAttr, element: ElementType) -> np.ndarray:
    """The bit pattern of every element of a dense attribute, flat, as unsigned integers.

    The bindings expose no buffer of bf16 or fp8 attributes, so those are folded into an
    integer attribute of their width first (`arith.bitcast` of the constant, canonicalized
    in a scratch module)."""
    if element.is_float and element.name not in ("f32", "f64", "f16"):
        attr = ir.DenseElementsAttr(_bitcast_to_integers(attr, element.bits))
    raw = np.array(attr).ravel()
    if raw.dtype == np.bool_:
        return raw.astype(np.uint64)
    return raw.view(f"u{raw.dtype.itemsize}").astype(np.uint64)


def _bitcast_to_integers(attr: ir.DenseElementsAttr, bits: int) -> ir.Attribute:
    """`attr` reinterpreted as integers of `bits` bits, folded by canonicalize."""
    vector_type = ir.VectorType(attr.type)
    with attr.context, ir.Location.unknown():
        target = ir.VectorType.get(vector_type.shape, ir.IntegerType.get_signless(bits))
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            function = func.FuncOp("constant_bits", ir.FunctionType.get([], [target]))
            with ir.InsertionPoint(function.add_entry_block()):
                constant = arith.ConstantOp(vector_type, attr)
                func.ReturnOp([arith.BitcastOp(target, constant.result).result])
        passmanager.PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        for folded in function.entry_block.operations:
            if isinstance(folded, arith.ConstantOp) and folded.result.type == target:
                return folded.value
    raise AssertionError(f"canonicalize did not fold the bitcast of {attr}")


def constant_bits(element: ElementType, attr: ir.Attribute) -> int:
    """The bit pattern of a scalar constant attribute of `element` type."""
    if isinstance(attr, ir.BoolAttr):
        return int(ir.BoolAttr(attr).value)
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value & ((1 << element.bits) - 1)
    return value_bits(element, ir.FloatAttr(attr).value)


def value_bits(element: ElementType, value: float) -> int:
    """The bit pattern of the float `value` in `element`'s format (rounded to nearest)."""
    if element.name == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if element.name == "f64":
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    if element.name in NUMPY_FLOATS:
        dtype = NUMPY_FLOATS[element.name]
        return int(np.array(value, dtype=dtype).view(f"u{np.dtype(dtype).itemsize}"))
    raise ValueError(f"no constant encoding for {element.name}")


__all__ = ["constant_bits", "dense_constant", "splat_constant", "value_bits"]
