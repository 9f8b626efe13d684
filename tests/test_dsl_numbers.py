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


@pytest.mark.parametrize("layout", [None, WGMMA_LAYOUT], ids=["inferred", "wgmma"])
def test_causal_mask_from_iotas_matches_jnp_where(layout):
    """Key (column) <= query (row) from two iotas, -inf elsewhere, then a masked row max."""
    @sd.kernel(out_shape=(jax.ShapeDtypeStruct((64, 128), F32),
                          jax.ShapeDtypeStruct((64,), F32)))
    def causal(x_ref, out_ref, max_ref):
        x = x_ref[...] if layout is None else sd.layout_cast(x_ref[...], layout)
        rows, cols = sd.iota(x.shape, dimension=0), sd.iota(x.shape, dimension=1)
        masked = sd.where(cols <= rows + 64, x, -np.inf)
        out_ref[...] = masked
        max_ref[...] = masked.max(axis=1)

    x = normal(11, (64, 128))
    out, row_max = jax.jit(causal)(x)
    rows, cols = jnp.arange(64)[:, None], jnp.arange(128)[None, :]
    want = jnp.where(cols <= rows + 64, x, -jnp.inf)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(row_max), np.asarray(want.max(axis=1)))


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16, jnp.int32])
def test_comparisons_match_jax_numpy_nan_included(dtype):
    """All six comparisons, one bit each of an int32 code; floats carry NaNs (only != holds
    for them) and both operands share values so that == and the <= / >= edges occur."""
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), jnp.int32))
    def codes(a_ref, b_ref, out_ref):
        a, b = a_ref[...], b_ref[...]
        bits = [a < b, a <= b, a > b, a >= b, a == b, a != b, a < 0]
        out_ref[...] = sum(c.astype(jnp.int32) * 2 ** k for k, c in enumerate(bits))

    rng = np.random.default_rng(12)
    values = rng.integers(-3, 4, size=(2, 128, 128)).astype(np.float32)
    if dtype != jnp.int32:
        values[rng.random(values.shape) < 0.1] = np.nan
    a, b = (jnp.asarray(v).astype(dtype) for v in values)
    got = np.asarray(jax.jit(codes)(a, b))
    bits = [a < b, a <= b, a > b, a >= b, a == b, a != b, a < 0]
    want = sum(np.asarray(c, np.int32) * 2 ** k for k, c in enumerate(bits))
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) >= 4


def test_int_float_bool_conversions_match_jax_numpy():
    """fptosi truncates toward zero; sitofp rounds to nearest (bf16 keeps 8 bits); to bool
    is != 0 (NaN included) and from bool is 1 or 0."""
    shape = (128, 128)

    @sd.kernel(out_shape=(jax.ShapeDtypeStruct(shape, jnp.int32), jax.ShapeDtypeStruct(shape, F32),
                          jax.ShapeDtypeStruct(shape, jnp.bfloat16),
                          jax.ShapeDtypeStruct(shape, F32)))
    def convert(x_ref, n_ref, to_int, to_f32, to_bf16, truth):
        x, n = x_ref[...], n_ref[...]
        to_int[...] = x.astype(jnp.int32)
        to_f32[...] = n.astype(F32)
        to_bf16[...] = n.astype(jnp.bfloat16)
        truth[...] = x.astype(bool).astype(F32) + (n.astype(bool)).astype(F32) * 2.0

    x = normal(13, shape) * 100.0
    x = x.at[0, :8].set(jnp.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, jnp.nan, -99.99]))
    n = jax.random.randint(jax.random.key(14), shape, -5000, 5000, jnp.int32).at[1, :4].set(0)
    got = jax.jit(convert)(x, n)
    finite = jnp.nan_to_num(x)  # NaN -> int is 0 in PTX's cvt; XLA leaves it undefined
    want = (finite.astype(jnp.int32), n.astype(F32), n.astype(jnp.bfloat16),
            x.astype(bool).astype(F32) + n.astype(bool).astype(F32) * 2.0)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))


@pytest.mark.parametrize("dtype", [jnp.int32, F32, jnp.bfloat16])
def test_iota_matches_broadcasted_iota(dtype):
    @sd.kernel(out_shape=(jax.ShapeDtypeStruct((64, 256), dtype),
                          jax.ShapeDtypeStruct((64, 256), dtype),
                          jax.ShapeDtypeStruct((128,), dtype)))
    def iotas(rows_ref, cols_ref, flat_ref):
        rows_ref[...] = sd.iota((64, 256), dtype, dimension=0)
        cols_ref[...] = sd.iota((64, 256), dtype, dimension=1)
        flat_ref[...] = sd.iota(128, dtype)

    rows, cols, flat = jax.jit(iotas)()
    for got, want in ((rows, jax.lax.broadcasted_iota(dtype, (64, 256), 0)),
                      (cols, jax.lax.broadcasted_iota(dtype, (64, 256), 1)),
                      (flat, jnp.arange(128, dtype=dtype))):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_logical_and_bitwise_ops_match_jax_numpy():
    """&, |, ^, ~ on bool masks (predicates) and on int32 values."""
    shape = (128, 128)

    @sd.kernel(out_shape=(jax.ShapeDtypeStruct(shape, F32), jax.ShapeDtypeStruct(shape, jnp.int32)))
    def logic(x_ref, n_ref, masked, bits):
        x, n = x_ref[...], n_ref[...]
        inside = (x > -1.0) & (x < 1.0)
        outside = ~inside
        either = (x > 2.0) | (n < 0)
        masked[...] = sd.where(outside ^ either, x, 0.0)
        bits[...] = ((n & 0xFF) | (n ^ 0x0F0F)) ^ ~n

    x, n = normal(21, shape) * 2.0, jax.random.randint(jax.random.key(22), shape, -9999, 9999)
    got_masked, got_bits = jax.jit(logic)(x, n)
    inside = (x > -1.0) & (x < 1.0)
    want_masked = jnp.where(~inside ^ ((x > 2.0) | (n < 0)), x, 0.0)
    np.testing.assert_array_equal(np.asarray(got_masked), np.asarray(want_masked))
    np.testing.assert_array_equal(np.asarray(got_bits),
                                  np.asarray(((n & 0xFF) | (n ^ 0x0F0F)) ^ ~n))


def test_integer_widths_convert_like_numpy():
    """int32 -> int16 keeps the low 16 bits; int16 -> int32 sign-extends; bool -> int16."""
    shape = (128, 128)

    @sd.kernel(out_shape=(jax.ShapeDtypeStruct(shape, jnp.int32),
                          jax.ShapeDtypeStruct(shape, jnp.int16)))
    def widths(n_ref, wrapped, flags):
        n = n_ref[...]
        wrapped[...] = n.astype(jnp.int16).astype(jnp.int32)
        flags[...] = (n > 0).astype(jnp.int16) - (n < -70000).astype(jnp.int16)

    n = jax.random.randint(jax.random.key(23), shape, -100000, 100000, jnp.int32)
    got_wrapped, got_flags = jax.jit(widths)(n)
    np.testing.assert_array_equal(np.asarray(got_wrapped),
                                  np.asarray(n).astype(np.int16).astype(np.int32))
    want_flags = (np.asarray(n) > 0).astype(np.int16) - (np.asarray(n) < -70000).astype(np.int16)
    np.testing.assert_array_equal(np.asarray(got_flags), want_flags)
