"""Correctly rounded floating point: exact results as float64 pairs, rounded once to a type.

An exact result is carried as `(s, err)` with `s = RN64(x)` and `x = s + err` exactly (TwoSum),
then rounded once to the destination type under any IEEE mode. Rounding to a 16-bit type goes
through round-to-odd at float64 and float32 precision, which makes the final round-to-nearest
step correct (round-to-odd at p+2 or more bits composes with one later rounding).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from smalti.sim.dtypes import UINT_OF_BITS

MODES = ("rn", "rz", "rm", "rp")


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, err) with s = RN64(a + b) and a + b = s + err exactly (non-finite s: err = 0)."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), err, 0.0)


def exact_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a*b + c exactly, for a and b of at most 26 significant bits (f32 and narrower)."""
    return two_sum(a * b, c)


def _odd64(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Round s + err to float64 with round-to-odd (truncate, set the last bit if inexact)."""
    inexact = err != 0
    if not inexact.any():
        return s
    bits = s.view(np.uint64).copy()
    away = inexact & ((err < 0) != (s < 0))  # s lies further from zero than the exact value
    bits[away] -= np.uint64(1)
    bits[inexact] |= np.uint64(1)
    return bits.view(np.float64)


def _odd32(t: np.ndarray) -> np.ndarray:
    """Round float64 `t` to float32 with round-to-odd."""
    f = t.astype(np.float32)
    r = t - f.astype(np.float64)
    inexact = (r != 0) & ~np.isnan(r)
    if not inexact.any():
        return f
    bits = f.view(np.uint32).copy()
    away = inexact & ((r < 0) != (f < 0))
    bits[away] -= np.uint32(1)
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


def _step(x: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    """Move finite or infinite `x` one representable value up (where `up`) or down."""
    width = x.dtype.itemsize * 8
    udt = UINT_OF_BITS[width]
    sign_bit = udt(1 << (width - 1))
    bits = x.view(udt).copy()
    negative = (bits & sign_bit) != 0
    zero = (bits & ~sign_bit) == 0
    one = udt(1)
    grow = (up & ~negative) | (down & negative)
    shrink = (up & negative) | (down & ~negative)
    bits = np.where(zero & up, one, bits)
    bits = np.where(zero & down, sign_bit | one, bits)
    bits = np.where(grow & ~zero, bits + one, bits)
    bits = np.where(shrink & ~zero, bits - one, bits)
    return bits.view(x.dtype)


def round_pair(s: np.ndarray, err: np.ndarray | float, dtype: type, mode: str) -> np.ndarray:
    """Round the exact value s + err (float64 pair) to `dtype` under IEEE `mode`."""
    s = np.asarray(s, dtype=np.float64)
    err = np.broadcast_to(np.asarray(err, dtype=np.float64), s.shape)
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        rn = s
    elif dtype == np.float32:
        rn = _odd64(s, err).astype(np.float32)
    elif dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        rn = _odd32(_odd64(s, err)).astype(dtype)
    else:
        raise ValueError(f"cannot round to {dtype}")
    if mode == "rn":
        return rn
    # Sign of (exact - rn): s - rn is exact (the two are within a factor of two, or rn is 0
    # or infinite), and RN of a sum keeps the sign of the exact sum.
    residual = (s - rn.astype(np.float64)) + err
    positive = residual > 0
    negative = residual < 0
    match mode:
        case "rz":
            up, down = positive & (rn < 0), negative & (rn > 0)
        case "rm":
            up, down = np.zeros_like(negative), negative
        case "rp":
            up, down = positive, np.zeros_like(positive)
        case _:
            raise ValueError(f"unknown rounding mode .{mode}")
    if not (up.any() or down.any()):
        return rn
    return _step(rn, up, down)


def round_integral(x: np.ndarray, mode: str) -> np.ndarray:
    """Round floats to integral values: .rni (ties to even), .rzi, .rmi, .rpi."""
    match mode:
        case "rni":
            return np.rint(x)
        case "rzi":
            return np.trunc(x)
        case "rmi":
            return np.floor(x)
        case "rpi":
            return np.ceil(x)
    raise ValueError(f"unknown integer rounding mode .{mode}")


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """.ftz: subnormal values become zero of the same sign."""
    width = x.dtype.itemsize * 8
    udt = UINT_OF_BITS[width]
    exponent_mask = {16: 0x7C00 if x.dtype == np.float16 else 0x7F80,
                     32: 0x7F800000, 64: 0x7FF0000000000000}[width]
    bits = x.view(udt)
    subnormal = (bits & udt(exponent_mask)) == 0
    if not subnormal.any():
        return x
    sign_only = bits & udt(1 << (width - 1))
    return np.where(subnormal, sign_only, bits).astype(udt).view(x.dtype)


def saturate(x: np.ndarray) -> np.ndarray:
    """.sat: clamp to [0.0, 1.0]; NaN becomes +0.0."""
    return np.where(x > 0, np.minimum(x, x.dtype.type(1)), x.dtype.type(0)).astype(x.dtype)


def relu(x: np.ndarray) -> np.ndarray:
    """.relu: negative results become +0.0, NaN stays NaN."""
    return np.where(np.isnan(x) | (x > 0), x, x.dtype.type(0)).astype(x.dtype)


def satfinite(x: np.ndarray) -> np.ndarray:
    """.satfinite: infinities become the largest finite value of the same sign."""
    biggest = ml_dtypes.finfo(x.dtype).max
    return np.where(np.isinf(x), np.copysign(biggest, x), x).astype(x.dtype)


SPLITTER = 134217729.0  # 2**27 + 1 (Veltkamp's split of a float64 into two 26-bit halves)


def two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, e) with p = RN64(a * b) and a * b = p + e exactly, when nothing under- or overflows
    (Dekker's product)."""
    p = a * b
    a_hi = a * SPLITTER - (a * SPLITTER - a)
    b_hi = b * SPLITTER - (b * SPLITTER - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RN64(a * b + c) with one rounding (fma.rn.f64).

    Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
    rounding to odd" (IEEE TC 2008): with a*b = uh + ul and c + ul = th + tl exactly,
    uh + th = vh + vl exactly, the result is RN(vh + RO(tl + vl)). Elements outside the range
    where the error terms are exact (tiny or huge magnitudes) are computed with rationals.
    """
    a, b, c = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, c)))
    with np.errstate(all="ignore"):
        uh, ul = two_product(a, b)
        th, tl = two_sum(c, ul)
        vh, vl = two_sum(uh, th)
        s, err = two_sum(tl, vl)
        result = vh + _odd64(s, err)
        zero_product = (a == 0) | (b == 0)  # then a*b + c is exact but for its zero's sign
        result = np.where(zero_product, a * b + c, result)
        product = np.abs(a * b)
        # Exact error terms need no overflow (Veltkamp's split of a and b included) and a
        # product whose error term is not subnormal (|a*b| * 2**-106 >= 2**-1022).
        safe = ((np.abs(np.stack([a, b, c, product])) < 2.0 ** 995).all(axis=0)
                & ((a == 0) | (b == 0) | (product > 2.0 ** -900)))
    if safe.all():
        return result
    result = np.array(result)
    for i in zip(*np.nonzero(~safe), strict=True):
        result[i] = _fma_exact(float(a[i]), float(b[i]), float(c[i]))
    return result


def _fma_exact(a: float, b: float, c: float) -> float:
    """One fma with exact rational arithmetic (float(Fraction) rounds to nearest even)."""
    from fractions import Fraction

    if not (np.isfinite(a) and np.isfinite(b)):
        return a * b + c  # inf * x, NaN: the product's special value decides
    if not np.isfinite(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # the sign of a zero: -0 only for (-0) + (-0) (IEEE 754, 6.3)
        return a * b + c if c == 0 and (a == 0 or b == 0) else 0.0
    try:
        return float(exact)
    except OverflowError:
        return float(np.copysign(np.inf, float(exact > 0) - 0.5))
