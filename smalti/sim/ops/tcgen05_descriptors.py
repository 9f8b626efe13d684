"""The descriptors of tcgen05.mma: the 32-bit instruction descriptor and the sm_100 shared
memory descriptor.

PTX ISA, "Instruction descriptor" (for .kind::f16, .kind::tf32, .kind::f8f6f4 and .kind::i8):
bits 0-1 sparsity selector, 2 sparsity, 3 saturate, 4-5 D type (0 F16, 1 F32, 2 S32), 7-9 A
type and 10-12 B type (.kind::f16: 0 F16, 1 BF16; .kind::tf32: 2 TF32; .kind::f8f6f4: 0 E4M3,
1 E5M2, 3 E2M3, 4 E3M2, 5 E2M1), 13 negate A, 14 negate B, 15 transpose A and 16 transpose B
(0: K-major, 1: MN-major), 17-22 N >> 3, 24-28 M >> 4, 30-31 maximum shift (.ws only).

PTX ISA, "Instruction descriptor" for .kind::mxf8f6f4, .kind::mxf4 and .kind::mxf4nvf4 (the
block-scaled kinds): bits 0-1 reserved, 2 sparsity, 4-5 matrix B's scale factor data ID, 7-9 A
type and 10-12 B type (.kind::mxf8f6f4: the .kind::f8f6f4 codes; .kind::mxf4 and
.kind::mxf4nvf4: 1 E2M1), 13/14 negate A/B, 15/16 transpose A/B, 17-22 N >> 3, 23 scale
factor type (0 UE4M3, 1 UE8M0), 24-28 M >> 4 (M >> 7 in bits 27-28), 29-30 matrix A's scale
factor data ID. The data ID picks the byte of each 32-bit tensor-memory column where the
instruction's scale factors start (tcgen05_scales.py).

PTX ISA, "Shared memory descriptor" (tcgen05, 64 bits): bits 0-13 matrix start address >> 4,
16-29 leading dimension byte offset >> 4, 32-45 stride dimension byte offset >> 4, 46-48 the
fixed constant 0b001, 49-51 matrix base offset, 52 leading dimension stride mode (0 relative,
1 absolute), 61-63 swizzling mode (0 none, 1 128-byte with 32-byte atomic, 2 128-byte,
4 64-byte, 6 32-byte).
"""

from __future__ import annotations

from dataclasses import dataclass

from smalti.sim.ops.wgmma_operands import Descriptor

KIND_TYPES = {
    "f16": {0: "f16", 1: "bf16"},
    "tf32": {2: "tf32"},
    "f8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
    "mxf8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
    "mxf4": {1: "e2m1"},
    "mxf4nvf4": {1: "e2m1"},
}
BLOCK_SCALED = ("mxf8f6f4", "mxf4", "mxf4nvf4")
SCALE_TYPES = {0: "ue4m3", 1: "ue8m0"}
D_TYPES = {0: "f16", 1: "f32", 2: "s32"}
SWIZZLE_SPANS = {0: None, 2: 128, 4: 64, 6: 32}  # mode 1 (128B, 32B atoms) is not modelled
VERSION = 1  # bits 46-48 of every sm_100 shared memory descriptor


def _field(value: int, low: int, bits: int) -> int:
    return (value >> low) & ((1 << bits) - 1)


@dataclass(frozen=True)
class InstructionDescriptor:
    """A decoded instruction descriptor; `atype`/`btype` are None for codes the kind lacks."""

    sparse: bool
    saturate: bool
    dtype: str | None
    atype: str | None
    btype: str | None
    negate_a: bool
    negate_b: bool
    transpose_a: bool  # A is MN-major
    transpose_b: bool  # B is MN-major
    n: int
    m: int
    max_shift: int

    @classmethod
    def decode(cls, value: int, kind: str) -> InstructionDescriptor:
        types = KIND_TYPES[kind]
        return cls(bool(_field(value, 2, 1)), bool(_field(value, 3, 1)),
                   D_TYPES.get(_field(value, 4, 2)), types.get(_field(value, 7, 3)),
                   types.get(_field(value, 10, 3)), bool(_field(value, 13, 1)),
                   bool(_field(value, 14, 1)), bool(_field(value, 15, 1)),
                   bool(_field(value, 16, 1)), _field(value, 17, 6) << 3,
                   _field(value, 24, 5) << 4, _field(value, 30, 2))


@dataclass(frozen=True)
class BlockScaledDescriptor:
    """A decoded instruction descriptor of a block-scaled kind (the accumulator is f32)."""

    sparse: bool
    b_scale_id: int
    atype: str | None
    btype: str | None
    negate_a: bool
    negate_b: bool
    transpose_a: bool
    transpose_b: bool
    n: int
    scale_type: str
    m: int
    a_scale_id: int
    dtype: str = "f32"
    saturate: bool = False
    max_shift: int = 0

    @classmethod
    def decode(cls, value: int, kind: str) -> BlockScaledDescriptor:
        types = KIND_TYPES[kind]
        return cls(bool(_field(value, 2, 1)), _field(value, 4, 2),
                   types.get(_field(value, 7, 3)), types.get(_field(value, 10, 3)),
                   bool(_field(value, 13, 1)), bool(_field(value, 14, 1)),
                   bool(_field(value, 15, 1)), bool(_field(value, 16, 1)),
                   _field(value, 17, 6) << 3, SCALE_TYPES[_field(value, 23, 1)],
                   _field(value, 24, 5) << 4, _field(value, 29, 2))


@dataclass(frozen=True)
class SharedDescriptor:
    """A decoded sm_100 shared memory descriptor."""

    start: int
    lbo: int
    sbo: int
    version: int
    base_offset: int
    absolute_lbo: bool
    swizzle_mode: int

    @classmethod
    def decode(cls, value: int) -> SharedDescriptor:
        return cls(_field(value, 0, 14) << 4, _field(value, 16, 14) << 4,
                   _field(value, 32, 14) << 4, _field(value, 46, 3), _field(value, 49, 3),
                   bool(_field(value, 52, 1)), _field(value, 61, 3))

    def problem(self) -> str | None:
        """Why the simulator cannot use this descriptor (None: it can)."""
        if self.version != VERSION:
            return (f"bits 46-48 of an sm_100 shared memory descriptor must be 0b001, not "
                    f"{self.version:#05b}")
        if self.swizzle_mode not in SWIZZLE_SPANS:
            return (f"swizzling mode {self.swizzle_mode} is not supported (0 none, 2 128B, "
                    "4 64B, 6 32B are)")
        if self.base_offset:
            return (f"a non-zero matrix base offset ({self.base_offset}) is not supported; "
                    "align the operand to its swizzle pattern")
        if self.absolute_lbo:
            return "the absolute leading dimension stride mode is not supported"
        return None

    def canonical(self) -> Descriptor:
        """The same layout as a wgmma matrix descriptor (the canonical layouts of both
        instruction families are the same: PTX ISA, "Shared Memory Matrix Layout")."""
        return Descriptor(self.start, self.lbo, self.sbo, 0, SWIZZLE_SPANS[self.swizzle_mode])
