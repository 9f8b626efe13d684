"""fp8 (e4m3, e5m2) encoding with round-to-nearest-even and .satfinite, and exact decoding.

PTX ISA, "cvt" and "Alternate Floating-Point Data Formats": e4m3 has 4 exponent bits (bias 7),
3 mantissa bits, no infinities and NaN S.1111.111, largest finite 448; e5m2 has 5 exponent
bits (bias 15), 2 mantissa bits, IEEE-style infinities and NaNs, largest finite 57344.
Conversions to fp8 are `.rn.satfinite`: rounded to nearest even, results beyond the largest
finite (infinities included) saturate to it with the input's sign, and NaN becomes the
canonical NaN 0x7F.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CANONICAL_NAN = 0x7F


@dataclass(frozen=True)
class Fp8Format:
    """The parameters of one fp8 format."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_finite: float
    has_infinity: bool

    @property
    def min_exponent(self) -> int:
        """Exponent of the smallest normal number."""
        return 1 - self.bias


E4M3 = Fp8Format("e4m3", 4, 3, 7, 448.0, False)
E5M2 = Fp8Format("e5m2", 5, 2, 15, 57344.0, True)
FORMATS = {"e4m3x2": E4M3, "e5m2x2": E5M2, "e4m3": E4M3, "e5m2": E5M2}


def round_to_fp8(x: np.ndarray, fmt: Fp8Format) -> np.ndarray:
    """Round float64 values to the nearest (ties to even) fp8 value, saturating (float64)."""
    x = np.asarray(x, np.float64)
    finite = np.isfinite(x) & (x != 0)
    _, exponent = np.frexp(np.where(finite, x, 1.0))  # x = f * 2**exponent, 0.5 <= |f| < 1
    exponent = np.maximum(exponent - 1, fmt.min_exponent)  # subnormals share the least one
    quantum = np.ldexp(1.0, exponent - fmt.mantissa_bits)
    rounded = np.rint(x / quantum) * quantum  # scaling by a power of two is exact
    rounded = np.where(finite, rounded, x)
    return np.clip(rounded, -fmt.max_finite, fmt.max_finite)  # NaN stays NaN


def encode(x: np.ndarray, fmt: Fp8Format, relu: bool = False) -> np.ndarray:
    """The fp8 codes (uint8) of `cvt.rn.satfinite{.relu}` applied to float values `x`."""
    value = round_to_fp8(x, fmt)
    if relu:  # PTX ISA: .relu clamps negative results (and -0) to +0; NaN stays NaN
        value = np.where(np.signbit(value) & ~np.isnan(value), 0.0, value)
    nan = np.isnan(value)
    magnitude = np.abs(np.where(nan, 0.0, value))
    normal = magnitude >= np.ldexp(1.0, fmt.min_exponent)
    _, exponent = np.frexp(np.where(normal, magnitude, 1.0))
    biased = np.where(normal, exponent - 1 + fmt.bias, 0)
    scale = np.where(normal, np.ldexp(1.0, exponent - 1), np.ldexp(1.0, fmt.min_exponent))
    fraction = magnitude / scale - np.where(normal, 1.0, 0.0)
    mantissa = np.rint(fraction * (1 << fmt.mantissa_bits)).astype(np.int64)
    code = (biased.astype(np.int64) << fmt.mantissa_bits) | mantissa
    code = code | np.where(np.signbit(value), 0x80, 0)
    return np.where(nan, CANONICAL_NAN, code).astype(np.uint8)


def decode(codes: np.ndarray, fmt: Fp8Format) -> np.ndarray:
    """The exact float64 value of each fp8 code (NaN for NaN codes, ±inf for e5m2's)."""
    codes = np.asarray(codes).astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    biased = (codes >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    mantissa = codes & ((1 << fmt.mantissa_bits) - 1)
    top = (1 << fmt.exponent_bits) - 1
    normal = biased > 0
    significand = np.where(normal, 1.0, 0.0) + mantissa / (1 << fmt.mantissa_bits)
    value = sign * np.ldexp(significand, np.where(normal, biased, 1) - fmt.bias)
    if fmt.has_infinity:
        special = biased == top
        value = np.where(special & (mantissa == 0), sign * np.inf, value)
        return np.where(special & (mantissa != 0), np.nan, value)
    return np.where((biased == top) & (mantissa == (1 << fmt.mantissa_bits) - 1), np.nan, value)
