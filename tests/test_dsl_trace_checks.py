"""What the DSL checks while tracing, before anything runs: windows at traced positions
stay inside their refs for every value their indices can take; `==` on traced indices is a
traced comparison."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

F32 = jnp.float32


def test_a_grid_one_block_too_large_is_refused_at_the_users_line():
    @sd.kernel(grid=(3,), out_shape=jax.ShapeDtypeStruct((256, 128), F32))
    def copy(x_ref, o_ref):
        i = sd.program_id(0) * 128
        o_ref[i:i + 128, :] = x_ref[i:i + 128, :]  # the load

    line = line_of("the load", copy.fn)
    with pytest.raises(IndexError, match=rf"{__file__}:{line}:\d+: the window of dim 0 of "
                                         r"x_ref reaches \[256, 384\) when program_id\(0\) = "
                                         r"2, past the dim's size 256"):
        copy.trace(jax.ShapeDtypeStruct((256, 128), F32))


def test_a_loop_counter_slicing_past_the_end_is_refused():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64,), F32))
    def sums(x_ref, o_ref):
        def body(k, acc):
            return acc + x_ref[k * 32:k * 32 + 64]  # k = 3 reads [96, 160)

        o_ref[...] = sd.fori(0, 4, body, sd.zeros((64,)))

    with pytest.raises(IndexError, match=r"reaches \[96, 160\) when the counter of the fori "
                                         r"at line \d+ = 3, past the dim's size 128"):
        sums.trace(jax.ShapeDtypeStruct((128,), F32))


def test_counters_count_only_the_values_the_loop_reaches():
    """fori(0, 4, step=2) reaches 0 and 2: a window at j + 1 tiles is inside."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((512,), F32))
    def pairs(x_ref, o_ref):
        def body(j, _):
            o_ref[j * 128 + 128:j * 128 + 256] = x_ref[j * 128 + 128:j * 128 + 256]
            o_ref[j * 128:j * 128 + 128] = x_ref[j * 128:j * 128 + 128] * 2.0

        sd.fori(0, 4, body, step=2)

    x = np.arange(512, dtype=np.float32)
    want = x.copy()
    want[0:128] *= 2
    want[256:384] *= 2
    np.testing.assert_array_equal(np.asarray(pairs(x)), want)


def test_a_negative_start_is_refused():
    @sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((128,), F32))
    def back(x_ref, o_ref):
        i = sd.program_id(0)
        o_ref[...] = x_ref[(i - 1) * 128:(i - 1) * 128 + 128]

    with pytest.raises(IndexError, match=r"starts at -128 when program_id\(0\) = 0"):
        back.trace(jax.ShapeDtypeStruct((256,), F32))


def test_tma_windows_may_hang_over_the_ref():
    """TMA clips what lies outside (ragged edges): `.at[...]` is not refused."""

    @sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((200, 64), F32),
               smem=[sd.Barriers(1), sd.SMEM((128, 64), F32)])
    def ragged(x_ref, o_ref, bars, tile):
        i = sd.program_id(0) * 128
        bars[0].arrive_expect_tx(tile.nbytes)
        sd.async_copy(x_ref.at[i:i + 128, :], tile, bars[0])
        bars[0].wait(0)
        sd.async_store(tile, o_ref.at[i:i + 128, :])
        sd.async_store_wait()

    x = np.random.default_rng(0).standard_normal((200, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ragged(x)), x)


def test_equality_of_traced_indices_is_a_traced_comparison():
    @sd.kernel(grid=(4,), out_shape=jax.ShapeDtypeStruct((4, 128), F32))
    def first_block_zero(x_ref, o_ref):
        i = sd.program_id(0)
        assert (i + 1 == 1 + i) is True and (i != i) is False  # static: Python bools
        o_ref[i, :] = x_ref[i, :]

        @sd.when(i == 0)
        def _():
            o_ref[i, :] = x_ref[i, :] * 0.0

        @sd.when(i != 3)
        def _():
            o_ref[i, :] = o_ref[i, :] + 1.0

    x = np.arange(512, dtype=np.float32).reshape(4, 128)
    want = x + 1.0
    want[0] = 1.0
    want[3] = x[3]
    np.testing.assert_array_equal(np.asarray(first_block_zero(x)), want)
