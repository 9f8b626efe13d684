"""smalti.ops.quantized_matmul through the simulator against a jax.numpy reference
(dequantise, then dot) for int8 and int4 weights, bf16 and f16 activations, group sizes 128
and 64, ragged M (1, 7, 130 rows) and N (odd multiples of 8: a last column tile that
overlaps the one before, or one narrower than a tile), inside jax.jit; the ValueErrors at
the call; and 0 spills at sm_90a."""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import quantized_matmul
from smalti.ptx.sass import main_loop
from smalti.ptx.toolchain import disassemble

module = importlib.import_module("smalti.ops.quantized_matmul")  # the function shadows it

BF16, F16, F32, I8, I4 = jnp.bfloat16, jnp.float16, jnp.float32, jnp.int8, jnp.int4
LIMITS = {I8: 128, I4: 8}


def reference(x, w, scales, group_size, out_dtype):
    """w * scales in f32, rounded once to x's dtype, then x @ that with f32 accumulation."""
    dequantised = w.astype(F32) * jnp.repeat(scales.astype(F32), group_size, axis=0)
    y = jnp.dot(x, dequantised.astype(x.dtype), preferred_element_type=F32)
    return y.astype(out_dtype)


def operands(m, n, k, dtype, w_dtype, group_size, scale_dtype):
    keys = jax.random.split(jax.random.key(m + n + k + group_size), 3)
    x = jax.random.normal(keys[0], (m, k), F32).astype(dtype)
    limit = LIMITS[w_dtype]
    w = jax.random.randint(keys[1], (k, n), -limit, limit).astype(w_dtype)
    scales = (jax.random.uniform(keys[2], (k // group_size, n), F32, 0.5, 2.0) / limit)
    return x, w, scales.astype(scale_dtype)


@pytest.mark.parametrize("m, n, k, dtype, w_dtype, group_size, scale_dtype, out_dtype", [
    (128, 256, 256, BF16, I4, 128, F32, None),  # two column tiles, two groups, four K steps
    (256, 128, 128, F16, I8, 64, F16, F32),  # two row tiles, scales in x's dtype
    (128, 128, 192, BF16, I8, 64, BF16, F16),  # three groups of 64
    (128, 128, 128, F16, I4, 64, F32, BF16),
    (200, 128, 128, BF16, I4, 128, F32, None),  # ragged M: a row tile over the edge
    (8, 128, 128, F16, I8, 128, F32, None),  # fewer rows than one tile
    (128, 128, 64, BF16, I8, 64, F32, None),  # one K step
    (1, 136, 128, BF16, I4, 128, F32, None),  # one row; the last column tile overlaps
    (7, 120, 128, F16, I8, 64, F32, F32),  # fewer columns than one tile
    (130, 264, 256, BF16, I8, 128, BF16, None),  # ragged M and N, three column tiles
    (7, 40, 64, F16, I4, 64, F32, BF16),
])
def test_quantized_matmul_matches_dequantised_dot(m, n, k, dtype, w_dtype, group_size,
                                                  scale_dtype, out_dtype):
    x, w, scales = operands(m, n, k, dtype, w_dtype, group_size, scale_dtype)
    out = jax.jit(lambda x, w, s: quantized_matmul(x, w, s, group_size=group_size,
                                                   out_dtype=out_dtype))(x, w, scales)
    expected = reference(x, w, scales, group_size, out_dtype or dtype)
    assert out.shape == (m, n) and out.dtype == expected.dtype
    got, want = np.asarray(out, np.float32), np.asarray(expected, np.float32)
    # One ulp of the output type (two roundings may differ), plus f32 summation order.
    ulp = np.spacing(np.abs(want).astype(out.dtype)).astype(np.float32)
    dequantised = np.asarray(w, np.float32) * np.repeat(np.asarray(scales, np.float32),
                                                        group_size, axis=0)
    slack = 2.0**-18 * (np.abs(np.asarray(x, np.float32)) @ np.abs(dequantised))
    np.testing.assert_array_less(np.abs(got - want), ulp + slack + 1e-6)


def _call(x_shape=(128, 128), w_shape=(128, 128), s_shape=(1, 128), x_dtype=BF16,
          w_dtype=I8, s_dtype=F32, **kwargs):
    return lambda: quantized_matmul(jnp.ones(x_shape, x_dtype), jnp.ones(w_shape, w_dtype),
                                    jnp.ones(s_shape, s_dtype), **kwargs)


@pytest.mark.parametrize("call, message", [
    (_call(x_dtype=F32), "x must be bfloat16 or float16, got float32"),
    (_call(w_dtype=jnp.uint8), "w must be int8 or int4, got uint8"),
    (_call(s_dtype=F16), "scales must be float32 or x's dtype (bfloat16), got float16"),
    (_call(group_size=96), "group_size must be a positive multiple of 64, got 96"),
    (_call(x_shape=(128,)), "x must be a non-empty 2-D array, got shape (128,)"),
    (_call(w_shape=(64, 128)),
     "w must have shape (128, n) (its rows x's columns), got (64, 128)"),
    (_call(w_shape=(128, 100), s_shape=(1, 100)), "w's columns must be a multiple of 8 and "
     "K of group_size (128); got x (128, 128) and w (128, 100)"),
    (_call(x_shape=(128, 192), w_shape=(192, 128), s_shape=(1, 128)),
     "w's columns must be a multiple of 8 and K of group_size (128); got x (128, 192)"),
    (_call(s_shape=(2, 128)),
     "scales must have shape (1, 128) (K // group_size, w's columns), got (2, 128)"),
    (_call(out_dtype=I8), "out_dtype must be float32, bfloat16 or float16"),
])
def test_bad_arguments_raise_naming_op_argument_and_constraint(call, message):
    with pytest.raises(ValueError) as raised:
        jax.jit(call)()
    assert f"smalti.ops.quantized_matmul: {message}" in str(raised.value)


@pytest.mark.parametrize("w_dtype", [I8, I4])
@pytest.mark.parametrize("dtype, out_dtype, n", [(BF16, BF16, 4096), (F16, F32, 4104)])
def test_kernels_assemble_without_spills_for_sm_90a(w_dtype, dtype, out_dtype, n):
    kernel = module.quantized_matmul_kernel(jnp.dtype(dtype), jnp.dtype(out_dtype), 128, n)
    specs = [jax.ShapeDtypeStruct((4096, 4096), dtype), jax.ShapeDtypeStruct((4096, n),
                                                                             w_dtype),
             jax.ShapeDtypeStruct((32 * n,), F32)]
    assert kernel.arch == "sm_90a"
    compiled = kernel.compile(*specs)[1]
    report = compiled.report
    assert report.registers > 0
    assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
    if (dtype, out_dtype) == (BF16, BF16):
        assert main_loop(disassemble(compiled.cubin)).length <= K_LOOP_SASS[w_dtype]


# SASS instructions per K tile (one iteration of the K loop) with the weight tile's layout
# cast by hand (#smalti.tiled<tiling = [[32, 128], [8, 32], [1, 8]], warp = [-6], lane =
# [-4, -3], vector = -1>), bf16 in and out, ptxas 13.5: inference must do no worse.
K_LOOP_SASS = {I8: 562, I4: 592}
