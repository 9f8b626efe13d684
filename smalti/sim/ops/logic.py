"""Bitwise logic and shifts: and, or, xor, not (on bits and predicates), shl, shr."""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Immediate, Instruction
from smalti.sim.dtypes import BITS, INTEGER, SIGNED, VIEW, constant
from smalti.sim.errors import Unsupported
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.ops.common import elementwise
from smalti.sim.registry import Step, semantics

BINARY = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _logic_type(mods: Modifiers) -> str:
    [ptx_type] = mods.types()
    if ptx_type != "pred" and ptx_type not in INTEGER:
        raise Unsupported(f"logic on .{ptx_type}")
    return ptx_type


@semantics("and")
@semantics("or")
@semantics("xor")
def decode_binary(inst: Instruction, env: DecodeEnv) -> Step:
    """and / or / xor on .pred and .b16/.b32/.b64."""
    mods = Modifiers(inst)
    ptx_type = _logic_type(mods)
    mods.done()
    return elementwise(inst, env, [ptx_type] * 2, ptx_type, BINARY[inst.base])


@semantics("not")
def decode_not(inst: Instruction, env: DecodeEnv) -> Step:
    """not: bitwise complement (logical negation of a predicate)."""
    mods = Modifiers(inst)
    ptx_type = _logic_type(mods)
    mods.done()
    return elementwise(inst, env, [ptx_type], ptx_type, np.invert)


@semantics("shl")
@semantics("shr")
def decode_shift(inst: Instruction, env: DecodeEnv) -> Step:
    """shl / shr by a .u32 amount; amounts past the width are clamped to the width.

    PTX ISA, "Logic and Shift Instructions: shl, shr": shr.s fills with the sign bit, shr.u and
    shr.b with zeros.
    """
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in INTEGER or BITS[ptx_type] < 16:
        raise Unsupported(f"shift of .{ptx_type}")
    width = BITS[ptx_type]
    dtype = VIEW[ptx_type]
    arithmetic = inst.base == "shr" and ptx_type in SIGNED

    def shift(a: np.ndarray, amount: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        amount = np.minimum(np.asarray(amount).astype(np.uint64), width)
        within = np.minimum(amount, width - 1).astype(dtype)
        if arithmetic:
            return (a >> within).astype(dtype)
        moved = a << within if inst.base == "shl" else a >> within
        return np.where(amount >= width, dtype(0), moved).astype(dtype)

    amount_op = inst.operands[2] if len(inst.operands) == 3 else None
    if isinstance(amount_op, Immediate) and isinstance(amount_op.value, int):
        shift = _constant_shift(inst.base, dtype, width, arithmetic,
                                int(constant(amount_op.value, "u32")))
    return elementwise(inst, env, [ptx_type, "u32"], ptx_type, shift)


def _constant_shift(base: str, dtype: type, width: int, arithmetic: bool, amount: int):
    """The shift by an immediate amount, its clamping decided once at decode (most shifts in
    compiled code are by constants, and this runs for every thread of the launch)."""
    if amount >= width and not arithmetic:
        return lambda a, _: np.zeros(np.shape(a), dtype)
    within = dtype(min(amount, width - 1))
    if base == "shl":
        return lambda a, _: (np.asarray(a) << within).astype(dtype, copy=False)
    return lambda a, _: (np.asarray(a) >> within).astype(dtype, copy=False)
