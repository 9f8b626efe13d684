"""Paged attention for decoding, in the layout of Pallas's TPU paged attention
(jax.experimental.pallas.ops.tpu.paged_attention): each sequence's keys and values live in
fixed-size pages of a shared pool, found through a page table the kernel reads at run time.

One warpgroup per (64-query-row block of a K/V head's group, K/V head, sequence[, split]).
The group's G = heads / kv_heads query rows (one decoding step: one row per query head) are
the rows of one wgmma M block: q arrives as [batch, kv_heads, G, head_dim] (a free reshape)
and its TMA box of 64 rows hangs over G, zero-filled; the output's box is clipped to G when
stored, so no array is padded or copied. Keys and values stream in blocks of 64 tokens
through a ring of STAGES shared-memory stages: a block is gathered page by page, one TMA
copy per page (or per 64-row piece of a longer page) into consecutive rows of the stage,
the page numbers read from the page table (`table_ref[b, j]`, scalar loads) just before
the copies; all of a block's copies complete one barrier. A stage is declared twice in an
`sd.Union`: as the pages TMA writes, (chunk, 64) each, and as the (64, 64) tile wgmma
reads; both are rows of 128 bytes in 128-byte swizzled tiles, which put a row at the same
bytes whatever the tile's height, so the pages land where the tile reads them. head_dim 128
is two 64-column halves (two K tiles accumulate into one score block, two O accumulators),
so every tile keeps 128-byte rows. The online softmax is smalti/ops/attention.py's, in f32.

Table entries past a sequence's last page are never read: the copies of a last block that
reach past the length re-read the last page (the entry index is clamped); keys at or past
the length get -inf scores and V's rows there are zeroed in shared memory (the pages' rows
past the length may hold anything, NaN included). A length of 0 (or less) gives zeros; a
length past pages_per_sequence * page_size is clamped there.

Few (sequence, K/V head) pairs with long tables leave most SMs idle, so the sequence is
split (flash decoding, `splits_for`): each split folds a share of the blocks into an f32 O
and log-sum-exp, which jax merges (`_combine`)."""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import jax
import jax.numpy as jnp

import smalti.dsl as sd

OP = "smalti.ops.paged_attention"
BLOCK_Q = 64  # query rows per warpgroup (one wgmma M block)
BLOCK_KV = 64  # tokens of K and V per ring stage
COLUMNS = 64  # head_dim columns per shared-memory tile: 128-byte rows of 16-bit elements
STAGES = 3  # K/V ring depth: two blocks in flight while one is folded
HEAD_DIMS = (64, 128)
DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
LOG2_E = 1.4426950408889634
Q_BARRIER = STAGES  # bars[0:STAGES]: the ring's stages; bars[STAGES]: the Q tile
SM_COUNT = 132  # an H100 SXM: a split launch aims at about one block per SM
MIN_SPLIT_BLOCKS = 4  # K/V blocks (256 tokens) a split should have at least


