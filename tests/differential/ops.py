"""The op table: every elementwise op, comparison, reduction and layout the generator may
draw, with how each is written in .mlir and in the DSL and how numpy computes it.

To test a new op, add one entry here (the generator, both emitters and the reference read
only this table): its MLIR op (`None`: the DSL only), its DSL expression (`None`: .mlir
only), its reference, and its error model. The ops are those the README and
smalti/lowering/{elementwise,float_math,integer,compare}.py say are supported.

Error models (see tests.differential.numerics): "rounded" ops are correctly rounded (PTX
`.rn`, or computed in f32 and rounded once, which is the same for 16-bit types since
24 >= 2 * 11 + 2); "approx" ops go through PTX's `.approx` units, with the bounds of the
PTX ISA (its "Floating point instructions" section) and of float_math.py's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.differential.dtypes import DType
from tests.differential.numerics import (
    INF,
    Tracked,
    any_error,
    as_f64,
    corner_deviation,
    round_to,
    settle,
    ulp,
    worst,
)

Reference = Callable[[list[Tracked], DType], Tracked]

# PTX ISA bounds of the .approx units (relative unless named), loosened a little:
# ex2.approx.f32 2^-22.5 relative; lg2.approx.f32 2^-22.6 absolute (mantissa in [0.5, 2]),
# 2^-22 relative elsewhere; rsqrt.approx.f32 2^-22.9 relative; tanh.approx.f32 2^-10.987
# relative; sin/cos.approx.f32 2^-20.9 absolute in [-pi, pi] (after float_math's reduction:
# 2^-20.5 + 7e-15 |x|).
EX2_RELATIVE = 2.0 ** -22
LG2_ABSOLUTE = 2.0 ** -22
LG2_RELATIVE = 2.0 ** -21.5
RSQRT_RELATIVE = 2.0 ** -22
TANH_RELATIVE = 2.0 ** -10.9
TRIG_ABSOLUTE = 2.0 ** -20.5
F32_EPS = 2.0 ** -24
SMALLEST_NORMAL_F32 = 2.0 ** -126  # the .approx units may flush subnormal results
LOG2_E = 1.4426950408889634


def _float_result(exact: np.ndarray, extra: np.ndarray | float, args: list[Tracked],
                  dtype: DType, fn: Callable[..., np.ndarray], monotone: bool = True,
                  approximate: bool = False) -> Tracked:
    """A float op's result: `exact` rounded to `dtype`, with the bound propagated from the
    operands (corners of their box, or a Lipschitz-1 bound), plus `extra` (the op's own
    error), plus an ulp of `dtype` wherever smalti may round another value than ours."""
    val = round_to(exact, dtype)
    xs = [as_f64(a) for a in args]
    if monotone:
        propagated = corner_deviation(fn, xs, [a.err for a in args], exact)
    else:
        propagated = sum((a.err for a in args), np.zeros(exact.shape))
    err = propagated + extra
    rounding = (err > 0) | approximate
    err = np.where(rounding, err + ulp(np.abs(exact) + err, dtype), err)
    return settle(val, err, exact, dtype)


def rounded(fn: Callable[..., np.ndarray], *, pole: bool = False, extra_ulp: bool = False
            ) -> Reference:
    """A correctly rounded op (add, mul, div, sqrt, max, ...): exact on exact operands.
    `pole`: undetermined where the divisor's box holds zero. `extra_ulp`: a rounding of
    float64 may differ from smalti's single rounding by one ulp (fma)."""

    def reference(args: list[Tracked], dtype: DType) -> Tracked:
        with np.errstate(all="ignore"):
            exact = fn(*(as_f64(a) for a in args))
            result = _float_result(exact, 0.0, args, dtype, fn)
        err = result.err
        if extra_ulp:
            err = err + np.where(np.isfinite(exact), ulp(exact, dtype), 0.0)
        if pole:
            divisor = args[-1]
            err = np.where((divisor.err > 0) & (np.abs(as_f64(divisor)) <= divisor.err),
                           INF, err)
        return Tracked(result.val, err)

    return reference


