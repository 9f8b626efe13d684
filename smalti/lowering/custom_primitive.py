"""Lowering of smalti.custom_primitive: the body once per thread, its block arguments bound to
the thread's element registers of each vector operand (and each ref's shared address), the
yielded elements packed back into the results' fragments.

The body is per-thread scalar code. Integer and index arithmetic, constants, selects and
inline_ptx lower through the kernel's own rules (they already compute on registers); what
only a body does — float arithmetic and conversions on scalars, the thread and lane index —
lowers through BODY_RULES here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu

from smalti.dialect.bindings import gpu_dimension
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_custom import CustomPrimitiveOp, CustomYieldOp
from smalti.dialect.registry import OpRegistry
from smalti.dialect.verifier import verify_op
from smalti.lowering import packing
from smalti.lowering.constants import value_bits
from smalti.lowering.context import LoweringContext
from smalti.lowering.elementwise import FLOAT_NATIVE, FLOAT_VIA_F32
from smalti.lowering.registry import RULES, lowering_rule
from smalti.lowering.smem import smem_address, smem_ref
from smalti.lowering.smem_order import order_generic_access
from smalti.lowering.values import (
    ELEMENT_TYPES,
    ElementType,
    FragmentedArray,
    ScalarValue,
    element_type,
    elements_per_register,
    fragment_geometry,
    vector_element_type,
)
from smalti.ptx import Immediate, Register

BodyRule = Callable[[LoweringContext, Any], None]
BODY_RULES: OpRegistry[BodyRule] = OpRegistry("custom_primitive body rules")
body_rule = BODY_RULES.register
I32 = ELEMENT_TYPES["i32"]
INDEX = ELEMENT_TYPES["index"]


def thread_elements(ctx: LoweringContext, array: FragmentedArray) -> list[Register]:
    """The thread's elements of `array` in register order, each in its own register."""
    return [e for vector in array.vectors for r in vector
            for e in packing.elements(ctx, array.element, r, array.pack)]


def in_register(ctx: LoweringContext, value: ScalarValue) -> Register:
    """`value`'s register, an immediate moved into one first."""
    if isinstance(value.operand, Register):
        return value.operand
    element = value.type
    if element.is_float and element.bits == 32:
        return ctx.builder.compute("mov.f32", "f32", value.operand)
    bits = value_bits(element, value.operand.value) if element.is_float \
        else value.operand.value
    return ctx.builder.compute(f"mov.b{element.bits}", f"b{element.bits}",
                               Immediate(int(bits)))


def pack_result(ctx: LoweringContext, value: ir.Value, layout: object,
                elements: list[Register]) -> FragmentedArray:
    """The fragments of result `value` from the thread's elements of it, in register order."""
    shape = tuple(ir.VectorType(value.type).shape)
    element = vector_element_type(ir.VectorType(value.type).element_type)
    count, length = fragment_geometry(layout, shape)
    held = elements_per_register(element, length)
    registers = [packing.join(ctx, element, elements[i:i + held], 1)
                 for i in range(0, len(elements), held)]
    per_vector = length // held
    vectors = tuple(tuple(registers[v * per_vector:(v + 1) * per_vector]) for v in range(count))
    return FragmentedArray(layout, shape, element, vectors, length)


@lowering_rule(CustomPrimitiveOp)
def _custom_primitive(ctx: LoweringContext, op: CustomPrimitiveOp) -> None:
    """Bind the block arguments, lower the body once (it is per thread), pack the yield.
    The declared layouts are the inferred ones (inference fixes them)."""
    arguments = list(op.body.arguments)
    position = 0
    for i, (value, layout) in enumerate(zip(op.vectors, op.in_layouts, strict=True)):
        array = ctx.array(op, value)
        if array.layout != layout:
            raise error_at(op, f"operand #{i} has layout {array.layout}, not its declared "
                               f"{layout}; run smalti-infer-layouts")
        for register in thread_elements(ctx, array):
            ctx.set(arguments[position], ScalarValue(register, array.element))
            position += 1
    for ref_value, transforms in zip(op.refs, op.in_transforms, strict=True):
        ref = smem_ref(ctx, op, ref_value)
        if tuple(ref.transforms) != tuple(transforms):
            raise error_at(op, f"a shared-memory ref has transforms {list(ref.transforms)}, "
                               f"not its declared {list(transforms)}; run "
                               "smalti-infer-layouts")
        # the body may read and write any of its bytes, in any thread
        order_generic_access(ctx, ref.start, ref.stop, True, None)
        ctx.set(arguments[position], ScalarValue(smem_address(ctx, ref), I32))
        position += 1
    yielded = _lower_body(ctx, op.body)
    if op.refs:
        ctx.unpublished_smem_writes = True
    _, counts = op.register_counts()
    start = 0
    for result, layout, count in zip(op.outputs, op.out_layouts, counts, strict=True):
        elements = [in_register(ctx, v) for v in yielded[start:start + count]]
        ctx.set(result, pack_result(ctx, result, layout, elements))
        start += count


