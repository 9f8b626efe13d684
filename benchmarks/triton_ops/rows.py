"""Triton peers of smalti.ops' row kernels (rms_norm, layer_norm, softmax; forward and
backward), written in the style of Triton's tutorials but with smalti's blocking and
algorithms, so that the two compilers' code for the same work is compared: one program per
ROWS rows, two loops over COLS-wide column tiles (statistics, then the result), f32 math,
f32 per-row statistics, and per-program column sums for the parameter gradients."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tile(ptr, rows, col, N: tl.constexpr, COLS: tl.constexpr):
    """The ROWS x COLS tile at (rows, col) of a row-major [*, N] array, in f32."""
    cols = col + tl.arange(0, COLS)
    return tl.load(ptr + rows[:, None] * N + cols[None, :]).to(tl.float32)


@triton.jit
def _store_tile(ptr, rows, col, value, N: tl.constexpr, COLS: tl.constexpr):
    cols = col + tl.arange(0, COLS)
    tl.store(ptr + rows[:, None] * N + cols[None, :], value.to(ptr.dtype.element_ty))


@triton.jit
def _vector(ptr, col, COLS: tl.constexpr):
    """COLS entries of a per-feature vector (weight, bias) in f32."""
    return tl.load(ptr + col + tl.arange(0, COLS)).to(tl.float32)


@triton.jit
def rms_norm_fwd(x_ptr, w_ptr, out_ptr, rstd_ptr, N: tl.constexpr, EPS: tl.constexpr,
                 ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    total = tl.zeros((ROWS,), tl.float32)
    for col in range(0, N, COLS):
        x = _tile(x_ptr, rows, col, N, COLS)
        total += tl.sum(x * x, axis=1)
    rstd = tl.rsqrt(total / N + EPS)
    tl.store(rstd_ptr + rows, rstd)
    for col in range(0, N, COLS):
        x = _tile(x_ptr, rows, col, N, COLS)
        y = x * rstd[:, None] * _vector(w_ptr, col, COLS)[None, :]
        _store_tile(out_ptr, rows, col, y, N, COLS)


@triton.jit
def rms_norm_bwd(x_ptr, w_ptr, rstd_ptr, dy_ptr, dx_ptr, dw_ptr, N: tl.constexpr,
                 ROWS: tl.constexpr, COLS: tl.constexpr):
    block = tl.program_id(0)
    rows = block * ROWS + tl.arange(0, ROWS)
    rstd = tl.load(rstd_ptr + rows)[:, None]
    total = tl.zeros((ROWS,), tl.float32)
    for col in range(0, N, COLS):
        xhat = _tile(x_ptr, rows, col, N, COLS) * rstd
        g = _tile(dy_ptr, rows, col, N, COLS) * _vector(w_ptr, col, COLS)[None, :]
        total += tl.sum(g * xhat, axis=1)
    mean_projection = (total / N)[:, None]
    for col in range(0, N, COLS):
        xhat = _tile(x_ptr, rows, col, N, COLS) * rstd
        dy = _tile(dy_ptr, rows, col, N, COLS)
        dx = (dy * _vector(w_ptr, col, COLS)[None, :] - xhat * mean_projection) * rstd
        _store_tile(dx_ptr, rows, col, dx, N, COLS)
        tl.store(dw_ptr + block * N + col + tl.arange(0, COLS), tl.sum(dy * xhat, axis=0))


@triton.jit
def layer_norm_fwd(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, N: tl.constexpr,
                   EPS: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """One pass for the moments of x shifted by its first tile's row means (as smalti's
    kernel: no E[x^2] - E[x]^2 cancellation), one for the result."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    shift = tl.sum(_tile(x_ptr, rows, 0, N, COLS), axis=1) / COLS
    first = tl.zeros((ROWS,), tl.float32)
    second = tl.zeros((ROWS,), tl.float32)
    for col in range(0, N, COLS):
        d = _tile(x_ptr, rows, col, N, COLS) - shift[:, None]
        first += tl.sum(d, axis=1)
        second += tl.sum(d * d, axis=1)
    mean_shifted = first / N
    rstd = tl.rsqrt(tl.maximum(second / N - mean_shifted * mean_shifted, 0.0) + EPS)
    mean = mean_shifted + shift
    tl.store(mean_ptr + rows, mean)
    tl.store(rstd_ptr + rows, rstd)
    for col in range(0, N, COLS):
        xhat = (_tile(x_ptr, rows, col, N, COLS) - mean[:, None]) * rstd[:, None]
        y = xhat * _vector(w_ptr, col, COLS)[None, :] + _vector(b_ptr, col, COLS)[None, :]
        _store_tile(out_ptr, rows, col, y, N, COLS)


