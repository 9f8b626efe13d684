"""What a new user tripped on with only the docs at hand, fixed: the ops take their float
parameters as jax.numpy would (Python lists, numpy float64), and dtype errors print the
dtype's name."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.ops import layer_norm, matmul, quantized_matmul, ragged_dot, rms_norm


def test_norm_parameters_may_be_python_lists_or_numpy_float64():
    """x as numpy float64 was converted as jnp.asarray does; weight and bias were not (a
    list reached custom_vjp as 64 leaves, float64 was refused): now all three are."""
    x = np.random.default_rng(0).standard_normal((7, 16))            # float64, as numpy makes
    weight, bias = [0.5] * 16, np.linspace(-1.0, 1.0, 16)            # a list and float64
    rms = rms_norm(x, weight)
    layer = layer_norm(x, weight, bias)
    assert rms.dtype == layer.dtype == jnp.float32
    np.testing.assert_allclose(rms, rms_norm(jnp.asarray(x), jnp.full(16, 0.5)), rtol=1e-6)
    np.testing.assert_allclose(layer, layer_norm(jnp.asarray(x), jnp.full(16, 0.5),
                                                 jnp.asarray(bias, jnp.float32)), rtol=1e-6)
    dx = jax.grad(lambda x: rms_norm(x, weight).sum())(jnp.asarray(x, jnp.float32))
    assert dx.shape == x.shape


@pytest.mark.parametrize("call, message", [
    (lambda: matmul(jnp.ones((8, 8), jnp.bfloat16), jnp.ones((8, 8), jnp.bfloat16),
                    out_dtype=jnp.int32),
     "smalti.ops.matmul: out_dtype must be float32, bfloat16 or float16, got int32"),
    (lambda: ragged_dot(jnp.ones((8, 8), jnp.bfloat16), jnp.ones((1, 8, 8), jnp.bfloat16),
                        jnp.array([8]), preferred_element_type=jnp.int8),
     "smalti.ops.ragged_dot: preferred_element_type must be float32, bfloat16 or float16, "
     "got int8"),
    (lambda: quantized_matmul(jnp.ones((8, 128), jnp.bfloat16), jnp.ones((128, 8), jnp.int8),
                              jnp.ones((2, 8)), group_size=64, out_dtype=np.int32),
     "smalti.ops.quantized_matmul: out_dtype must be float32, bfloat16 or float16, got int32"),
    (lambda: matmul(jnp.ones((8, 8), jnp.bfloat16), jnp.ones((8, 8), jnp.bfloat16),
                    out_dtype="f33"),
     "smalti.ops.matmul: out_dtype must be float32, bfloat16 or float16, got 'f33'"),
])
def test_output_dtype_errors_print_the_dtype_name(call, message):
    """Not `<class 'jax.numpy.int32'>`, the repr of jnp's scalar type."""
    with pytest.raises(ValueError) as raised:
        call()
    assert str(raised.value) == message


def test_full_of_an_array_is_a_located_type_error():
    """`sd.full(shape, t_ref[0], ...)` of a 2-D table reads a row (an Array), not a scalar;
    this was a bare `float()` TypeError from inside the DSL."""
    import smalti.dsl as sd

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    def fill(t_ref, out_ref):
        out_ref[...] = sd.full((128,), t_ref[0], jnp.float32)

    with pytest.raises(TypeError, match=r"test_new_user_regressions\.py:\d+:\d+: full's value "
                                        r"must be a Python number or an Index, got Array "
                                        r"\(an array: sd.broadcast_to\)"):
        fill.trace(jax.ShapeDtypeStruct((4, 4), jnp.int32))


