"""Float ops without a single PTX instruction (smalti.lowering.float_math) in the simulator
against numpy: rounding to integers, copysign and remf exactly (NaN, infinities, signed
zeros, subnormals, ties included), powf, sin and cos within the bounds the module documents
(the simulator computes the .approx units exactly, so what it shows is the error of the
surrounding arithmetic; the PTX ISA's unit errors are added to the bounds). bitcast moves
bits. Every kernel assembles."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.runtime import compile_mlir, run_simulated
from tests.kernels import elementwise_kernel

BF16 = ml_dtypes.bfloat16
FLOATS = {"f32": np.float32, "bf16": BF16, "f16": np.float16}
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5,
                     -2.5, 1e-45, -1e-45, 3.4e38, -3.4e38, 2.0, -2.0, 3.0, -3.0, 0.25,
                     8388608.5, 16777217.0, 1e-40, 4.5, -0.49999997], np.float32)


def _c_round(x: np.ndarray) -> np.ndarray:
    """C's round: half away from zero (numpy's round is half to even)."""
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.copysign(1.0, x), whole)


EXACT_OPS = {  # op -> (arity, numpy reference on f32)
    "math.floor": (1, np.floor),
    "math.ceil": (1, np.ceil),
    "math.trunc": (1, np.trunc),
    "math.roundeven": (1, np.rint),
    "math.round": (1, _c_round),
    "math.copysign": (2, np.copysign),
    "arith.remf": (2, np.fmod),
}


def _inputs(arity: int, dtype: type, rng: np.random.Generator, op: str) -> list[np.ndarray]:
    """Rows of increasing magnitude (1, 10, 1e3, 1e6), the special values first (rotated
    per operand, so they meet each other)."""
    scales = np.array([1.0, 10.0, 1e3, 1e6])[:, None]
    inputs = []
    for i in range(arity):
        x = (rng.standard_normal((4, 128)) * scales).astype(np.float32)
        x.flat[:len(SPECIALS)] = np.roll(SPECIALS, 7 * i)
        if op == "arith.remf" and i == 1:  # tiny and huge divisors: exponent gaps to 250
            x[2, 40:] = (rng.standard_normal(88) * 1e-30).astype(np.float32)
            x[3, 40:] = (rng.standard_normal(88) * 1e-44).astype(np.float32)
            x[1, 40:] = (rng.standard_normal(88) * 1e30).astype(np.float32)
        if op == "arith.remf" and i == 0:
            x[3, 40:] = (rng.standard_normal(88) * 1e38).astype(np.float32)
        with np.errstate(over="ignore"):  # 1e6 and more are inf in f16
            inputs.append(x.astype(dtype))
    return inputs


def _run(op: str, element: str, inputs: list[np.ndarray]) -> np.ndarray:
    compiled = compile_mlir(elementwise_kernel(op, element, len(inputs)), "float.mlir")
    compiled.assemble()
    return run_simulated(compiled, *inputs, np.zeros_like(inputs[0]))[-1]


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bit for bit up to NaN payloads (signed zeros count)."""
    got, want = got.astype(np.float32), want.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("element", sorted(FLOATS))
@pytest.mark.parametrize("op", sorted(EXACT_OPS))
def test_exact_float_ops(op, element):
    arity, reference = EXACT_OPS[op]
    dtype = FLOATS[element]
    inputs = _inputs(arity, dtype, np.random.default_rng(abs(hash((op, element))) % 2**32), op)
    with np.errstate(all="ignore"):
        want = reference(*(x.astype(np.float32) for x in inputs)).astype(dtype)
    _same(_run(op, element, inputs), want)


def test_remf_is_exact_across_the_exponent_range():
    """fmod of random bit patterns (every exponent pair), against numpy's exact fmod."""
    rng = np.random.default_rng(11)
    x, y = (rng.integers(0, 2**32, (4, 128), dtype=np.uint64).astype(np.uint32)
            .view(np.float32) for _ in range(2))
    with np.errstate(all="ignore"):
        _same(_run("arith.remf", "f32", [x, y]), np.fmod(x, y))


# The PTX ISA's bounds for the .approx units the ops use, and the error the module adds.
SIN_COS_ABSOLUTE = 2**-20.5  # sin/cos.approx 2^-20.9 on [-π, π], plus the reduction's 2^-23


