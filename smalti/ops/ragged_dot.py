"""Grouped matmul, `ragged_dot(lhs, rhs, group_sizes, *, preferred_element_type=None)`:
jax.lax.ragged_dot's meaning (the rows of lhs fall in consecutive groups of run-time sizes;
group i multiplies rhs[i]; rows past sum(group_sizes) are zeros) on Hopper wgmma.

The group sizes are only known at run time, so the launch cannot be shaped by them. As
Megablox does, a few jnp ops in the wrapper (inside jit, O(groups + row tiles) work) turn
them into a table of *work items*: each is one (group, BLOCK_M-row tile) pair that meets,
with the rows [lo, hi) of that tile the group owns. The rows no group owns, [sum, m), form
one more pseudo-group whose items compute nothing and store zeros, so every output row is
written exactly once and XLA needs no zero fill or mask pass over the output. g + 1
consecutive row ranges cover at most tiles_m + g tiles counted with overlap, so the grid is
that static bound by the N tiles; items past the real count have lo = hi and exit at once.

Each block reads its item (three scalars) at run time, then runs a TMA/wgmma pipeline over
K (`sd.emit_pipeline`): lhs's row tile lo // BLOCK_M, and rhs[group] through a squeezed,
run-time coordinate, the windows hanging over the arrays' ends being zero-filled by TMA
(ragged M, N, K need no padding). The pseudo-group's items run zero K steps. A tile wholly
inside its group (the common case for large groups) is stored by TMA through shared memory
(clipped at the edges); a tile shared with other groups stores its rows with a masked
register store, leaving the other groups' rows to their own items.

Tiles are 128x128 outputs, K in 64-wide steps, one warpgroup per block (a 128x128 f32
accumulator) and 4 stages: the pipeline model's own choice for this step (TMA-bound at
32 KiB per step, `smalti-opt --smalti-explain-schedule`). A tile shared by several groups
is computed once per group, each keeping its own rows (as in Megablox): at most g extra
tile products.

The backward (`jax.custom_vjp`) is two more kernels. d_lhs = ragged_dot(d_out, rhs^T) is the
same kernel reading rhs transposed in shared memory (`RhsOperand(transposed=True)`: the
[n-step, k-tile] window of rhs[group] handed to wgmma as `block.T`, no copy). d_rhs[i] =
lhs[rows_i]^T d_out[rows_i] contracts over the ragged rows: one block per (group, K tile, N
tile) loops at run time over its group's rows in ROWS-row steps, its offsets read from a
[g + 1] table; lhs's tile is wgmma's A read transposed, and the rows of a first or last step
that other groups own are zeroed in both shared-memory tiles, so they add nothing (NaN in
them included). An empty group's blocks run no step and store zeros."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
STAGES = 4
ROWS = 64  # rows of lhs and d_out per step of d_rhs's contraction
MULTIPLE = 8  # TMA needs 16-byte row strides: 8 elements of 2 bytes
INPUT_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
OUT_DTYPES = (*INPUT_DTYPES, jnp.dtype(jnp.float32))
F32, I32 = jnp.float32, jnp.int32
OP = "smalti.ops.ragged_dot"
GROUP, LO, HI = range(3)  # the fields of a work item


def _error(message: str) -> ValueError:
    return ValueError(f"{OP}: {message}")


def _check(lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array,
           preferred_element_type: object) -> jnp.dtype:
    """The output dtype, once every argument is checked (ValueError naming the argument)."""
    for name, value, rank in (("lhs", lhs, 2), ("rhs", rhs, 3)):
        if value.ndim != rank or 0 in value.shape[1 if name == "lhs" else 0:]:
            what = "a 2-D array with columns" if name == "lhs" else "a non-empty 3-D array"
            raise _error(f"{name} must be {what}, got shape {tuple(value.shape)}")
        if value.dtype not in INPUT_DTYPES:
            raise _error(f"{name} must be bfloat16 or float16, got {value.dtype}")
    if lhs.dtype != rhs.dtype:
        raise _error(f"lhs and rhs must have the same dtype, got {lhs.dtype} and {rhs.dtype}")
    (_, k), (groups, k_rhs, n) = lhs.shape, rhs.shape
    if k_rhs != k:
        raise _error(f"rhs must have shape (g, {k}, n) (its dim 1 lhs's columns), got "
                     f"{tuple(rhs.shape)}")
    if k % MULTIPLE or n % MULTIPLE:
        raise _error(f"lhs's columns and rhs's last dim must be multiples of {MULTIPLE}, got "
                     f"lhs {tuple(lhs.shape)} and rhs {tuple(rhs.shape)}")
    if tuple(group_sizes.shape) != (groups,):
        raise _error(f"group_sizes must have shape ({groups},) (rhs's groups), got "
                     f"{tuple(group_sizes.shape)}")
    if not jnp.issubdtype(group_sizes.dtype, jnp.integer):
        raise _error(f"group_sizes must be an integer array, got {group_sizes.dtype}")
    try:
        dtype = jnp.dtype(lhs.dtype if preferred_element_type is None
                          else preferred_element_type)
    except TypeError:
        dtype = None
    if dtype not in OUT_DTYPES:
        raise _error(f"preferred_element_type must be float32, bfloat16 or float16, got "
                     f"{repr(preferred_element_type) if dtype is None else dtype}")
    return dtype


def max_items(m: int, groups: int) -> int:
    """The grid's bound on work items: the g + 1 consecutive row ranges (the groups and the
    rows past their sum) meet the row tiles in at most tiles + g pairs, each of the g
    boundaries between ranges adding at most one."""
    return -(-m // BLOCK_M) + groups


def group_ends(group_sizes: jax.Array, m: int) -> jax.Array:
    """One past each group's last row, i32 [g]: cumulative sums clipped to [0, m] and made
    non-decreasing, so the groups always partition a prefix of [0, m)."""
    return jax.lax.cummax(jnp.clip(jnp.cumsum(group_sizes.astype(I32)), 0, m))


def group_offsets(group_sizes: jax.Array, m: int) -> jax.Array:
    """The i32 [g + 1] table of d_rhs's kernel: group i owns the rows [offsets[i],
    offsets[i + 1])."""
    return jnp.concatenate([jnp.zeros((1,), I32), group_ends(group_sizes, m)])


def work_items(group_sizes: jax.Array, m: int) -> jax.Array:
    """The i32 [max_items, 3] table of (group, lo, hi): item w computes rhs[group] for the
    rows [lo, hi) of row tile lo // BLOCK_M; group g (the pseudo-group of rows past the
    groups' sum) computes nothing, and items past the real count have lo = hi = 0.

    The ranges (`group_ends`) always partition [0, m), negative sizes included (jax leaves
    those unspecified)."""
    groups = group_sizes.shape[0]
    ends = jnp.concatenate([group_ends(group_sizes, m),
                            jnp.full((1,), m, I32)])  # the pseudo-group: [sum, m)
    starts = jnp.concatenate([jnp.zeros((1,), I32), ends[:-1]])
    tiles = jnp.where(ends > starts, (ends - 1) // BLOCK_M - starts // BLOCK_M + 1, 0)
    last_items = jnp.cumsum(tiles)  # one past each group's last item
    item = jnp.arange(max_items(m, groups), dtype=I32)
    group = jnp.minimum(jnp.searchsorted(last_items, item, side="right"), groups).astype(I32)
    tile = starts[group] // BLOCK_M + item - (last_items[group] - tiles[group])
    lo = jnp.maximum(starts[group], tile * BLOCK_M)
    hi = jnp.minimum(ends[group], tile * BLOCK_M + BLOCK_M)
    real = item < last_items[-1]
    return jnp.stack([group, jnp.where(real, lo, 0), jnp.where(real, hi, 0)], axis=1)


@dataclass(frozen=True)
class RhsOperand:
    """How the grouped kernel reads rhs: as given, [g, k, n] (the forward), or `transposed`,
    [g, n, k] read as rhs[i]^T (d_lhs = d_out rhs[i]^T); wgmma reads 16-bit B operands either
    way from shared memory, so the transpose is a view of the loaded tile, not a copy."""

    transposed: bool = False

    def dims(self, rhs: object) -> tuple[int, int, int]:
        """Groups, contraction and output columns of the product from rhs (or its spec)."""
        groups, rows, cols = rhs.shape
        return (groups, cols, rows) if self.transposed else (groups, rows, cols)

    def spec(self, group: sd.Index, col_tile: sd.Index) -> sd.BlockSpec:
        """The block of rhs[group] that step s of the contraction reads."""
        if self.transposed:
            return sd.BlockSpec((None, BLOCK_N, BLOCK_K), lambda s: (group, col_tile, s))
        return sd.BlockSpec((None, BLOCK_K, BLOCK_N), lambda s: (group, s, col_tile))

    def operand(self, block: sd.SharedRef) -> sd.SharedRef:
        """The wgmma B operand [BLOCK_K, BLOCK_N] of a loaded block."""
        return block.T if self.transposed else block


def _products(lhs_ref: sd.Ref, rhs_ref: sd.Ref, group: sd.Index, tile: sd.Index,
              col_tile: sd.Index, rhs: RhsOperand) -> sd.Array:
    """lhs's row tile `tile` times rhs[group]'s column tile, f32, pipelined over K; zeros
    (no K step) for the pseudo-group g."""
    groups, k, _ = rhs.dims(rhs_ref)
    k_steps = -(-k // BLOCK_K)
    rhs_group = sd.minimum(group, groups - 1)  # in bounds for the pseudo-group too
    return sd.emit_pipeline(
        lambda _, lhs_block, rhs_block, acc: sd.wgmma(acc, lhs_block, rhs.operand(rhs_block)),
        grid=(sd.minimum(groups - group, 1) * k_steps,),
        in_specs=[sd.BlockSpec((BLOCK_M, BLOCK_K), lambda s: (tile, s)),
                  rhs.spec(rhs_group, col_tile)],
        # no more stages than steps: the prologue's loads then stay inside K
        max_concurrent_steps=min(STAGES, k_steps),
        init_carry=sd.zeros((BLOCK_M, BLOCK_N), F32))(lhs_ref, rhs_ref)


def _store(out_ref: sd.Ref, out: sd.Array, lo: sd.Index, hi: sd.Index,
           col_tile: sd.Index) -> None:
    """Store the rows [lo, hi) of the output tile holding them: a tile wholly the item's by
    TMA (clipped at the arrays' edges), else with a masked register store that leaves the
    other rows to their own items and no column past n."""
    row, col = lo // BLOCK_M * BLOCK_M, col_tile * BLOCK_N
    window = out_ref.at[row:row + BLOCK_M, col:col + BLOCK_N]

    @sd.when(hi - lo == BLOCK_M)
    def _():
        with sd.scoped_smem(sd.SMEM((BLOCK_M, BLOCK_N), out.dtype)) as (staged,):
            staged[...] = out
            sd.async_store(staged, window)
            sd.async_store_wait()

    @sd.when(hi - lo < BLOCK_M)
    def _():
        rows = sd.iota((BLOCK_M, BLOCK_N), I32, dimension=0) + row
        cols = sd.iota((BLOCK_M, BLOCK_N), I32, dimension=1) + col
        sd.store(window, out, mask=(rows >= lo) & (rows < hi) & (cols < out_ref.shape[1]))


@functools.cache
def ragged_dot_kernel(out_dtype: jnp.dtype, rhs: RhsOperand = RhsOperand()) -> sd.Kernel:
    """The kernel for one output dtype and way of reading rhs: inputs lhs [m, k], rhs
    ([g, k, n], or [g, n, k] transposed) and the work items; one block per (work item,
    BLOCK_N columns)."""

    def grid(lhs: object, rhs_spec: object, items: object) -> tuple[int, int]:
        return items.shape[0], -(-rhs.dims(rhs_spec)[2] // BLOCK_N)

    def out_shape(lhs: object, rhs_spec: object, items: object) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((lhs.shape[0], rhs.dims(rhs_spec)[2]), out_dtype)

    @sd.kernel(grid=grid, out_shape=out_shape,
               name="ragged_dot_rhs_t" if rhs.transposed else "ragged_dot")
    def kernel(lhs_ref, rhs_ref, items_ref, out_ref):
        item, col_tile = sd.program_id(0), sd.program_id(1)
        group, lo, hi = (items_ref[item, field] for field in (GROUP, LO, HI))

        @sd.when(lo < hi)  # past the real items: nothing to do
        def _():
            acc = _products(lhs_ref, rhs_ref, group, lo // BLOCK_M, col_tile, rhs)
            out = acc if out_dtype == jnp.dtype(F32) else acc.astype(out_dtype)
            _store(out_ref, out, lo, hi, col_tile)

    return kernel


def _group_products(lhs_ref: sd.Ref, d_out_ref: sd.Ref, start: sd.Index, end: sd.Index,
                    row_tile: sd.Index, col_tile: sd.Index) -> sd.Array:
    """lhs[start:end, row tile]^T @ d_out[start:end, col tile], f32, pipelined over the
    ROWS-row windows that meet [start, end); the rows of a window outside it are zeroed in
    both shared-memory tiles before the wgmma reads them."""
    first = start // ROWS
    # Every window meets at least one of the rows, so there are no more windows than rows:
    # the minimum is the window count, 0 for an empty group.
    steps = sd.minimum(end - start, (end + ROWS - 1) // ROWS - first)

    def step(indices: tuple[sd.Index, ...], lhs_block: sd.SharedRef,
             d_out_block: sd.SharedRef, acc: sd.Array) -> sd.Array:
        base = (first + indices[0]) * ROWS

        @sd.when(sd.maximum(start - base, base + ROWS - end) > 0)  # a partial window
        def _() -> None:
            for block in (lhs_block, d_out_block):
                row = sd.iota(block.shape, I32, dimension=0) + base
                block[...] = sd.where((row >= start) & (row < end), block[...], 0.0)

        return sd.wgmma(acc, lhs_block.T, d_out_block)

    return sd.emit_pipeline(
        step, grid=(steps,),
        in_specs=[sd.BlockSpec((ROWS, BLOCK_M), lambda s: (first + s, row_tile)),
                  sd.BlockSpec((ROWS, BLOCK_N), lambda s: (first + s, col_tile))],
        max_concurrent_steps=STAGES,
        init_carry=sd.zeros((BLOCK_M, BLOCK_N), F32))(lhs_ref, d_out_ref)


@functools.cache
def ragged_dot_rhs_grad_kernel(out_dtype: jnp.dtype) -> sd.Kernel:
    """d_rhs [g, k, n] in out_dtype from lhs [m, k], d_out [m, n] and the group offsets
    [g + 1]: one block per (group, BLOCK_M rows of k, BLOCK_N columns of n), each storing
    its tile by TMA (clipped at k and n), zeros for an empty group."""

    def grid(lhs: object, d_out: object, offsets: object) -> tuple[int, int, int]:
        return (offsets.shape[0] - 1, -(-lhs.shape[1] // BLOCK_M),
                -(-d_out.shape[1] // BLOCK_N))

    def out_shape(lhs: object, d_out: object, offsets: object) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((offsets.shape[0] - 1, lhs.shape[1], d_out.shape[1]),
                                    out_dtype)

    @sd.kernel(grid=grid, out_shape=out_shape, name="ragged_dot_rhs_grad")
    def kernel(lhs_ref, d_out_ref, offsets_ref, d_rhs_ref):
        group, row_tile, col_tile = (sd.program_id(axis) for axis in range(3))
        start, end = offsets_ref[group], offsets_ref[group + 1]
        acc = _group_products(lhs_ref, d_out_ref, start, end, row_tile, col_tile)
        row, col = row_tile * BLOCK_M, col_tile * BLOCK_N
        with sd.scoped_smem(sd.SMEM((BLOCK_M, BLOCK_N), out_dtype)) as (staged,):
            staged[...] = acc if out_dtype == jnp.dtype(F32) else acc.astype(out_dtype)
            sd.async_store(staged, d_rhs_ref.at[group, row:row + BLOCK_M, col:col + BLOCK_N])
            sd.async_store_wait()

    return kernel


def ragged_dot(lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array, *,
               preferred_element_type: object = None) -> jax.Array:
    """jax.lax.ragged_dot: out[r] = lhs[r] @ rhs[i] for the rows r of group i (groups of
    group_sizes[i] consecutive rows from row 0), zeros for rows past sum(group_sizes);
    f32 accumulation, the result in preferred_element_type (default lhs's dtype).
    Differentiable in lhs and rhs (`jax.grad` runs smalti kernels; group_sizes, integers,
    get no gradient).

    lhs [m, k], rhs [g, k, n]: both bfloat16 or both float16, k and n multiples of 8, any
    m (0 too: no rows, as when no token reaches these experts); group_sizes [g],
    non-negative integers, read at run time."""
    lhs, rhs, group_sizes = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    dtype = _check(lhs, rhs, group_sizes, preferred_element_type)
    if lhs.shape[0] == 0:  # nothing to launch
        return jnp.zeros((0, rhs.shape[2]), dtype)
    return _differentiable(lhs, rhs, group_sizes, dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _differentiable(lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array,
                    dtype: jnp.dtype) -> jax.Array:
    return _differentiable_fwd(lhs, rhs, group_sizes, dtype)[0]


def _differentiable_fwd(lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array,
                        dtype: jnp.dtype) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    items = work_items(group_sizes, lhs.shape[0])
    return ragged_dot_kernel(dtype)(lhs, rhs, items), (lhs, rhs, group_sizes, items)


def _differentiable_bwd(dtype: jnp.dtype, residuals: tuple[jax.Array, ...],
                        d_out: jax.Array) -> tuple[jax.Array, jax.Array, None]:
    """d_lhs = ragged_dot(d_out, rhs^T) by the forward kernel reading rhs transposed (the
    same work items), d_rhs[i] = lhs[rows_i]^T d_out[rows_i] by the grouped-contraction
    kernel; d_out is rounded to the inputs' dtype for the tensor cores. group_sizes'
    cotangent is None (jax makes it float0 zeros, as for jax.lax.ragged_dot)."""
    lhs, rhs, group_sizes, items = residuals
    d_out = d_out.astype(lhs.dtype)
    d_lhs = ragged_dot_kernel(lhs.dtype, RhsOperand(transposed=True))(d_out, rhs, items)
    offsets = group_offsets(group_sizes, lhs.shape[0])
    return d_lhs, ragged_dot_rhs_grad_kernel(rhs.dtype)(lhs, d_out, offsets), None


_differentiable.defvjp(_differentiable_fwd, _differentiable_bwd)
