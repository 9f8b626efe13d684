"""The DSL's integer operators with numpy's meaning, run under jax.jit on the CPU (the
simulator): abs, `//` (floor division), `%` (the divisor's sign), `<<` and `>>` (by the bit
width or more: 0, or the sign for `>>`), with Python ints on either side."""

from __future__ import annotations

import operator as ops

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd

SHAPE = (16, 128)  # 16 values per thread and array: no spills
OUT = jax.ShapeDtypeStruct(SHAPE, jnp.int32)


@sd.kernel(grid=(1,), out_shape=[OUT] * 5)
def integer_ops(x_ref, y_ref, abs_ref, floor_ref, mod_ref, left_ref, right_ref):
    x, y = x_ref[...], y_ref[...]
    abs_ref[...] = abs(x)
    floor_ref[...] = x // y
    mod_ref[...] = x % y
    left_ref[...] = x << (y & 63)
    right_ref[...] = x >> (y & 63)


@sd.kernel(grid=(1,), out_shape=[OUT] * 4)
def with_python_ints(x_ref, a_ref, b_ref, c_ref, d_ref):
    x = x_ref[...]
    a_ref[...] = 7 // x
    b_ref[...] = x % -3
    c_ref[...] = 1 << (x & 31)
    d_ref[...] = -1024 >> (x & 15)


def _operands() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(41)
    x = rng.integers(-2**31, 2**31, SHAPE, dtype=np.int32)
    y = rng.integers(-9, 10, SHAPE, dtype=np.int32)
    y[y == 0] = 5  # numpy gives 0 for division by zero; MLIR leaves it undefined
    x[0, :8] = [-7, 7, -7, 7, -2**31, 2**31 - 1, 0, -1]
    y[0, :8] = [2, 2, -2, -2, 3, -3, 4, 6]
    y[1, :4] = [31, 32, 40, 63]  # shifts by the width and more
    return x, y


def test_integer_operators_match_numpy():
    x, y = _operands()
    got = jax.jit(integer_ops)(x, y)
    want = [np.abs(x), x // y, x % y, x << (y & 63), x >> (y & 63)]
    for name, g, w in zip(["abs", "//", "%", "<<", ">>"], got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)


def test_python_ints_on_either_side():
    x, _ = _operands()
    x[x == 0] = 1
    got = jax.jit(with_python_ints)(x)
    want = [7 // x, x % -3, np.int32(1) << (x & 31), np.int32(-1024) >> (x & 15)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)


OPERATORS = {"//": ops.floordiv, "%": ops.mod, "<<": ops.lshift, ">>": ops.rshift}


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_integer_operators_refuse_floats(operator):
    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    def on_floats(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = OPERATORS[operator](x, x)

    with pytest.raises(TypeError, match=f"'{operator}' is supported for integer arrays only"):
        jax.jit(on_floats)(jnp.ones(128, jnp.float32))