@triton.jit
def layer_norm_bwd(x_ptr, w_ptr, mean_ptr, rstd_ptr, dy_ptr, dx_ptr, dw_ptr, db_ptr,
                   N: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    block = tl.program_id(0)
    rows = block * ROWS + tl.arange(0, ROWS)
    mean = tl.load(mean_ptr + rows)[:, None]
    rstd = tl.load(rstd_ptr + rows)[:, None]
    g_sum = tl.zeros((ROWS,), tl.float32)
    projection = tl.zeros((ROWS,), tl.float32)
    for col in range(0, N, COLS):
        g = _tile(dy_ptr, rows, col, N, COLS) * _vector(w_ptr, col, COLS)[None, :]
        xhat = (_tile(x_ptr, rows, col, N, COLS) - mean) * rstd
        g_sum += tl.sum(g, axis=1)
        projection += tl.sum(g * xhat, axis=1)
    g_mean = (g_sum / N)[:, None]
    mean_projection = (projection / N)[:, None]
    for col in range(0, N, COLS):
        xhat = (_tile(x_ptr, rows, col, N, COLS) - mean) * rstd
        dy = _tile(dy_ptr, rows, col, N, COLS)
        dx = (dy * _vector(w_ptr, col, COLS)[None, :] - g_mean - xhat * mean_projection) * rstd
        _store_tile(dx_ptr, rows, col, dx, N, COLS)
        cols = block * N + col + tl.arange(0, COLS)
        tl.store(dw_ptr + cols, tl.sum(dy * xhat, axis=0))
        tl.store(db_ptr + cols, tl.sum(dy, axis=0))


@triton.jit
def softmax_fwd(x_ptr, out_ptr, N: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """Online softmax: one pass for the running max and rescaled sum, one for the result."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_max = tl.full((ROWS,), float("-inf"), tl.float32)
    row_sum = tl.zeros((ROWS,), tl.float32)
    for col in range(0, N, COLS):
        x = _tile(x_ptr, rows, col, N, COLS)
        new_max = tl.maximum(row_max, tl.max(x, axis=1))
        row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max[:, None]),
                                                                axis=1)
        row_max = new_max
    inverse = (1.0 / row_sum)[:, None]
    for col in range(0, N, COLS):
        x = _tile(x_ptr, rows, col, N, COLS)
        _store_tile(out_ptr, rows, col, tl.exp(x - row_max[:, None]) * inverse, N, COLS)


@triton.jit
def softmax_bwd(y_ptr, dy_ptr, dx_ptr, N: tl.constexpr, ROWS: tl.constexpr,
                COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    total = tl.zeros((ROWS,), tl.float32)
    for col in range(0, N, COLS):
        total += tl.sum(_tile(y_ptr, rows, col, N, COLS) * _tile(dy_ptr, rows, col, N, COLS),
                        axis=1)
    for col in range(0, N, COLS):
        y = _tile(y_ptr, rows, col, N, COLS)
        dx = y * (_tile(dy_ptr, rows, col, N, COLS) - total[:, None])
        _store_tile(dx_ptr, rows, col, dx, N, COLS)
