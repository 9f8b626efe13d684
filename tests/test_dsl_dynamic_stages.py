"""Pipelines over any number of K tiles: `//` and `%` of traced indices (Python's floor
division and remainder, with the ranges the DSL knows for them) and stages of staged shared
memory chosen at run time (`smem[k % stages]`, smalti.select_stage), run under jax.jit in
the simulator against numpy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime import run_simulated
from smalti.runtime.compiler import compile_module
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

F32, BF16 = jnp.float32, jnp.bfloat16
ROWS = 128


@pytest.mark.parametrize("divisor", [3, -3, 4, 1])
def test_floor_division_and_remainder_of_block_ids_are_pythons(divisor):
    """Blocks -3 .. 4 (program_id - 3): each row picks the row (i // d) % 4 and (i % d) % 4."""

    @sd.kernel(grid=(8,), out_shape=jax.ShapeDtypeStruct((8, 2, ROWS), F32))
    def pick(x_ref, o_ref):
        i = sd.program_id(0) - 3
        o_ref[i + 3, 0, :] = x_ref[(i // divisor) % 4, :]
        o_ref[i + 3, 1, :] = x_ref[(i % divisor) % 4, :]

    x = np.arange(4 * ROWS, dtype=np.float32).reshape(4, ROWS)
    got = np.asarray(jax.jit(pick)(x))
    for i in range(-3, 5):
        np.testing.assert_array_equal(got[i + 3, 0], x[(i // divisor) % 4])
        np.testing.assert_array_equal(got[i + 3, 1], x[(i % divisor) % 4])


def test_division_by_a_traced_index():
    """q = 7 // (i + 1) and r = 7 % (i + 1) for blocks 0 .. 3: a traced divisor."""

    @sd.kernel(grid=(4,), out_shape=jax.ShapeDtypeStruct((4, ROWS), F32))
    def pick(x_ref, o_ref):
        i = sd.program_id(0)
        o_ref[i, :] = x_ref[7 // (i + 1) + 8 * (7 % (i + 1)), :]

    x = np.arange(32 * ROWS, dtype=np.float32).reshape(32, ROWS)
    got = np.asarray(jax.jit(pick)(x))
    for i in range(4):
        np.testing.assert_array_equal(got[i], x[7 // (i + 1) + 8 * (7 % (i + 1))])


def test_remainders_have_the_range_python_gives_them():
    """A window at (k % 3) tiles of a 3-tile ref is inside for every k; at (k % 4) it is not,
    and the refusal is at the user's line, while tracing."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((ROWS,), F32))
    def cycling(x_ref, o_ref):
        def body(k, acc):
            s = k % 3
            return acc + x_ref[s * ROWS:s * ROWS + ROWS]

        o_ref[...] = sd.fori(0, 7, body, sd.zeros((ROWS,)))

    x = np.random.default_rng(0).standard_normal(3 * ROWS).astype(np.float32)
    want = sum(x[(k % 3) * ROWS:(k % 3 + 1) * ROWS] for k in range(7))
    np.testing.assert_allclose(np.asarray(jax.jit(cycling)(x)), want, rtol=1e-6)

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((ROWS,), F32))
    def too_far(x_ref, o_ref):
        def body(k, acc):
            s = k % 4
            return acc + x_ref[s * ROWS:s * ROWS + ROWS]  # s = 3 is past the end

        o_ref[...] = sd.fori(0, 7, body, sd.zeros((ROWS,)))

    line = line_of("past the end", too_far.fn)
    with pytest.raises(IndexError, match=rf"{__file__}:{line}:\d+: the window of dim 0 of "
                                         r"x_ref reaches \[384, 512\)"):
        too_far.trace(jax.ShapeDtypeStruct((3 * ROWS,), F32))


def test_division_by_zero_is_refused_at_the_users_line():
    @sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((ROWS,), F32))
    def by_zero(x_ref, o_ref):
        o_ref[...] = x_ref[sd.program_id(0) % 0, :]  # the division

    line = line_of("the division", by_zero.fn)
    with pytest.raises(ZeroDivisionError, match=rf"{__file__}:{line}:\d+: division of an "
                                                "index by zero"):
        by_zero.trace(jax.ShapeDtypeStruct((2, ROWS), F32))


def pipelined_matmul(stages: int, transposed_b: bool):
    """C = A @ B over K tiles of 64 through `stages` stages chosen by k % stages; B given as
    (K, N), or as (N, K) read through the chosen stage's transposed view."""
    b_stage = (64, 64)

    @sd.kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((64, 64), F32),
               smem=[sd.Barriers(stages), sd.SMEM((stages, 64, 64), BF16),
                     sd.SMEM((stages, *b_stage), BF16)])
    def matmul(a_ref, b_ref, c_ref, bars, a_smem, b_smem):
        k_tiles = a_ref.shape[1] // 64

        def fetch(k):
            slot = k % stages
            bars[slot].arrive_expect_tx(a_smem[0].nbytes + b_smem[0].nbytes)
            sd.async_copy(a_ref.at[:, k * 64:k * 64 + 64], a_smem[slot], bars[slot])
            window = b_ref.at[:, k * 64:k * 64 + 64] if transposed_b else \
                b_ref.at[k * 64:k * 64 + 64, :]
            sd.async_copy(window, b_smem[slot], bars[slot])

        for k in range(min(stages - 1, k_tiles)):
            fetch(k)

        def step(k, acc):
            slot = k % stages
            bars[slot].wait(k // stages)
            acc = sd.wgmma(acc, a_smem[slot], b_smem[slot].T if transposed_b else b_smem[slot])

            @sd.when(k + stages - 1 < k_tiles)
            def _():
                fetch(k + stages - 1)

            return acc

        c_ref[...] = sd.fori(0, k_tiles, step, sd.zeros((64, 64)))

    return matmul


@pytest.mark.parametrize("stages, k_tiles, transposed_b",
                         [(2, 3, False), (3, 5, False), (3, 4, True), (4, 2, False)])
def test_a_pipeline_over_any_number_of_k_tiles(stages, k_tiles, transposed_b):
    rng = np.random.default_rng(stages * 10 + k_tiles)
    a = rng.standard_normal((64, 64 * k_tiles)).astype(BF16)
    b = rng.standard_normal((64 * k_tiles, 64)).astype(BF16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    kernel = pipelined_matmul(stages, transposed_b)
    b_arg = np.ascontiguousarray(b.T) if transposed_b else b
    got = np.asarray(jax.jit(kernel)(a, b_arg))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_the_pipeline_is_right_whenever_async_work_completes():
    """The same kernel in the simulator with TMA and wgmma completing as late as the waits
    allow, and in a random order: a stage reused too early would show."""
    kernel = pipelined_matmul(3, False)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 64 * 5)).astype(BF16)
    b = rng.standard_normal((64 * 5, 64)).astype(BF16)
    compiled = compile_module(kernel.trace(jax.ShapeDtypeStruct(a.shape, BF16),
                                           jax.ShapeDtypeStruct(b.shape, BF16)).module)
    want = a.astype(np.float32) @ b.astype(np.float32)
    for completion in ("latest", "random"):
        got = run_simulated(compiled, a, b, np.zeros((64, 64), np.float32),
                            async_completion=completion, seed=3)[-1]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_chosen_stage_round_trips_through_registers():
    """Stores to stage k % 2 and loads back from it, in another layout, every trip: the
    warpgroup meets between them (and before the next trip's store over what it read)."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((256, 64), F32),
               smem=[sd.SMEM((2, 64, 64), F32)])
    def round_trip(x_ref, o_ref, buffers):
        def body(k, _):
            slot = k % 2
            buffers[slot][...] = x_ref[k * 64:k * 64 + 64, :] * 2.0
            o_ref[k * 64:k * 64 + 64, :] = buffers[slot][...].T

        sd.fori(0, 4, body)

    x = np.random.default_rng(2).standard_normal((256, 64)).astype(np.float32)
    mlir = round_trip.trace(jax.ShapeDtypeStruct(x.shape, F32)).mlir
    assert mlir.count('"smalti.select_stage"') == 2  # the store's stage and the load's
    got = np.asarray(jax.jit(round_trip)(x)).reshape(4, 64, 64)
    np.testing.assert_array_equal(got, (x.reshape(4, 64, 64) * 2).transpose(0, 2, 1))


def test_a_stage_index_that_may_leave_the_stages_is_refused_at_the_users_line():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 64), F32), smem=[sd.SMEM((2, 64, 64), F32)])
    def unbounded(out_ref, buffers):
        def body(k, _):
            buffers[k][...] = sd.zeros((64, 64))  # k reaches 2

        sd.fori(0, 3, body)

    line = line_of("k reaches 2", unbounded.fn)
    with pytest.raises(IndexError, match=rf"{__file__}:{line}:\d+: the stage index of buffers "
                                         r"ranges over \[0, 2\] \(at the counter of the fori "
                                         r"at line \d+ = 2\); it must stay in \[0, 2\): take it "
                                         r"modulo the stages \(k % 2\)"):
        unbounded.trace()
