"""smalti.ops.softmax through the simulator, inside jax.jit, against jax.nn.softmax in f32
(and jax.grad of it): any axis, row counts that are not a whole number of blocks, large
inputs (max subtraction), the ValueErrors at the call, and 0 spills at sm_90a."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import row_softmax, softmax

TOLERANCE = {jnp.float32: 2e-6, jnp.bfloat16: 1e-2, jnp.float16: 1e-3}


def reference(x, axis=-1):
    return jax.nn.softmax(x.astype(jnp.float32), axis=axis).astype(x.dtype)


def assert_close(got, want, dtype):
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16],
                         ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize(("shape", "axis"), [((3, 37, 64), -1), ((130, 320), 1),
                                             ((40, 5, 3), 0)], ids=str)
def test_softmax_forward_and_backward(shape, axis, dtype):
    keys = jax.random.split(jax.random.key(0), 2)
    x = (jax.random.normal(keys[0], shape) * 3.0).astype(dtype)
    cotangent = jax.random.normal(keys[1], shape).astype(dtype)
    out = jax.jit(softmax, static_argnames="axis")(x, axis=axis)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert_close(out, reference(x, axis), dtype)

    def loss(op):
        return lambda x: jnp.sum(op(x, axis=axis).astype(jnp.float32)
                                 * cotangent.astype(jnp.float32))
    got, want = jax.jit(jax.grad(loss(softmax)))(x), jax.grad(loss(reference))(x)
    assert got.dtype == x.dtype
    # the reference rounds its output to x's dtype before the product, hence a wider bound
    assert_close(got, want, dtype if dtype == jnp.float32 else jnp.bfloat16)


def test_large_inputs_are_stable():
    """exp of 1e4 overflows f32 without the max subtraction; rows sum to one."""
    x = jnp.concatenate([jnp.full((70, 8), 1e4), jnp.zeros((70, 8)),
                         jnp.full((70, 8), -jnp.inf)], axis=1)
    out = np.asarray(softmax(x))
    np.testing.assert_allclose(out[:, :8], 1 / 8, rtol=1e-6)
    np.testing.assert_array_equal(out[:, 8:], 0.0)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: softmax(jnp.ones((4, 64), jnp.int32)),
     "smalti.ops.softmax: x must be float32, bfloat16 or float16, got int32"),
    (lambda: softmax(jnp.ones((4, 60))),
     "smalti.ops.softmax: the last axis of x must be a multiple of 8, got shape (4, 60)"),
    (lambda: softmax(jnp.ones((64, 4)), axis=2),
     "smalti.ops.softmax: axis must be one int in [-2, 2) for x of shape (64, 4), got 2"),
    (lambda: softmax(jnp.ones((64, 4)), axis=(0, 1)),
     "smalti.ops.softmax: axis must be one int"),
    (lambda: softmax(jnp.ones((12, 64)), axis=0),
     "smalti.ops.softmax: axis 0 of x must be a multiple of 8, got shape (12, 64)"),
])
def test_bad_arguments_raise_naming_op_argument_and_constraint(call, message):
    with pytest.raises(ValueError) as raised:
        call()
    assert message in str(raised.value)


@pytest.mark.parametrize("hidden", [64, 1024])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_kernels_assemble_without_spills_for_sm_90a(hidden, dtype):
    x = jax.ShapeDtypeStruct((128, hidden), dtype)
    for kernel, specs in [(row_softmax._softmax_forward, (x,)),
                          (row_softmax._softmax_backward, (x, x))]:
        assert kernel.arch == "sm_90a"
        report = kernel.compile(*specs)[1].report
        assert report.registers > 0, kernel.name
        assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0), \
            kernel.name
        assert report.performance_failures == (), kernel.name