def _lower_body(ctx: LoweringContext, body: ir.Block) -> list[ScalarValue]:
    """Lower the body's ops in order; the scalars its custom_yield yields."""
    for inner in body.operations:
        view = inner.operation.opview
        if isinstance(view, CustomYieldOp):
            return [ctx.scalar(view, v) for v in view.values]
        rule = BODY_RULES.get(view) or RULES.get(view)
        if rule is None:
            raise error_at(view, "has no PTX lowering rule (in a custom_primitive body)")
        verify_op(view.operation)
        rule(ctx, view)
    raise error_at(body.owner, "has a body without 'smalti.custom_yield'")


@lowering_rule(CustomYieldOp)
def _custom_yield(ctx: LoweringContext, op: CustomYieldOp) -> None:
    """Only ever reached outside a body (the body's lowering consumes its yield)."""
    del ctx
    raise error_at(op, "expects to end a 'smalti.custom_primitive' body")


# ---- what only a body computes: float scalars, the thread's index ----------------------

def _float_element(op: ir.OpView) -> ElementType:
    element = element_type(op.operation.results[0].type)
    if element is None or element.name not in ("f32", "bf16", "f16"):
        raise error_at(op, f"computes on {op.operation.results[0].type}; a custom_primitive "
                           "body computes on f32, bf16 and f16 floats")
    return element


@body_rule(*FLOAT_NATIVE)
def _float_native(ctx: LoweringContext, op: ir.OpView) -> None:
    """One instruction of the element's own type (add.rn.bf16, max.NaN.f32, ...)."""
    element = _float_element(op)
    first, *rest = [ctx.scalar(op, v) for v in op.operation.operands]
    # PTX takes an f32 immediate as a later source; 16-bit floats have no immediates
    sources = [in_register(ctx, first)] + [
        v.operand if element.bits == 32 and isinstance(v.operand, Immediate)
        else in_register(ctx, v) for v in rest]
    result = ctx.builder.compute(f"{FLOAT_NATIVE[type(op)]}.{element.scalar}",
                                 element.scalar, *sources)
    ctx.set(op.operation.results[0], ScalarValue(result, element))


@body_rule(*FLOAT_VIA_F32)
def _float_via_f32(ctx: LoweringContext, op: ir.OpView) -> None:
    """Computed in f32 (16-bit operands widened, the result rounded once)."""
    element = _float_element(op)
    b = ctx.builder
    sources = [in_register(ctx, ctx.scalar(op, v)) for v in op.operation.operands]
    if element.bits != 32:
        sources = [b.compute(f"cvt.f32.{element.scalar}", "f32", s) for s in sources]
    result = FLOAT_VIA_F32[type(op)](b, sources)
    if element.bits != 32:
        result = b.compute(f"cvt.rn.{element.scalar}.f32", element.scalar, result)
    ctx.set(op.operation.results[0], ScalarValue(result, element))


@body_rule(arith.ExtFOp, arith.TruncFOp)
def _float_cast(ctx: LoweringContext, op: arith.ExtFOp | arith.TruncFOp) -> None:
    """Between f32 and bf16/f16: widening is exact, narrowing rounds to nearest even."""
    source = ctx.scalar(op, op.in_)
    target = _float_element(op)
    rounding = "" if target.bits > source.type.bits else ".rn"
    result = ctx.builder.compute(f"cvt{rounding}.{target.scalar}.{source.type.scalar}",
                                 target.scalar, in_register(ctx, source))
    ctx.set(op.out, ScalarValue(result, target))


@body_rule(arith.BitcastOp)
def _bitcast(ctx: LoweringContext, op: arith.BitcastOp) -> None:
    """The same bits in a register of the target type."""
    source = ctx.scalar(op, op.in_)
    target = element_type(op.out.type)
    if target is None or target.bits != source.type.bits:
        raise error_at(op, f"cannot bitcast {op.in_.type} to {op.out.type}")
    result = ctx.builder.compute(f"mov.b{target.bits}", target.scalar,
                                 in_register(ctx, source))
    ctx.set(op.out, ScalarValue(result, target))


@body_rule(gpu.ThreadIdOp, gpu.LaneIdOp)
def _thread_index(ctx: LoweringContext, op: gpu.ThreadIdOp | gpu.LaneIdOp) -> None:
    """%tid.x (the thread's index in the block) or %laneid, as an index."""
    if isinstance(op, gpu.ThreadIdOp):
        if gpu_dimension(op.dimension) != 0:
            raise error_at(op, "a custom_primitive body reads the thread index along x only")
        name = "%tid.x"
    else:
        name = "%laneid"
    wide = ctx.builder.compute("cvt.u64.u32", "s64", ctx.builder.special(name))
    ctx.set(op.operation.results[0], ScalarValue(wide, INDEX))
