"""Instruction numerics, one instruction at a time, against exact references."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from smalti.ptx import Address, KernelBuilder, Module
from smalti.sim import run_module
from smalti.sim.rounding import round_pair, two_sum

WIDTH = {"f32": 32, "s32": 32, "u32": 32, "f64": 64, "s64": 64, "u64": 64, "bf16": 16,
         "f16": 16, "bf16x2": 32, "f16x2": 32, "b32": 32}


def apply(opcode: str, in_types: list[str], out_type: str, *inputs: np.ndarray) -> np.ndarray:
    """Run `opcode d, a, b, ...` once per element, inputs and output through global memory."""
    kb = KernelBuilder("apply")
    pointers = [kb.compute("ld.param.u64", "u64", Address(kb.param(f"p{i}")))
                for i in range(len(inputs) + 1)]
    tid = kb.special("%tid.x")
    sources = []
    for pointer, ptx_type in zip(pointers, in_types, strict=False):
        width = WIDTH[ptx_type]
        offset = kb.compute("mul.wide.u32", "u64", tid, width // 8)
        address = kb.compute("add.s64", "s64", pointer, offset)
        reg = kb.reg(ptx_type if ptx_type in ("f32", "f64") else f"b{width}")
        kb.emit(f"ld.global.b{width}", reg, Address(address))
        sources.append(reg)
    result = kb.compute(opcode, out_type, *sources)
    width = WIDTH[out_type]
    offset = kb.compute("mul.wide.u32", "u64", tid, width // 8)
    address = kb.compute("add.s64", "s64", pointers[-1], offset)
    kb.emit(f"st.global.b{width}", Address(address), result)
    kb.emit("ret")
    n = inputs[0].size
    out = np.zeros(n, {16: np.uint16, 32: np.uint32, 64: np.uint64}[width])
    run_module(Module(kernels=(kb.build(),)), "apply", 1, n, [*inputs, out])
    return out



def exact(x: float | np.floating) -> Fraction:
    return Fraction(float(x))


def reference_round(x: Fraction, dtype: type, mode: str) -> np.ndarray:
    """Round the rational `x` to `dtype` by comparing with neighbouring representable values."""
    guess = np.array(float(x), np.float64).astype(dtype)[()]
    candidates = [guess]
    for _ in range(2):
        candidates = sorted({c for g in candidates for c in (
            np.nextafter(g, dtype(-np.inf)), g, np.nextafter(g, dtype(np.inf)))
            if np.isfinite(c)}, key=float)
    below = max((c for c in candidates if Fraction(float(c)) <= x), key=float)
    above = min((c for c in candidates if Fraction(float(c)) >= x), key=float)
    if below == above:
        return below
    match mode:
        case "rz":
            return below if x > 0 else above
        case "rm":
            return below
        case "rp":
            return above
    d_below, d_above = x - Fraction(float(below)), Fraction(float(above)) - x
    if d_below != d_above:
        return below if d_below < d_above else above
    unsigned = {2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]
    return below if int(np.array(below, dtype).view(unsigned)) % 2 == 0 else above


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("op", ["add", "mul", "fma"])
def test_f32_rounding_modes_against_exact_rationals(op: str, mode: str):
    rng = np.random.default_rng(7)
    n = 64
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    c = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    b[:4] = [np.float32(2.0 ** -40), -a[1], np.float32(1.0), np.float32(3.0)]
    arity = 3 if op == "fma" else 2
    out = apply(f"{op}.{mode}.f32", ["f32"] * arity, "f32", *(a, b, c)[:arity]).view(np.float32)
    for i in range(n):
        match op:
            case "add":
                x = exact(a[i]) + exact(b[i])
            case "mul":
                x = exact(a[i]) * exact(b[i])
            case _:
                x = exact(a[i]) * exact(b[i]) + exact(c[i])
        assert out[i] == reference_round(x, np.float32, mode), (op, mode, a[i], b[i], c[i])


def test_round_pair_avoids_double_rounding_to_bf16():
    s, err = two_sum(np.array([1.0]), np.array([2.0 ** -8 + 2.0 ** -40]))
    result = round_pair(s, err, ml_dtypes.bfloat16, "rn")
    assert int(result.view(np.uint16)[0]) == 0x3F81  # 1 + 2^-7: above the midpoint
    via_f32 = np.array([1.0 + 2.0 ** -8 + 2.0 ** -40]).astype(np.float32).astype(
        ml_dtypes.bfloat16)
    assert int(via_f32.view(np.uint16)[0]) == 0x3F80  # what double rounding would give


@pytest.mark.parametrize("ptx_type", ["bf16x2", "f16x2"])
def test_packed_fma_rounds_once(ptx_type: str):
    element = ml_dtypes.bfloat16 if ptx_type == "bf16x2" else np.float16
    rng = np.random.default_rng(3)
    n = 128
    a, b, c = (rng.standard_normal(2 * n).astype(element) for _ in range(3))
    # A product landing exactly on a rounding midpoint, nudged by a tiny addend.
    a[0], b[0], c[0] = element(1.0 + 2 ** -7), element(1.0 + 2 ** -7), element(2.0 ** -60)
    out = apply(f"fma.rn.{ptx_type}", [ptx_type] * 3, ptx_type,
                a.view(np.uint32), b.view(np.uint32), c.view(np.uint32))
    got = out.view(element)
    for i in range(2 * n):
        x = exact(a[i]) * exact(b[i]) + exact(c[i])
        assert got[i].view(np.uint16) == reference_round(x, element, "rn").view(np.uint16), i


def test_cvt_rzi_s32_f32_truncates_and_saturates():
    values = np.array([-1.5, -0.5, -2.7, 2.7, np.nan, 3e9, -3e9, -0.0, 2147483520.0],
                      np.float32)
    out = apply("cvt.rzi.s32.f32", ["f32"], "s32", values).view(np.int32)
    np.testing.assert_array_equal(out, [-1, 0, -2, 2, 0, 2**31 - 1, -(2**31), 0, 2147483520])


@pytest.mark.parametrize(("mode", "expected"), [
    ("rni", [0, 2, 2, 0, -2, -3]), ("rmi", [0, 1, 2, -1, -2, -3]),
    ("rpi", [1, 2, 3, 0, -1, -2]),
])
def test_cvt_integer_rounding_modes(mode: str, expected: list[int]):
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7], np.float32)
    out = apply(f"cvt.{mode}.s32.f32", ["f32"], "s32", values).view(np.int32)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_int_to_f32_rounding(mode: str):
    values = np.array([16777217, -16777217, 2**31 - 1, -(2**31), 7, 0, 16777219], np.int32)
    out = apply(f"cvt.{mode}.f32.s32", ["s32"], "f32", values).view(np.float32)
    for v, got in zip(values, out, strict=True):
        assert got == reference_round(Fraction(int(v)), np.float32, mode), v
    wide = np.array([2**60 + 1, -(2**60) - 1, 2**63 - 1, 2**53 + 1], np.int64)
    out = apply(f"cvt.{mode}.f32.s64", ["s64"], "f32", wide).view(np.float32)
    for v, got in zip(wide, out, strict=True):
        assert got == reference_round(Fraction(int(v)), np.float32, mode), v


def test_cvt_bf16x2_puts_first_source_in_upper_half():
    a = np.array([1.0, -2.0, 3.140625], np.float32)
    b = np.array([0.5, 65504.0, -0.0], np.float32)
    out = apply("cvt.rn.bf16x2.f32", ["f32", "f32"], "bf16x2", a, b)
    hi = a.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)
    lo = b.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)
    np.testing.assert_array_equal(out, (hi << 16) | lo)


def test_cvt_f32_to_f16_and_back():
    values = np.array([1.0 / 3, 70000.0, 1e-8, -2.5, np.inf], np.float32)
    halves = apply("cvt.rn.f16.f32", ["f32"], "f16", values)
    with np.errstate(over="ignore"):
        expected = values.astype(np.float16)
    np.testing.assert_array_equal(halves, expected.view(np.uint16))
    back = apply("cvt.f32.f16", ["f16"], "f32", halves).view(np.float32)
    np.testing.assert_array_equal(back, halves.view(np.float16).astype(np.float32))


def test_integer_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, -(2**31), 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, 1], np.int32)
    q = apply("div.s32", ["s32", "s32"], "s32", a, b).view(np.int32)
    r = apply("rem.s32", ["s32", "s32"], "s32", a, b).view(np.int32)
    np.testing.assert_array_equal(q, [3, -3, -3, 3, -715827882, 5])
    np.testing.assert_array_equal(r, [1, -1, 1, -1, -2, 0])


@pytest.mark.parametrize("ptx_type", ["s64", "u64"])
def test_mul_hi_64_bit(ptx_type: str):
    rng = np.random.default_rng(5)
    dtype = np.int64 if ptx_type == "s64" else np.uint64
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 32, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, 32, dtype=dtype, endpoint=True)
    a[:3] = [info.min, info.max, 0]
    b[:3] = [info.min, info.max, info.max]
    out = apply(f"mul.hi.{ptx_type}", [ptx_type] * 2, ptx_type, a, b).view(dtype)
    expected = [(int(x) * int(y)) >> 64 for x, y in zip(a, b, strict=True)]
    assert [int(v) for v in out] == expected


def test_mul_wide_and_shifts():
    a = np.array([-3, 2**31 - 1, -(2**31), 1], np.int32)
    wide = apply("mul.wide.s32", ["s32", "s32"], "s64", a, a).view(np.int64)
    assert [int(v) for v in wide] == [int(x) * int(x) for x in a]
    amounts = np.array([1, 31, 32, 40], np.uint32)
    values = np.array([-8, -8, -8, 8], np.int32)
    shr = apply("shr.s32", ["s32", "u32"], "s32", values, amounts).view(np.int32)
    np.testing.assert_array_equal(shr, [-4, -1, -1, 0])
    shl = apply("shl.b32", ["b32", "u32"], "b32", values.view(np.uint32), amounts)
    np.testing.assert_array_equal(shl, [np.uint32(0xFFFFFFF0), np.uint32(0), 0, 0])


def test_add_sat_and_min_max_signedness():
    a = np.array([2**31 - 1, -(2**31), -1], np.int32)
    b = np.array([1, -1, 1], np.int32)
    sat = apply("add.sat.s32", ["s32", "s32"], "s32", a, b).view(np.int32)
    np.testing.assert_array_equal(sat, [2**31 - 1, -(2**31), 0])
    smin = apply("min.s32", ["s32", "s32"], "s32", a, b).view(np.int32)
    umin = apply("min.u32", ["u32", "u32"], "u32", a.view(np.uint32), b.view(np.uint32))
    np.testing.assert_array_equal(smin, [1, -(2**31), -1])
    np.testing.assert_array_equal(umin, [1, 2**31, 1])


def test_ftz_sat_and_nan_rules():
    tiny = np.float32(1e-40)  # subnormal
    a = np.array([tiny, -tiny, 0.75, np.nan, 2.0], np.float32)
    b = np.array([0.0, 0.0, 0.5, 1.0, 1.0], np.float32)
    ftz = apply("add.ftz.f32", ["f32", "f32"], "f32", a, b).view(np.float32)
    assert ftz[0] == 0 and not np.signbit(ftz[0]) and ftz[1] == 0
    sat = apply("add.sat.f32", ["f32", "f32"], "f32", a, b).view(np.float32)
    np.testing.assert_array_equal(sat, np.array([tiny, -0.0, 1.0, 0.0, 1.0], np.float32)
                                  .clip(0, 1))
    low = apply("min.f32", ["f32", "f32"], "f32", a, b).view(np.float32)
    assert low[3] == 1.0  # min with one NaN operand gives the other operand
    neg_zero = apply("min.f32", ["f32", "f32"], "f32", np.array([0.0], np.float32),
                     np.array([-0.0], np.float32)).view(np.float32)
    assert np.signbit(neg_zero[0])


def test_rcp_sqrt_rn_and_ex2_approx():
    x = np.array([3.0, 7.0, 0.1, 1e-3], np.float32)
    rcp = apply("rcp.rn.f32", ["f32"], "f32", x).view(np.float32)
    np.testing.assert_array_equal(rcp, np.float32(1) / x)
    root = apply("sqrt.rn.f32", ["f32"], "f32", x).view(np.float32)
    np.testing.assert_array_equal(root, np.sqrt(x))
    e = apply("ex2.approx.f32", ["f32"], "f32", np.array([0.5, -3.25, 10.0], np.float32))
    np.testing.assert_allclose(e.view(np.float32), np.exp2([0.5, -3.25, 10.0]), rtol=2e-7)
