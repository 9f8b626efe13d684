"""Extended-precision integer arithmetic: add.cc, addc, sub.cc, subc, mad.cc, madc, and the
high halves of products (mul.hi, mad.hi).

These chain a per-thread carry flag (CC.CF, `Machine.carry`) from one instruction to the next,
which is how multi-word additions are written in PTX (PTX ISA, "Extended-Precision Integer
Arithmetic Instructions"). For subtraction the flag is the borrow: `subc` computes
d = a - (b + CC.CF), so sub.cc sets it when a < b (as unsigned words).
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import BITS, SIGNED, UINT_OF_BITS, VIEW
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, writer
from smalti.sim.registry import Compute, Step, semantics

CARRY_TYPES = ("u32", "s32", "u64", "s64")


def mul_hi(a: np.ndarray, b: np.ndarray, ptx_type: str) -> np.ndarray:
    """The upper half of the double-width product."""
    bits = BITS[ptx_type]
    signed = ptx_type in SIGNED
    if bits < 64:
        wide = np.int64 if signed else np.uint64
        return ((np.asarray(a).astype(wide) * np.asarray(b).astype(wide)) >> bits).astype(
            VIEW[ptx_type])
    ua = np.asarray(a).view(np.uint64) if signed else np.asarray(a)
    ub = np.asarray(b).view(np.uint64) if signed else np.asarray(b)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = ua & m32, ua >> s32, ub & m32, ub >> s32
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if signed:  # unsigned high half minus the corrections for negative operands
        hi = hi - np.where(np.asarray(a) < 0, ub, 0).astype(np.uint64)
        hi = hi - np.where(np.asarray(b) < 0, ua, 0).astype(np.uint64)
        return hi.view(np.int64)
    return hi


def carry_in(m: Machine, lanes: Lanes) -> np.ndarray:
    """CC.CF of the active lanes (clear before any instruction set it)."""
    if m.carry is None:
        m.carry = np.zeros(m.geometry.threads, np.bool_)
    return m.carry if lanes.index is None else m.carry[lanes.index]


def set_carry(m: Machine, lanes: Lanes, flag: np.ndarray) -> None:
    """Store CC.CF for the active lanes."""
    carry_in(m, lanes)
    assert m.carry is not None
    if lanes.index is None:
        m.carry[:] = flag
    else:
        m.carry[lanes.index] = flag


def add_with_carry(a: np.ndarray, b: np.ndarray, cf: np.ndarray | bool,
                   width: int) -> tuple[np.ndarray, np.ndarray]:
    """(a + b + cf mod 2**width, carry out) on unsigned words."""
    udt = UINT_OF_BITS[width]
    a, b = np.asarray(a).astype(udt), np.asarray(b).astype(udt)
    cf = np.asarray(cf).astype(udt)
    partial = a + b
    total = partial + cf
    return total, (partial < a) | (total < partial)


def sub_with_borrow(a: np.ndarray, b: np.ndarray, bf: np.ndarray | bool,
                    width: int) -> tuple[np.ndarray, np.ndarray]:
    """(a - b - bf mod 2**width, borrow out) on unsigned words."""
    udt = UINT_OF_BITS[width]
    a, b = np.asarray(a).astype(udt), np.asarray(b).astype(udt)
    bf = np.asarray(bf).astype(udt)
    partial = a - b
    total = partial - bf
    return total, (a < b) | (partial < bf)


def decode_carry(inst: Instruction, env: DecodeEnv) -> Step:
    """add.cc / sub.cc / mad{.lo,.hi}.cc and addc / subc / madc{.lo,.hi}{.cc}."""
    mods = Modifiers(inst)
    part = mods.one_of(("lo", "hi")) if inst.base in ("mad", "madc") else None
    writes_carry = mods.flag("cc")
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in CARRY_TYPES:
        raise Unsupported(f"{inst.base}.cc on .{ptx_type}")
    if inst.base in ("mad", "madc") and part is None:
        raise Unsupported(f"{inst.base} needs .lo or .hi")
    width = BITS[ptx_type]
    unsigned = f"u{width}"
    uses_carry = inst.base.endswith("c")
    op = inst.base.rstrip("c") if uses_carry else inst.base
    arity = 3 if op == "mad" else 2
    dest, *sources = expect(inst.operands, arity + 1)
    write = writer(dest, unsigned, env)
    reads = [reader(s, ptx_type if op == "mad" and i < 2 else unsigned, env)
             for i, s in enumerate(sources)]

    def run(m: Machine, lanes: Lanes) -> None:
        values = [read(m, lanes) for read in reads]
        cf = carry_in(m, lanes) if uses_carry else False
        match op:
            case "add":
                result, out = add_with_carry(values[0], values[1], cf, width)
            case "sub":
                result, out = sub_with_borrow(values[0], values[1], cf, width)
            case _:
                a, b, c = values
                product = a * b if part == "lo" else mul_hi(a, b, ptx_type)
                bits = np.asarray(product, dtype=VIEW[ptx_type]).view(UINT_OF_BITS[width])
                result, out = add_with_carry(bits, c, cf, width)
        write(m, lanes, result)
        if writes_carry:
            set_carry(m, lanes, np.broadcast_to(out, (lanes.count,)))

    return Compute(run)


@semantics("addc")
@semantics("subc")
@semantics("madc")
def decode_with_carry_in(inst: Instruction, env: DecodeEnv) -> Step:
    """addc / subc / madc read CC.CF (and with .cc write it)."""
    return decode_carry(inst, env)
