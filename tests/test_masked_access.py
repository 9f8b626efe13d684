"""Masked register loads and stores of global windows: `sd.load(view, mask=, other=)` reads
only where the mask holds (elsewhere `other`), `sd.store(view, value, mask=)` writes only
there, so a window may hang over the ref's end, with a start read at run time. Each kernel
runs in the simulator against numpy; stores run on prefilled buffers (run_simulated), which
show that masked elements are not written. Without a mask they are `view[...]` and
`view[...] = value`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime.compiler import CompiledModule
from smalti.runtime.simulate import run_simulated
from tests.dsl_helpers import line_of

F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32
RNG = np.random.default_rng(3)
ROWS, BLOCK = 100, 64  # a 100-row ref read in 64-row windows: the last hangs over the end


def _expected_tail(x: np.ndarray, start: int, fill: float) -> np.ndarray:
    want = np.full((BLOCK, x.shape[1]), fill, x.dtype)
    n = max(0, min(BLOCK, x.shape[0] - start))
    want[:n] = x[start:start + n]
    return want


@sd.kernel(grid=(3,), out_shape=jax.ShapeDtypeStruct((3, BLOCK, 128), F32))
def row_tails(starts_ref, x_ref, out_ref):
    """Rows start .. start + 63 of x, the start read at run time; rows past the end are -1
    (a row mask: one predicated vector access per register vector)."""
    b = sd.program_id(0)
    start = starts_ref[b]
    rows = sd.iota(BLOCK) + start
    out_ref[b] = sd.load(x_ref.at[start:start + BLOCK, :], mask=rows[:, None] < ROWS,
                         other=-1.0)


def test_a_window_hanging_over_the_end_with_a_run_time_start():
    starts = np.array([0, 50, 90], np.int32)
    x = RNG.standard_normal((ROWS, 128)).astype(np.float32)
    got = np.asarray(jax.jit(row_tails)(starts, x))
    for b, start in enumerate(starts):
        np.testing.assert_array_equal(got[b], _expected_tail(x, start, -1.0))


@sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((2, 16, 128), BF16))
def column_masks(lengths_ref, x_ref, out_ref):
    """bf16 columns below a run-time length, and below the diagonal: masks that differ
    between the two halves of a register (single-element accesses), `other` an Array."""
    b = sd.program_id(0)
    cols = sd.iota((16, 128), I32, 1)
    rows = sd.iota((16, 128), I32, 0)
    mask = (cols < lengths_ref[b]) & (cols >= rows)
    other = rows.astype(BF16)
    out_ref[b] = sd.load(x_ref.at[b, :, :], mask=mask, other=other)


def test_element_masks_of_packed_elements_and_an_array_other():
    lengths = np.array([37, 128], np.int32)
    x = jnp.asarray(RNG.standard_normal((2, 16, 128)), BF16)
    got = np.asarray(jax.jit(column_masks)(lengths, x))
    cols, rows = np.arange(128)[None, :], np.arange(16)[:, None]
    for b in range(2):
        mask = (cols < lengths[b]) & (cols >= rows)
        fill = np.broadcast_to(rows, (16, 128)).astype(np.float32)
        want = np.where(mask, np.asarray(x[b]).astype(np.float32), fill)
        np.testing.assert_array_equal(got[b].astype(np.float32), want)


@sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((ROWS, 128), F32))
def scatter_tails(starts_ref, x_ref, out_ref):
    """Stores block b of x at a run-time row start, the rows past the end masked (the
    last window hangs over), and in rows `start % 3 == 1` only the first 40 columns."""
    b = sd.program_id(0)
    start = starts_ref[b]
    rows = sd.iota((BLOCK, 128), I32, 0) + start
    cols = sd.iota((BLOCK, 128), I32, 1)
    keep = (rows < ROWS) & ((rows % 3 != 1) | (cols < 40))
    sd.store(out_ref.at[start:start + BLOCK, :], x_ref[b] * 2.0, mask=keep)


def test_masked_stores_write_only_where_the_mask_holds():
    starts = np.array([0, 64], np.int32)  # the second window hangs over the end
    x = RNG.standard_normal((2, BLOCK, 128)).astype(np.float32)
    out = np.full((ROWS, 128), 7.0, np.float32)  # what masked elements keep
    _, kernel = scatter_tails.compile(starts, x)
    compiled = CompiledModule(kernel.ptx, {kernel.name: kernel.signature}, kernel.arch)
    want = out.copy()
    for b, start in enumerate(starts):
        rows = np.arange(start, min(ROWS, start + BLOCK))
        keep = (rows[:, None] % 3 != 1) | (np.arange(128) < 40)
        want[rows] = np.where(keep, x[b, :len(rows)] * 2, want[rows])
    got = run_simulated(compiled, starts, x, out)[-1]
    np.testing.assert_array_equal(got, want)


@sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((2, 3, 128), F32))
def squeezed(starts_ref, x_ref, out_ref):
    """A window with a squeezed dim (page p), its rows hanging over the end."""
    p = sd.program_id(0)
    start = starts_ref[p]
    rows = sd.iota(4) + start
    out_ref[p] = sd.load(x_ref.at[p, start:start + 4, :], mask=rows[:, None] < 6)[:3, :]


def test_a_window_with_a_squeezed_dim():
    starts = np.array([1, 4], np.int32)
    x = RNG.standard_normal((2, 6, 128)).astype(np.float32)
    got = np.asarray(jax.jit(squeezed)(starts, x))
    np.testing.assert_array_equal(got[0], x[0, 1:4])
    np.testing.assert_array_equal(got[1], np.concatenate([x[1, 4:6], np.zeros((1, 128))]))


@sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((64, 128), F32))
def unmasked(x_ref, out_ref):
    sd.store(out_ref.at[:, :], sd.load(x_ref.at[8:72, :]) + 1.0)


def test_without_a_mask_they_are_plain_loads_and_stores():
    x = RNG.standard_normal((80, 128)).astype(np.float32)
    text = unmasked.trace(x).mlir
    assert '"smalti.vector_load"' in text and '"smalti.vector_store"' in text
    assert "smalti.masked" not in text
    np.testing.assert_array_equal(np.asarray(jax.jit(unmasked)(x)), x[8:72] + 1)


# ---- misuse ------------------------------------------------------------------------------

def _misuse(body):
    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((64, 128), F32))
    def misuse(x_ref, out_ref):
        body(x_ref, out_ref)

    return misuse


def _hangs(x_ref, out_ref):
    out_ref[...] = sd.load(x_ref.at[40:104, :])  # unmasked, hanging


def _float_mask(x_ref, out_ref):
    out_ref[...] = sd.load(x_ref.at[0:64, :], mask=sd.zeros((64, 128)))  # float mask


def _wrong_shape(x_ref, out_ref):
    out_ref[...] = sd.load(x_ref.at[0:64, :], mask=sd.iota(32) < 3)  # wrong shape


def _other_dtype(x_ref, out_ref):
    mask = sd.iota((64, 128), I32, 0) < 3
    out_ref[...] = sd.load(x_ref.at[0:64, :], mask=mask, other=sd.zeros((64, 128), BF16))


@pytest.mark.parametrize("body, marker, error, message", [
    (_hangs, "unmasked, hanging", IndexError,
     r"load without a mask: window \[40, 104\) of dim 0 hangs over the end of x_ref of shape "
     r"\(100, 128\); give a mask that is false past the end"),
    (_float_mask, "float mask", TypeError,
     r"load's mask must be a bool Array \(a comparison such as `rows < n`\), got float32"),
    (_wrong_shape, "wrong shape", ValueError,
     r"load's mask of shape \(32,\) does not broadcast to the window's shape \(64, 128\) "
     r"\(a row mask is `rows\[:, None\] < n`\)"),
    (_other_dtype, "other=", TypeError,
     r"load's other is bfloat16, x_ref is float32; cast it with .astype"),
])
def test_misuse_is_a_located_error(body, marker, error, message):
    kernel = _misuse(body)
    line = line_of(marker, body)
    with pytest.raises(error, match=rf"{__file__}:{line}:\d+: {message}"):
        kernel.trace(jax.ShapeDtypeStruct((ROWS, 128), F32))


def test_bytes_and_shared_memory_are_refused():
    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((64, 128), jnp.int8))
    def bytes_(x_ref, out_ref):
        sd.store(out_ref.at[...], x_ref[...], mask=sd.iota((64, 128), I32, 0) < 3)  # int8

    line = line_of("# int8", bytes_.fn)
    with pytest.raises(TypeError, match=rf"{__file__}:{line}:\d+: store with a mask moves 16-, "
                                        r"32- or 64-bit elements; out_ref is int8"):
        bytes_.trace(jax.ShapeDtypeStruct((64, 128), jnp.int8))

    @sd.kernel(grid=(1,), out_shape=jax.ShapeDtypeStruct((64, 128), F32),
               smem=[sd.SMEM((64, 128), F32)])
    def shared(x_ref, out_ref, buffer):
        mask = sd.iota((64, 128), I32, 0) < 3
        buffer[...] = x_ref[...]
        out_ref[...] = sd.load(buffer.at[...], mask=mask)  # shared

    line = line_of("# shared", shared.fn)
    with pytest.raises(TypeError, match=rf"{__file__}:{line}:\d+: load with a mask takes a "
                                        r"window of a global ref \(a kernel argument\); buffer "
                                        r"is not one"):
        shared.trace(jax.ShapeDtypeStruct((64, 128), F32))


@sd.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((ROWS,), F32))
def row_sums(starts_ref, x_ref, out_ref):
    """Row sums of a wgmma-laid-out block (a row layout replicated over the 4 threads of a
    row: only the first copy stores, and only where the mask holds), at a run-time row."""
    b = sd.program_id(0)
    start = starts_ref[b]
    block = sd.layout_cast(x_ref[b], "#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], "
                                     "warp = [-7], lane = [-3, -2], vector = -1>")
    rows = sd.iota(BLOCK) + start
    sd.store(out_ref.at[start:start + BLOCK], block.sum(axis=1), mask=rows < ROWS)


def test_a_masked_store_of_a_replicated_layout_writes_each_element_once():
    starts = np.array([0, 64], np.int32)
    x = RNG.standard_normal((2, BLOCK, 128)).astype(np.float32)
    _, kernel = row_sums.compile(starts, x)
    assert "and.pred" in kernel.ptx  # the mask and the first copy
    compiled = CompiledModule(kernel.ptx, {kernel.name: kernel.signature}, kernel.arch)
    got = run_simulated(compiled, starts, x, np.full(ROWS, 7.0, np.float32))[-1]
    want = np.concatenate([x[0].sum(1), x[1, :ROWS - BLOCK].sum(1)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
