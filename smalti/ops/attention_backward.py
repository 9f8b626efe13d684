"""The backward of smalti.ops.dot_product_attention (FlashAttention-2 style), from the
forward's saved log-sum-exp: delta = rowsum(dO * O) in jax, then two smalti kernels that
recompute P = exp(scale * Q K^T - lse) tile by tile.

- dK/dV: one warpgroup per (64-row K/V block, query head, batch) holds its K and V tiles and
  streams the query head's Q and dO tiles through `sd.emit_pipeline`, working transposed
  (S^T = K Q^T) so that P^T and dS^T are wgmma A operands in registers. Grouped-query heads
  write per-query-head partials that jax sums over each K/V head's group.
- dQ: one warpgroup per (64-row Q block, query head, batch), like the forward, streams K and
  V tiles: dQ += dS K.

Nothing is padded: TMA zero-fills the tiles that hang over the end of Q, dO, K or V (such
rows contribute nothing: a zero dO row and the 0 read for its lse and delta make its P^T dO
and dS^T zero, and a zero key row's gradients are not stored), and the lse/delta loads and
the dQ/dK/dV stores of a tile's rows past its sequence's end are masked. Causal kernels take
a query no longer than the keys (the caller splits the rest off, as the forward does); the
dK/dV kernel walks the query tiles backwards so the diagonal tile is the pipeline's (masked)
last step, and each step loads the next tile's lse and delta: only the first tile's (the
query's last, loaded before the loop) need a mask, so the loop's loads are never predicated."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

import smalti.dsl as sd

BLOCK = 64  # rows of Q and of K/V per tile (one wgmma M block)
F32 = jnp.float32
LOG2_E = 1.4426950408889634
Grads = tuple[sd.Array, sd.Array]  # dK, dV accumulators


def _tiles(rows: int) -> int:
    return -(-rows // BLOCK)


def _tail(first: sd.Index, rows: int) -> sd.Array | None:
    """Which of the BLOCK rows from `first` lie before `rows` (a sequence's length); None
    where every tile is whole, so that accesses of whole tiles are not predicated."""
    return None if rows % BLOCK == 0 else sd.iota(BLOCK) < rows - first


def _load_rows(flat: sd.Ref, start: sd.Index, mask: sd.Array | None) -> sd.Array:
    """flat[start:start + BLOCK] (the flat lse or delta of one (batch, head)'s rows), 0 where
    `mask` is false (past the run's end: not the next head's rows, nor past the array's)."""
    view = flat.at[start:start + BLOCK]
    return sd.load(view) if mask is None else sd.load(view, mask=mask, other=0.0)


def _store_rows(view: sd.RefView, value: sd.Array, first: sd.Index, rows: int) -> None:
    """value stored into the BLOCK-row window `view` starting at row `first`, but for the
    rows from `rows` (the end of the array's dim) on."""
    mask = _tail(first, rows)
    sd.store(view, value, mask=None if mask is None else mask[:, None])


def _probabilities(s: sd.Array, lse: sd.Array, exp2_scale: float) -> sd.Array:
    """exp(scale * s - lse) as one exp2 (lse already broadcast against s, times log2 e)."""
    return sd.exp2(s * exp2_scale - lse)


@functools.cache
def _dkdv(scale: float, causal: bool) -> sd.Kernel:
    """Per-query-head f32 dK and dV [batch, kv_rows, heads, head_dim] from Q, dO
    [batch, q_len, heads, head_dim], K, V [batch, kv_len, kv_heads, head_dim] and the flat
    f32 lse and delta [batch * heads * q_len]. kv_rows is kv_len, or causal the keys up to
    the query's last tile's end (the later ones no query sees: `_launch` gives them 0)."""
    exp2_scale = scale * LOG2_E

    def kv_rows(q, k) -> int:
        return min(k.shape[1], _tiles(q.shape[1]) * BLOCK) if causal else k.shape[1]

    def grid(q, do, k, v, lse, delta):
        return _tiles(kv_rows(q, k)), q.shape[2], q.shape[0]

    def out_shape(q, do, k, v, lse, delta):
        batch, _, heads, head_dim = q.shape
        grads = jax.ShapeDtypeStruct((batch, kv_rows(q, k), heads, head_dim), F32)
        return grads, grads

    def smem(q, do, k, v, lse, delta):
        return [sd.Barriers(1), *(sd.SMEM((BLOCK, q.shape[3]), q.dtype),) * 2]

    @sd.kernel(grid=grid, out_shape=out_shape, smem=smem,
               name="dot_product_attention_causal_bwd_dkdv" if causal else
               "dot_product_attention_bwd_dkdv")
    def kernel(q_ref, do_ref, k_ref, v_ref, lse_ref, delta_ref, dk_ref, dv_ref, bar, k_smem,
               v_smem):
        _, q_len, heads, head_dim = q_ref.shape
        q_tiles, kv_heads = _tiles(q_len), k_ref.shape[2]
        kv_block, head, batch = sd.program_id(0), sd.program_id(1), sd.program_id(2)
        kv_head = head // (heads // kv_heads)
        rows = kv_block * BLOCK
        bar[0].arrive_expect_tx(k_smem.nbytes + v_smem.nbytes)
        sd.async_copy(k_ref.at[batch, rows:rows + BLOCK, kv_head, :], k_smem, bar[0])
        sd.async_copy(v_ref.at[batch, rows:rows + BLOCK, kv_head, :], v_smem, bar[0])
        bar[0].wait(0)

        def stats(tile: sd.Index, masked: bool) -> tuple[sd.Array, sd.Array]:
            """lse (times log2 e) and delta of query tile `tile`'s rows; `masked`: it may be
            the last, whose rows past the query's end read 0."""
            first = tile * BLOCK
            start = (batch * heads + head) * q_len + first
            mask = _tail(first, q_len) if masked else None
            return (_load_rows(lse_ref, start, mask) * LOG2_E,
                    _load_rows(delta_ref, start, mask))

        def fold(q_block: sd.Ref, do_block: sd.Ref, grads: Grads, lse: sd.Array,
                 delta: sd.Array, diagonal: bool) -> Grads:
            """Fold one query tile into (dK, dV)."""
            dk, dv = grads
            s_t = sd.wgmma(sd.zeros((BLOCK, BLOCK)), k_smem, q_block.T)
            p_t = _probabilities(s_t, lse[None, :], exp2_scale)
            if diagonal:  # the causal diagonal tile: query >= key
                visible = (sd.iota((BLOCK, BLOCK), dimension=1)
                           >= sd.iota((BLOCK, BLOCK), dimension=0))
                p_t = sd.where(visible, p_t, 0.0)
            dv = sd.wgmma(dv, p_t.astype(q_ref.dtype), do_block)
            dp_t = sd.wgmma(sd.zeros((BLOCK, BLOCK)), v_smem, do_block.T)
            ds_t = p_t * (dp_t - delta[None, :])
            dk = sd.wgmma(dk, ds_t.astype(q_ref.dtype), q_block)
            return dk, dv

        ragged = q_len % BLOCK != 0  # the query's last tile hangs over its end
        start = (sd.zeros((BLOCK, head_dim)), sd.zeros((BLOCK, head_dim)))
        if causal:
            # From the query's last tile down to the diagonal (the masked last step). Each
            # step loads the next tile's (whole) lse and delta into the carry, so only the
            # first tile's, loaded before the loop, are masked.
            def step(indices, q_block, do_block, carry):
                *grads, lse, delta = carry
                grads = fold(q_block, do_block, grads, lse, delta, diagonal=False)
                if q_tiles == 1:  # traced, never run: the last step is the only one
                    return *grads, lse, delta
                return *grads, *stats(q_tiles - 2 - indices[0], masked=False)

            def last_step(indices, q_block, do_block, carry):
                *grads, lse, delta = carry
                return *fold(q_block, do_block, grads, lse, delta, diagonal=True), lse, delta

            tile = sd.BlockSpec((None, BLOCK, None, head_dim),
                                lambda j: (batch, q_tiles - 1 - j, head, 0))
            dk, dv, _, _ = sd.emit_pipeline(
                step, grid=(q_tiles - kv_block,), in_specs=[tile, tile],
                init_carry=(*start, *stats(q_tiles - 1, masked=ragged)),
                last_step=last_step)(q_ref, do_ref)
        else:  # the last tile, when it hangs over the end, is the (masked) last step
            def step(indices, q_block, do_block, grads):
                return fold(q_block, do_block, grads, *stats(indices[0], masked=False),
                            diagonal=False)

            def last_step(indices, q_block, do_block, grads):
                return fold(q_block, do_block, grads, *stats(indices[0], masked=True),
                            diagonal=False)

            tile = sd.BlockSpec((None, BLOCK, None, head_dim), lambda j: (batch, j, head, 0))
            dk, dv = sd.emit_pipeline(
                step, grid=(q_tiles,), in_specs=[tile, tile], init_carry=start,
                last_step=last_step if ragged else None)(q_ref, do_ref)
        out_rows = dk_ref.shape[1]
        _store_rows(dk_ref.at[batch, rows:rows + BLOCK, head, :], dk * scale, rows, out_rows)
        _store_rows(dv_ref.at[batch, rows:rows + BLOCK, head, :], dv, rows, out_rows)

    return kernel


@functools.cache
def _dq(scale: float, causal: bool, kv_len: int) -> sd.Kernel:
    """f32 dQ [batch, q_len, heads, head_dim] from Q, dO, K, V and the flat lse and delta;
    the last K/V tile's keys from kv_len (K's length) on are masked (their P is 0)."""
    exp2_scale = scale * LOG2_E
    tail = kv_len % BLOCK

    def grid(q, do, k, v, lse, delta):
        return _tiles(q.shape[1]), q.shape[2], q.shape[0]

    def out_shape(q, do, k, v, lse, delta):
        return jax.ShapeDtypeStruct(q.shape, F32)

    def smem(q, do, k, v, lse, delta):
        return [sd.Barriers(1), *(sd.SMEM((BLOCK, q.shape[3]), q.dtype),) * 2]

    @sd.kernel(grid=grid, out_shape=out_shape, smem=smem,
               name="dot_product_attention_causal_bwd_dq" if causal else
               "dot_product_attention_bwd_dq")
    def kernel(q_ref, do_ref, k_ref, v_ref, lse_ref, delta_ref, dq_ref, bar, q_smem, do_smem):
        _, q_len, heads, head_dim = q_ref.shape
        kv_tiles, kv_heads = _tiles(k_ref.shape[1]), k_ref.shape[2]
        q_block, head, batch = sd.program_id(0), sd.program_id(1), sd.program_id(2)
        kv_head = head // (heads // kv_heads)
        rows = q_block * BLOCK
        bar[0].arrive_expect_tx(q_smem.nbytes + do_smem.nbytes)
        sd.async_copy(q_ref.at[batch, rows:rows + BLOCK, head, :], q_smem, bar[0])
        sd.async_copy(do_ref.at[batch, rows:rows + BLOCK, head, :], do_smem, bar[0])
        bar[0].wait(0)
        start, mask = (batch * heads + head) * q_len + rows, _tail(rows, q_len)
        lse = _load_rows(lse_ref, start, mask) * LOG2_E
        delta = _load_rows(delta_ref, start, mask)

        def fold(k_block: sd.Ref, v_block: sd.Ref, dq: sd.Array, masked: bool) -> sd.Array:
            """Fold one K/V tile into dQ."""
            s = sd.wgmma(sd.zeros((BLOCK, BLOCK)), q_smem, k_block.T)
            p = _probabilities(s, lse[:, None], exp2_scale)
            if masked:
                key = sd.iota((BLOCK, BLOCK), dimension=1)
                visible = key <= sd.iota((BLOCK, BLOCK), dimension=0) if causal \
                    else key < tail
                p = sd.where(visible, p, 0.0)
            dp = sd.wgmma(sd.zeros((BLOCK, BLOCK)), do_smem, v_block.T)
            ds = p * (dp - delta[:, None])
            return sd.wgmma(dq, ds.astype(q_ref.dtype), k_block)

        def step(_, k_block, v_block, dq):
            return fold(k_block, v_block, dq, masked=False)

        def last_step(_, k_block, v_block, dq):
            return fold(k_block, v_block, dq, masked=True)

        tile = sd.BlockSpec((None, BLOCK, None, head_dim), lambda j: (batch, j, kv_head, 0))
        dq = sd.emit_pipeline(
            step, grid=(q_block + 1 if causal else kv_tiles,), in_specs=[tile, tile],
            init_carry=sd.zeros((BLOCK, head_dim)),
            last_step=last_step if causal or tail else None)(k_ref, v_ref)
        _store_rows(dq_ref.at[batch, rows:rows + BLOCK, head, :], dq * scale, rows, q_len)

    return kernel


def _launch(query: jax.Array, key: jax.Array, value: jax.Array, d_out: jax.Array,
            lse: jax.Array, delta: jax.Array, scale: float, causal: bool
            ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """f32 dQ and per-query-head dK, dV ([batch, kv_seq, heads, head_dim]) of one launch's
    query rows (lse, delta [batch, heads, q_seq]). Causal: q_seq <= kv_seq, and the keys
    past the query's last tile get zeros (no query sees them; the kernel skips them)."""
    kv_len = key.shape[1]
    flat_lse, flat_delta = lse.reshape(-1), delta.reshape(-1)
    dq = _dq(scale, causal, kv_len)(query, d_out, key, value, flat_lse, flat_delta)
    dk, dv = _dkdv(scale, causal)(query, d_out, key, value, flat_lse, flat_delta)
    widths = ((0, 0), (0, kv_len - dk.shape[1]), (0, 0), (0, 0))
    return dq, jnp.pad(dk, widths), jnp.pad(dv, widths)


def attention_backward(query: jax.Array, key: jax.Array, value: jax.Array, out: jax.Array,
                       lse: jax.Array, d_out: jax.Array, d_lse: jax.Array, scale: float,
                       causal: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """dQ, dK, dV (in the inputs' dtype) of dot_product_attention_with_lse for cotangents
    d_out (of O) and d_lse (of the lse: it adds P * d_lse to dS, so it folds into delta)."""
    delta = jnp.einsum("bqhd,bqhd->bhq", d_out.astype(F32), out.astype(F32)) - d_lse
    kv_len = key.shape[1]
    if not causal or query.shape[1] <= kv_len:
        dq, dk, dv = _launch(query, key, value, d_out, lse, delta, scale, causal)
    else:  # as the forward: query rows from kv_len on see every key
        parts = [_launch(query[:, rows], key, value, d_out[:, rows], lse[:, :, rows],
                         delta[:, :, rows], scale, part_causal)
                 for rows, part_causal in ((slice(None, kv_len), True),
                                           (slice(kv_len, None), False))]
        dq = jnp.concatenate([part[0] for part in parts], axis=1)
        dk, dv = (parts[0][i] + parts[1][i] for i in (1, 2))
    batch, _, heads, head_dim = query.shape
    kv_heads = key.shape[2]
    group = (batch, kv_len, kv_heads, heads // kv_heads, head_dim)  # query heads per K/V head
    dk, dv = (x.reshape(group).sum(axis=3) for x in (dk, dv))
    return dq.astype(query.dtype), dk.astype(key.dtype), dv.astype(value.dtype)