@pytest.mark.parametrize("op", ["math.sin", "math.cos"])
def test_sin_cos_within_the_documented_bound(op):
    reference = np.sin if op == "math.sin" else np.cos
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.uniform(-4, 4, 128), rng.uniform(-1e3, 1e3, 128),
                        rng.uniform(-2**20, 2**20, 128), np.geomspace(1e-6, 2**20, 128)])
    x = x.astype(np.float32).reshape(4, 128)
    got = _run(op, "f32", [x]).astype(np.float64)
    np.testing.assert_allclose(got, reference(x.astype(np.float64)), rtol=0,
                               atol=SIN_COS_ABSOLUTE)
    special = np.zeros((4, 128), np.float32)
    special[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    out = _run(op, "f32", [special])
    assert np.isnan(out[0, :3]).all()
    assert out[0, 3] == reference(np.float32(-0.0))
    assert op == "math.cos" or np.signbit(out[0, 3])  # sin(-0) = -0


def test_sin_cos_of_bf16_round_once():
    x = np.random.default_rng(13).uniform(-50, 50, (4, 128)).astype(BF16)
    for op, reference in (("math.sin", np.sin), ("math.cos", np.cos)):
        got = _run(op, "bf16", [x]).astype(np.float64)
        np.testing.assert_allclose(got, reference(x.astype(np.float64)), rtol=2**-8,
                                   atol=2**-20)


def _c_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.power(x.astype(np.float64), y.astype(np.float64))


def test_powf_follows_c_pow_on_special_values():
    """x^0 = 1 (NaN too), 1^y = 1 (NaN too), (-1)^±inf = 1, signed zeros and infinities by
    odd integer powers, NaN for negative bases and non-integer powers: exactly numpy's."""
    values = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, np.inf, -np.inf, np.nan,
                       3.0, -3.0, 2.5, -2.5, 1e-30], np.float32)
    x, y = np.meshgrid(values, values, indexing="ij")
    x, y = x.ravel()[:256], y.ravel()[:256]  # 16 x 16 pairs
    x = np.resize(x, 512).reshape(4, 128)
    y = np.resize(y, 512).reshape(4, 128)
    got = _run("math.powf", "f32", [x, y]).astype(np.float64)
    with np.errstate(over="ignore"):
        want = _c_pow(x, y).astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = ~np.isnan(want) & (np.isinf(want) | (want == 0) | (np.abs(want) == 1))
    np.testing.assert_array_equal(got[exact], want[exact])
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]))
    finite = ~np.isnan(want) & ~exact
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = 2**-21 * (1 + np.abs(y * np.log2(np.abs(x.astype(np.float64)))))
    np.testing.assert_array_less(np.abs(got[finite] - want[finite]) / np.abs(want[finite]),
                                 bound[finite])


def test_powf_within_the_documented_bound():
    """Relative error below 2^-21 (1 + |y log2|x||) (ex2/lg2.approx at about 2^-22 each)."""
    rng = np.random.default_rng(14)
    x = np.abs(rng.standard_normal((4, 128)) * 10).astype(np.float32) + np.float32(1e-3)
    y = (rng.standard_normal((4, 128)) * 8).astype(np.float32)
    x[1] = -x[1]
    y[1] = np.round(y[1])  # negative bases with integer powers: signs by parity
    got = _run("math.powf", "f32", [x, y]).astype(np.float64)
    want = _c_pow(x, y)
    ok = np.isfinite(want) & (want != 0)
    scale = 1 + np.abs(y * np.log2(np.abs(x)).astype(np.float64))
    np.testing.assert_array_less(np.abs(got[ok] - want[ok]) / np.abs(want[ok]),
                                 2**-21 * scale[ok])
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize(("source", "target"), [
    ("f32", "i32"), ("i32", "f32"), ("bf16", "i16"), ("i16", "bf16"), ("bf16", "f16"),
    ("i8", "f8E4M3FN"), ("f8E5M2", "i8"), ("i64", "f64")])
def test_bitcast_moves_bits(source, target):
    dtypes = {"f32": np.float32, "i32": np.int32, "bf16": BF16, "i16": np.int16,
              "f16": np.float16, "i8": np.int8, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
              "f8E5M2": ml_dtypes.float8_e5m2, "i64": np.int64, "f64": np.float64}
    text = f"""
func.func @k(%a: memref<4x128x{source}>, %out: memref<4x128x{target}>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128x{source}>, index, index) -> vector<4x128x{source}>
  %y = arith.bitcast %x : vector<4x128x{source}> to vector<4x128x{target}>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<4x128x{target}>, memref<4x128x{target}>, index, index) -> ()
  return
}}
"""
    size = np.dtype(dtypes[source]).itemsize
    x = np.random.default_rng(15).integers(0, 256, 512 * size, dtype=np.uint8).view(
        dtypes[source]).reshape(4, 128)
    compiled = compile_mlir(text, "bitcast.mlir")
    compiled.assemble()
    out = run_simulated(compiled, x, np.zeros((4, 128), dtypes[target]))[-1]
    np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))
