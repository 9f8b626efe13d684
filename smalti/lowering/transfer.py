"""One ld/st between registers and memory (global or shared): which PTX access moves `count`
consecutive elements of a register vector, and how its units become the array's registers.

PTX vector accesses hold at most four units (`.v2`, `.v4`) of 8 to 64 bits. (`.v8` exists
only as PTX 8.8's 256-bit access of 32-bit units on sm_100; ptxas 13.5 rejects
`ld.global.v16.b8` and crashes on `ld.global.v8.b16` for sm_90a.) So an access of more
than four registers narrower than 32 bits moves them in groups: eight i16 elements are
`ld.global.v4.b32`, each .b32 split into two .b16 (`mov.b32 {lo, hi}`, free in SASS).

In memory an i1 is a byte (0 or 1, numpy's bool); in registers it is a predicate. Loaded
bytes are tested against zero (any nonzero byte reads as true); stored predicates become
the bytes 1 and 0, gathered into the unit the access writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from smalti.lowering import packing
from smalti.lowering.context import LoweringContext
from smalti.lowering.packing import PartialRegisters, RegisterParts
from smalti.lowering.values import ElementType, FragmentedArray, register_type
from smalti.ptx import Address, Guard, Immediate, Register, VectorOperand

MAX_UNITS = 4  # .v4


@dataclass(frozen=True)
class AccessPlan:
    """How one access moves `count` elements: `units` units of PTX type `unit`, each holding
    `per_unit` whole registers, or (`per_unit` 0) part of one register."""

    unit: str
    units: int
    per_unit: int

    @property
    def opcode_suffix(self) -> str:
        return (f".v{self.units}" if self.units > 1 else "") + f".{self.unit}"


def is_predicate(element: ElementType) -> bool:
    return element.scalar == "pred"


def plan_access(element: ElementType, pack: int, count: int) -> AccessPlan:
    """The units of an access of `count` elements of a vector packed `pack` per register."""
    if is_predicate(element):  # count bytes, as 1, 2 or 4 bytes per unit
        size = min(count, 4)
        return AccessPlan({1: "u8", 2: "b16", 4: "b32"}[size], count // size, size)
    if count < pack:
        return AccessPlan(f"b{element.bits * count}", 1, 0)
    registers = count // pack
    bits = element.bits * pack
    per_unit = max(1, registers // MAX_UNITS)
    if per_unit == 1:
        return AccessPlan("f32" if element.name == "f32" else f"b{bits}", registers, 1)
    return AccessPlan(f"b{bits * per_unit}", MAX_UNITS, per_unit)


class Loader:
    """Loads the accesses of one vector load (`space` "global" or "shared") and collects the
    registers of each register vector, in order."""

    def __init__(self, ctx: LoweringContext, space: str, element: ElementType, pack: int,
                 num_registers: int) -> None:
        self.ctx, self.space, self.element, self.pack = ctx, space, element, pack
        self.vectors: list[list[Register]] = [[] for _ in range(num_registers)]
        self.partial = PartialRegisters(ctx, element, pack)

    def load(self, register: int, count: int, address: Address) -> None:
        """Load `count` elements of register vector `register` from `address`."""
        b = self.ctx.builder
        plan = plan_access(self.element, self.pack, count)
        opcode = f"ld.{self.space}{plan.opcode_suffix}"
        if plan.per_unit == 0:  # part of one register: joined once it is whole
            self.partial.add(self.vectors, register, b.compute(opcode, plan.unit, address),
                             count)
            return
        unit_type = register_type(self.element, self.pack) if plan.per_unit == 1 and not \
            is_predicate(self.element) else plan.unit
        units = [b.reg(unit_type) for _ in range(plan.units)]
        b.emit(opcode, VectorOperand(tuple(units)) if plan.units > 1 else units[0], address)
        for unit in units:
            self.vectors[register].extend(self._registers(unit, plan))

    def _registers(self, unit: Register, plan: AccessPlan) -> list[Register]:
        """The registers of the array one loaded unit holds."""
        if is_predicate(self.element):
            return bytes_to_predicates(self.ctx, unit, plan)
        if plan.per_unit == 1:
            return [unit]
        return packing.split(self.ctx, self.element, unit, self.pack * plan.per_unit,
                             plan.per_unit)

    def result(self) -> tuple[tuple[Register, ...], ...]:
        return tuple(map(tuple, self.vectors))


class Storer:
    """Stores the accesses of one vector store of `array`, each under `guard` if any."""

    def __init__(self, ctx: LoweringContext, space: str, array: FragmentedArray,
                 guard: Guard | None) -> None:
        self.ctx, self.space, self.array, self.guard = ctx, space, array, guard
        self.parts = RegisterParts(ctx, array)

    def store(self, register: int, first: int, count: int, address: Address) -> None:
        """Store elements first .. first + count - 1 of register vector `register`."""
        array, b = self.array, self.ctx.builder
        plan = plan_access(array.element, array.pack, count)
        opcode = f"st.{self.space}{plan.opcode_suffix}"
        if plan.per_unit == 0:
            b.emit(opcode, address, self.parts.part(register, first, count), guard=self.guard)
            return
        start = first // array.pack
        registers = array.vectors[register][start:start + plan.units * plan.per_unit]
        units = [self._unit(registers[i:i + plan.per_unit], plan)
                 for i in range(0, len(registers), plan.per_unit)]
        b.emit(opcode, address, VectorOperand(tuple(units)) if plan.units > 1 else units[0],
               guard=self.guard)

    def _unit(self, registers: list[Register], plan: AccessPlan) -> Register:
        """The unit holding `registers` (one register, or several joined)."""
        if is_predicate(self.array.element):
            return predicates_to_bytes(self.ctx, registers, plan)
        if plan.per_unit == 1:
            return registers[0]
        return packing.join(self.ctx, self.array.element, registers, self.array.pack)


def bytes_to_predicates(ctx: LoweringContext, unit: Register, plan: AccessPlan
                        ) -> list[Register]:
    """One predicate per byte of a loaded unit: byte != 0 (a lone byte is zero-extended by
    `ld.u8`, so it is tested whole)."""
    b = ctx.builder
    if plan.per_unit == 1:
        return [b.compute("setp.ne.b16", "pred", unit, 0)]
    bits = 8 * plan.per_unit
    predicates = []
    for k in range(plan.per_unit):
        byte = b.compute(f"and.b{bits}", f"b{bits}", unit, 0xFF << (8 * k))
        predicates.append(b.compute(f"setp.ne.b{bits}", "pred", byte, 0))
    return predicates


def predicates_to_bytes(ctx: LoweringContext, predicates: list[Register], plan: AccessPlan
                        ) -> Register:
    """A unit of bytes 1 (true) or 0 (false), the first predicate in the lowest byte."""
    b = ctx.builder
    bits = max(16, 8 * plan.per_unit)
    unit: Register | None = None
    for k, predicate in enumerate(predicates):
        byte = b.compute(f"selp.b{bits}", f"b{bits}", Immediate(1 << (8 * k)), 0, predicate)
        unit = byte if unit is None else b.compute(f"or.b{bits}", f"b{bits}", unit, byte)
    assert unit is not None
    return unit


__all__ = ["AccessPlan", "Loader", "Storer", "plan_access"]
