"""f32 and f64 arithmetic with IEEE rounding modes, .ftz and .sat, and the approximate functions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import VIEW
from smalti.sim.errors import Unsupported
from smalti.sim.operands import DecodeEnv, Modifiers
from smalti.sim.ops.common import elementwise
from smalti.sim.registry import Step, semantics
from smalti.sim.rounding import (
    exact_fma,
    flush_subnormals,
    fma64,
    round_pair,
    saturate,
    two_sum,
)

ROUNDING = ("rn", "rz", "rm", "rp")


def _float_type(mods: Modifiers) -> str:
    [ptx_type] = mods.types()
    if ptx_type not in ("f32", "f64"):
        raise Unsupported(f"float arithmetic on .{ptx_type}")
    return ptx_type


def _wrap(fn: Callable[..., np.ndarray], ftz: bool, sat: bool) -> Callable[..., np.ndarray]:
    """Apply .ftz to the inputs and result and .sat to the result of `fn`."""
    if not (ftz or sat):
        return fn

    def wrapped(*args: np.ndarray) -> np.ndarray:
        if ftz:
            args = tuple(flush_subnormals(np.asarray(a)) for a in args)
        result = np.asarray(fn(*args))
        if ftz:
            result = flush_subnormals(result)
        return saturate(result) if sat else result

    return wrapped


def _minus_zero_if_cancelled(result: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754: an exact zero sum is -0 under round-toward-negative unless both addends are +0."""
    plus_zeros = (a == 0) & (b == 0) & ~np.signbit(a) & ~np.signbit(b)
    return np.where((result == 0) & ~plus_zeros, -result.dtype.type(0), result).astype(
        result.dtype)


def _directed(base: str, mode: str, dtype: type) -> Callable[..., np.ndarray]:
    """add/sub/mul/fma rounded once under a directed mode, from exact float64 pairs."""

    def run(*args: np.ndarray) -> np.ndarray:
        x = [np.asarray(a).astype(np.float64) for a in args]
        match base:
            case "add":
                s, err = two_sum(x[0], x[1])
                addends = (x[0], x[1])
            case "sub":
                s, err = two_sum(x[0], -x[1])
                addends = (x[0], -x[1])
            case "mul":
                s, err, addends = x[0] * x[1], 0.0, None
            case _:
                s, err = exact_fma(x[0], x[1], x[2])
                addends = (x[0] * x[1], x[2])
        result = round_pair(np.asarray(s), err, dtype, mode)
        if mode == "rm" and addends is not None:
            result = _minus_zero_if_cancelled(result, *addends)
        return result

    return run


@semantics("add", "float")
@semantics("sub", "float")
@semantics("mul", "float")
@semantics("fma", "float")
@semantics("mad", "float")
def decode_arith(inst: Instruction, env: DecodeEnv) -> Step:
    """add/sub/mul/fma{.rnd}{.ftz}{.sat}: one correctly rounded result (fma: of the exact a*b+c).

    PTX ISA, "Floating-Point Instructions": .rn is the default for add/sub/mul; mad.f32 with a
    rounding modifier is fma. f32 fma and directed modes are computed exactly in float64 pairs.
    """
    mods = Modifiers(inst)
    mode = mods.one_of(ROUNDING)
    ftz = mods.flag("ftz")
    sat = mods.flag("sat")
    ptx_type = _float_type(mods)
    mods.done()
    base = "fma" if inst.base == "mad" else inst.base
    if base == "fma" and mode is None:
        raise Unsupported(f"{inst.base}.{ptx_type} needs a rounding modifier")
    mode = mode or "rn"
    dtype = VIEW[ptx_type]
    if ptx_type == "f64":
        if ftz or sat:
            raise Unsupported(".ftz and .sat apply to .f32 only")
        if base == "fma" and mode == "rn":
            return elementwise(inst, env, ["f64"] * 3, "f64", fma64)
        if base == "fma" or (base == "mul" and mode != "rn"):
            raise Unsupported(f"{base}.{mode}.f64 needs exact 106-bit products; only "
                              "fma.rn.f64 is implemented")
    arity = 3 if base == "fma" else 2
    if mode == "rn" and base != "fma":
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]
    else:
        fn = _directed(base, mode, dtype)
    return elementwise(inst, env, [ptx_type] * arity, ptx_type, _wrap(fn, ftz, sat))


