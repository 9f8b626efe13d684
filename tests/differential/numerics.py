"""Exact rounding and error bounds for the numpy reference.

The reference computes every float op in float64 and rounds the result once to the op's
type (`round_to`), which is what a correctly rounded op (PTX's `.rn` forms) gives: for
add, sub, mul, div and sqrt, float64 holds at least 2p + 2 bits of every p-bit type, so
rounding twice (to float64, then to the type) equals rounding once.

Values carry an error bound next to them (`Tracked.err`, float64, per element): 0 where the
reference is exact (smalti must give the same bits, up to the sign of zero), a positive
bound where an approximate unit (`.approx`), a summation order or an inexact input took
part, and infinity where the value is not determined (undefined behaviour, or a
discontinuity, such as a comparison, within the error of its inputs): not compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.differential.dtypes import DType

INF = math.inf


@dataclass(frozen=True)
class Tracked:
    """A value of the reference: its elements (in the value's numpy dtype) and their bounds."""

    val: np.ndarray
    err: np.ndarray  # float64, same shape

    @staticmethod
    def exact(val: np.ndarray) -> Tracked:
        return Tracked(val, np.zeros(val.shape, np.float64))


def round_to(x: np.ndarray, dtype: DType) -> np.ndarray:
    """float64 `x` rounded to nearest even in `dtype` (subnormals and overflow included),
    exactly: the result is a value of `dtype` (as its numpy dtype)."""
    x = np.asarray(x, np.float64)
    finite = np.isfinite(x)
    safe = np.where(finite, x, 0.0)
    _, exponent = np.frexp(safe)  # safe = m 2^e with 0.5 <= |m| < 1: leading bit 2^(e-1)
    lead = np.maximum(exponent - 1, dtype.min_exponent)
    quantum = np.ldexp(1.0, lead - (dtype.precision - 1))
    rounded = np.round(safe / quantum) * quantum  # np.round: half to even; the scaling is exact
    rounded = np.where(np.abs(rounded) > dtype.max_finite, np.copysign(INF, safe), rounded)
    return np.where(finite, rounded, x).astype(dtype.numpy)


def ulp(x: np.ndarray, dtype: DType) -> np.ndarray:
    """The spacing of `dtype` at magnitude |x| (float64); inf for non-finite x."""
    x = np.abs(np.asarray(x, np.float64))
    finite = np.isfinite(x)
    _, exponent = np.frexp(np.where(finite, x, 0.0))
    lead = np.maximum(exponent - 1, dtype.min_exponent)
    return np.where(finite, np.ldexp(1.0, lead - (dtype.precision - 1)), INF)


def unit_roundoff(dtype: DType) -> float:
    return 2.0 ** -dtype.precision


def as_f64(value: Tracked) -> np.ndarray:
    return value.val.astype(np.float64)


def any_error(values: list[Tracked]) -> np.ndarray:
    """Where any operand is inexact."""
    mask = np.zeros(values[0].val.shape, bool)
    for v in values:
        mask |= v.err > 0
    return mask


def worst(values: list[Tracked]) -> np.ndarray:
    """The largest operand bound, per element."""
    out = np.zeros(values[0].val.shape, np.float64)
    for v in values:
        out = np.maximum(out, v.err)
    return out


def corner_deviation(fn: Callable[..., np.ndarray], xs: list[np.ndarray], errs: list[np.ndarray],
                     exact: np.ndarray) -> np.ndarray:
    """max |fn(x + s e) - fn(x)| over the corners s of the box of inputs: a bound of how far
    `fn` moves within the box for functions monotone in each argument (add, mul, max, exp,
    ...). NaN at a corner (the box leaves the domain) gives inf."""
    deviation = np.zeros(exact.shape, np.float64)
    inexact = np.zeros(exact.shape, bool)
    for e in errs:
        inexact |= e > 0
    if not inexact.any():
        return deviation
    with np.errstate(all="ignore"):
        for corner in range(1 << len(xs)):
            args = [x + (e if corner >> i & 1 else -e) for i, (x, e) in enumerate(zip(xs, errs, strict=True))]
            value = fn(*args)
            step = np.abs(value - exact)
            step = np.where(np.isnan(step), INF, step)
            deviation = np.maximum(deviation, step)
    return np.where(inexact, deviation, 0.0)


def settle(val: np.ndarray, err: np.ndarray, exact: np.ndarray, dtype: DType) -> Tracked:
    """A float result: bounds past the finite range, or around a non-finite value with any
    error, are undetermined."""
    err = np.where(np.isnan(err), INF, err)
    big = np.abs(exact) + err >= dtype.max_finite
    err = np.where((err > 0) & big, INF, err)
    err = np.where((err > 0) & ~np.isfinite(exact), INF, err)
    return Tracked(val, err)


__all__ = ["INF", "Tracked", "any_error", "as_f64", "corner_deviation", "round_to", "settle",
           "ulp", "unit_roundoff", "worst"]
