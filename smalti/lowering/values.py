"""What an MLIR value becomes in PTX: a scalar, a global buffer, or a fragmented array."""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.ptx import Immediate, Register
from smalti.tiling import Layout, WGSplatLayout


@dataclass(frozen=True)
class ElementType:
    """How one MLIR element type lives in PTX registers."""

    name: str  # MLIR spelling: "f32", "bf16", "i32", ...
    bits: int
    scalar: str  # PTX type of one element: "f32", "bf16", "s32", "pred"
    packed: str | None = None  # PTX type of two elements in one .b32 register, if any
    vector_only: bool = False  # True: no scalar values (fp8 lives packed in vector registers)

    @property
    def is_float(self) -> bool:
        return self.name.startswith(("f", "bf"))

    @property
    def bytes(self) -> int:
        return max(self.bits // 8, 1)

    @property
    def memory_bits(self) -> int:
        """Bits of one element in memory: an i1 is a byte; 4-bit types pack two per byte."""
        return max(self.bits, 8) if self.bits == 1 else self.bits


ELEMENT_TYPES = {
    e.name: e
    for e in (
        ElementType("f32", 32, "f32"),
        ElementType("bf16", 16, "bf16", "bf16x2"),
        ElementType("f16", 16, "f16", "f16x2"),
        ElementType("f8E4M3FN", 8, "b8", vector_only=True),
        ElementType("f8E5M2", 8, "b8", vector_only=True),
        ElementType("f8E8M0FNU", 8, "b8", vector_only=True),  # block scales (tcgen05_cp)
        ElementType("i4", 4, "b8", vector_only=True),  # 8 per .b32 (smalti/lowering/subbyte.py)
        ElementType("f4E2M1FN", 4, "b8", vector_only=True),
        ElementType("i32", 32, "s32"),
        ElementType("i16", 16, "s16"),
        ElementType("i8", 8, "s8"),
        ElementType("i64", 64, "s64"),
        ElementType("f64", 64, "f64"),
        ElementType("i1", 1, "pred"),
        ElementType("index", 64, "s64"),
    )
}


def element_type(t: ir.Type) -> ElementType | None:
    """The type of a scalar register value, None if unsupported (fp8 has no scalars)."""
    element = ELEMENT_TYPES.get(type_name(t))
    return element if element is not None and not element.vector_only else None


def vector_element_type(t: ir.Type) -> ElementType | None:
    """The element type of a vector in registers, None if unsupported."""
    return ELEMENT_TYPES.get(type_name(t))


def memory_element_type(t: ir.Type) -> ElementType | None:
    """The element type of a global or shared memory ref, None if unsupported."""
    return ELEMENT_TYPES.get(type_name(t))


@dataclass(frozen=True)
class ScalarValue:
    """A uniform scalar: an immediate or a register, and a known divisor (for alignment)."""

    operand: Register | Immediate
    type: ElementType
    divisor: int = 1  # the value is a multiple of this; 0 means the value is 0

    @property
    def constant(self) -> int | float | None:
        return self.operand.value if isinstance(self.operand, Immediate) else None


@dataclass(frozen=True)
class BufferValue:
    """A global-memory buffer: its generic-to-global converted address and its shape."""

    address: Register
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    element: ElementType
    # A symmetric buffer's byte offset in its device's symmetric heap, when known while
    # lowering (smalti.lowering.collective moves it to a peer's heap by this offset).
    heap_offset: int | None = None

    @property
    def size_bytes(self) -> int:
        return -(-math.prod(self.shape) * self.element.memory_bits // 8)


@dataclass(frozen=True)
class FragmentedArray:
    """A warpgroup-owned vector: per register vector of the layout, the PTX registers holding
    its elements, `pack` per register (`elements_per_register`), the lowest element in the
    lowest bits."""

    layout: Layout
    shape: tuple[int, ...]
    element: ElementType
    vectors: tuple[tuple[Register, ...], ...]
    vector_length: int

    @property
    def pack(self) -> int:
        return elements_per_register(self.element, self.vector_length)

    @property
    def register_type(self) -> str:
        return register_type(self.element, self.pack)


def elements_per_register(element: ElementType, vector_length: int) -> int:
    """How many elements of a register vector share one register: 16-bit pairs in a .b32
    when the vector length is even; 8-bit quads in a .b32 when it is a multiple of 4, else
    pairs in a .b16 when even (the unit of PTX's fp8 conversions), else one byte in the low
    half of a .b16 (its upper byte unspecified). 4-bit elements are eight to a .b32, always
    (their vectors' lengths are multiples of 8; the lowering refuses others)."""
    if element.bits == 4:
        return 8
    if element.bits == 8:
        return 4 if vector_length % 4 == 0 else 2 if vector_length % 2 == 0 else 1
    return 2 if element.packed is not None and vector_length % 2 == 0 else 1


def register_type(element: ElementType, pack: int) -> str:
    """The PTX type of a register holding `pack` elements."""
    if element.bits == 8:
        return "b32" if pack == 4 else "b16"
    if element.bits == 4:
        return "b32"
    return element.packed if pack == 2 else element.scalar


def register_bits(element: ElementType, pack: int) -> int:
    """The bits of PTX data `pack` elements occupy (at least 16 for 8-bit elements, which
    live in .b16 registers when alone)."""
    return max(element.bits * pack, 16) if element.bits == 8 else element.bits * pack


LoweredValue = ScalarValue | BufferValue | FragmentedArray


def fragment_geometry(layout: Layout, shape: tuple[int, ...]) -> tuple[int, int]:
    """(register vectors per thread, elements per vector) of `layout` over `shape`."""
    if isinstance(layout, WGSplatLayout):
        return 1, 1
    distribution = layout.distribution(shape)
    return distribution.num_registers, distribution.vector_length
