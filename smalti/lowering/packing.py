"""Registers holding several vector elements: split them into parts, join parts again, and
the memory accesses narrower than one register that need either.

A register holds `pack` elements, the lowest in the lowest bits (`elements_per_register`):
16-bit pairs in a .b32, 8-bit quads in a .b32 or pairs in a .b16, a lone byte in the low
half of a .b16. Parts of 16 bits or more move with `mov.bN {lo, hi}` (free in SASS); a
byte is the low half of a .b16 whose upper byte is left unspecified (ld/st.b8 and the fp8
conversions use only the low byte), so joining bytes masks the low one and shifts the high
one in.
"""

from __future__ import annotations

from smalti.lowering.context import LoweringContext
from smalti.lowering.values import ElementType, FragmentedArray
from smalti.ptx import Register, VectorOperand


def split(ctx: LoweringContext, element: ElementType, register: Register, pack: int,
          parts: int) -> list[Register]:
    """`register` (holding `pack` elements) as `parts` registers of pack // parts elements
    each, lowest first."""
    if parts == 1:
        return [register]
    b = ctx.builder
    if element.bits * pack >= 32:  # a .b32: its two 16-bit halves
        halves = [b.reg("b16"), b.reg("b16")]
        b.emit("mov.b32", VectorOperand(tuple(halves)), register)
        if parts == 2:
            return halves
        return [p for half in halves for p in split(ctx, element, half, pack // 2, parts // 2)]
    # two bytes of a .b16: the low one in place, the high one shifted down
    return [register, b.compute("shr.b16", "b16", register, 8)]


def join(ctx: LoweringContext, element: ElementType, parts: list[Register], per: int
         ) -> Register:
    """One register holding the elements of `parts` (`per` elements each, lowest first)."""
    if len(parts) == 1:
        return parts[0]
    b = ctx.builder
    if element.bits * per == 8:  # lone bytes: pair them into .b16 registers first
        pairs = []
        for low, high in zip(parts[::2], parts[1::2], strict=True):
            masked = b.compute("and.b16", "b16", low, 0xFF)
            shifted = b.compute("shl.b16", "b16", high, 8)
            pairs.append(b.compute("or.b16", "b16", masked, shifted))
        return join(ctx, element, pairs, 2)
    bits = element.bits * per * len(parts)
    joined = b.reg(f"b{bits}")  # two i16 make a .b32 (register_type would say s16)
    b.emit(f"mov.b{bits}", joined, VectorOperand(tuple(parts)))
    return joined


def elements(ctx: LoweringContext, element: ElementType, register: Register, pack: int
             ) -> list[Register]:
    """Each element of `register` in its own register (a 16-bit half, a byte in a .b16)."""
    return split(ctx, element, register, pack, pack)


def replicate(ctx: LoweringContext, element: ElementType, value: Register, pack: int
              ) -> Register:
    """A register holding `pack` copies of the one element in `value`."""
    return join(ctx, element, [value] * pack, 1)


class PartialRegisters:
    """Registers a load fills from accesses narrower than one register (a 16-bit half of a
    pair, one or two bytes of an 8-bit quad): parts collect until a register is whole."""

    def __init__(self, ctx: LoweringContext, element: ElementType, pack: int) -> None:
        self.ctx, self.element, self.pack = ctx, element, pack
        self.parts: dict[int, list[Register]] = {}

    def add(self, vectors: list[list[Register]], register: int, part: Register, count: int
            ) -> None:
        """Collect `part` (`count` elements) for register vector `register` of `vectors`,
        appending the joined register once the parts make one."""
        parts = self.parts.setdefault(register, [])
        parts.append(part)
        if len(parts) * count == self.pack:
            vectors[register].append(join(self.ctx, self.element, parts, count))
            self.parts[register] = []


class RegisterParts:
    """The parts of stored registers that accesses narrower than one register write: each
    register is split once."""

    def __init__(self, ctx: LoweringContext, array: FragmentedArray) -> None:
        self.ctx, self.array = ctx, array
        self.cache: dict[tuple[int, int, int], list[Register]] = {}

    def part(self, register: int, first: int, count: int) -> Register:
        """The register holding elements first .. first + count - 1 of vector `register`."""
        array = self.array
        key = (register, first // array.pack, count)
        if key not in self.cache:
            self.cache[key] = split(self.ctx, array.element, array.vectors[register][key[1]],
                                    array.pack, array.pack // count)
        return self.cache[key][(first % array.pack) // count]