def test_async_copy_of_a_ref_smaller_than_the_buffer_says_a_window_may_hang_over():
    """`sd.async_copy(x_ref, smem, ...)` of a (5, 64) ref into a (64, 64) buffer: the error
    now says how to copy it (a window hanging over the end), which works."""
    import smalti.dsl as sd

    def kernel_of(window):
        @sd.kernel(out_shape=jax.ShapeDtypeStruct((5, 64), jnp.float32),
                   smem=[sd.Barriers(1), sd.SMEM((64, 64), jnp.float32)])
        def double(x_ref, out_ref, bars, smem):
            bars[0].arrive_expect_tx(smem.nbytes)
            sd.async_copy(window(x_ref), smem, bars[0])
            bars[0].wait(0)
            smem[...] = smem[...] * 2.0
            sd.async_store(smem, out_ref.at[0:64, 0:64])
            sd.async_store_wait()
        return double

    x = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    with pytest.raises(ValueError, match=r"test_new_user_regressions\.py:\d+:\d+: async_copy: "
                       r"the window of x_ref has shape \(5, 64\) but smem has shape \(64, 64\) "
                       r"\(a window may hang over x_ref's end, .* like x_ref.at\[0:64, 0:64\]\)"):
        kernel_of(lambda x_ref: x_ref).trace(jax.ShapeDtypeStruct((5, 64), jnp.float32))
    got = kernel_of(lambda x_ref: x_ref.at[0:64, 0:64])(x)
    np.testing.assert_array_equal(np.asarray(got), 2 * x)


def test_custom_primitive_body_returning_a_list_per_result_too_many_says_so():
    """A body of one result returning (list, list) was told it "returned 2" registers."""
    import smalti.dsl as sd

    @sd.custom_primitive(in_layouts=["wgmma"], out_layouts=["wgmma"],
                         out_shapes=[jax.ShapeDtypeStruct((64, 32), jnp.float32)])
    def twice(t, x):
        return list(x), list(x)

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 32), jnp.float32))
    def kernel(x_ref, out_ref):
        out_ref[...] = twice(x_ref[...])

    with pytest.raises(ValueError, match=r"test_new_user_regressions\.py:\d+:\d+: "
                       r"custom_primitive: result #0 needs 16 registers per thread .*; the "
                       r"body returned 2 lists \(result #0 takes one list of registers\)"):
        kernel.trace(jax.ShapeDtypeStruct((64, 32), jnp.float32))


def test_numpy_scalars_are_accepted_where_python_numbers_are():
    """softmax's axis, the norms' eps and the attention scales took int/float only, so
    `axis=np.int64(1)` or `eps=np.float32(1e-6)` (what numpy code hands on) was refused."""
    from smalti.ops import paged_attention, softmax

    x = jax.random.normal(jax.random.key(0), (8, 16), jnp.float32)
    np.testing.assert_array_equal(softmax(x, axis=np.int64(0)), softmax(x, axis=0))
    np.testing.assert_array_equal(rms_norm(x, jnp.ones(16), eps=np.float32(1e-3)),
                                  rms_norm(x, jnp.ones(16), eps=float(np.float32(1e-3))))
    q = jnp.ones((1, 1, 64), jnp.bfloat16)
    pages = jnp.ones((1, 1, 8, 64), jnp.bfloat16)
    lengths, table = jnp.array([3], jnp.int32), jnp.array([[0]], jnp.int32)
    np.testing.assert_array_equal(paged_attention(q, pages, pages, lengths, table,
                                                  scale=np.float32(0.5)),
                                  paged_attention(q, pages, pages, lengths, table, scale=0.5))
    with pytest.raises(ValueError, match="axis must be one int"):
        softmax(x, axis=np.float64(0))
    with pytest.raises(ValueError, match="eps must be a finite non-negative Python number"):
        rms_norm(x, jnp.ones(16), eps=np.float32(np.nan))


def test_ragged_dot_of_no_rows_is_an_empty_result_as_jax_gives():
    """A mixture-of-experts layer where no token reaches these experts: lhs [0, k]. jax gives
    a [0, n] result (and zero gradients); smalti did refuse it as empty."""
    lhs = jnp.zeros((0, 16), jnp.bfloat16)
    rhs = jnp.ones((3, 16, 24), jnp.bfloat16)
    sizes = jnp.zeros(3, jnp.int32)
    got = jax.jit(ragged_dot)(lhs, rhs, sizes)
    want = jax.lax.ragged_dot(lhs, rhs, sizes)
    assert got.shape == want.shape == (0, 24) and got.dtype == want.dtype
    d_rhs = jax.grad(lambda r: ragged_dot(lhs, r, sizes).astype(jnp.float32).sum())(rhs)
    assert d_rhs.shape == rhs.shape and not np.asarray(d_rhs, np.float32).any()
    with pytest.raises(ValueError, match="lhs must be a 2-D array with columns"):
        ragged_dot(jnp.zeros((4, 0), jnp.bfloat16), rhs, sizes)