@semantics("div", "float")
def decode_div(inst: Instruction, env: DecodeEnv) -> Step:
    """div.rn (IEEE), div.approx and div.full (computed as IEEE division, within their bounds)."""
    mods = Modifiers(inst)
    mode = mods.one_of(("rn", "approx", "full", "rz", "rm", "rp"))
    ftz = mods.flag("ftz")
    ptx_type = _float_type(mods)
    mods.done()
    if mode not in ("rn", "approx", "full"):
        raise Unsupported("div needs .rn, .approx or .full (directed modes not implemented)")
    return elementwise(inst, env, [ptx_type] * 2, ptx_type, _wrap(np.divide, ftz, False))


def _sign_bit_op(base: str, dtype: type) -> Callable[[np.ndarray], np.ndarray]:
    width = np.dtype(dtype).itemsize * 8
    udt = {32: np.uint32, 64: np.uint64}[width]
    sign = udt(1 << (width - 1))
    if base == "neg":
        return lambda a: (np.asarray(a).view(udt) ^ sign).view(dtype)
    return lambda a: (np.asarray(a).view(udt) & ~sign).view(dtype)


@semantics("neg", "float")
@semantics("abs", "float")
def decode_neg_abs(inst: Instruction, env: DecodeEnv) -> Step:
    """neg / abs flip or clear the sign bit (NaNs included)."""
    mods = Modifiers(inst)
    ftz = mods.flag("ftz")
    ptx_type = _float_type(mods)
    mods.done()
    fn = _sign_bit_op(inst.base, VIEW[ptx_type])
    return elementwise(inst, env, [ptx_type], ptx_type, _wrap(fn, ftz, False))


def min_max(base: str, propagate_nan: bool) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """min/max: a NaN operand yields the other (unless .NaN); -0.0 is below +0.0."""

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a), np.asarray(b)
        result = np.fmin(a, b) if base == "min" else np.fmax(a, b)
        zeros = (a == 0) & (b == 0)
        if zeros.any():
            negative = np.signbit(a) | np.signbit(b) if base == "min" else \
                np.signbit(a) & np.signbit(b)
            result = np.where(zeros, np.where(negative, -result.dtype.type(0),
                                              result.dtype.type(0)), result)
        if propagate_nan:
            result = np.where(np.isnan(a) | np.isnan(b), result.dtype.type(np.nan), result)
        return np.asarray(result).astype(a.dtype)

    return run


@semantics("min", "float")
@semantics("max", "float")
def decode_min_max(inst: Instruction, env: DecodeEnv) -> Step:
    """min / max{.ftz}{.NaN}.f32 and .f64."""
    mods = Modifiers(inst)
    ftz = mods.flag("ftz")
    nan = mods.flag("NaN")
    ptx_type = _float_type(mods)
    mods.done()
    return elementwise(inst, env, [ptx_type] * 2, ptx_type,
                       _wrap(min_max(inst.base, nan), ftz, False))


UNARY = {
    "ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "rcp": lambda a: np.divide(a.dtype.type(1), a), "sqrt": np.sqrt,
    "rsqrt": lambda a: (1.0 / np.sqrt(a.astype(np.float64))).astype(a.dtype),
}
CORRECTLY_ROUNDED = ("rcp", "sqrt")  # .rn forms are IEEE; numpy's f32/f64 ops are too


@semantics("ex2", "float")
@semantics("lg2", "float")
@semantics("sin", "float")
@semantics("cos", "float")
@semantics("tanh", "float")
@semantics("rcp", "float")
@semantics("sqrt", "float")
@semantics("rsqrt", "float")
def decode_unary(inst: Instruction, env: DecodeEnv) -> Step:
    """ex2, lg2, sin, cos, tanh, rsqrt (.approx) and rcp, sqrt (.rn or .approx)."""
    mods = Modifiers(inst)
    mode = mods.one_of(("approx", "rn", "rz", "rm", "rp", "full"))
    ftz = mods.flag("ftz")
    ptx_type = _float_type(mods)
    mods.done()
    allowed = ("approx", "rn") if inst.base in CORRECTLY_ROUNDED else ("approx",)
    if mode not in allowed:
        raise Unsupported(f"{inst.base} supports {', '.join('.' + a for a in allowed)}")
    fn = UNARY[inst.base]
    return elementwise(inst, env, [ptx_type], ptx_type,
                       _wrap(lambda a: fn(np.asarray(a)), ftz, False))
