"""Triton peers of smalti.ops.matmul, quantized_matmul and ragged_dot, in the style of
Triton's matmul tutorials: pointer loads that Triton pipelines (cp.async) over `num_stages`,
`tl.dot` with an f32 accumulator, the result rounded to the output's dtype.

- `matmul`: persistent (one program per SM walking the output tiles p, p + programs, ...)
  in the grouped order smalti's kernel uses (GROUP_ROWS rows of tiles, column by column);
  `matmul_tma` the same through tensor descriptors (TMA loads and store).
- `quantized_matmul`: one program per output tile; w's int8 tile is loaded at its own
  width, converted, multiplied by its group's f32 scales and rounded to x's dtype before
  the dot, as smalti's kernel does.
- `ragged_dot`: one program per (work item, output column tile) of smalti's work-item
  table, the group's rows stored under a mask."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
           GROUP_ROWS: tl.constexpr, PROGRAMS: tl.constexpr):
    """C [M, N] = A [M, K] @ B [K, N], all row-major."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_ROWS * tiles_n
    ks = tl.arange(0, BLOCK_K)
    for tile in range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS):
        group = tile // per_group
        first_row = group * GROUP_ROWS
        group_rows = min(tiles_m - first_row, GROUP_ROWS)
        local = tile % per_group
        rows = (first_row + local % group_rows) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = (local // group_rows) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + rows[:, None] * K + (k + ks)[None, :])
            b = tl.load(b_ptr + (k + ks)[:, None] * N + cols[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def matmul_tma(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_ROWS: tl.constexpr, PROGRAMS: tl.constexpr):
    """`matmul` with its tiles loaded and stored through tensor descriptors (TMA), as
    Triton's persistent-matmul tutorial does on Hopper."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_ROWS * tiles_n
    for tile in range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS):
        group = tile // per_group
        first_row = group * GROUP_ROWS
        group_rows = min(tiles_m - first_row, GROUP_ROWS)
        local = tile % per_group
        row = (first_row + local % group_rows) * BLOCK_M
        col = (local // group_rows) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k in range(0, K, BLOCK_K):
            acc = tl.dot(a_desc.load([row, k]), b_desc.load([k, col]), acc)
        c_desc.store([row, col], acc.to(c_desc.dtype))


@triton.jit
def quantized_matmul(x_ptr, w_ptr, s_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
                     K: tl.constexpr, GROUP: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out [M, N] = x [M, K] @ (w [K, N] * scales [K // GROUP, N] repeated GROUP times)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + rows[:, None] * K + (k + ks)[None, :])
        w = tl.load(w_ptr + (k + ks)[:, None] * N + cols[None, :])
        scales = tl.load(s_ptr + (k // GROUP) * N + cols)
        weights = (w.to(tl.float32) * scales[None, :]).to(x.dtype)
        acc = tl.dot(x, weights, acc)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(out_ptr.dtype.element_ty))


@triton.jit
def ragged_dot(lhs_ptr, rhs_ptr, items_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
               K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    """out [M, N] rows of group g = lhs [M, K] rows @ rhs [g, K, N], one program per (work
    item, column tile), with smalti's table of work items (group, lo, hi): the item's row
    tile is lo // BLOCK_M and it writes the rows [lo, hi)."""
    item = tl.program_id(0)
    group = tl.load(items_ptr + item * 3)
    lo = tl.load(items_ptr + item * 3 + 1)
    hi = tl.load(items_ptr + item * 3 + 2)
    if lo < hi:
        rows = (lo // BLOCK_M) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        rhs_group = rhs_ptr + group.to(tl.int64) * K * N
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k in range(0, K, BLOCK_K):
            a = tl.load(lhs_ptr + rows[:, None] * K + (k + ks)[None, :])
            b = tl.load(rhs_group + (k + ks)[:, None] * N + cols[None, :])
            acc = tl.dot(a, b, acc)
        mine = (rows >= lo) & (rows < hi)
        tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(out_ptr.dtype.element_ty),
                 mask=mine[:, None])
