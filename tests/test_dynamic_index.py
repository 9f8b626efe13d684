"""Run-time scalars: `table_ref[b, k]` of an int32 global ref reads an element at run time
(smalti.load_scalar) as an `sd.Index`, which composes with everything an Index does
(arithmetic, `//`, `%`, `sd.when`, `sd.fori` bounds, window starts, TMA coordinates, the
index maps of `sd.emit_pipeline`); and indices in array arithmetic (`sd.iota(n) < length`,
`x * s`, `sd.where(cols < length, s, -inf)`), `sd.minimum` / `sd.maximum` of indices. Each
kernel runs in the simulator (jax.jit on the CPU) against numpy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from tests.dsl_helpers import line_of

F32, I32, BF16 = jnp.float32, jnp.int32, jnp.bfloat16
RNG = np.random.default_rng(19)


# ---- reading scalars ---------------------------------------------------------------------

@sd.kernel(grid=(4,), out_shape=[jax.ShapeDtypeStruct((4, 128), F32),
                                 jax.ShapeDtypeStruct((4, 128), I32)])
def page_gather(table_ref, x_ref, rows_ref, numbers_ref):
    """Row table[b, 1] of x, and arithmetic on the page numbers (with a static index and a
    negative one)."""
    b = sd.program_id(0)
    page = table_ref[b, 1]
    rows_ref[b, :] = x_ref[page, :] * 2.0
    mixed = (page * 3 + table_ref[b, -2]) // 2 - page % 3
    numbers_ref[b, :] = sd.full((128,), mixed, I32)


def test_a_page_table_picks_rows_and_its_values_compute_as_indices():
    table = np.array([[5, 3], [-7, 0], [9, 2], [1, 1]], np.int32)
    x = RNG.standard_normal((4, 128)).astype(np.float32)
    rows, numbers = jax.jit(page_gather)(table, x)
    np.testing.assert_array_equal(np.asarray(rows), x[table[:, 1]] * 2)
    page, first = table[:, 1], table[:, 0]
    want = (page * 3 + first) // 2 - page % 3
    np.testing.assert_array_equal(np.asarray(numbers), np.repeat(want[:, None], 128, 1))


def test_the_scalar_is_one_load_of_the_same_address_in_every_thread():
    table, x = np.zeros((4, 2), np.int32), np.zeros((4, 128), np.float32)
    traced, compiled = page_gather.compile(table, x)
    assert traced.mlir.count('"smalti.load_scalar"') == 2
    assert compiled.ptx.count("ld.global.s32") == 2
    assert "%tid" not in compiled.ptx.split("ld.global.s32")[1].split("\n")[0]


@sd.kernel(grid=(3,), out_shape=jax.ShapeDtypeStruct((3, 128), F32))
def ragged_sums(lengths_ref, starts_ref, x_ref, out_ref):
    """Sums rows starts[b] .. starts[b] + lengths[b] - 1 of x in a loop whose bound is read
    at run time; rows of groups longer than 2 are negated (a branch on a loaded value)."""
    b = sd.program_id(0)
    length, start = lengths_ref[b], starts_ref[b]
    total = sd.fori(0, length, lambda k, acc: acc + x_ref[start + k, :],
                    sd.zeros((128,), F32))
    out_ref[b, :] = total

    @sd.when(length > 2)
    def _():
        out_ref[b, :] = -total


def test_loop_bounds_and_branches_read_at_run_time():
    lengths = np.array([2, 0, 5], np.int32)
    starts = np.array([1, 7, 3], np.int32)
    x = RNG.standard_normal((10, 128)).astype(np.float32)
    got = np.asarray(jax.jit(ragged_sums)(lengths, starts, x))
    want = np.stack([x[s:s + n].sum(0) * (-1 if n > 2 else 1)
                     for n, s in zip(lengths, starts, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((2, 64), F32))
def squeezed_windows(table_ref, x_ref, out_ref):
    """x[p, r, c:c + 64] with p, r and c read from the table: two squeezed dims and a
    run-time start."""
    b = sd.program_id(0)
    p, r, c = table_ref[b, 0], table_ref[b, 1], table_ref[b, 2]
    out_ref[b, :] = x_ref[p, r, c:c + 64]


def test_windows_start_at_run_time_values_in_squeezed_dims():
    table = np.array([[2, 5, 64], [0, 1, 8]], np.int32)
    x = RNG.standard_normal((3, 8, 128)).astype(np.float32)
    got = np.asarray(jax.jit(squeezed_windows)(table, x))
    np.testing.assert_array_equal(got, np.stack([x[p, r, c:c + 64] for p, r, c in table]))


PAGE = 64


@sd.kernel(grid=(3,), out_shape=jax.ShapeDtypeStruct((3 * PAGE, 64), BF16),
           smem=[sd.Barriers(1), sd.SMEM((PAGE, 64), BF16)])
def tma_pages(pages_ref, kv_ref, out_ref, bars, page_smem):
    """TMA loads the page the table names (a run-time coordinate) and stores it at the
    slot the table names."""
    b = sd.program_id(0)
    page, slot = pages_ref[b, 0], pages_ref[b, 1]
    bars[0].arrive_expect_tx(page_smem.nbytes)
    sd.async_copy(kv_ref.at[page * PAGE:(page + 1) * PAGE, :], page_smem, bars[0])
    bars[0].wait(0)
    sd.async_store(page_smem, out_ref.at[slot * PAGE:slot * PAGE + PAGE, :])
    sd.async_store_wait()


def test_tma_coordinates_read_from_a_page_table():
    pages = np.array([[4, 2], [0, 0], [2, 1]], np.int32)
    kv = jnp.asarray(RNG.standard_normal((5 * PAGE, 64)), BF16)
    got = np.asarray(jax.jit(tma_pages)(pages, kv)).reshape(3, PAGE, 64)
    kv_pages = np.asarray(kv).reshape(5, PAGE, 64)
    for page, slot in pages:
        np.testing.assert_array_equal(got[slot], kv_pages[page])


@sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((2 * 64, 128), F32))
def paged_sum(table_ref, x_ref, out_ref):
    """Sums, per program, the 4 (64, 128) blocks of x that its row of the table names, in a
    pipeline whose index map reads the table."""
    b = sd.program_id(0)

    def step(indices, x_block, acc):
        return acc + x_block[...]

    total = sd.emit_pipeline(
        step, grid=(4,), in_specs=[sd.BlockSpec((64, 128), lambda k: (table_ref[b, k], 0))],
        max_concurrent_steps=2, init_carry=sd.zeros((64, 128), F32))(x_ref)
    out_ref[b * 64:(b + 1) * 64, :] = total


def test_pipeline_index_maps_read_a_table():
    table = np.array([[5, 0, 2, 2], [1, 3, 4, 0]], np.int32)
    x = RNG.standard_normal((6 * 64, 128)).astype(np.float32)
    got = np.asarray(jax.jit(paged_sum)(table, x)).reshape(2, 64, 128)
    blocks = x.reshape(6, 64, 128)
    for b in range(2):
        np.testing.assert_allclose(got[b], blocks[table[b]].sum(0), rtol=1e-5, atol=1e-5)


def test_int64_tables_read_whole():
    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128,), F32))
    def pick(table_ref, x_ref, out_ref):
        out_ref[...] = x_ref[table_ref[0], :]

    x = RNG.standard_normal((3, 128)).astype(np.float32)
    with jax.enable_x64(True):
        got = jax.jit(pick)(np.array([2], np.int64), x)
    np.testing.assert_array_equal(np.asarray(got), x[2])


# ---- misuse ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, message", [
    (np.float32, r"x_ref\[...\] reads a run-time index, which must be int32 or int64; x_ref "
                 r"is float32"),
    (np.int16, r"x_ref\[...\] reads a run-time index, which must be int32 or int64; x_ref is int16"),
])
def test_a_scalar_of_another_dtype_is_refused_where_it_is_read(dtype, message):
    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128,), F32))
    def reads_float(x_ref, out_ref):
        out_ref[...] = sd.full((128,), x_ref[0, 1], F32)  # the scalar read

    line = line_of("the scalar read", reads_float.fn)
    with pytest.raises(TypeError, match=rf"{__file__}:{line}:\d+: {message}"):
        reads_float.trace(jax.ShapeDtypeStruct((2, 2), dtype))


def test_a_static_index_out_of_bounds_is_refused():
    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128,), F32))
    def past_end(t_ref, out_ref):
        out_ref[...] = sd.full((128,), t_ref[0, 2], F32)  # past the end

    line = line_of("past the end", past_end.fn)
    with pytest.raises(IndexError, match=rf"{__file__}:{line}:\d+: index 2 is out of bounds "
                                         r"for dim 1 of t_ref of shape \(2, 2\)"):
        past_end.trace(jax.ShapeDtypeStruct((2, 2), I32))


def test_shared_memory_gives_no_scalars():
    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((128,), I32),
               smem=[sd.SMEM((128,), I32)])
    def from_smem(out_ref, buffer):
        buffer[...] = sd.iota(128)
        out_ref[...] = sd.full((128,), buffer[3], I32)  # a shared scalar

    line = line_of("a shared scalar", from_smem.fn)
    with pytest.raises(TypeError, match=rf"{__file__}:{line}:\d+: indexing every dim of .* "
                                        r"gives a scalar; only global refs"):
        from_smem.trace()


# ---- indices in array arithmetic ---------------------------------------------------------

@sd.kernel(grid=(3,), out_shape=[jax.ShapeDtypeStruct((3, 128), F32)] * 3
           + [jax.ShapeDtypeStruct((3, 128), I32)] * 2)
def index_arithmetic(lengths_ref, x_ref, masked_ref, scores_ref, scaled_ref, ints_ref,
                     counts_ref):
    b = sd.program_id(0)
    length = lengths_ref[b]
    cols = sd.iota(128)
    x = x_ref[b, :]
    masked_ref[b, :] = sd.where(cols < length, x, 0.0)
    scores_ref[b, :] = sd.where(length > cols, x, -jnp.inf)  # the index on the left
    scaled_ref[b, :] = x * length + length
    ints_ref[b, :] = (cols * length) % 7 - length
    counts_ref[b, :] = sd.where(cols == length, length, sd.maximum(cols, length))


def test_indices_splat_into_array_arithmetic():
    lengths = np.array([5, 0, 127], np.int32)
    x = RNG.standard_normal((3, 128)).astype(np.float32)
    masked, scores, scaled, ints, counts = (np.asarray(a) for a in
                                            jax.jit(index_arithmetic)(lengths, x))
    cols, n = np.arange(128), lengths[:, None]
    np.testing.assert_array_equal(masked, np.where(cols < n, x, 0))
    np.testing.assert_array_equal(scores, np.where(n > cols, x, -np.inf))
    nf = n.astype(np.float32)
    np.testing.assert_allclose(scaled, x * nf + nf, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ints, (cols * n) % 7 - n)
    np.testing.assert_array_equal(counts, np.where(cols == n, n, np.maximum(cols, n)))


@sd.kernel(grid=(4,), out_shape=jax.ShapeDtypeStruct((4, 128), I32))
def index_extremes(a_ref, b_ref, out_ref):
    g = sd.program_id(0)
    a, b = a_ref[g], b_ref[g]
    low, high = sd.minimum(a, b), sd.maximum(a, b)
    out_ref[g, :] = sd.full((128,), high * 1000 + low + sd.minimum(g, 2), I32)


def test_minimum_and_maximum_of_indices():
    a = np.array([3, -8, 40, 7], np.int32)
    b = np.array([5, -9, 2, 7], np.int32)
    got = np.asarray(jax.jit(index_extremes)(a, b))
    want = np.maximum(a, b) * 1000 + np.minimum(a, b) + np.minimum(np.arange(4), 2)
    np.testing.assert_array_equal(got, np.repeat(want[:, None], 128, 1))


def test_minimum_of_known_indices_is_known_while_tracing():
    @sd.kernel(grid=(4,), out_shape=jax.ShapeDtypeStruct((4, 128), F32))
    def bounded(x_ref, out_ref):
        g = sd.program_id(0)
        assert sd.minimum(g * 0 + 3, 5).static == 3 and sd.maximum(g, 9).bounds() == (9, 9)
        assert sd.minimum(g, 2).bounds() == (0, 2)
        out_ref[g, :] = x_ref[sd.minimum(g + 1, 3), :]  # within bounds: no IndexError

    x = RNG.standard_normal((4, 128)).astype(np.float32)
    got = np.asarray(jax.jit(bounded)(x))
    np.testing.assert_array_equal(got, x[[1, 2, 3, 3]])


def test_an_index_does_not_combine_with_a_bool_array():
    @sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((128,), F32))
    def with_bools(out_ref):
        mask = sd.iota(128) < 4
        out_ref[...] = sd.where(mask & sd.program_id(0), 1.0, 0.0)  # bool and index

    line = line_of("bool and index", with_bools.fn)
    with pytest.raises(TypeError, match=rf"{__file__}:{line}:\d+: cannot combine a bool array "
                                        r"with an index"):
        with_bools.trace()


@sd.kernel(grid=(2,), out_shape=[jax.ShapeDtypeStruct((2, 128), BF16),
                                 jax.ShapeDtypeStruct((2, 128), jnp.int16)])
def narrow_dtypes(n_ref, x_ref, y_ref, scaled_ref, shifted_ref):
    b = sd.program_id(0)
    n = n_ref[b]
    scaled_ref[b, :] = x_ref[b, :] * n        # the index converted to bf16
    shifted_ref[b, :] = y_ref[b, :] + n + b   # and to int16


def test_indices_convert_to_narrow_dtypes():
    n = np.array([3, -2], np.int32)
    x = jnp.asarray(RNG.standard_normal((2, 128)), BF16)
    y = np.arange(256, dtype=np.int16).reshape(2, 128)
    scaled, shifted = jax.jit(narrow_dtypes)(n, x, y)
    want = (np.asarray(x).astype(np.float32) * n[:, None]).astype(BF16)
    np.testing.assert_array_equal(np.asarray(scaled), want)
    np.testing.assert_array_equal(np.asarray(shifted), y + n[:, None] + np.arange(2)[:, None])


@sd.kernel(warpgroups=3, out_shape=jax.ShapeDtypeStruct((128, 128), F32))
def chosen_k_blocks(table_ref, a_ref, b_ref, c_ref):
    """A @ B over the K blocks the table names (2 of 4), in a warp-specialised pipeline
    whose producer reads the table in its index maps."""
    def store_rows(consumer, acc):
        c_ref[consumer * 64:(consumer + 1) * 64, :] = acc

    sd.emit_pipeline_warp_specialized(
        lambda indices, a_rows, b_block, acc: sd.wgmma(acc, a_rows, b_block),
        grid=2,
        in_specs=[sd.BlockSpec((128, 64), lambda k: (0, table_ref[k])),
                  sd.BlockSpec((64, 128), lambda k: (table_ref[k], 0))],
        split=(0, None), init_carry=lambda: sd.zeros((64, 128)),
        epilogue=store_rows)(a_ref, b_ref)


def test_warp_specialized_pipeline_index_maps_read_a_table():
    table = np.array([3, 1], np.int32)
    a = RNG.integers(-4, 4, (128, 256)).astype(BF16)
    b = RNG.integers(-4, 4, (256, 128)).astype(BF16)
    got = np.asarray(jax.jit(chosen_k_blocks)(table, a, b))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    want = sum(a32[:, k * 64:(k + 1) * 64] @ b32[k * 64:(k + 1) * 64] for k in table)
    np.testing.assert_array_equal(got, want)
