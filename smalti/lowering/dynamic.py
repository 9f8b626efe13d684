"""load_scalar, masked_load and masked_store: dynamic addressing in global memory.

A scalar load is one `ld.global` per thread of the same address (a warp's 32 requests
coalesce into one transaction; ptxas keeps it an LDG, as it cannot prove the memory
read-only). A masked access is vector_load / vector_store's accesses, each under the
predicate of its elements' mask: one predicated access where the elements it moves share a
mask register (a mask broadcast along them, such as `rows[:, None]`), else halves of it, down
to one element. A masked load first fills its registers with `other`, which the predicated
load overwrites where the mask holds.
"""

from __future__ import annotations

from collections.abc import Iterator

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_dynamic import LoadScalarOp, MaskedLoadOp, MaskedStoreOp
from smalti.lowering import packing
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.memory import Access, global_accesses, slice_offset
from smalti.lowering.registry import lowering_rule
from smalti.lowering.transfer import AccessPlan, Storer, plan_access
from smalti.lowering.values import (
    ElementType,
    FragmentedArray,
    ScalarValue,
    elements_per_register,
    register_type,
    vector_element_type,
)
from smalti.ptx import Address, Guard, Register, VectorOperand
from smalti.tiling import Layout

MASKED_ELEMENT_BITS = (16, 32, 64)  # elements a masked access moves (whole registers or halves)


@lowering_rule(LoadScalarOp)
def _load_scalar(ctx: LoweringContext, op: LoadScalarOp) -> None:
    """Every thread loads the element (the same address: a uniform value)."""
    buffer = ctx.buffer(op, op.source)
    offset = slice_offset(ctx, op, buffer, list(op.indices))
    if offset.constant is not None:
        address = Address(buffer.address, int(offset.constant))
    else:
        address = Address(ctx.builder.compute("add.s64", "u64", buffer.address, offset.operand))
    scalar = buffer.element.scalar
    ctx.set(op.result, ScalarValue(ctx.builder.compute(f"ld.global.{scalar}", scalar, address),
                                   buffer.element))


def _masked_element(op: ir.OpView, value: ir.Value) -> ElementType:
    """The element type of a masked access's vector; a located error for those it cannot
    split into per-element accesses (bytes, 4-bit types, bools)."""
    element = vector_element_type(ir.VectorType(value.type).element_type)
    if element is None or element.bits not in MASKED_ELEMENT_BITS:
        raise error_at(op, f"masked accesses move 16-, 32- or 64-bit elements, not "
                           f"{ir.VectorType(value.type).element_type}")
    return element


def _same_layout(op: ir.OpView, array: FragmentedArray, layout: Layout, what: str) -> None:
    if array.layout != layout:
        raise error_at(op, f"{what} has layout {array.layout}, but the access's is {layout}")


def _pieces(access: Access, predicates: tuple[Register, ...], element: ElementType
            ) -> Iterator[tuple[Access, Register]]:
    """`access` as accesses whose elements share one mask register, with that register:
    the whole access, or its halves (recursively)."""
    shared = predicates[access.first:access.first + access.count]
    if all(p == shared[0] for p in shared):
        yield access, shared[0]
        return
    half = access.count // 2
    for first in (access.first, access.first + half):  # a run of contiguous elements
        offset = access.offset + (first - access.first) * element.bytes
        yield from _pieces(Access(access.address, offset, first, half), predicates, element)


def _masked_accesses(ctx: LoweringContext, op: ir.OpView, memref: ir.Value, mask: ir.Value,
                     layout: Layout, shape: tuple[int, ...]
                     ) -> Iterator[tuple[int, Access, Register]]:
    """(register vector, access, mask predicate) triples covering the window."""
    buffer = ctx.buffer(op, memref)
    predicates = ctx.array(op, mask)
    _same_layout(op, predicates, layout, "the mask")
    offset = slice_offset(ctx, op, buffer, list(op.indices))
    for register, access in global_accesses(ctx, op, buffer, offset, layout, shape):
        for piece, predicate in _pieces(access, predicates.vectors[register], buffer.element):
            yield register, piece, predicate


