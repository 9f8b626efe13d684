"""Bit manipulation: prmt, lop3, shf, bfe, bfi, popc, clz, brev, bfind, testp, copysign."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from smalti.ptx.module import Immediate, Instruction
from smalti.sim.dtypes import BITS, SIGNED, UINT_OF_BITS
from smalti.sim.errors import Unsupported
from smalti.sim.operands import DecodeEnv, Modifiers, expect
from smalti.sim.ops.common import elementwise
from smalti.sim.registry import Step, semantics

# prmt modes other than the generic one: result byte k (d.b0..d.b3) for each selector c[1:0].
# PTX ISA, "Integer Arithmetic Instructions: prmt", the table of f4e, b4e, rc8, ecl, ecr, rc16.
PRMT_MODES: dict[str, tuple[tuple[int, int, int, int], ...]] = {
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


def prmt(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str | None) -> np.ndarray:
    """Pick four bytes of the eight in {b, a} (a is bytes 0-3) by the selectors in c.

    Generic mode: nibble k of c selects byte k of the result; its bit 3 replicates the
    selected byte's sign bit instead of copying the byte.
    """
    both = (np.asarray(b).astype(np.uint64) << np.uint64(32)) | np.asarray(a).astype(np.uint64)
    c = np.asarray(c).astype(np.uint64)
    result = np.zeros(np.broadcast(both, c).shape, np.uint64)
    for k in range(4):
        if mode is None:
            nibble = (c >> np.uint64(4 * k)) & np.uint64(0xF)
            byte = (both >> ((nibble & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            sign = np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0))
            byte = np.where(nibble & np.uint64(8), sign, byte)
        else:
            table = np.array([row[k] for row in PRMT_MODES[mode]], np.uint64)
            which = table[(c & np.uint64(3)).astype(np.int64)]
            byte = (both >> (which * np.uint64(8))) & np.uint64(0xFF)
        result |= byte << np.uint64(8 * k)
    return result.astype(np.uint32)


@semantics("prmt")
def decode_prmt(inst: Instruction, env: DecodeEnv) -> Step:
    """prmt.b32{.mode} d, a, b, c."""
    mods = Modifiers(inst)
    mode = mods.one_of(tuple(PRMT_MODES))
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type != "b32":
        raise Unsupported("prmt.b32")
    return elementwise(inst, env, ["b32"] * 3, "b32", lambda a, b, c: prmt(a, b, c, mode))


def lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, lut: int) -> np.ndarray:
    """Bitwise F(a, b, c) whose truth table is `lut`: bit (a<<2 | b<<1 | c) of lut.

    PTX ISA, "Logic and Shift Instructions: lop3": immLut is F(0xF0, 0xCC, 0xAA).
    """
    a, b, c = (np.asarray(x) for x in (a, b, c))
    result = np.zeros(np.broadcast(a, b, c).shape, a.dtype)
    for minterm in range(8):
        if lut >> minterm & 1:
            term = (a if minterm & 4 else ~a) & (b if minterm & 2 else ~b) & (
                c if minterm & 1 else ~c)
            result = result | term
    return result


@semantics("lop3")
def decode_lop3(inst: Instruction, env: DecodeEnv) -> Step:
    """lop3.b32 d, a, b, c, immLut."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type != "b32":
        raise Unsupported("lop3.b32")
    *sources, lut = expect(inst.operands, 5)
    if not isinstance(lut, Immediate) or not isinstance(lut.value, int):
        raise Unsupported("lop3 needs an immediate truth table")
    table = int(lut.value) & 0xFF
    return elementwise(replace(inst, operands=tuple(sources)), env, ["b32"] * 3, "b32",
                       lambda a, b, c: lop3(a, b, c, table))


def funnel_shift(a: np.ndarray, b: np.ndarray, c: np.ndarray, left: bool,
                 clamp: bool) -> np.ndarray:
    """shf: shift the 64-bit {b, a} (b high) by c; shf.l keeps the high word, shf.r the low.

    PTX ISA, "shf": .clamp limits the amount to 32, .wrap takes it modulo 32.
    """
    both = (np.asarray(b).astype(np.uint64) << np.uint64(32)) | np.asarray(a).astype(np.uint64)
    c = np.asarray(c).astype(np.uint64)
    n = np.minimum(c, np.uint64(32)) if clamp else c & np.uint64(31)
    if left:
        return ((both << n) >> np.uint64(32)).astype(np.uint32)
    return (both >> n).astype(np.uint32)