@dataclass(frozen=True)
class Geometry:
    """How one launch cuts its work: `row_blocks` 64-row blocks per query group, `parts`
    64-column halves of head_dim, page copies of `chunk` rows (`copies` per K/V block)."""

    row_blocks: int
    parts: int
    chunk: int
    copies: int

    @staticmethod
    def of(q: object, k_pages: object) -> Geometry:
        """For q [batch, kv_heads, group, head_dim] and k_pages."""
        chunk = min(k_pages.shape[2], BLOCK_KV)
        return Geometry(-(-q.shape[2] // BLOCK_Q), q.shape[3] // COLUMNS, chunk,
                        BLOCK_KV // chunk)


def splits_for(batch: int, kv_heads: int, group: int, max_tokens: int) -> int:
    """Sequence splits per (sequence, K/V head): enough blocks for about one wave of SMs,
    each split at least MIN_SPLIT_BLOCKS K/V blocks of the longest possible sequence."""
    programs = batch * kv_heads * -(-group // BLOCK_Q)
    most = -(-max_tokens // BLOCK_KV) // MIN_SPLIT_BLOCKS
    return max(1, min(most, -(-SM_COUNT // programs)))


@functools.cache
def _kernel(scale: float, splits: int) -> sd.Kernel:
    """The decoding kernel for one scale (compiled into it) and number of sequence splits.
    One split writes O in q's dtype; more write each split's normalised O and log-sum-exp in
    f32 [batch, kv_heads, splits, group(, head_dim)], which `_combine` merges."""
    exp2_scale = scale * LOG2_E  # exp(x * scale) = exp2(x * exp2_scale)

    def grid(q: object, k_pages: object, *_: object) -> tuple[int, int, int]:
        batch, kv_heads = q.shape[:2]
        return kv_heads * Geometry.of(q, k_pages).row_blocks, batch, splits

    def out_shape(q: object, k_pages: object, *_: object) -> object:
        if splits == 1:
            return jax.ShapeDtypeStruct(q.shape, q.dtype)
        batch, kv_heads, group, head_dim = q.shape
        rows = Geometry.of(q, k_pages).row_blocks * BLOCK_Q
        return (jax.ShapeDtypeStruct((batch, kv_heads, splits, group, head_dim), jnp.float32),
                jax.ShapeDtypeStruct((batch, kv_heads, splits, rows), jnp.float32))

    def smem(q: object, k_pages: object, *_: object) -> list[object]:
        """Barriers; the Q halves (reused for O); K and V stages, each as pages and as tiles
        (with splits, K's also as the f32 O halves, once the ring is drained)."""
        shape = Geometry.of(q, k_pages)
        tiles = STAGES * shape.parts
        ring = (sd.SMEM((tiles * shape.copies, shape.chunk, COLUMNS), q.dtype),
                sd.SMEM((tiles, BLOCK_KV, COLUMNS), q.dtype))
        partial = (sd.SMEM((shape.parts, BLOCK_Q, COLUMNS), jnp.float32),) * (splits > 1)
        return [sd.Barriers(STAGES + 1), sd.SMEM((shape.parts, BLOCK_Q, COLUMNS), q.dtype),
                sd.Union(*ring, *partial), sd.Union(*ring)]

    def attend(q_ref: sd.Ref, k_ref: sd.Ref, v_ref: sd.Ref, lengths_ref: sd.Ref,
               table_ref: sd.Ref, o_ref: sd.Ref, lse_ref: sd.Ref | None,
               bars: sd.BarrierArray, q_smem: sd.StagedRef, k_pages: sd.StagedRef,
               k_tiles: sd.StagedRef, o_smem: sd.StagedRef | None, v_pages: sd.StagedRef,
               v_tiles: sd.StagedRef) -> None:
        """The body of both kernels (lse_ref and o_smem: with splits only)."""
        page_size, pages_per_sequence = k_ref.shape[2], table_ref.shape[1]
        shape = Geometry.of(q_ref, k_ref)
        parts, chunk, copies = shape.parts, shape.chunk, shape.copies
        head = sd.program_id(0) // shape.row_blocks
        rows = sd.program_id(0) % shape.row_blocks * BLOCK_Q
        batch, split = sd.program_id(1), sd.program_id(2)
        length = sd.minimum(sd.maximum(lengths_ref[batch], 0), pages_per_sequence * page_size)
        blocks = (length + BLOCK_KV - 1) // BLOCK_KV
        last_entry = (length - 1) // page_size  # read only when blocks > 0
        per_split = (blocks + splits - 1) // splits
        first = split * per_split  # this split's K/V blocks: [first, first + count)
        count = sd.maximum(sd.minimum(per_split, blocks - first), 0)
        stage_bytes = 2 * parts * k_tiles[0].nbytes  # K and V halves of one block

        bars[Q_BARRIER].arrive_expect_tx(q_smem[0].nbytes * parts)
        for part in range(parts):
            sd.async_copy(q_ref.at[batch, head, rows:rows + BLOCK_Q,
                                   part * COLUMNS:(part + 1) * COLUMNS],
                          q_smem[part], bars[Q_BARRIER])

        def fetch(step: sd.Index | int) -> None:
            """Gather the split's K/V block `step` into its stage, page by page."""
            slot, block = step % STAGES, first + step
            if copies > 1:  # pages of `chunk` rows: `copies` whole pages per block
                starts = [(block * copies + copy, 0) for copy in range(copies)]
            else:  # pages of one or more blocks: 64 rows of one page
                per_page = page_size // BLOCK_KV
                starts = [(block // per_page, block % per_page * BLOCK_KV)]
            # Every table read first, then the copies: the reads' latencies overlap.
            pages = [(table_ref[batch, sd.minimum(entry, last_entry)], row)
                     for entry, row in starts]
            bars[slot].arrive_expect_tx(stage_bytes)
            for copy, (page, row) in enumerate(pages):
                for part in range(parts):
                    stage = (slot * parts + part) * copies + copy
                    columns = slice(part * COLUMNS, (part + 1) * COLUMNS)
                    sd.async_copy(k_ref.at[head, page, row:row + chunk, columns],
                                  k_pages[stage], bars[slot])
                    sd.async_copy(v_ref.at[head, page, row:row + chunk, columns],
                                  v_pages[stage], bars[slot])

        for step in range(STAGES - 1):
            @sd.when(step < count)
            def _(step: int = step) -> None:
                fetch(step)

        bars[Q_BARRIER].wait(0)

        def fold(step: sd.Index, state: tuple[sd.Array, ...]) -> tuple[sd.Array, ...]:
            """Fold the split's K/V block `step` into (O halves..., row max, row sum)."""
            *o, row_max, row_sum = state
            slot = step % STAGES
            bars[slot].wait(step // STAGES)
            valid = length - (first + step) * BLOCK_KV  # keys of the block before the length

            @sd.when(valid < BLOCK_KV)
            def _() -> None:
                # Rows past the length hold whatever the last page holds there (NaN too):
                # zero them, as P's zeros would not cancel a NaN of V.
                row = sd.iota((BLOCK_KV, COLUMNS), dimension=0)
                for part in range(parts):
                    tile = v_tiles[slot * parts + part]
                    tile[...] = sd.where(row < valid, tile[...], 0.0)

            s = sd.zeros((BLOCK_Q, BLOCK_KV))
            for part in range(parts):
                s = sd.wgmma(s, q_smem[part], k_tiles[slot * parts + part].T)
            key = sd.iota((BLOCK_Q, BLOCK_KV), dimension=1)
            s = sd.where(key < valid, s, -math.inf)
            new_max = sd.maximum(row_max, s.max(axis=1))
            rescale = sd.exp2((row_max - new_max) * exp2_scale)
            p = sd.exp2((s - new_max[:, None]) * exp2_scale)
            row_sum = row_sum * rescale + p.sum(axis=1)
            p = p.astype(q_ref.dtype)
            o = [sd.wgmma(o[part] * rescale[:, None], p, v_tiles[slot * parts + part])
                 for part in range(parts)]

            @sd.when(step + STAGES - 1 < count)
            def _() -> None:
                fetch(step + STAGES - 1)  # into the stage the previous step read

            return (*o, new_max, row_sum)

        start = (*(sd.zeros((BLOCK_Q, COLUMNS)) for _ in range(parts)),
                 sd.full((BLOCK_Q,), -math.inf), sd.zeros((BLOCK_Q,)))
        *o, row_max, row_sum = sd.fori(0, count, fold, start)
        # A folded block holds a valid key for every row, so row_sum >= 1; with none (length
        # 0, or a split past the end) O is zero and so is the result.
        inverse = 1.0 / sd.maximum(row_sum, 1.0)
        out_smem = q_smem if o_smem is None else o_smem
        window = (batch, head, split) if splits > 1 else (batch, head)
        for part in range(parts):
            out_smem[part][...] = (o[part] * inverse[:, None]).astype(out_smem.dtype)
            sd.async_store(out_smem[part], o_ref.at[(*window, slice(rows, rows + BLOCK_Q),
                                                     slice(part * COLUMNS,
                                                           (part + 1) * COLUMNS))])
        if lse_ref is not None:  # -inf for no keys: log(0) = -inf, -inf * scale - inf
            lse_ref[batch, head, split, rows:rows + BLOCK_Q] = row_max * scale + sd.log(row_sum)
        sd.async_store_wait()

    if splits == 1:
        @sd.kernel(grid=grid, out_shape=out_shape, smem=smem, name="paged_attention")
        def whole(q_ref, k_ref, v_ref, lengths_ref, table_ref, o_ref, bars, q_smem, k_pages,
                  k_tiles, v_pages, v_tiles):
            attend(q_ref, k_ref, v_ref, lengths_ref, table_ref, o_ref, None, bars, q_smem,
                   k_pages, k_tiles, None, v_pages, v_tiles)

        return whole

    @sd.kernel(grid=grid, out_shape=out_shape, smem=smem, name="paged_attention_split")
    def partial(q_ref, k_ref, v_ref, lengths_ref, table_ref, o_ref, lse_ref, bars, q_smem,
                k_pages, k_tiles, o_smem, v_pages, v_tiles):
        attend(q_ref, k_ref, v_ref, lengths_ref, table_ref, o_ref, lse_ref, bars, q_smem,
               k_pages, k_tiles, o_smem, v_pages, v_tiles)

    return partial


def _combine(out: jax.Array, lse: jax.Array, group: int) -> jax.Array:
    """Merge the splits' normalised outputs [batch, kv_heads, splits, group, head_dim] by
    their log-sum-exps, f32; zeros where no split saw a key."""
    lse = lse[..., :group]
    top = jnp.max(lse, axis=2, keepdims=True)
    weights = jnp.exp(lse - jnp.where(jnp.isfinite(top), top, 0.0))  # 0 for empty splits
    total = jnp.sum(weights, axis=2)
    merged = jnp.einsum("bhsg,bhsgd->bhgd", weights, out)
    return merged / jnp.where(total > 0, total, 1.0)[..., None]


def _shape(array: object) -> tuple[int, ...]:
    return tuple(jnp.shape(array))


def _dtype(array: object) -> jnp.dtype:
    return jnp.dtype(jnp.result_type(array))


def _check(q: object, k_pages: object, v_pages: object, lengths: object, page_indices: object,
           scale: object) -> float:
    """ValueErrors naming the op, the argument and the constraint; the scale to use."""
    for name, array, rank, layout in (
            ("q", q, 3, "[batch, heads, head_dim]"),
            ("k_pages", k_pages, 4, "[kv_heads, total_pages, page_size, head_dim]"),
            ("v_pages", v_pages, 4, "[kv_heads, total_pages, page_size, head_dim]"),
            ("lengths", lengths, 1, "[batch]"),
            ("page_indices", page_indices, 2, "[batch, pages_per_sequence]")):
        shape = _shape(array)
        if len(shape) != rank or math.prod(shape) == 0:
            raise ValueError(f"{OP}: {name} must be a non-empty {layout} array, got shape "
                             f"{shape}")
    if _dtype(q) not in DTYPES:
        raise ValueError(f"{OP}: q must be bfloat16 or float16, got {_dtype(q)}")
    for name, array in (("k_pages", k_pages), ("v_pages", v_pages)):
        if _dtype(array) != _dtype(q):
            raise ValueError(f"{OP}: {name} must have q's dtype {_dtype(q)}, got {_dtype(array)}")
    for name, array in (("lengths", lengths), ("page_indices", page_indices)):
        if _dtype(array) != jnp.dtype(jnp.int32):
            raise ValueError(f"{OP}: {name} must be int32, got {_dtype(array)}")
    (batch, heads, head_dim), k_shape = _shape(q), _shape(k_pages)
    if _shape(v_pages) != k_shape:
        raise ValueError(f"{OP}: k_pages and v_pages must have one shape, got {k_shape} and "
                         f"{_shape(v_pages)}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"{OP}: head_dim (the last axis of q) must be 64 or 128, got shape "
                         f"{_shape(q)}")
    if k_shape[3] != head_dim:
        raise ValueError(f"{OP}: k_pages must have q's head_dim ({head_dim}), got shape "
                         f"{k_shape}")
    if heads % k_shape[0]:
        raise ValueError(f"{OP}: k_pages' kv_heads ({k_shape[0]}) must divide q's heads "
                         f"({heads})")
    page_size = k_shape[2]
    if page_size % 8 or (BLOCK_KV % page_size and page_size % BLOCK_KV):
        raise ValueError(f"{OP}: page_size (axis 2 of k_pages) must be 8, 16, 32 or a multiple "
                         f"of 64, got {page_size}")
    for name, array in (("lengths", lengths), ("page_indices", page_indices)):
        if _shape(array)[0] != batch:
            raise ValueError(f"{OP}: {name} must have q's batch ({batch}) as its first axis, "
                             f"got shape {_shape(array)}")
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if (not isinstance(scale, numbers.Real) or isinstance(scale, bool)
            or not 0 < scale < math.inf):
        raise ValueError(f"{OP}: scale must be a positive finite Python number (it is "
                         f"compiled into the kernel), got {scale!r}")
    return float(scale)


def paged_attention(q: jax.Array, k_pages: jax.Array, v_pages: jax.Array, lengths: jax.Array,
                    page_indices: jax.Array, *, scale: float | None = None) -> jax.Array:
    """softmax(scale * q K^T) V for one decoding step, K and V read through a page table.

    q [batch, heads, head_dim]; k_pages and v_pages [kv_heads, total_pages, page_size,
    head_dim], kv_heads dividing heads (query head h reads K/V head h // (heads // kv_heads));
    lengths i32[batch], the tokens of each sequence; page_indices i32[batch,
    pages_per_sequence]: token t of sequence b is row t % page_size of page
    page_indices[b, t // page_size]. Entries past a sequence's last page are never read.
    bf16 or f16, head_dim 64 or 128, page_size 8, 16, 32 or a multiple of 64; `scale`
    defaults to 1 / sqrt(head_dim). Softmax math is f32; the result [batch, heads, head_dim]
    is in q's dtype, zeros for a sequence of length 0."""
    q, k_pages, v_pages, lengths, page_indices = (
        jnp.asarray(x) for x in (q, k_pages, v_pages, lengths, page_indices))
    scale = _check(q, k_pages, v_pages, lengths, page_indices, scale)
    batch, heads, head_dim = _shape(q)
    kv_heads = _shape(k_pages)[0]
    group = heads // kv_heads
    grouped = jnp.reshape(q, (batch, kv_heads, group, head_dim))
    max_tokens = _shape(page_indices)[1] * _shape(k_pages)[2]
    splits = splits_for(batch, kv_heads, group, max_tokens)
    out = _kernel(scale, splits)(grouped, k_pages, v_pages, lengths, page_indices)
    if splits > 1:
        out = _combine(*out, group).astype(_dtype(q))
    return jnp.reshape(out, (batch, heads, head_dim))
