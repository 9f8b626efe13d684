"""RMS norm and layer norm over the last axis, forward and backward, as smalti kernels.

Each block owns BLOCK_ROWS rows and loops over their column tiles twice: once for the row
statistics (f32), once to write the result. The forward kernels also write the per-row
statistics (rstd; mean and rstd) that the backward kernels read; the backward kernels write
dx and, per block, the column sums of the parameter gradients, reduced over blocks after."""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp

import smalti.dsl as sd
from smalti.ops.rows import (
    BLOCK_ROWS,
    F32,
    RowBlock,
    check_float,
    check_hidden,
    check_vector,
    row_blocks,
    row_grid,
    sum_blocks,
    tile_cols,
    to_rows,
    vector_tile,
)


def _row_stats(x: object) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((x.shape[0],), F32)


def _block_partials(x: object) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((row_blocks(x.shape[0]), x.shape[1]), F32)


@functools.cache
def _rms_forward(eps: float) -> sd.Kernel:
    """out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps) per row."""
    @sd.kernel(grid=lambda x, w: row_grid(x), name="rms_norm_fwd",
               out_shape=lambda x, w: (jax.ShapeDtypeStruct(x.shape, x.dtype), _row_stats(x)))
    def rms_norm_fwd(x_ref, w_ref, out_ref, rstd_ref):
        rows, hidden = RowBlock.of(x_ref.shape[0]), x_ref.shape[1]
        cols = tile_cols(hidden)
        tile = rows.tile_loader(x_ref, cols)

        def squares(j, total):
            x = tile(j)
            return total + (x * x).sum(axis=1)

        total = sd.fori(0, hidden // cols, squares, sd.zeros((BLOCK_ROWS,)))
        rstd = sd.rsqrt(total * (1.0 / hidden) + eps)
        rows.store(rstd_ref, rstd)

        def normalize(j, _):
            y = tile(j) * rstd[:, None] * vector_tile(w_ref, j, cols)
            rows.store_tile(out_ref, j, cols, y)

        sd.fori(0, hidden // cols, normalize)
    return rms_norm_fwd


@sd.kernel(grid=lambda x, w, rstd, dy: row_grid(x), name="rms_norm_bwd",
           out_shape=lambda x, w, rstd, dy: (jax.ShapeDtypeStruct(x.shape, x.dtype),
                                             _block_partials(x)))
def _rms_backward(x_ref, w_ref, rstd_ref, dy_ref, dx_ref, dw_ref):
    """dx = rstd * (g - xhat * mean(g * xhat)), g = dy * weight, xhat = x * rstd; and the
    block's column sums of dy * xhat (its part of dweight)."""
    block = sd.program_id(0)
    rows, hidden = RowBlock.of(x_ref.shape[0]), x_ref.shape[1]
    cols = tile_cols(hidden)
    x_tile, dy_tile = rows.tile_loader(x_ref, cols), rows.tile_loader(dy_ref, cols)
    rstd = rows.load(rstd_ref)[:, None]

    def projection(j, total):
        xhat = x_tile(j) * rstd
        return total + (dy_tile(j) * vector_tile(w_ref, j, cols) * xhat).sum(axis=1)

    total = sd.fori(0, hidden // cols, projection, sd.zeros((BLOCK_ROWS,)))
    mean_projection = (total * (1.0 / hidden))[:, None]

    def gradients(j, _):
        col = j * cols
        xhat, dy = x_tile(j) * rstd, dy_tile(j)
        dx = (dy * vector_tile(w_ref, j, cols) - xhat * mean_projection) * rstd
        rows.store_tile(dx_ref, j, cols, dx)
        dw_ref[block, col:col + cols] = (dy * xhat).sum(axis=0)

    sd.fori(0, hidden // cols, gradients)


@functools.cache
def _layer_forward(eps: float) -> sd.Kernel:
    """out = (x - mean) * rstd * weight + bias. The variance is of x shifted by the mean of
    the row's first tile (close to the row's mean), so one pass computes it without the
    cancellation of E[x^2] - E[x]^2."""
    @sd.kernel(grid=lambda x, w, b: row_grid(x), name="layer_norm_fwd",
               out_shape=lambda x, w, b: (jax.ShapeDtypeStruct(x.shape, x.dtype),
                                          _row_stats(x), _row_stats(x)))
    def layer_norm_fwd(x_ref, w_ref, b_ref, out_ref, mean_ref, rstd_ref):
        rows, hidden = RowBlock.of(x_ref.shape[0]), x_ref.shape[1]
        cols = tile_cols(hidden)
        tile = rows.tile_loader(x_ref, cols)
        shift_row = tile(0).sum(axis=1) * (1.0 / cols)
        shift = shift_row[:, None]

        def moments(j, carry):
            first, second = carry
            d = tile(j) - shift
            return first + d.sum(axis=1), second + (d * d).sum(axis=1)

        zero = sd.zeros((BLOCK_ROWS,))
        first, second = sd.fori(0, hidden // cols, moments, (zero, zero))
        mean_shifted = first * (1.0 / hidden)
        variance = sd.maximum(second * (1.0 / hidden) - mean_shifted * mean_shifted, 0.0)
        rstd = sd.rsqrt(variance + eps)
        mean = mean_shifted + shift_row
        rows.store(mean_ref, mean)
        rows.store(rstd_ref, rstd)

        def normalize(j, _):
            xhat = (tile(j) - mean[:, None]) * rstd[:, None]
            y = xhat * vector_tile(w_ref, j, cols) + vector_tile(b_ref, j, cols)
            rows.store_tile(out_ref, j, cols, y)

        sd.fori(0, hidden // cols, normalize)
    return layer_norm_fwd


@sd.kernel(grid=lambda x, w, mean, rstd, dy: row_grid(x), name="layer_norm_bwd",
           out_shape=lambda x, w, mean, rstd, dy: (jax.ShapeDtypeStruct(x.shape, x.dtype),
                                                   _block_partials(x), _block_partials(x)))
def _layer_backward(x_ref, w_ref, mean_ref, rstd_ref, dy_ref, dx_ref, dw_ref, db_ref):
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight; and the block's
    column sums of dy * xhat and of dy (its parts of dweight and dbias)."""
    block = sd.program_id(0)
    rows, hidden = RowBlock.of(x_ref.shape[0]), x_ref.shape[1]
    cols = tile_cols(hidden)
    x_tile, dy_tile = rows.tile_loader(x_ref, cols), rows.tile_loader(dy_ref, cols)
    mean, rstd = rows.load(mean_ref)[:, None], rows.load(rstd_ref)[:, None]

    def sums(j, carry):
        g_sum, projection = carry
        g = dy_tile(j) * vector_tile(w_ref, j, cols)
        xhat = (x_tile(j) - mean) * rstd
        return g_sum + g.sum(axis=1), projection + (g * xhat).sum(axis=1)

    zero = sd.zeros((BLOCK_ROWS,))
    g_sum, projection = sd.fori(0, hidden // cols, sums, (zero, zero))
    g_mean = (g_sum * (1.0 / hidden))[:, None]
    mean_projection = (projection * (1.0 / hidden))[:, None]

    def gradients(j, _):
        col = j * cols
        xhat, dy = (x_tile(j) - mean) * rstd, dy_tile(j)
        dx = (dy * vector_tile(w_ref, j, cols) - g_mean - xhat * mean_projection) * rstd
        rows.store_tile(dx_ref, j, cols, dx)
        dw_ref[block, col:col + cols] = (dy * xhat).sum(axis=0)
        db_ref[block, col:col + cols] = dy.sum(axis=0)

    sd.fori(0, hidden // cols, gradients)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _rms_rows(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    return _rms_forward(eps)(x, weight)[0]


def _rms_rows_fwd(x, weight, eps):
    out, rstd = _rms_forward(eps)(x, weight)
    return out, (x, weight, rstd)


def _rms_rows_bwd(eps, saved, dy):
    x, weight, rstd = saved
    dx, dw = _rms_backward(x, weight, rstd, dy)
    return dx, sum_blocks(dw, weight.dtype)


_rms_rows.defvjp(_rms_rows_fwd, _rms_rows_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _layer_rows(x, weight, bias, eps):
    return _layer_forward(eps)(x, weight, bias)[0]


def _layer_rows_fwd(x, weight, bias, eps):
    out, mean, rstd = _layer_forward(eps)(x, weight, bias)
    return out, (x, weight, bias, mean, rstd)


def _layer_rows_bwd(eps, saved, dy):
    x, weight, bias, mean, rstd = saved
    dx, dw, db = _layer_backward(x, weight, mean, rstd, dy)
    return dx, sum_blocks(dw, weight.dtype), sum_blocks(db, bias.dtype)


_layer_rows.defvjp(_layer_rows_fwd, _layer_rows_bwd)


def _check_eps(op: str, eps: object) -> float:
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not eps >= 0 \
            or not math.isfinite(eps):
        raise ValueError(f"smalti.ops.{op}: eps must be a finite non-negative Python number, "
                         f"got {eps!r}")
    return float(eps)


def rms_norm(x: jax.Array, weight: jax.Array, *, eps: float = 1e-6) -> jax.Array:
    """x / sqrt(mean(x^2, axis=-1) + eps) * weight, in x's dtype (f32 statistics).

    x: f32, bf16 or f16 of any leading shape, its last axis a multiple of 8; weight: the
    last axis's size. Differentiable in x and weight (backward smalti kernels)."""
    x = jnp.asarray(x)
    check_float("rms_norm", "x", x)
    hidden = check_hidden("rms_norm", "x", tuple(x.shape))
    weight = jnp.asarray(weight)
    check_vector("rms_norm", "weight", weight, hidden)
    return _rms_rows(to_rows(x), weight, _check_eps("rms_norm", eps)).reshape(x.shape)


def layer_norm(x: jax.Array, weight: jax.Array, bias: jax.Array, *,
               eps: float = 1e-5) -> jax.Array:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis, in x's dtype (f32
    statistics; the biased variance, as jax.numpy's var). Shapes as rms_norm's, bias as
    weight. Differentiable in x, weight and bias (backward smalti kernels)."""
    x = jnp.asarray(x)
    check_float("layer_norm", "x", x)
    hidden = check_hidden("layer_norm", "x", tuple(x.shape))
    weight, bias = jnp.asarray(weight), jnp.asarray(bias)
    check_vector("layer_norm", "weight", weight, hidden)
    check_vector("layer_norm", "bias", bias, hidden)
    return _layer_rows(to_rows(x), weight, bias, _check_eps("layer_norm", eps)).reshape(x.shape)
