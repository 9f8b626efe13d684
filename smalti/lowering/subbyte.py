"""4-bit elements (i4, f4E2M1FN): their byte addressing in global memory and their
conversion to 16- and 32-bit floats in a few bit operations per register.

In memory two elements share a byte, the first in the low nibble (as XLA lays out
jnp.int4 and jnp.float4_e2m1fn arrays, and as TMA's packed 4-bit formats read them). In
registers eight consecutive elements share a .b32, element j in bits 4j..4j+3, so a 16-byte
load brings 32 of them. A slice therefore starts at a byte (its innermost index even) and
each thread's run of elements is a whole number of registers.

Conversions (sm_90a has no cvt from 4-bit types) work on register pairs of outputs: for the
byte k of a register, one `prmt` puts element 2k into the low 16-bit lane and element 2k+1
into the high lane, then:
- i4 -> bf16/f16: the nibble n, XOR 8 (for the whole register, once), ORed into the
  exponent of 128.0 (bf16 0x4300) or 1024.0 (f16 0x6400), where one unit of the mantissa is
  1.0, reads 128 + (v + 8); one `sub.bf16x2`/`sub.f16x2` of 136 (1032) leaves v exactly.
  Unsigned (uitofp) skips the XOR and subtracts 128 (1024).
- f4E2M1FN -> f16/bf16: e2m1 is sign, 2 exponent bits (bias 1) and 1 mantissa bit. Its
  sign goes to bit 15 and its 3 other bits to the top of the lane's exponent-mantissa
  boundary (f16 bits 9..11, bf16 bits 6..8): read as f16 (bf16) this is the value times
  2^-14 (2^-126), subnormals included, so one `mul` by 2^14 (2^126) makes it exact.
- f32 targets: the 16-bit pairs (bf16 for i4, f16 for e2m1) widened: a bf16 is the top half
  of its f32; an f16 widens with `cvt.f32.f16`.
The sequences are checked over every 4-bit value in tests/test_subbyte_convert.py.
"""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.lowering.context import LoweringContext
from smalti.lowering.scalar import constant_scalar, scalar_add, scalar_mul
from smalti.lowering.values import (
    BufferValue,
    ElementType,
    FragmentedArray,
    ScalarValue,
)
from smalti.ptx import Register, VectorOperand
from smalti.tiling import Distribution

PER_REGISTER = 8  # 4-bit elements in one .b32

# lop3 truth tables (PTX ISA, lop3: immLut = F(0xF0, 0xCC, 0xAA)).
LUT_A_AND_B_OR_C = (0xF0 & 0xCC) | 0xAA
LUT_A_OR_B_AND_C = 0xF0 | (0xCC & 0xAA)

# Per 16-bit float type: the OR-magic whose mantissa unit is 1.0, and the e2m1 placement.
MAGIC = {"bf16": 0x4300, "f16": 0x6400}  # 128.0, 1024.0
MANTISSA_BITS = {"bf16": 7, "f16": 10}
E2M1_SCALE = {"bf16": 0x7E80, "f16": 0x7400}  # 2^126, 2^14: 2^(bias - e2m1's bias of 1)
FLOAT_BITS = {"bf16": 0x4300 + 8, "f16": 0x6400 + 8}  # 136.0, 1032.0


def twice(half: int) -> int:
    """A 16-bit pattern in both lanes of a .b32."""
    return half | half << 16


def pair_selector(k: int) -> int:
    """prmt selector taking byte k of a into bytes 0-1 and byte k of b into bytes 2-3."""
    return k | k << 4 | (4 + k) << 8 | (4 + k) << 12


