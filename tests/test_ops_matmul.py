"""smalti.ops.matmul through the simulator against jnp.dot (plus bias and activation), at
shapes that are not multiples of the tiles, inside jax.jit; the grouped tile order; the
ValueErrors at the call; and 0 spills at sm_90a."""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.ops import matmul

matmul_module = importlib.import_module("smalti.ops.matmul")  # the function shadows it

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32
ACTIVATIONS = {None: lambda y: y, "relu": jax.nn.relu, "silu": jax.nn.silu,
               "gelu": lambda y: jax.nn.gelu(y, approximate=True)}


def reference(a, b, bias, activation, out_dtype):
    y = jnp.dot(a, b, preferred_element_type=F32)
    if bias is not None:
        y = y + bias.astype(F32)
    return ACTIVATIONS[activation](y).astype(out_dtype)


@pytest.mark.parametrize("m, n, k, dtype, bias, activation, out_dtype", [
    (200, 136, 72, BF16, True, "gelu", None),  # ragged M, N and K; two K steps
    (8, 8, 8, F16, True, "relu", F32),  # one tile hanging over every edge
    (256, 384, 192, BF16, False, "silu", F32),  # whole tiles, three K steps, six tiles
    (136, 264, 136, F16, False, None, None),  # ragged, with a partial group of tile rows
])
def test_matmul_matches_jnp_dot(m, n, k, dtype, bias, activation, out_dtype):
    keys = jax.random.split(jax.random.key(m * n + k), 3)
    a = jax.random.normal(keys[0], (m, k), F32).astype(dtype)
    b = jax.random.normal(keys[1], (k, n), F32).astype(dtype)
    bias = jax.random.normal(keys[2], (n,), F32).astype(dtype) if bias else None
    out = jax.jit(lambda a, b, bias: matmul(a, b, bias=bias, activation=activation,
                                            out_dtype=out_dtype))(a, b, bias)
    expected = reference(a, b, bias, activation, out_dtype or dtype)
    assert out.shape == (m, n) and out.dtype == expected.dtype
    got, want = np.asarray(out, np.float32), np.asarray(expected, np.float32)
    # One ulp of the output type (two roundings may differ), plus f32 summation order.
    ulp = np.spacing(np.abs(want).astype(out.dtype)).astype(np.float32)
    slack = 2.0**-18 * (np.abs(np.asarray(a, np.float32)) @ np.abs(np.asarray(b, np.float32)))
    np.testing.assert_array_less(np.abs(got - want), ulp + slack + 1e-6)


@pytest.mark.parametrize("m, n, k, sms, activation", [
    (256, 384, 192, 2, "gelu"),  # 6 tiles, 3 per block: the ring runs on across tiles
    (136, 264, 200, 4, "relu"),  # 6 ragged tiles over 4 blocks (2, 2, 1, 1); 4 K steps
])
def test_persistent_blocks_walk_several_tiles(m, n, k, sms, activation):
    keys = jax.random.split(jax.random.key(k), 3)
    a = jax.random.normal(keys[0], (m, k), F32).astype(BF16)
    b = jax.random.normal(keys[1], (k, n), F32).astype(BF16)
    bias = jax.random.normal(keys[2], (n,), F32)
    padded = jnp.pad(bias, (0, -n % matmul_module.BLOCK_N))
    kernel = matmul_module.matmul_kernel(jnp.dtype(F32), activation, True, sms=sms)
    assert kernel.trace(a, b, padded).grid == (sms,)
    out = np.asarray(jax.jit(kernel)(a, b, padded))
    want = np.asarray(reference(a, b, bias, activation, F32))
    slack = 2.0**-18 * (np.abs(np.asarray(a, np.float32)) @ np.abs(np.asarray(b, np.float32)))
    np.testing.assert_array_less(np.abs(out - want), slack + 1e-5)