@semantics("shf")
def decode_shf(inst: Instruction, env: DecodeEnv) -> Step:
    """shf.{l,r}.{clamp,wrap}.b32 d, a, b, c."""
    mods = Modifiers(inst)
    direction = mods.one_of(("l", "r"))
    mode = mods.one_of(("clamp", "wrap"))
    [ptx_type] = mods.types()
    mods.done()
    if direction is None or mode is None or ptx_type != "b32":
        raise Unsupported("shf.{l,r}.{clamp,wrap}.b32")
    return elementwise(inst, env, ["b32"] * 3, "b32", lambda a, b, c: funnel_shift(
        a, b, c, direction == "l", mode == "clamp"))


def _low_bits(length: np.ndarray, width: int) -> np.ndarray:
    """A mask of the low `length` bits (0..width) as uint64."""
    length = np.asarray(length).astype(np.uint64)
    full = np.uint64((1 << width) - 1)
    partial = (np.uint64(1) << np.minimum(length, np.uint64(63))) - np.uint64(1)
    return np.where(length >= np.uint64(width), full, partial)


def bfe(a: np.ndarray, pos: np.ndarray, length: np.ndarray, ptx_type: str) -> np.ndarray:
    """Extract `length` bits from `pos` (each taken mod 256); signed types sign-extend.

    PTX ISA, "bfe": bits past the msb read as the sign bit, which is a[min(pos+len-1, msb)]
    for signed types with len > 0 and 0 otherwise.
    """
    width = BITS[ptx_type]
    udt = UINT_OF_BITS[width]
    bits = np.asarray(a).view(udt).astype(np.uint64)
    pos = np.asarray(pos).astype(np.uint64) & np.uint64(0xFF)
    length = np.asarray(length).astype(np.uint64) & np.uint64(0xFF)
    msb = np.uint64(width - 1)
    shifted = np.where(pos > msb, np.uint64(0), bits >> np.minimum(pos, msb))
    available = np.where(pos > msb, np.uint64(0), msb + np.uint64(1) - np.minimum(pos, msb))
    taken = np.minimum(length, available)
    field = shifted & _low_bits(taken, 64)
    if ptx_type in SIGNED:
        top = np.minimum(pos + length - np.uint64(1), msb)
        sign = (length > 0) & ((bits >> np.where(length > 0, top, 0)) & np.uint64(1) == 1)
        fill = ~_low_bits(taken, 64)
        field = np.where(sign, field | fill, field)
    return field.astype(udt).view(np.dtype(np.asarray(a).dtype))


@semantics("bfe")
def decode_bfe(inst: Instruction, env: DecodeEnv) -> Step:
    """bfe.{u32,u64,s32,s64} d, a, b, c: b is the start bit, c the length."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in ("u32", "u64", "s32", "s64"):
        raise Unsupported(f"bfe.{ptx_type}")
    return elementwise(inst, env, [ptx_type, "u32", "u32"], ptx_type,
                       lambda a, b, c: bfe(a, b, c, ptx_type))


def bfi(a: np.ndarray, b: np.ndarray, pos: np.ndarray, length: np.ndarray,
        width: int) -> np.ndarray:
    """Insert the low `length` bits of a into b at `pos` (each mod 256; clipped at the msb)."""
    udt = UINT_OF_BITS[width]
    a = np.asarray(a).astype(np.uint64)
    b = np.asarray(b).astype(np.uint64)
    pos = np.asarray(pos).astype(np.uint64) & np.uint64(0xFF)
    length = np.asarray(length).astype(np.uint64) & np.uint64(0xFF)
    inside = pos < np.uint64(width)
    at = np.where(inside, pos, np.uint64(0))
    field = np.where(inside, _low_bits(length, 64) << at, np.uint64(0)) & _low_bits(
        np.uint64(width), 64)
    return ((b & ~field) | ((a << at) & field)).astype(udt)


@semantics("bfi")
def decode_bfi(inst: Instruction, env: DecodeEnv) -> Step:
    """bfi.{b32,b64} f, a, b, c, d: b with a's low d bits inserted at bit c."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in ("b32", "b64"):
        raise Unsupported(f"bfi.{ptx_type}")
    width = BITS[ptx_type]
    return elementwise(inst, env, [ptx_type, ptx_type, "u32", "u32"], ptx_type,
                       lambda a, b, c, d: bfi(a, b, c, d, width))


