"""Lowering of smalti.inline_ptx: the user's PTX text, once per register group (once per
thread in a custom_primitive body), in a scope."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_inline import PLACEHOLDER, Constraint, InlinePtxOp, parse_constraints
from smalti.lowering import packing
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import (
    ElementType,
    FragmentedArray,
    ScalarValue,
    element_type,
    elements_per_register,
    fragment_geometry,
    register_type,
    vector_element_type,
)
from smalti.ptx import Immediate, Register
from smalti.ptx.module import register_class


def _groups(ctx: LoweringContext, array: FragmentedArray, pack: int) -> list[Register]:
    """A thread's registers of `array`, in register order, regrouped to hold `pack` elements
    each (groups may span register vectors: the op is elementwise)."""
    registers = [r for vector in array.vectors for r in vector]
    return _regroup(ctx, array.element, registers, array.pack, pack)


def _as(ctx: LoweringContext, register: Register, constraint: Constraint) -> Register:
    """`register`, moved into one of the constraint's register class if it is not one."""
    if register.type == register_class(constraint.ptx_type):
        return register
    return ctx.builder.compute(f"mov.b{constraint.bits}", constraint.ptx_type, register)


def _scalar_source(ctx: LoweringContext, value: ScalarValue, constraint: Constraint
                   ) -> Register:
    """A scalar operand in a register of the constraint's class: an immediate moved in, an
    index read as its low 32 bits for 'r'."""
    b = ctx.builder
    operand = value.operand
    if isinstance(operand, Immediate):
        if isinstance(operand.value, float):
            return b.compute(f"mov.{constraint.ptx_type}", constraint.ptx_type, operand)
        return b.compute(f"mov.b{constraint.bits}", constraint.ptx_type, operand)
    if value.type.bits == 64 and constraint.bits == 32:
        return b.compute("cvt.u32.u64", "b32", operand)
    return _as(ctx, operand, constraint)


def _regroup(ctx: LoweringContext, element: ElementType, registers: list[Register],
             held: int, pack: int) -> list[Register]:
    """Registers of `held` elements each as registers of `pack` elements each."""
    if held >= pack:
        return [part for r in registers
                for part in packing.split(ctx, element, r, held, held // pack)]
    step = pack // held
    return [packing.join(ctx, element, registers[i:i + step], held)
            for i in range(0, len(registers), step)]


def substitute(text: str, names: list[str]) -> str:
    """`text` with each `$i` replaced by `names[i]`."""
    return PLACEHOLDER.sub(lambda match: names[int(match.group(1))], text)


@lowering_rule(InlinePtxOp)
def _inline_ptx(ctx: LoweringContext, op: InlinePtxOp) -> None:
    """Each group of `pack` elements: the operands' registers (moved to the constraint's
    class where they differ; a scalar's in every group), fresh result registers, the text
    with `$i` replaced. Without vectors (a custom_primitive body): once, on scalars."""
    constraints = parse_constraints(op.constraints)
    outputs = list(op.outputs)
    inputs = constraints[len(outputs):]
    if not any(isinstance(v.type, ir.VectorType) for v in [*outputs, *op.values]):
        sources = [_scalar_source(ctx, ctx.scalar(op, v), c)
                   for v, c in zip(op.values, inputs, strict=True)]
        results = [ctx.builder.reg(c.ptx_type) for c in constraints[:len(outputs)]]
        ctx.builder.inline(substitute(op.ptx, [r.name for r in results + sources]))
        for value, result in zip(outputs, results, strict=True):
            element = element_type(value.type)
            if result.type != register_class(element.scalar):
                result = ctx.builder.compute(f"mov.b{element.bits}", element.scalar, result)
            ctx.set(value, ScalarValue(result, element))
        return
    _inline_vectors(ctx, op, constraints)


def _inline_vectors(ctx: LoweringContext, op: InlinePtxOp, constraints: list[Constraint]
                    ) -> None:
    pack = op.pack
    outputs = list(op.outputs)
    layout = layouts_of(op, "out_layouts", len(outputs))[0]
    shape = tuple(ir.VectorType(outputs[0].type).shape)
    count, length = fragment_geometry(layout, shape)
    if count * length % pack:
        raise error_at(op, f"layout {layout} gives each thread {count * length} elements, "
                           f"not a multiple of pack = {pack}")
    groups_per_thread = count * length // pack
    inputs: list[list[Register]] = []
    for i, (value, constraint) in enumerate(zip(op.values, constraints[len(outputs):],
                                                strict=True)):
        if not isinstance(value.type, ir.VectorType):
            inputs.append([_scalar_source(ctx, ctx.scalar(op, value), constraint)]
                          * groups_per_thread)
            continue
        array = ctx.array(op, value)
        if array.layout != layout:
            raise error_at(op, f"operand #{i} has layout {array.layout} but the results have "
                               f"{layout}; run smalti-infer-layouts or insert a layout_cast")
        inputs.append([_as(ctx, r, constraint) for r in _groups(ctx, array, pack)])
    elements = [vector_element_type(ir.VectorType(r.type).element_type) for r in outputs]
    b = ctx.builder
    produced: list[list[Register]] = [[] for _ in outputs]
    for g in range(groups_per_thread):
        sources = [groups[g] for groups in inputs]
        results = [b.reg(c.ptx_type) for c in constraints[:len(outputs)]]
        b.inline(substitute(op.ptx, [r.name for r in results + sources]))
        for groups, result, element in zip(produced, results, elements, strict=True):
            wanted = register_class(register_type(element, pack))
            if result.type != wanted:
                result = b.compute(f"mov.b{element.bits * pack}", wanted, result)
            groups.append(result)
    for result, element, groups in zip(outputs, elements, produced, strict=True):
        held = elements_per_register(element, length)
        registers = _regroup(ctx, element, groups, pack, held)
        per_vector = length // held
        vectors = tuple(tuple(registers[v * per_vector:(v + 1) * per_vector])
                        for v in range(count))
        ctx.set(result, FragmentedArray(layout, shape, element, vectors, length))