@pytest.mark.parametrize("tiles_m, tiles_n", [(1, 1), (3, 5), (8, 2), (11, 3), (20, 7)])
def test_grouped_order_visits_every_tile_once_in_groups(tiles_m, tiles_n):
    table = [matmul_module.grouped_tile(pid, tiles_m, tiles_n)  # ints trace as ints
             for pid in range(tiles_m * tiles_n)]
    assert sorted(table) == [(i, j) for i in range(tiles_m) for j in range(tiles_n)]
    group = min(matmul_module.GROUP_ROWS, tiles_m)
    for pid, (i, j) in enumerate(table):  # blocks in launch order stay in a group of rows
        assert pid // (group * tiles_n) == i // group
        assert table[pid - 1][1] <= j or pid % (group * tiles_n) == 0  # column by column


@pytest.mark.parametrize("m, n, k, dtype, bias, activation, out_dtype", [
    (136, 200, 72, BF16, True, "gelu", F32),  # ragged everywhere; two K steps of dB
    (64, 8, 8, F16, True, "relu", None),  # one tile hanging over every edge of each product
    (128, 136, 264, BF16, False, None, None),  # no epilogue: dZ is the cotangent as it is
    (72, 128, 128, BF16, True, "silu", BF16),
])
def test_grad_matches_jax_grad_of_the_reference(m, n, k, dtype, bias, activation, out_dtype):
    """jax.grad runs the kernel on B (for dA) and A (for dB) read transposed: dA, dB and
    dbias against jax.grad of jnp.dot; dZ is rounded to the inputs' dtype for the tensor
    cores, hence a tolerance of a few of its ulps relative to the largest gradient."""
    keys = jax.random.split(jax.random.key(m + n + k), 4)
    a = jax.random.normal(keys[0], (m, k), F32).astype(dtype)
    b = jax.random.normal(keys[1], (k, n), F32).astype(dtype)
    bias_value = jax.random.normal(keys[2], (n,), F32) if bias else None
    cotangent = jax.random.normal(keys[3], (m, n), F32)

    def loss(function):
        return lambda *args: (function(*args).astype(F32) * cotangent).sum()

    def ours(a, b, bias_value):
        return matmul(a, b, bias=bias_value, activation=activation, out_dtype=out_dtype)

    def theirs(a, b, bias_value):
        return reference(a, b, bias_value, activation, out_dtype or dtype)

    argnums = (0, 1, 2) if bias else (0, 1)
    got = jax.jit(jax.grad(loss(ours), argnums))(a, b, bias_value)
    want = jax.grad(loss(theirs), argnums)(a, b, bias_value)
    for name, x, y in zip(["a", "b", "bias"], got, want, strict=False):
        assert x.dtype == y.dtype and x.shape == y.shape, name
        scale = float(jnp.abs(y.astype(F32)).max())
        np.testing.assert_allclose(np.asarray(x, np.float32), np.asarray(y, np.float32),
                                   rtol=0, atol=2e-2 * scale, err_msg=name)


@pytest.mark.parametrize("operands", [matmul_module.Operands(transpose_a=True),
                                      matmul_module.Operands(transpose_b=True)])
def test_transposed_operand_kernels_assemble_without_spills(operands):
    kernel = matmul_module.matmul_kernel(jnp.dtype(BF16), None, False, operands=operands)
    specs = [jax.ShapeDtypeStruct((4096, 4096), BF16)] * 2
    report = kernel.compile(*specs)[1].report
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert report.performance_failures == ()


