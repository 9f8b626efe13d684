"""Scales read from memory, as quantized kernels read them: a column of a 2-D ref applied per
row of a wgmma accumulator (`acc * s_ref[:, j][:, None]`: the (rows, 1) load takes the row
layout through the unit dim), and one element applied to everything (`s_ref[i:i+1, j:j+1]`,
a load every thread makes: a splat). Numbers against numpy through the simulator."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd

S = jax.ShapeDtypeStruct


@sd.kernel(out_shape=lambda a, b, s: S((a.shape[0], b.shape[1]), jnp.float32),
           smem=lambda a, b, s: [sd.Barriers(1), sd.SMEM(a.shape, a.dtype),
                                 sd.SMEM(b.shape, b.dtype)])
def scaled_matmul(a_ref, b_ref, s_ref, o_ref, bars, a_smem, b_smem):
    """o = (a @ b) * s[:, 1] per row * s[1, 0]."""
    bars[0].arrive_expect_tx(a_smem.nbytes + b_smem.nbytes)
    sd.async_copy(a_ref.at[...], a_smem, bars[0])
    sd.async_copy(b_ref.at[...], b_smem, bars[0])
    bars[0].wait(0)
    acc = sd.wgmma(sd.zeros(o_ref.shape, jnp.float32), a_smem, b_smem)
    one = s_ref[1:2, 0:1].broadcast_to(o_ref.shape)
    o_ref[...] = acc * s_ref[:, 1][:, None] * one


@pytest.mark.parametrize("rows", [64, 128])
def test_a_column_of_scales_per_row_and_one_scale_for_all(rows):
    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, 64)).astype(jnp.bfloat16)
    b = rng.standard_normal((64, 128)).astype(jnp.bfloat16)
    s = rng.uniform(0.5, 2.0, (rows, 3)).astype(np.float32)
    out = np.asarray(scaled_matmul(a, b, s))
    expected = (a.astype(np.float32) @ b.astype(np.float32)) * s[:, 1:2] * s[1, 0]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@sd.kernel(out_shape=lambda x, s: S(x.shape, x.dtype))
def strided_rows(x_ref, s_ref, o_ref):
    """A per-row scale on a plainly loaded (strided) array: the (rows, 1) column is loaded
    in the row layout of whatever the product takes."""
    o_ref[...] = x_ref[...] * s_ref[:, 0][:, None]


def test_a_column_scales_the_rows_of_a_loaded_array():
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    s = np.arange(128, dtype=np.float32).reshape(64, 2)
    np.testing.assert_array_equal(np.asarray(strided_rows(x, s)), x * s[:, :1])
