"""i8 -> f16 / bf16 / f32 (arith.sitofp, arith.uitofp) for registers of four bytes, by
magic numbers rather than one or two cvt per element.

A byte u (0..255; a signed value v XOR 0x80, done once for the register, is v + 128)
placed in the low mantissa bits of 1024.0 (f16 0x6400, whose mantissa unit is 1.0 up to
2048) reads 1024 + u; one `sub.f16x2` of 1152 (1024 when unsigned) leaves v exactly. One
`prmt` per pair builds [u0, 0x64, u1, 0x64]. bf16 has too few mantissa bits for 256 values
above a power of two, so bf16 and f32 go through 2^23 (f32 0x4B000000): `prmt` builds
[u, 0, 0, 0x4B] per element, `sub.f32` of 2^23 + 128 leaves v, and bf16 pairs round the two
f32 values with one `cvt.rn.bf16x2.f32` (exact: |v| <= 255 needs 8 significant bits).
Checked over all 256 values in tests/test_subbyte_convert.py.
"""

from __future__ import annotations

from smalti.lowering.context import LoweringContext
from smalti.lowering.subbyte import twice
from smalti.lowering.values import ELEMENT_TYPES, ElementType, FragmentedArray
from smalti.ptx import Immediate, Register

F16_MAGIC = 0x6400  # 1024.0
F32_MAGIC = 0x4B000000  # 2^23


def applies(source: FragmentedArray, target: ElementType) -> bool:
    """Whether `source` (integers) converts to `target` here: i8 four to a register, to
    f16, bf16 or f32."""
    return (source.element.name == "i8" and source.pack == 4
            and target.name in ("f16", "bf16", "f32"))


def convert(ctx: LoweringContext, source: FragmentedArray, target: ElementType,
            signed: bool) -> FragmentedArray:
    """`source` (i8, four per register) as `target` floats, exactly."""
    vectors = []
    for vector in source.vectors:
        registers: list[Register] = []
        for register in vector:
            biased = (ctx.builder.compute("xor.b32", "b32", register, 0x80808080) if signed
                      else register)
            registers.extend(_to_f16(ctx, biased, signed) if target.name == "f16"
                             else _to_f32(ctx, biased, signed, target.name == "bf16"))
        vectors.append(tuple(registers))
    return FragmentedArray(source.layout, source.shape, ELEMENT_TYPES[target.name],
                           tuple(vectors), source.vector_length)


def _to_f16(ctx: LoweringContext, biased: Register, signed: bool) -> list[Register]:
    """Two f16x2 registers: bytes 0, 1 and bytes 2, 3 of `biased`."""
    b = ctx.builder
    magic = b.compute("mov.b32", "b32", F16_MAGIC)  # its byte 1 (prmt index 5): 0x64
    offset = b.compute("mov.b32", "b32", twice(F16_MAGIC + (128 if signed else 0)))
    pairs = []
    for k in (0, 2):
        lanes = b.compute("prmt.b32", "b32", biased, magic, k | 5 << 4 | (k + 1) << 8 | 5 << 12)
        pairs.append(b.compute("sub.rn.f16x2", "b32", lanes, offset))
    return pairs


def _to_f32(ctx: LoweringContext, biased: Register, signed: bool, pairs: bool
            ) -> list[Register]:
    """Four f32 registers (or, `pairs`, two bf16x2) of the bytes of `biased`."""
    b = ctx.builder
    magic = b.compute("mov.b32", "b32", F32_MAGIC)  # bytes 0-2 (prmt 4-6): 0, byte 3 (7): 0x4B
    offset = Immediate(float(2**23 + (128 if signed else 0)), "f32")
    values = []
    for k in range(4):
        bits = b.compute("prmt.b32", "f32", biased, magic, k | 4 << 4 | 4 << 8 | 7 << 12)
        values.append(b.compute("sub.rn.f32", "f32", bits, offset))
    if not pairs:
        return values
    # cvt.rn.bf16x2.f32 d, a, b puts a in the upper half
    return [b.compute("cvt.rn.bf16x2.f32", "b32", values[k + 1], values[k]) for k in (0, 2)]


__all__ = ["applies", "convert"]