def approx(fn: Callable[..., np.ndarray], bound: Callable[..., np.ndarray],
           monotone: bool = True) -> Reference:
    """An op through the .approx units: `bound(exact, *operands)` is its own absolute error
    (before rounding to the type)."""

    def reference(args: list[Tracked], dtype: DType) -> Tracked:
        xs = [as_f64(a) for a in args]
        with np.errstate(all="ignore"):
            exact = fn(*xs)
            extra = np.where(np.isfinite(exact), bound(exact, *xs), 0.0) + SMALLEST_NORMAL_F32
            result = _float_result(exact, extra, args, dtype, fn, monotone, approximate=True)
        # special values (inf, nan, zero of the units) are exact where the operands are
        err = np.where(~np.isfinite(exact) & ~any_error(args), 0.0, result.err)
        return Tracked(result.val, err)

    return reference


def discontinuous(fn: Callable[..., np.ndarray]) -> Reference:
    """An exact op with jumps (floor, fmod, ...): undetermined unless every operand is
    exact, or (one operand) `fn` is the same at both ends of its box."""

    def reference(args: list[Tracked], dtype: DType) -> Tracked:
        xs = [as_f64(a) for a in args]
        with np.errstate(all="ignore"):
            exact = fn(*xs)
            val = round_to(exact, dtype)
            if len(args) == 1:
                low, high = fn(xs[0] - args[0].err), fn(xs[0] + args[0].err)
                same = (low == high) | (np.isnan(low) & np.isnan(high))
            else:
                same = np.zeros(exact.shape, bool)
        err = np.where(any_error(args) & ~same, INF, 0.0)
        return Tracked(val, err)

    return reference


def copysign_reference(args: list[Tracked], dtype: DType) -> Tracked:
    """|x| with y's sign: x's bound, undetermined where y's sign is."""
    x, y = args
    val = np.copysign(as_f64(x), as_f64(y))
    unknown_sign = ((y.err > 0) & (np.abs(as_f64(y)) <= y.err)) | np.isnan(as_f64(y))
    err = np.where(unknown_sign, INF, x.err)  # (a NaN's sign bit is not specified)
    return Tracked(round_to(val, dtype), err)


def _exp_bound(exact: np.ndarray, x: np.ndarray) -> np.ndarray:
    """exp(x) = ex2(x * log2(e)): the unit's error, and the rounding of the product (and of
    the constant), which moves the argument by |x log2 e| 2^-23."""
    return np.abs(exact) * (EX2_RELATIVE + math.log(2) * np.abs(x * LOG2_E) * 2 * F32_EPS)


def _log_bound(exact: np.ndarray, x: np.ndarray) -> np.ndarray:
    """lg2 (absolute near 1, relative elsewhere), times ln 2 (a rounding)."""
    return LG2_ABSOLUTE + np.abs(exact) * (LG2_RELATIVE + 2 * F32_EPS)


def _pow_bound(exact: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """float_math.powf: relative 2^-21 (1 + |y log2 |x||)."""
    with np.errstate(all="ignore"):
        scale = np.abs(y * np.log2(np.abs(x)))
    return np.abs(exact) * 2.0 ** -21 * (1 + np.where(np.isfinite(scale), scale, 0))


def _trig_bound(exact: np.ndarray, x: np.ndarray) -> np.ndarray:
    return TRIG_ABSOLUTE + 7e-15 * np.abs(x)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x - np.trunc(x)) >= 0.5, np.trunc(x) + np.sign(x), np.trunc(x))


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.power(x, y)


@dataclass(frozen=True)
class Elementwise:
    """An elementwise op on operands of one element kind ("float", "int" or "bool")."""

    name: str
    kind: str
    arity: int
    mlir: str | None  # the op ("arith.addf"); names of tests.differential.emit_mlir.COMPOSITE
    dsl: str | None  # a format string over the operands ("({0} + {1})")
    reference: Reference | None  # floats; integer and bool ops use `integer`
    integer: Callable[..., np.ndarray] | None = None  # on int64 values: the exact result
    undefined: Callable[..., np.ndarray] | None = None  # int64 operands -> where UB
    weight: float = 1.0
    domain: str = ""  # the generator's guard for operand 0: "positive", "nonzero", ...