@pytest.mark.parametrize("call, message", [
    (lambda: matmul(jnp.ones((16, 8), F32), jnp.ones((8, 8), F32)),
     "smalti.ops.matmul: a must be bfloat16 or float16, got float32"),
    (lambda: matmul(jnp.ones((16, 8), BF16), jnp.ones((8, 8), F16)),
     "smalti.ops.matmul: a and b must have the same dtype, got bfloat16 and float16"),
    (lambda: matmul(jnp.ones((16, 12), BF16), jnp.ones((12, 8), BF16)),
     "smalti.ops.matmul: both dims of a must be multiples of 8, got shape (16, 12)"),
    (lambda: matmul(jnp.ones((16, 8), BF16), jnp.ones((16, 8), BF16)),
     "smalti.ops.matmul: b must have shape (8, n) (its rows a's columns), got (16, 8)"),
    (lambda: matmul(jnp.ones((16,), BF16), jnp.ones((16, 8), BF16)),
     "smalti.ops.matmul: a must be a non-empty 2-D array, got shape (16,)"),
    (lambda: matmul(jnp.ones((16, 8), BF16), jnp.ones((8, 8), BF16), bias=jnp.ones(16)),
     "smalti.ops.matmul: bias must have shape (8,) (b's columns), got (16,)"),
    (lambda: matmul(jnp.ones((16, 8), BF16), jnp.ones((8, 8), BF16), activation="tanh"),
     "smalti.ops.matmul: activation must be None, 'relu', 'silu' or 'gelu', got 'tanh'"),
    (lambda: matmul(jnp.ones((16, 8), BF16), jnp.ones((8, 8), BF16), out_dtype=jnp.int8),
     "smalti.ops.matmul: out_dtype must be float32, bfloat16 or float16"),
])
def test_bad_arguments_raise_naming_op_argument_and_constraint(call, message):
    with pytest.raises(ValueError) as raised:
        jax.jit(call)()
    assert message in str(raised.value)


@pytest.mark.parametrize("m, n, k", [
    (4096, 4096, 4096),  # 1024 tiles over 132 blocks; K steps fill whole rounds of stages
    (4104, 4104, 4104),  # ragged: a partial group of tile rows, stages chosen at run time
])
@pytest.mark.parametrize("out_dtype, activation, bias", [
    (jnp.dtype(BF16), "gelu", True), (jnp.dtype(F32), "silu", True),
    (jnp.dtype(F16), None, False)])
def test_kernels_assemble_without_spills_for_sm_90a(m, n, k, out_dtype, activation, bias):
    kernel = matmul_module.matmul_kernel(out_dtype, activation, bias)
    specs = [jax.ShapeDtypeStruct((m, k), BF16), jax.ShapeDtypeStruct((k, n), BF16)]
    specs += [jax.ShapeDtypeStruct((n + -n % matmul_module.BLOCK_N,), F32)] * bias
    assert kernel.arch == "sm_90a"
    report = kernel.compile(*specs)[1].report
    assert report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    assert report.performance_failures == ()


def test_static_tma_windows_may_hang_over_the_end():
    """The DSL addition the op needs: a static `ref.at[...]` window starting inside a dim
    may run past its end (TMA zero-fills the rest); register loads and windows starting
    past the end are still IndexErrors."""
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 64), F32),
               smem=[sd.Barriers(1), sd.SMEM((64, 64), F32)])
    def tail(x_ref, out_ref, bars, tile):
        bars[0].arrive_expect_tx(tile.nbytes)
        sd.async_copy(x_ref.at[64:128, :], tile, bars[0])
        bars[0].wait(0)
        out_ref[...] = tile[...]

    x = np.random.default_rng(0).standard_normal((72, 64)).astype(np.float32)
    expected = np.zeros((64, 64), np.float32)
    expected[:8] = x[64:]
    np.testing.assert_array_equal(np.asarray(tail(x)), expected)

    for window in (lambda x_ref: x_ref.at[72:136, :], lambda x_ref: x_ref[64:128, :]):
        with pytest.raises(IndexError, match=r"slice \[\d+:\d+\] of dim 0 is out of bounds"):
            _tracing(window)(x)


def _tracing(window):
    """A kernel whose body only takes `window(x_ref)`."""
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 64), F32))
    def body(x_ref, out_ref):
        window(x_ref)
    return body


def test_pipeline_tiles_must_be_an_index():
    with pytest.raises(TypeError, match=r"emit_pipeline_warp_specialized's tiles .* got float"):
        sd.emit_pipeline_warp_specialized(
            lambda indices, block: None, grid=(2,), tiles=1.5,
            in_specs=[sd.BlockSpec((64, 64), lambda t, k: (t, k))])
