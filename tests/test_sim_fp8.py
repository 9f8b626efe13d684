"""fp8 conversions (cvt to and from .e4m3x2/.e5m2x2) against ml_dtypes, exhaustively over the
256 codes and on random f32 and f16 inputs: round to nearest even, .satfinite saturation to the
largest finite value, the canonical NaN 0x7F, and .relu."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import SimError
from tests.sim_body import run_body

FORMATS = {"e4m3x2": (ml_dtypes.float8_e4m3fn, 448.0), "e5m2x2": (ml_dtypes.float8_e5m2, 57344.0)}


def reference_codes(x: np.ndarray, fmt: str, relu: bool = False) -> np.ndarray:
    """cvt.rn.satfinite per the ISA, through ml_dtypes: clamp, round to nearest even."""
    dtype, biggest = FORMATS[fmt]
    x = np.asarray(x, np.float32)
    clamped = np.clip(x, -biggest, biggest)
    if relu:
        clamped = np.where(np.signbit(clamped), np.float32(0), clamped)  # -0 too
    with np.errstate(invalid="ignore"):  # NaN inputs, replaced below
        codes = clamped.astype(dtype).view(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), codes)


def pack_f32(fmt: str, a: np.ndarray, b: np.ndarray, relu: bool = False) -> np.ndarray:
    """cvt.rn.satfinite{.relu}.fmt.f32 d, a, b per thread: d's 16 bits."""
    inputs = np.stack([np.asarray(a, np.float32).view(np.uint32),
                       np.asarray(b, np.float32).view(np.uint32)], axis=1)
    mods = ".relu" if relu else ""
    out = run_body(f"  cvt.rn.satfinite{mods}.{fmt}.f32 %r20, %r10, %r11;", inputs, 1,
                   block=len(inputs))
    return out[:, 0]


def all_codes(n: int = 256) -> np.ndarray:
    return np.arange(n, dtype=np.uint32)


@pytest.mark.parametrize("fmt", FORMATS)
def test_widening_every_code_to_f16x2_matches_ml_dtypes(fmt):
    dtype, _ = FORMATS[fmt]
    codes = all_codes()
    packed = (codes << 8) | (255 - codes)  # every code in both bytes
    out = run_body(f"  cvt.rn.f16x2.{fmt} %r20, %r10;", packed[:, None], 1, block=256)[:, 0]
    hi = (out >> 16).astype(np.uint16).view(np.float16)
    lo = (out & 0xFFFF).astype(np.uint16).view(np.float16)
    for half, source in ((hi, codes), (lo, 255 - codes)):
        expected = source.astype(np.uint8).view(dtype).astype(np.float16)
        nan = np.isnan(expected)
        np.testing.assert_array_equal(np.isnan(half), nan)
        np.testing.assert_array_equal(half[~nan].view(np.uint16), expected[~nan].view(np.uint16))
        assert (half[nan].view(np.uint16) == 0x7FFF).all()  # the canonical f16 NaN


@pytest.mark.parametrize("fmt", FORMATS)
def test_narrowing_every_fp8_value_from_f32_gives_its_code_back(fmt):
    dtype, _ = FORMATS[fmt]
    codes = all_codes().astype(np.uint8)
    values = codes.view(dtype).astype(np.float32)
    out = pack_f32(fmt, values, values[::-1])
    expected = reference_codes(values, fmt)
    finite = np.isfinite(values)
    np.testing.assert_array_equal(expected[finite], codes[finite])  # the reference is exact
    np.testing.assert_array_equal(out >> 8, expected)
    np.testing.assert_array_equal(out & 0xFF, expected[::-1])


def interesting_f32(fmt: str, n: int, seed: int) -> np.ndarray:
    """Random magnitudes across the format's range, exact ties between neighbours, values
    just past the largest finite one, subnormals, infinities and NaNs."""
    dtype, biggest = FORMATS[fmt]
    rng = np.random.default_rng(seed)
    exponents = rng.uniform(-24, np.log2(biggest) + 2, n)
    x = (rng.choice([-1.0, 1.0], n) * 2.0 ** exponents).astype(np.float32)
    grid = np.sort(np.unique(np.abs(all_codes().astype(np.uint8).view(dtype).astype(np.float64))))
    grid = grid[np.isfinite(grid)]
    ties = ((grid[1:] + grid[:-1]) / 2).astype(np.float32)  # midpoints are exact in f32
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, biggest, -biggest,
                         np.nextafter(np.float32(biggest), np.float32(np.inf)), 1e30, -1e30,
                         1e-30, -1e-30], np.float32)
    return np.concatenate([x, ties, -ties, specials]).astype(np.float32)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_narrowing_random_f32_rounds_to_nearest_even_and_saturates(fmt, relu):
    x = interesting_f32(fmt, 2000, seed=len(fmt) + relu)
    y = np.roll(x, 7)
    out = pack_f32(fmt, x, y, relu)
    np.testing.assert_array_equal(out >> 8, reference_codes(x, fmt, relu))
    np.testing.assert_array_equal(out & 0xFF, reference_codes(y, fmt, relu))


def test_ties_round_to_even_codes():
    # 1.0625 lies halfway between e4m3's 1.0 (0x38) and 1.125 (0x39): the even code wins;
    # 1.1875 between 1.125 (0x39) and 1.25 (0x3A) goes up to 0x3A.
    out = pack_f32("e4m3x2", np.float32([1.0625]), np.float32([1.1875]))
    assert int(out[0]) == (0x38 << 8) | 0x3A


@pytest.mark.parametrize("fmt", FORMATS)
def test_narrowing_f16x2_matches_ml_dtypes(fmt):
    rng = np.random.default_rng(5)
    halves = rng.integers(0, 1 << 16, (4096, 2), dtype=np.uint32)
    packed = (halves[:, 0] << 16) | halves[:, 1]
    out = run_body(f"  cvt.rn.satfinite.{fmt}.f16x2 %r20, %r10;", packed[:, None], 1,
                   block=4096)[:, 0]
    for shift, column in ((8, 0), (0, 1)):
        x = halves[:, column].astype(np.uint16).view(np.float16).astype(np.float32)
        np.testing.assert_array_equal((out >> shift) & 0xFF, reference_codes(x, fmt))


@pytest.mark.parametrize("opcode", ["cvt.rz.satfinite.e4m3x2.f32 %r20, %r10, %r11;",
                                    "cvt.rn.e4m3x2.f32 %r20, %r10, %r11;",
                                    "cvt.rn.satfinite.f16x2.e5m2x2 %r20, %r10;",
                                    "cvt.rn.bf16x2.e4m3x2 %r20, %r10;"])
def test_forms_the_isa_does_not_have_are_rejected(opcode):
    with pytest.raises(SimError, match="unsupported PTX instruction 'cvt"):
        run_body(f"  {opcode}", np.zeros((32, 2), np.uint32), 1)


def test_widening_with_relu_clamps_negatives_and_keeps_nan():
    codes = np.array([0x38, 0xB8, 0x80, 0x7F, 0xFF, 0x01], np.uint32)  # 1, -1, -0, NaN, -NaN
    out = run_body("  cvt.rn.relu.f16x2.e4m3x2 %r20, %r10;", codes[:, None], 1,
                   block=len(codes))[:, 0]
    low = (out & 0xFFFF).astype(np.uint16)
    np.testing.assert_array_equal(low[[0, 1, 2, 5]].view(np.float16), [1.0, 0.0, 0.0, 2.0 ** -9])
    assert not np.signbit(low[[1, 2]].view(np.float16)).any()
    assert (low[[3, 4]] == 0x7FFF).all()
