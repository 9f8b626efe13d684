"""DSL kernels called from JAX on the CPU (their PTX run by the simulator), against jax.numpy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.tiling import WGMMA_LAYOUT
from tests.dsl_helpers import isolated_cache, load_example  # noqa: F401

F32 = jnp.float32


def normal(key: int, shape: tuple[int, ...], dtype=F32) -> jax.Array:
    return jax.random.normal(jax.random.key(key), shape, F32).astype(dtype)


def test_pointwise_example_under_jit_matches_jax_numpy_exactly():
    example = load_example("pointwise")
    x, scale, shift = normal(0, (256, 384)), normal(1, (384,)), normal(2, (256,))
    out = jax.jit(example.scale_shift)(x, scale, shift)
    assert out.shape == x.shape and out.dtype == x.dtype
    # The reference runs op by op: under jit, XLA's CPU backend contracts x * s + t into an
    # FMA, which rounds once where the kernel (mul.rn, add.rn) rounds twice.
    np.testing.assert_array_equal(np.asarray(out),
                                  np.asarray(example.reference(x, scale, shift)))


def test_kernel_outside_jit_inside_jit_and_in_a_larger_computation():
    @sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((256, 128), F32))
    def double(x_ref, out_ref):
        i = sd.program_id(0) * 128
        out_ref[i:i + 128, :] = x_ref[i:i + 128, :] * 2.0

    x = normal(3, (256, 128))
    expected = np.asarray(x) * 2
    np.testing.assert_array_equal(np.asarray(double(x)), expected)
    np.testing.assert_array_equal(np.asarray(jax.jit(double)(x)), expected)
    composed = jax.jit(lambda v: double(v + 1.0).sum(axis=0))(x)
    np.testing.assert_allclose(np.asarray(composed), ((np.asarray(x) + 1) * 2).sum(0),
                               rtol=1e-5)


def test_bf16_inputs_computed_in_f32_and_rounded_once():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), jnp.bfloat16))
    def fma(a_ref, b_ref, out_ref):
        a, b = a_ref[...].astype(F32), b_ref[...].astype(F32)
        out_ref[...] = (a * b + 1.0).astype(jnp.bfloat16)

    a, b = normal(4, (128, 128), jnp.bfloat16), normal(5, (128, 128), jnp.bfloat16)
    out = jax.jit(fma)(a, b)
    reference = (a.astype(F32) * b.astype(F32) + 1.0).astype(jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(out).view(np.uint16),
                                  np.asarray(reference).view(np.uint16))


def test_several_outputs_and_reductions_with_broadcasting():
    @sd.kernel(grid=(2,), out_shape=(jax.ShapeDtypeStruct((256, 128), F32),
                                     jax.ShapeDtypeStruct((256,), F32)))
    def center(x_ref, out_ref, max_ref):
        i = sd.program_id(0) * 128
        x = sd.layout_cast(x_ref[i:i + 128, :], WGMMA_LAYOUT)
        row_max = x.max(axis=1)
        out_ref[i:i + 128, :] = (x - row_max[:, None]) / abs(x).sum(axis=1, keepdims=True)
        max_ref[i:i + 128] = row_max

    x = normal(6, (256, 128))
    out, row_max = jax.jit(center)(x)
    xs = np.asarray(x)
    np.testing.assert_array_equal(np.asarray(row_max), xs.max(1))
    expected = (xs - xs.max(1, keepdims=True)) / np.abs(xs).sum(1, keepdims=True)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=2e-6, atol=1e-7)


def test_fori_over_column_tiles_with_carried_row_statistics():
    @sd.kernel(grid=lambda x: (x.shape[0] // 128,),
               out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), F32))
    def row_absmax_sum(x_ref, out_ref):
        rows = sd.program_id(0) * 128

        def step(j, carry):
            biggest, total = carry
            tile = sd.layout_cast(x_ref[rows:rows + 128, j * 128:j * 128 + 128], WGMMA_LAYOUT)
            return sd.maximum(biggest, abs(tile).max(axis=1)), total + tile.sum(axis=1)

        biggest, total = sd.fori(0, x_ref.shape[1] // 128, step,
                                 (sd.zeros((128,)), sd.zeros((128,))))
        out_ref[rows:rows + 128] = total / biggest

    x = normal(7, (256, 384))
    out = np.asarray(jax.jit(row_absmax_sum)(x))
    xs = np.asarray(x)
    np.testing.assert_allclose(out, xs.sum(1) / np.abs(xs).max(1), rtol=1e-5, atol=1e-4)


def test_softmax_example_matches_jax_nn_softmax():
    example = load_example("softmax")
    x = normal(8, (256, 512))
    out = jax.jit(example.softmax)(x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax.nn.softmax(x, axis=-1)),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_16_bit_elementwise(dtype):
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 256), dtype))
    def combine(a_ref, b_ref, out_ref):
        a, b = a_ref[...], b_ref[...]
        out_ref[...] = sd.maximum(a * b, -a) - b

    a, b = normal(9, (128, 256), dtype), normal(10, (128, 256), dtype)
    out = jax.jit(combine)(a, b)
    np.testing.assert_array_equal(np.asarray(out, np.float32),
                                  np.asarray(jnp.maximum(a * b, -a) - b, np.float32))
