"""smalti.ops.rms_norm and layer_norm through the simulator, inside jax.jit, against
jax.numpy references (and jax.grad of them): row counts that are not a whole number of
blocks, bf16, f16 and f32, the ValueErrors at the call, and 0 spills at sm_90a."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import layer_norm, norms, rms_norm

# Leading shapes whose row counts (111, 130, 5, 70) are not multiples of the 64-row block;
# hidden sizes of one tile, several 128-wide tiles, 64-wide tiles (320 = 5 x 64) and 8-wide
# ones (24 = 3 x 8).
SHAPES = [(3, 37, 64), (130, 256), (5, 320), (70, 24)]
TOLERANCE = {jnp.float32: 2e-5, jnp.bfloat16: 2e-2, jnp.float16: 2e-3}


def rms_reference(x, weight, eps=1e-6):
    xf = x.astype(jnp.float32)
    rstd = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (xf * rstd * weight.astype(jnp.float32)).astype(x.dtype)


def layer_reference(x, weight, bias, eps=1e-5):
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    variance = jnp.mean((xf - mean) ** 2, axis=-1, keepdims=True)
    out = (xf - mean) * jax.lax.rsqrt(variance + eps) * weight.astype(jnp.float32)
    return (out + bias.astype(jnp.float32)).astype(x.dtype)


def inputs(shape, dtype, seed=0):
    """x (off-centre, so layer_norm's mean matters), weight, bias and a cotangent."""
    keys = jax.random.split(jax.random.key(seed), 4)
    hidden = shape[-1]
    x = (jax.random.normal(keys[0], shape) * 2.0 + 3.0).astype(dtype)
    weight = jax.random.normal(keys[1], (hidden,), jnp.float32)
    bias = jax.random.normal(keys[2], (hidden,), jnp.float32)
    cotangent = jax.random.normal(keys[3], shape).astype(dtype)
    return x, weight, bias, cotangent


def assert_close(got, want, dtype):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] * scale)


def gradients(op, args, cotangent):
    """jax.grad of <op(args), cotangent> in every argument, jitted."""
    def loss(*a):
        return jnp.sum(op(*a).astype(jnp.float32) * cotangent.astype(jnp.float32))
    return jax.jit(jax.grad(loss, argnums=tuple(range(len(args)))))(*args)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rms_norm_forward_and_backward(shape, dtype):
    x, weight, _, cotangent = inputs(shape, dtype)
    out = jax.jit(rms_norm)(x, weight)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert_close(out, rms_reference(x, weight), dtype)
    for got, want in zip(gradients(rms_norm, (x, weight), cotangent),
                         gradients(rms_reference, (x, weight), cotangent), strict=True):
        assert got.dtype == want.dtype
        assert_close(got, want, dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layer_norm_forward_and_backward(shape, dtype):
    x, weight, bias, cotangent = inputs(shape, dtype, seed=1)
    out = jax.jit(layer_norm)(x, weight, bias)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert_close(out, layer_reference(x, weight, bias), dtype)
    for got, want in zip(gradients(layer_norm, (x, weight, bias), cotangent),
                         gradients(layer_reference, (x, weight, bias), cotangent), strict=True):
        assert got.dtype == want.dtype
        assert_close(got, want, dtype)


def test_f16_inputs_and_parameters_and_eps():
    x, weight, bias, _ = inputs((70, 128), jnp.float16, seed=2)
    weight, bias = weight.astype(jnp.float16), bias.astype(jnp.float16)
    assert_close(jax.jit(lambda *a: rms_norm(*a, eps=0.5))(x, weight),
                 rms_reference(x, weight, eps=0.5), jnp.float16)
    assert_close(jax.jit(lambda *a: layer_norm(*a, eps=0.25))(x, weight, bias),
                 layer_reference(x, weight, bias, eps=0.25), jnp.float16)


def test_layer_norm_of_a_large_offset_keeps_its_variance():
    """The variance is of x shifted near the row mean: no E[x^2] - E[x]^2 cancellation."""
    x, weight, bias, _ = inputs((64, 256), jnp.float32, seed=3)
    x = x + 1000.0
    assert_close(layer_norm(x, weight, bias), layer_reference(x, weight, bias), jnp.float32)


def test_constant_rows_normalize_to_the_bias():
    x = jnp.full((65, 64), 7.0, jnp.float32)
    weight, bias = jnp.ones((64,)), jnp.arange(64, dtype=jnp.float32)
    np.testing.assert_array_equal(np.asarray(layer_norm(x, weight, bias)),
                                  np.broadcast_to(np.arange(64, dtype=np.float32), (65, 64)))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: rms_norm(jnp.ones((4, 64), jnp.int32), jnp.ones(64)),
     "smalti.ops.rms_norm: x must be float32, bfloat16 or float16, got int32"),
    (lambda: rms_norm(jnp.ones((4, 60)), jnp.ones(60)),
     "smalti.ops.rms_norm: the last axis of x must be a multiple of 8, got shape (4, 60)"),
    (lambda: rms_norm(jnp.ones((0, 64)), jnp.ones(64)),
     "smalti.ops.rms_norm: x must be a non-empty array with at least one axis"),
    (lambda: rms_norm(jnp.ones((4, 64)), jnp.ones(32)),
     "smalti.ops.rms_norm: weight must have shape (64,) (the last axis of x), got (32,)"),
    (lambda: rms_norm(jnp.ones((4, 64)), jnp.ones(64), eps=-1.0),
     "smalti.ops.rms_norm: eps must be a finite non-negative Python number, got -1.0"),
    (lambda: layer_norm(jnp.ones((4, 64)), jnp.ones(64), jnp.ones(64, jnp.int8)),
     "smalti.ops.layer_norm: bias must be float32, bfloat16 or float16, got int8"),
    (lambda: layer_norm(jnp.ones((4, 64)), jnp.ones((1, 64)), jnp.ones(64)),
     "smalti.ops.layer_norm: weight must have shape (64,) (the last axis of x), got (1, 64)"),
])
def test_bad_arguments_raise_naming_op_argument_and_constraint(call, message):
    with pytest.raises(ValueError) as raised:
        call()
    assert message in str(raised.value)


def test_bad_arguments_raise_inside_jit_too():
    with pytest.raises(ValueError) as raised:
        jax.jit(layer_norm)(jnp.ones((2, 3, 12)), jnp.ones(12), jnp.ones(12))
    assert "smalti.ops.layer_norm: the last axis of x must be a multiple of 8" in \
        str(raised.value)


@pytest.mark.parametrize("hidden", [64, 1024])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_kernels_assemble_without_spills_for_sm_90a(hidden, dtype):
    x = jax.ShapeDtypeStruct((128, hidden), dtype)
    vector = jax.ShapeDtypeStruct((hidden,), jnp.float32)
    rows = jax.ShapeDtypeStruct((128,), jnp.float32)
    kernels = [(norms._rms_forward(1e-6), (x, vector)),
               (norms._rms_backward, (x, vector, rows, x)),
               (norms._layer_forward(1e-5), (x, vector, vector)),
               (norms._layer_backward, (x, vector, rows, rows, x))]
    for kernel, specs in kernels:
        assert kernel.arch == "sm_90a"
        report = kernel.compile(*specs)[1].report
        assert report.registers > 0, kernel.name
        assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0), \
            kernel.name
        assert report.performance_failures == (), kernel.name