def _shift_undefined(bits: int) -> Callable[..., np.ndarray]:
    return lambda a, s: (s < 0) | (s >= bits)


def _division_undefined(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return c == 0


def _trunc_div(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    safe = np.where(c == 0, 1, c)
    q = np.abs(a) // np.abs(safe)
    return np.where((a < 0) != (safe < 0), -q, q)


def _floor_div(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a // np.where(c == 0, 1, c)


def _ceil_div(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return -(-a // np.where(c == 0, 1, c))


def _trunc_rem(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a - _trunc_div(a, c) * np.where(c == 0, 1, c)


def _unsigned(bits: int, fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda *xs: fn(*(x % (1 << bits) for x in xs))


def _signed_overflow(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Where signed division is undefined: by zero, or the most negative value by -1
    (either width: the int64 operands still hold the narrow values)."""
    return (c == 0) | ((c == -1) & ((a == -2**31) | (a == -2**15)))


FLOAT = [
    Elementwise("addf", "float", 2, "arith.addf", "({0} + {1})", rounded(np.add), weight=3),
    Elementwise("subf", "float", 2, "arith.subf", "({0} - {1})", rounded(np.subtract), weight=3),
    Elementwise("mulf", "float", 2, "arith.mulf", "({0} * {1})", rounded(np.multiply), weight=3),
    Elementwise("divf", "float", 2, "arith.divf", "({0} / {1})", rounded(np.divide, pole=True),
                domain="divisor"),
    Elementwise("maximumf", "float", 2, "arith.maximumf", "sd.maximum({0}, {1})",
                rounded(np.maximum)),
    Elementwise("minimumf", "float", 2, "arith.minimumf", "sd.minimum({0}, {1})",
                rounded(np.minimum)),
    Elementwise("maxnumf", "float", 2, "arith.maxnumf", None, rounded(np.fmax), weight=0.5),
    Elementwise("minnumf", "float", 2, "arith.minnumf", None, rounded(np.fmin), weight=0.5),
    Elementwise("negf", "float", 1, "arith.negf", "(-{0})", rounded(np.negative)),
    Elementwise("absf", "float", 1, "math.absf", "abs({0})", rounded(np.abs)),
    Elementwise("exp", "float", 1, "math.exp", "sd.exp({0})", approx(np.exp, _exp_bound),
                domain="small"),
    Elementwise("exp2", "float", 1, "math.exp2", "sd.exp2({0})",
                approx(np.exp2, lambda e, x: np.abs(e) * EX2_RELATIVE), domain="small"),
    Elementwise("log", "float", 1, "math.log", "sd.log({0})", approx(np.log, _log_bound),
                domain="positive"),
    Elementwise("log2", "float", 1, "math.log2", None,
                approx(np.log2, lambda e, x: LG2_ABSOLUTE + np.abs(e) * LG2_RELATIVE),
                weight=0.5, domain="positive"),
    Elementwise("sqrt", "float", 1, "math.sqrt", "sd.sqrt({0})", rounded(np.sqrt),
                domain="positive"),
    Elementwise("rsqrt", "float", 1, "math.rsqrt", "sd.rsqrt({0})",
                approx(lambda x: 1 / np.sqrt(x), lambda e, x: np.abs(e) * RSQRT_RELATIVE),
                domain="positive"),
    Elementwise("tanh", "float", 1, "math.tanh", "sd.tanh({0})",
                approx(np.tanh, lambda e, x: np.abs(e) * TANH_RELATIVE)),
    Elementwise("floor", "float", 1, "math.floor", None, discontinuous(np.floor), weight=0.3),
    Elementwise("ceil", "float", 1, "math.ceil", None, discontinuous(np.ceil), weight=0.3),
    Elementwise("trunc", "float", 1, "math.trunc", None, discontinuous(np.trunc), weight=0.3),
    Elementwise("roundeven", "float", 1, "math.roundeven", None, discontinuous(np.round),
                weight=0.3),
    Elementwise("round", "float", 1, "math.round", None, discontinuous(_round_half_away),
                weight=0.3),
    Elementwise("sin", "float", 1, "math.sin", None, approx(np.sin, _trig_bound, False),
                weight=0.3),
    Elementwise("cos", "float", 1, "math.cos", None, approx(np.cos, _trig_bound, False),
                weight=0.3),
    Elementwise("powf", "float", 2, "math.powf", None, approx(_pow, _pow_bound), weight=0.3,
                domain="positive"),
    Elementwise("remf", "float", 2, "arith.remf", None, discontinuous(np.fmod), weight=0.3),
    Elementwise("copysign", "float", 2, "math.copysign", None, copysign_reference,
                weight=0.3),
    Elementwise("fma", "float", 3, "math.fma", None,
                rounded(lambda a, b, c: a * b + c, extra_ulp=True), weight=0.5),
]

INTEGER = [
    Elementwise("addi", "int", 2, "arith.addi", "({0} + {1})", None, np.add, weight=3),
    Elementwise("subi", "int", 2, "arith.subi", "({0} - {1})", None, np.subtract, weight=2),
    Elementwise("muli", "int", 2, "arith.muli", "({0} * {1})", None, np.multiply, weight=2),
    Elementwise("andi", "int", 2, "arith.andi", "({0} & {1})", None, np.bitwise_and),
    Elementwise("ori", "int", 2, "arith.ori", "({0} | {1})", None, np.bitwise_or),
    Elementwise("xori", "int", 2, "arith.xori", "({0} ^ {1})", None, np.bitwise_xor),
    Elementwise("maxsi", "int", 2, "arith.maxsi", "sd.maximum({0}, {1})", None, np.maximum),
    Elementwise("minsi", "int", 2, "arith.minsi", "sd.minimum({0}, {1})", None, np.minimum),
    Elementwise("negi", "int", 1, "negi", "(-{0})", None, np.negative),
    Elementwise("noti", "int", 1, "noti", "(~{0})", None, np.invert),
    Elementwise("absi", "int", 1, "math.absi", "abs({0})", None, np.abs),
    Elementwise("maxui", "int", 2, "arith.maxui", None, None, None, weight=0.3),
    Elementwise("minui", "int", 2, "arith.minui", None, None, None, weight=0.3),
    Elementwise("divsi", "int", 2, "arith.divsi", None, None, _trunc_div, _signed_overflow,
                weight=0.3),
    Elementwise("remsi", "int", 2, "arith.remsi", None, None, _trunc_rem, _signed_overflow,
                weight=0.3),
    Elementwise("floordivsi", "int", 2, "arith.floordivsi", None, None, _floor_div,
                _signed_overflow, weight=0.3),
    Elementwise("ceildivsi", "int", 2, "arith.ceildivsi", None, None, _ceil_div,
                _signed_overflow, weight=0.3),
    Elementwise("divui", "int", 2, "arith.divui", None, None, None, _division_undefined,
                weight=0.3),
    Elementwise("remui", "int", 2, "arith.remui", None, None, None, _division_undefined,
                weight=0.3),
    Elementwise("ceildivui", "int", 2, "arith.ceildivui", None, None, None,
                _division_undefined, weight=0.3),
    Elementwise("shli", "int", 2, "arith.shli", None, None, np.left_shift, weight=0.3),
    Elementwise("shrsi", "int", 2, "arith.shrsi", None, None, np.right_shift, weight=0.3),
    Elementwise("shrui", "int", 2, "arith.shrui", None, None, None, weight=0.3),
]

BOOL = [
    Elementwise("and", "bool", 2, "arith.andi", "({0} & {1})", None, np.logical_and),
    Elementwise("or", "bool", 2, "arith.ori", "({0} | {1})", None, np.logical_or),
    Elementwise("xor", "bool", 2, "arith.xori", "({0} ^ {1})", None, np.logical_xor),
    Elementwise("not", "bool", 1, "notb", "(~{0})", None, np.logical_not),
]

# Unsigned ops read the operands modulo 2^bits: their integer functions depend on the width.
UNSIGNED: dict[str, Callable[[int], Callable[..., np.ndarray]]] = {
    "maxui": lambda bits: _unsigned(bits, np.maximum),
    "minui": lambda bits: _unsigned(bits, np.minimum),
    "divui": lambda bits: _unsigned(bits, _floor_div),
    "remui": lambda bits: _unsigned(bits, lambda a, c: a % np.where(c == 0, 1, c)),
    "ceildivui": lambda bits: _unsigned(bits, _ceil_div),
    "shrui": lambda bits: lambda a, s: (a % (1 << bits)) >> np.clip(s, 0, 63),
}
SHIFTS = {"shli", "shrsi", "shrui"}

ELEMENTWISE: dict[str, Elementwise] = {op.name: op for op in (*FLOAT, *INTEGER, *BOOL)}


@dataclass(frozen=True)
class Comparison:
    """A predicate: MLIR's name (cmpf or cmpi), the DSL's operator, numpy's function."""

    name: str
    kind: str  # operand kind: "float", "int" or "bool"
    mlir: str
    dsl: str | None
    numpy: Callable[[np.ndarray, np.ndarray], np.ndarray]
    unsigned: bool = False


def _unordered(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda a, b: fn(a, b) | np.isnan(a) | np.isnan(b)


COMPARISONS: dict[str, Comparison] = {c.name: c for c in [
    Comparison("olt", "float", "olt", "<", np.less),
    Comparison("ole", "float", "ole", "<=", np.less_equal),
    Comparison("ogt", "float", "ogt", ">", np.greater),
    Comparison("oge", "float", "oge", ">=", np.greater_equal),
    Comparison("oeq", "float", "oeq", "==", np.equal),
    Comparison("une", "float", "une", "!=", np.not_equal),
    Comparison("one", "float", "one", None, lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b)),
    Comparison("ueq", "float", "ueq", None, _unordered(np.equal)),
    Comparison("ult", "float", "ult", None, _unordered(np.less)),
    Comparison("uge", "float", "uge", None, _unordered(np.greater_equal)),
    Comparison("ord", "float", "ord", None, lambda a, b: ~np.isnan(a) & ~np.isnan(b)),
    Comparison("uno", "float", "uno", None, lambda a, b: np.isnan(a) | np.isnan(b)),
    Comparison("slt", "int", "slt", "<", np.less),
    Comparison("sle", "int", "sle", "<=", np.less_equal),
    Comparison("sgt", "int", "sgt", ">", np.greater),
    Comparison("sge", "int", "sge", ">=", np.greater_equal),
    Comparison("eq", "int", "eq", "==", np.equal),
    Comparison("ne", "int", "ne", "!=", np.not_equal),
    Comparison("ult_i", "int", "ult", None, np.less, unsigned=True),
    Comparison("uge_i", "int", "uge", None, np.greater_equal, unsigned=True),
    Comparison("eq_b", "bool", "eq", None, np.equal),
    Comparison("ne_b", "bool", "ne", None, np.not_equal),
    Comparison("slt_b", "bool", "slt", None, np.less),  # as signed i1, true is -1
    Comparison("ult_b", "bool", "ult", None, np.less, unsigned=True),
]}


@dataclass(frozen=True)
class Reduction:
    """A reduction kind: its #vector.kind for floats and for integers (None: none), whether
    the DSL has it (as the method `name`), the accumulator that changes nothing, and numpy's
    combining function (on float64 values, or on int64 values read unsigned if `unsigned`)."""

    name: str
    mlir_float: str | None
    mlir_int: str | None
    dsl: bool
    float_identity: float = 0.0
    int_identity: int = 0
    combine: Callable[[np.ndarray, np.ndarray], np.ndarray] = np.add
    unsigned: bool = False


REDUCTIONS: dict[str, Reduction] = {r.name: r for r in [
    Reduction("sum", "add", "add", True),
    Reduction("max", "maximumf", "maxsi", True, -math.inf, -2**31, np.maximum),
    Reduction("min", "minimumf", "minsi", True, math.inf, 2**31 - 1, np.minimum),
    Reduction("prod", None, "mul", False, 1.0, 1, np.multiply),
    Reduction("nanmax", "maxnumf", None, False, -math.inf, 0, np.fmax),
    Reduction("nanmin", "minnumf", None, False, math.inf, 0, np.fmin),
    Reduction("umax", None, "maxui", False, 0, 0, np.maximum, unsigned=True),
    Reduction("umin", None, "minui", False, 0, -1, np.minimum, unsigned=True),
    Reduction("and", None, "and", False, 0, -1, np.bitwise_and),
    Reduction("or", None, "or", False, 0, 0, np.bitwise_or),
    Reduction("xor", None, "xor", False, 0, 0, np.bitwise_xor),
]}


@dataclass(frozen=True)
class LayoutChoice:
    """A layout_cast target: its attribute text (after `#smalti.`) and the shapes it holds."""

    name: str
    text: str
    fits: Callable[[tuple[int, ...]], bool]


WGMMA = ("tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], "
         "vector = -1>")
LAYOUTS: dict[str, LayoutChoice] = {c.name: c for c in [
    LayoutChoice("wgmma", WGMMA, lambda s: len(s) == 2 and s[0] % 64 == 0 and s[1] % 8 == 0),
    LayoutChoice("wgmma_transposed",
                 "tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], "
                 "lane = [-3, -4], vector = -2>",
                 lambda s: len(s) == 2 and s[0] % 8 == 0 and s[1] % 64 == 0),
    LayoutChoice("wgmma_8bit", "tiled<tiling = [[64, 16], [16, 16], [8, 16], [4]], warp = [-7], "
                               "lane = [-3, -2], vector = -1>",
                 lambda s: len(s) == 2 and s[0] % 64 == 0 and s[1] % 16 == 0),
    LayoutChoice("wgmma_tf32_a", "tiled<tiling = [[64, 4], [16, 4], [8, 4], [1]], warp = [-7], "
                                 "lane = [-3, -2], vector = -1>",
                 lambda s: len(s) == 2 and s[0] % 64 == 0 and s[1] % 4 == 0),
    LayoutChoice("wgmma_upcast_2x", "tiled<tiling = [[64, 16], [16, 16], [8, 16], [8], [4]], "
                                    "warp = [-8], lane = [-4, -2, -3], vector = -1>",
                 lambda s: len(s) == 2 and s[0] % 64 == 0 and s[1] % 16 == 0),
    LayoutChoice("wgmma_upcast_4x", "tiled<tiling = [[64, 32], [16, 32], [8, 32], [8]], "
                                    "warp = [-7], lane = [-3, -2], vector = -1>",
                 lambda s: len(s) == 2 and s[0] % 64 == 0 and s[1] % 32 == 0),
    LayoutChoice("wgmma_row", "tiled<tiling = [[64], [16], [8], [1]], warp = [-4], "
                              "lane = [-2, r4], vector = -1>",
                 lambda s: len(s) == 1 and s[0] % 64 == 0),
    LayoutChoice("wgmma_col", "tiled<tiling = [[8], [2]], warp = [r4], lane = [r8, -2], "
                              "vector = -1>",
                 lambda s: len(s) == 1 and s[0] % 8 == 0),
    *(LayoutChoice(f"strided{v}", f"strided<vec = {v}>",
                   lambda s, v=v: math.prod(s) % (128 * v) == 0) for v in (1, 2, 4, 8)),
]}


def integer_function(op: Elementwise, bits: int) -> Callable[..., np.ndarray]:
    if op.name in UNSIGNED:
        return UNSIGNED[op.name](bits)
    assert op.integer is not None
    return op.integer


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """int64 values as signed `bits`-bit integers (two's complement wrap-around)."""
    half = 1 << (bits - 1)
    return (values + half) % (1 << bits) - half


def undetermined(values: list[Tracked]) -> np.ndarray:
    """Integer or bool bounds: inf wherever an operand is undetermined."""
    return np.where(worst(values) > 0, INF, 0.0)


__all__ = ["COMPARISONS", "ELEMENTWISE", "LAYOUTS", "REDUCTIONS", "SHIFTS", "Comparison",
           "Elementwise", "LayoutChoice", "Reduction", "integer_function", "undetermined",
           "wrap"]