def slice_offset(ctx: LoweringContext, op: ir.OpView, buffer: BufferValue,
                 indices: list[ir.Value]) -> ScalarValue:
    """Byte offset of a slice of 4-bit elements: its element offset, provably even, halved."""
    total = constant_scalar(0)
    for index, stride in zip(indices, buffer.strides, strict=True):
        total = scalar_add(ctx, total, scalar_mul(ctx, ctx.scalar(op, index),
                                                  constant_scalar(stride)))
    if total.constant is not None:
        if total.constant % 2:
            raise error_at(op, f"a slice of {buffer.element.name} must start at a byte (an "
                               f"even element offset), got element {total.constant}")
        return constant_scalar(total.constant // 2)
    if total.divisor % 2:
        raise error_at(op, f"a slice of {buffer.element.name} must start at a byte: its "
                           "element offset must be a provable multiple of 2 (index * 2)")
    shifted = ctx.builder.compute(f"shr.{total.type.scalar}", total.type.scalar,
                                  total.operand, 1)
    return ScalarValue(shifted, total.type, total.divisor // 2)


def check_global_access(op: ir.OpView, dist: Distribution, buffer: BufferValue) -> None:
    """4-bit elements move in whole registers: each thread's vector is a contiguous run of
    the innermost dimension, a multiple of 8 long, starting at a byte."""
    name = buffer.element.name
    if not dist.separable or dist.vector_dim != len(dist.shape) - 1 or dist.vector_step != 1:
        raise error_at(op, f"vectors of {name} move in runs of the innermost dimension: "
                           "use a strided or tiled layout whose vector is the last dimension")
    if dist.vector_length % PER_REGISTER:
        raise error_at(op, f"vectors of {name} hold {PER_REGISTER} elements per register: "
                           f"the layout's vector of {dist.vector_length} is not a multiple "
                           f"of {PER_REGISTER}")
    if buffer.strides[-1] != 1 or any(s % 2 for s in buffer.strides[:-1]):
        raise error_at(op, f"a buffer of {name} must have rows of an even length")
    last = len(dist.shape) - 1
    if any(term.dim == last and term.scale % 2 for term in dist.thread_terms) or any(
            origin[last] % 2 for origin in dist.register_origins):
        raise error_at(op, f"the layout splits bytes of {name} between threads")


def refuse(op: ir.OpView, *elements: ElementType | None) -> None:
    """A located error for an op computing on 4-bit vectors, which registers only hold to
    be stored or widened."""
    for element in elements:
        if element is not None and element.bits == 4:
            raise error_at(op, f"has no lowering for vectors of {element.name}: 4-bit vectors "
                               "are loaded, stored and converted to bf16, f16 or f32 "
                               "(arith.sitofp, arith.uitofp, arith.extf) only")


def check_register_vectors(op: ir.OpView, array: FragmentedArray) -> None:
    if array.vector_length % PER_REGISTER:
        raise error_at(op, f"vectors of {array.element.name} hold {PER_REGISTER} elements "
                           f"per register; this layout gives {array.vector_length}")


def widen(ctx: LoweringContext, op: ir.OpView, source: FragmentedArray, target: ElementType,
          signed: bool = True) -> FragmentedArray:
    """`source` (i4 or f4E2M1FN) converted to `target` (bf16, f16 or f32), exactly."""
    check_register_vectors(op, source)
    if target.name not in ("bf16", "f16", "f32"):
        raise error_at(op, f"converts {source.element.name} to bf16, f16 or f32, not "
                           f"{target.name}")
    convert: Callable[[LoweringContext, Register, str], list[Register]]
    if source.element.name == "i4":
        convert = _int4_pairs_signed if signed else _int4_pairs_unsigned
        pair_type = "bf16" if target.name == "f32" else target.name
    else:
        convert, pair_type = _e2m1_pairs, "f16" if target.name == "f32" else target.name
    vectors = []
    for vector in source.vectors:
        registers: list[Register] = []
        for register in vector:
            pairs = convert(ctx, register, pair_type)
            registers.extend(pairs if target.name != "f32"
                             else [w for p in pairs for w in _pair_to_f32(ctx, p, pair_type)])
        vectors.append(tuple(registers))
    return FragmentedArray(source.layout, source.shape, target, tuple(vectors),
                           source.vector_length)


def _int4_pairs_signed(ctx: LoweringContext, register: Register, float_type: str
                       ) -> list[Register]:
    return _int4_pairs(ctx, register, float_type, signed=True)


def _int4_pairs_unsigned(ctx: LoweringContext, register: Register, float_type: str
                         ) -> list[Register]:
    return _int4_pairs(ctx, register, float_type, signed=False)


def _int4_pairs(ctx: LoweringContext, register: Register, float_type: str, signed: bool
                ) -> list[Register]:
    """Four registers of two `float_type` each: the eight int4 of `register`, lowest first."""
    b = ctx.builder
    biased = b.compute("xor.b32", "b32", register, 0x88888888) if signed else register
    odd = b.compute("shr.b32", "b32", biased, 4)  # byte k's low nibble: element 2k + 1
    offset = b.compute("mov.b32", "b32", twice(MAGIC[float_type] + (8 if signed else 0)))
    pairs = []
    for k in range(4):
        lanes = b.compute("prmt.b32", "b32", biased, odd, pair_selector(k))
        magic = b.compute("lop3.b32", "b32", lanes, twice(0x000F), twice(MAGIC[float_type]),
                          LUT_A_AND_B_OR_C)
        pairs.append(b.compute(f"sub.rn.{float_type}x2", "b32", magic, offset))
    return pairs


def _e2m1_pairs(ctx: LoweringContext, register: Register, float_type: str) -> list[Register]:
    """Four registers of two `float_type` each: the eight e2m1 of `register`, lowest first."""
    b = ctx.builder
    mantissa = MANTISSA_BITS[float_type]
    even = b.compute("shl.b32", "b32", register, 4)  # byte k's high nibble: element 2k
    scale = b.compute("mov.b32", "b32", twice(E2M1_SCALE[float_type]))
    pairs = []
    for k in range(4):
        # each lane's top nibble (bits 12..15) is its element: the sign lands in place
        lanes = b.compute("prmt.b32", "b32", even, register, pair_selector(k))
        shifted = b.compute("shr.b32", "b32", lanes, 13 - mantissa)
        sign = b.compute("and.b32", "b32", lanes, twice(0x8000))
        bits = b.compute("lop3.b32", "b32", sign, shifted, twice(7 << (mantissa - 1)),
                         LUT_A_OR_B_AND_C)
        pairs.append(b.compute(f"mul.rn.{float_type}x2", "b32", bits, scale))
    return pairs


def _pair_to_f32(ctx: LoweringContext, pair: Register, float_type: str) -> list[Register]:
    """The two 16-bit floats of `pair` as f32 registers, low first (exact)."""
    b = ctx.builder
    if float_type == "bf16":  # a bf16 is the upper half of the f32 of the same value
        return [b.compute("shl.b32", "f32", pair, 16),
                b.compute("and.b32", "f32", pair, 0xFFFF0000)]
    halves = [b.reg("b16"), b.reg("b16")]
    b.emit("mov.b32", VectorOperand(tuple(halves)), pair)
    return [b.compute("cvt.f32.f16", "f32", h) for h in halves]


__all__ = ["check_global_access", "refuse", "slice_offset", "widen"]
