"""Integer arithmetic: add, sub, mul, mad, div, rem, min, max, neg, abs (two's complement)."""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import BITS, SIGNED, SINT_OF_BITS, UINT_OF_BITS, VIEW
from smalti.sim.errors import Unsupported
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.ops.carry import decode_carry, mul_hi
from smalti.sim.ops.common import elementwise
from smalti.sim.registry import Step, semantics

ARITH_TYPES = frozenset({"s16", "u16", "s32", "u32", "s64", "u64"})


def _int_type(mods: Modifiers) -> str:
    [ptx_type] = mods.types()
    if ptx_type not in ARITH_TYPES:
        raise Unsupported(f"integer arithmetic on .{ptx_type}")
    return ptx_type


def _saturating(fn, ptx_type: str):
    """.sat (s32 only): compute in int64 and clamp to the s32 range."""
    if ptx_type != "s32":
        raise Unsupported(".sat applies to .s32 only")
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    return lambda a, b: np.clip(fn(np.int64(1) * a, np.int64(1) * b), lo, hi).astype(np.int32)


@semantics("add", "int")
@semantics("sub", "int")
def decode_add_sub(inst: Instruction, env: DecodeEnv) -> Step:
    """add/sub{.sat}.T: wrapping, or clamped with .sat."""
    mods = Modifiers(inst)
    sat = mods.flag("sat")
    if mods.flag("cc"):
        return decode_carry(inst, env)
    ptx_type = _int_type(mods)
    mods.done()
    fn = np.add if inst.base == "add" else np.subtract
    if sat:
        fn = _saturating(fn, ptx_type)
    return elementwise(inst, env, [ptx_type] * 2, ptx_type, fn)


def _wide_type(ptx_type: str) -> str:
    if BITS[ptx_type] == 64:
        raise Unsupported(".wide needs a 16- or 32-bit type")
    return f"{ptx_type[0]}{BITS[ptx_type] * 2}"


def _widen(x: np.ndarray, wide: str) -> np.ndarray:
    return np.asarray(x).astype(VIEW[wide])


@semantics("mul", "int")
def decode_mul(inst: Instruction, env: DecodeEnv) -> Step:
    """mul.lo / .hi / .wide on 16-, 32- and 64-bit integers."""
    mods = Modifiers(inst)
    mode = mods.one_of(("lo", "hi", "wide"), default="lo")
    ptx_type = _int_type(mods)
    mods.done()
    match mode:
        case "lo":
            return elementwise(inst, env, [ptx_type] * 2, ptx_type, np.multiply)
        case "hi":
            return elementwise(inst, env, [ptx_type] * 2, ptx_type,
                               lambda a, b: mul_hi(a, b, ptx_type))
    wide = _wide_type(ptx_type)
    return elementwise(inst, env, [ptx_type] * 2, wide,
                       lambda a, b: _widen(a, wide) * _widen(b, wide))


@semantics("mad", "int")
def decode_mad(inst: Instruction, env: DecodeEnv) -> Step:
    """mad.lo / .hi / .wide: the product's chosen part plus c (of the result width)."""
    if "cc" in inst.modifiers:
        return decode_carry(inst, env)
    mods = Modifiers(inst)
    mode = mods.one_of(("lo", "hi", "wide"), default="lo")
    ptx_type = _int_type(mods)
    mods.done()
    match mode:
        case "lo":
            return elementwise(inst, env, [ptx_type] * 3, ptx_type, lambda a, b, c: a * b + c)
        case "hi":
            return elementwise(inst, env, [ptx_type] * 3, ptx_type,
                               lambda a, b, c: mul_hi(a, b, ptx_type) + c)
    wide = _wide_type(ptx_type)
    return elementwise(inst, env, [ptx_type, ptx_type, wide], wide,
                       lambda a, b, c: _widen(a, wide) * _widen(b, wide) + c)


def _divide(a: np.ndarray, b: np.ndarray, ptx_type: str) -> tuple[np.ndarray, np.ndarray]:
    """Quotient truncated toward zero and remainder with the dividend's sign.

    Division by zero is unspecified in PTX; this gives quotient all-ones and remainder a, as
    the hardware's unsigned division does.
    """
    a, b = np.asarray(a), np.asarray(b)
    dtype = VIEW[ptx_type]
    zero = b == 0
    safe = np.where(zero, dtype(1), b).astype(dtype)
    if ptx_type in SIGNED:
        bits = BITS[ptx_type]
        ua = np.abs(a.astype(np.int64)) if bits < 64 else np.abs(a).view(np.uint64)
        ub = np.abs(safe.astype(np.int64)) if bits < 64 else np.abs(safe).view(np.uint64)
        q = (ua // ub).astype(UINT_OF_BITS[bits]).view(SINT_OF_BITS[bits])
        q = np.where((a < 0) != (safe < 0), -q, q).astype(dtype)
    else:
        q = (a // safe).astype(dtype)
    r = (a - q * safe).astype(dtype)
    q = np.where(zero, dtype(-1) if ptx_type in SIGNED else ~dtype(0), q).astype(dtype)
    return q, np.where(zero, a, r).astype(dtype)


@semantics("div", "int")
@semantics("rem", "int")
def decode_div_rem(inst: Instruction, env: DecodeEnv) -> Step:
    """div / rem: C semantics (truncating quotient)."""
    mods = Modifiers(inst)
    ptx_type = _int_type(mods)
    mods.done()
    part = 0 if inst.base == "div" else 1
    return elementwise(inst, env, [ptx_type] * 2, ptx_type,
                       lambda a, b: _divide(a, b, ptx_type)[part])


@semantics("min", "int")
@semantics("max", "int")
def decode_min_max(inst: Instruction, env: DecodeEnv) -> Step:
    """min / max{.relu}, signed or unsigned by type; .relu (s32) clamps negative results to 0."""
    mods = Modifiers(inst)
    use_relu = mods.flag("relu")
    ptx_type = _int_type(mods)
    mods.done()
    fn = np.minimum if inst.base == "min" else np.maximum
    if use_relu:
        if ptx_type != "s32":
            raise Unsupported(".relu applies to .s32 only")
        return elementwise(inst, env, [ptx_type] * 2, ptx_type,
                           lambda a, b: np.maximum(fn(a, b), np.int32(0)))
    return elementwise(inst, env, [ptx_type] * 2, ptx_type, fn)


@semantics("neg", "int")
@semantics("abs", "int")
def decode_neg_abs(inst: Instruction, env: DecodeEnv) -> Step:
    """neg / abs on signed types (the most negative value maps to itself)."""
    mods = Modifiers(inst)
    ptx_type = _int_type(mods)
    mods.done()
    if ptx_type not in SIGNED:
        raise Unsupported(f"{inst.base} needs a signed type")
    return elementwise(inst, env, [ptx_type], ptx_type,
                       np.negative if inst.base == "neg" else np.abs)
