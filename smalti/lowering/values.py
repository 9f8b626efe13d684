"""What an MLIR value becomes in PTX: a scalar, a global buffer, or a fragmented array."""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.ptx import Immediate, Register
from smalti.tiling import Layout


@dataclass(frozen=True)
class ElementType:
    """How one MLIR element type lives in PTX registers."""

    name: str  # MLIR spelling: "f32", "bf16", "i32", ...
    bits: int
    scalar: str  # PTX type of one element: "f32", "bf16", "s32", "pred"
    packed: str | None = None  # PTX type of two elements in one .b32 register, if any
    in_registers: bool = True  # False: only memory holds it (TMA moves it, wgmma reads it)

    @property
    def is_float(self) -> bool:
        return self.name.startswith(("f", "bf"))

    @property
    def bytes(self) -> int:
        return max(self.bits // 8, 1)


ELEMENT_TYPES = {
    e.name: e
    for e in (
        ElementType("f32", 32, "f32"),
        ElementType("bf16", 16, "bf16", "bf16x2"),
        ElementType("f16", 16, "f16", "f16x2"),
        ElementType("f8E4M3FN", 8, "b8", in_registers=False),
        ElementType("f8E5M2", 8, "b8", in_registers=False),
        ElementType("i32", 32, "s32"),
        ElementType("i16", 16, "s16"),
        ElementType("i64", 64, "s64"),
        ElementType("f64", 64, "f64"),
        ElementType("i1", 1, "pred"),
        ElementType("index", 64, "s64"),
    )
}


def element_type(t: ir.Type) -> ElementType | None:
    """The element type of a register value (scalar or vector element), None if unsupported."""
    element = ELEMENT_TYPES.get(str(t))
    return element if element is not None and element.in_registers else None


def memory_element_type(t: ir.Type) -> ElementType | None:
    """The element type of a global or shared memory ref, None if unsupported."""
    return ELEMENT_TYPES.get(str(t))


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

    @property
    def size_bytes(self) -> int:
        return math.prod(self.shape) * self.element.bytes


@dataclass(frozen=True)
class FragmentedArray:
    """A warpgroup-owned vector: per register vector of the layout, the PTX registers holding
    its elements. 16-bit elements pair up in .b32 registers when the vector length is even."""

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
        return self.element.packed if self.pack == 2 else self.element.scalar


def elements_per_register(element: ElementType, vector_length: int) -> int:
    return 2 if element.packed is not None and vector_length % 2 == 0 else 1


LoweredValue = ScalarValue | BufferValue | FragmentedArray


def fragment_geometry(layout: Layout, shape: tuple[int, ...]) -> tuple[int, int]:
    """(register vectors per thread, elements per vector) of `layout` over `shape`."""
    from smalti.tiling import WGSplatLayout

    if isinstance(layout, WGSplatLayout):
        return 1, 1
    distribution = layout.distribution(shape)
    return distribution.num_registers, distribution.vector_length
