"""The reductions of issue 14 (wrong numbers from canonicalization, missing ops), kept as
regression tests: each .mlir file in lit_tests/regressions/ (whose FileCheck lines check
the PTX) runs here in the simulator against numpy, and its PTX assembles with ptxas."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime import compile_mlir, run_simulated

REGRESSIONS = Path(__file__).resolve().parents[1] / "lit_tests" / "regressions"
BF16 = ml_dtypes.bfloat16


def _compile(name: str):
    path = REGRESSIONS / f"issue14_{name}.mlir"
    compiled = compile_mlir(path.read_text(), path.name)
    compiled.assemble()  # ptxas accepts it (PtxasError otherwise)
    return compiled


def test_truncf_sitofp_rounds_twice():
    x = np.arange(128, dtype=np.int32) * 1000003
    x[0], x[1] = -547356703, -1438646243
    out = run_simulated(_compile("truncf_sitofp_double_rounding"), x, np.zeros(128, BF16))[1]
    want = x.astype(np.float32).astype(BF16)
    np.testing.assert_array_equal(out.astype(np.float64), want.astype(np.float64))
    assert float(out[0]) == -545259520.0


def test_sitofp_of_an_i1():
    a = np.random.default_rng(0).integers(-5, 5, (128, 128), dtype=np.int32)
    out = run_simulated(_compile("sitofp_i1_ptxas"), a, np.zeros((128, 128), np.float32))[-1]
    np.testing.assert_array_equal(out, np.where(a < 0, -1.0, 0.0).astype(np.float32))


def test_folded_nonsplat_constant():
    out = run_simulated(_compile("folded_nonsplat_constant"), np.zeros(256, BF16))[-1]
    want = np.where(np.arange(256) < 192, np.inf, 0.0)
    np.testing.assert_array_equal(out.astype(np.float64), want)


def test_i1_vector_load():
    rng = np.random.default_rng(1)
    m = rng.random((128, 128)) < 0.5
    a = rng.standard_normal((128, 128)).astype(np.float32)
    out = run_simulated(_compile("i1_vector_load"), m, a, np.zeros_like(a))[-1]
    np.testing.assert_array_equal(out, np.where(m, a, np.float32(0)))


def test_i1_vector_store():
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-4, 4, (128, 128), dtype=np.int32) for _ in range(2))
    out = run_simulated(_compile("i1_vector_store_ptxas"), a, b, np.ones((128, 128), bool))[-1]
    np.testing.assert_array_equal(out, a < b)


def test_int_division():
    rng = np.random.default_rng(3)
    a = rng.integers(-2**31, 2**31, (128, 128), dtype=np.int32)
    b = rng.integers(-50, 50, (128, 128), dtype=np.int32)
    b[b == 0] = 7
    a[0, :4], b[0, :4] = [-7, 7, -7, 7], [2, 2, -2, -2]
    out = run_simulated(_compile("int_div_shift"), a, b, np.zeros_like(a))[-1]
    want = np.trunc(a.astype(np.float64) / b).astype(np.int64)  # exact for these sizes
    np.testing.assert_array_equal(out, want)


@sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128, 128), jnp.int32))
def int_abs(x_ref, o_ref):
    o_ref[...] = abs(x_ref[...])


@pytest.mark.parametrize("dtype", [jnp.int32])
def test_dsl_abs_of_int_array(dtype):
    """dsl_int_abs.py: abs() of an int32 array (math.absi; abs of the most negative value is
    itself, as numpy's)."""
    xi = jnp.arange(-8192, 8192, dtype=dtype).reshape(128, 128).at[0, 0].set(-2**31)
    np.testing.assert_array_equal(np.asarray(jax.jit(int_abs)(xi)), np.abs(np.asarray(xi)))