def highest_bit(x: np.ndarray) -> np.ndarray:
    """Index of the most significant set bit of unsigned `x` (int64), -1 for zero."""
    v = np.asarray(x).astype(np.uint64)
    position = np.zeros(v.shape, np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        big = v >= np.uint64(1 << step)
        v = np.where(big, v >> np.uint64(step), v)
        position = position + np.where(big, step, 0)
    return np.where(np.asarray(x) == 0, -1, position)


BYTE_REVERSED = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def brev(x: np.ndarray, width: int) -> np.ndarray:
    """Reverse the bit order of each `width`-bit value."""
    udt = UINT_OF_BITS[width]
    flat = np.ascontiguousarray(np.atleast_1d(np.asarray(x).astype(udt)))
    as_bytes = BYTE_REVERSED[flat.view(np.uint8).reshape(flat.size, width // 8)][:, ::-1]
    return np.ascontiguousarray(as_bytes).view(udt).reshape(np.asarray(x).shape)


@semantics("popc")
@semantics("clz")
@semantics("brev")
def decode_count(inst: Instruction, env: DecodeEnv) -> Step:
    """popc / clz .{b32,b64} d(.u32), a; brev.{b32,b64} d, a."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in ("b32", "b64"):
        raise Unsupported(f"{inst.base}.{ptx_type}")
    width = BITS[ptx_type]
    match inst.base:
        case "popc":
            return elementwise(inst, env, [ptx_type], "u32",
                               lambda a: np.bitwise_count(np.asarray(a)).astype(np.uint32))
        case "clz":
            return elementwise(inst, env, [ptx_type], "u32", lambda a: (
                width - 1 - highest_bit(a)).astype(np.uint32))
    return elementwise(inst, env, [ptx_type], ptx_type, lambda a: brev(a, width))


def bfind(a: np.ndarray, ptx_type: str, shift_amount: bool) -> np.ndarray:
    """Bit position of the most significant non-sign bit; 0xFFFFFFFF when there is none.

    PTX ISA, "bfind": for signed types negative values search for the highest 0 bit;
    .shiftamt returns width-1-position instead (the left shift that normalises a).
    """
    width = BITS[ptx_type]
    a = np.asarray(a)
    bits = a.astype(UINT_OF_BITS[width])
    if ptx_type in SIGNED:
        bits = np.where(a < 0, ~bits, bits)
    position = highest_bit(bits)
    if shift_amount:
        position = np.where(position < 0, -1, width - 1 - position)
    return np.where(position < 0, 0xFFFFFFFF, position).astype(np.uint32)


@semantics("bfind")
def decode_bfind(inst: Instruction, env: DecodeEnv) -> Step:
    """bfind{.shiftamt}.{u32,u64,s32,s64} d(.u32), a."""
    mods = Modifiers(inst)
    shift_amount = mods.flag("shiftamt")
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in ("u32", "u64", "s32", "s64"):
        raise Unsupported(f"bfind.{ptx_type}")
    return elementwise(inst, env, [ptx_type], "u32",
                       lambda a: bfind(a, ptx_type, shift_amount))


TESTS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")


def testp(a: np.ndarray, test: str) -> np.ndarray:
    """testp's class tests; normal and subnormal exclude zero, infinity and NaN."""
    a = np.asarray(a)
    tiny = np.finfo(a.dtype).tiny
    match test:
        case "finite":
            return np.isfinite(a)
        case "infinite":
            return np.isinf(a)
        case "number":
            return ~np.isnan(a)
        case "notanumber":
            return np.isnan(a)
        case "normal":
            return np.isfinite(a) & (np.abs(a) >= tiny)
    return (a != 0) & (np.abs(a) < tiny)


@semantics("testp")
def decode_testp(inst: Instruction, env: DecodeEnv) -> Step:
    """testp.op.{f32,f64} p, a."""
    mods = Modifiers(inst)
    test = mods.one_of(TESTS)
    [ptx_type] = mods.types()
    mods.done()
    if test is None or ptx_type not in ("f32", "f64"):
        raise Unsupported("testp.{finite,infinite,number,notanumber,normal,subnormal}.f32/f64")
    return elementwise(inst, env, [ptx_type], "pred", lambda a: testp(a, test))


@semantics("copysign")
def decode_copysign(inst: Instruction, env: DecodeEnv) -> Step:
    """copysign.{f32,f64} d, a, b: b with the sign of a (bitwise, so NaNs keep their payload)."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in ("f32", "f64"):
        raise Unsupported(f"copysign.{ptx_type}")
    width = BITS[ptx_type]
    udt = UINT_OF_BITS[width]
    sign = udt(1 << (width - 1))

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ua, ub = (np.asarray(x).astype(x.dtype).view(udt) for x in (np.asarray(a), np.asarray(b)))
        return ((ub & ~sign) | (ua & sign)).view(np.asarray(b).dtype)

    return elementwise(inst, env, [ptx_type] * 2, ptx_type, run)