@lowering_rule(MaskedLoadOp)
def _masked_load(ctx: LoweringContext, op: MaskedLoadOp) -> None:
    element = _masked_element(op, op.result)
    shape = tuple(ir.VectorType(op.result.type).shape)
    layout = layouts_of(op, "out_layouts", 1)[0]
    other = ctx.array(op, op.other)
    _same_layout(op, other, layout, "'other'")
    dist = layout.distribution(shape)
    pack = elements_per_register(element, dist.vector_length)
    loader = _MaskedLoader(ctx, other, dist.num_registers)
    for register, access, predicate in _masked_accesses(ctx, op, op.source, op.mask, layout,
                                                        shape):
        loader.load(register, access, Guard(predicate), plan_access(element, pack,
                                                                    access.count))
    ctx.set(op.result, FragmentedArray(layout, shape, element, loader.result(),
                                       dist.vector_length))


class _MaskedLoader:
    """The registers of a masked load: each access's units start as `other`'s, which a
    predicated ld.global overwrites."""

    def __init__(self, ctx: LoweringContext, other: FragmentedArray, num_registers: int
                 ) -> None:
        self.ctx, self.other = ctx, other
        self.vectors: list[list[Register]] = [[] for _ in range(num_registers)]
        self.partial = packing.PartialRegisters(ctx, other.element, other.pack)
        self.parts = packing.RegisterParts(ctx, other)

    def _fresh(self, ptx_type: str, bits: int, value: Register) -> Register:
        """A new register holding `value` (the ld then writes it only where the mask holds)."""
        register = self.ctx.builder.reg(ptx_type)
        self.ctx.builder.emit(f"mov.b{bits}", register, value)
        return register

    def load(self, register: int, access: Access, guard: Guard, plan: AccessPlan) -> None:
        b, other = self.ctx.builder, self.other
        element, pack = other.element, other.pack
        address = Address(access.address, access.offset)
        opcode = f"ld.global{plan.opcode_suffix}"
        if plan.per_unit == 0:  # part of one register: joined once it is whole
            bits = element.bits * access.count
            part = self._fresh(plan.unit, bits,
                               self.parts.part(register, access.first, access.count))
            b.emit(opcode, part, address, guard=guard)
            self.partial.add(self.vectors, register, part, access.count)
            return
        start = access.first // pack
        registers = other.vectors[register][start:start + plan.units * plan.per_unit]
        bits = element.bits * pack * plan.per_unit
        unit_type = register_type(element, pack) if plan.per_unit == 1 else plan.unit
        units = [self._fresh(unit_type, bits, packing.join(self.ctx, element,
                                                           registers[i:i + plan.per_unit], pack))
                 for i in range(0, len(registers), plan.per_unit)]
        b.emit(opcode, VectorOperand(tuple(units)) if plan.units > 1 else units[0], address,
               guard=guard)
        for unit in units:
            self.vectors[register].extend(
                packing.split(self.ctx, element, unit, pack * plan.per_unit, plan.per_unit))

    def result(self) -> tuple[tuple[Register, ...], ...]:
        return tuple(map(tuple, self.vectors))


@lowering_rule(MaskedStoreOp)
def _masked_store(ctx: LoweringContext, op: MaskedStoreOp) -> None:
    _masked_element(op, op.value)
    array = ctx.array(op, op.value)
    layout = layouts_of(op, "in_layouts", 2)[0]
    _same_layout(op, array, layout, "the stored value")
    replica = ctx.first_copy(layout.distribution(array.shape))
    storers: dict[Register, Storer] = {}  # one per guard: the mask, and the first copy
    for register, access, predicate in _masked_accesses(ctx, op, op.destination, op.mask,
                                                        layout, array.shape):
        if predicate not in storers:
            guard = predicate if replica is None else ctx.builder.compute(
                "and.pred", "pred", predicate, replica.predicate)
            storers[predicate] = Storer(ctx, "global", array, Guard(guard))
        storers[predicate].store(register, access.first, access.count,
                                 Address(access.address, access.offset))
