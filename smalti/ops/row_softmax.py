"""Softmax along one axis, forward and backward, as smalti kernels.

The axis is moved last and flattened to rows; each block owns BLOCK_ROWS rows. The forward
kernel makes one pass for the running max and rescaled sum (online softmax, f32) and one to
write exp(x - max) / sum; the backward kernel one pass for sum(dy * y) and one to write
y * (dy - sum)."""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp

import smalti.dsl as sd
from smalti.ops.rows import (
    BLOCK_ROWS,
    RowBlock,
    check_float,
    check_hidden,
    row_grid,
    tile_cols,
    to_rows,
)


@sd.kernel(grid=lambda x: row_grid(x), name="softmax_fwd",
           out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype))
def _softmax_forward(x_ref, out_ref):
    rows, hidden = RowBlock.of(x_ref.shape[0]), x_ref.shape[1]
    cols = tile_cols(hidden)
    tile = rows.tile_loader(x_ref, cols)

    def statistics(j, carry):
        running_max, running_sum = carry
        x = tile(j)
        new_max = sd.maximum(running_max, x.max(axis=1))
        rescaled = running_sum * sd.exp(running_max - new_max)
        return new_max, rescaled + sd.exp(x - new_max[:, None]).sum(axis=1)

    start = (sd.full((BLOCK_ROWS,), -math.inf), sd.zeros((BLOCK_ROWS,)))
    row_max, row_sum = sd.fori(0, hidden // cols, statistics, start)
    inverse = (1.0 / row_sum)[:, None]

    def normalize(j, _):
        rows.store_tile(out_ref, j, cols, sd.exp(tile(j) - row_max[:, None]) * inverse)

    sd.fori(0, hidden // cols, normalize)


@sd.kernel(grid=lambda y, dy: row_grid(y), name="softmax_bwd",
           out_shape=lambda y, dy: jax.ShapeDtypeStruct(y.shape, y.dtype))
def _softmax_backward(y_ref, dy_ref, dx_ref):
    rows, hidden = RowBlock.of(y_ref.shape[0]), y_ref.shape[1]
    cols = tile_cols(hidden)
    y_tile, dy_tile = rows.tile_loader(y_ref, cols), rows.tile_loader(dy_ref, cols)

    def projection(j, total):
        return total + (y_tile(j) * dy_tile(j)).sum(axis=1)

    total = sd.fori(0, hidden // cols, projection, sd.zeros((BLOCK_ROWS,)))[:, None]

    def gradients(j, _):
        rows.store_tile(dx_ref, j, cols, y_tile(j) * (dy_tile(j) - total))

    sd.fori(0, hidden // cols, gradients)


@jax.custom_vjp
def _softmax_rows(x: jax.Array) -> jax.Array:
    return _softmax_forward(x)


def _softmax_rows_fwd(x):
    y = _softmax_forward(x)
    return y, y


def _softmax_rows_bwd(y, dy):
    return (_softmax_backward(y, dy),)


_softmax_rows.defvjp(_softmax_rows_fwd, _softmax_rows_bwd)


def softmax(x: jax.Array, axis: int = -1) -> jax.Array:
    """exp(x - max) / sum(exp(x - max)) along `axis` (one int), in x's dtype with f32 math.

    x: f32, bf16 or f16, the size of `axis` a multiple of 8. Differentiable (a backward
    smalti kernel from the saved output)."""
    x = jnp.asarray(x)
    check_float("softmax", "x", x)
    if (not isinstance(axis, numbers.Integral) or isinstance(axis, bool)
            or not -x.ndim <= axis < x.ndim):
        raise ValueError(f"smalti.ops.softmax: axis must be one int in [{-x.ndim}, {x.ndim}) "
                         f"for x of shape {tuple(x.shape)}, got {axis!r}")
    axis = int(axis)
    check_hidden("softmax", "x", tuple(x.shape), axis)
    moved = jnp.moveaxis(x, axis, -1)
    return jnp.moveaxis(_softmax_rows(to_rows(moved)).reshape(moved.shape), -1, axis)
