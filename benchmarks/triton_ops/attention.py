"""Triton peers of smalti.ops.dot_product_attention's kernels (forward; backward dK/dV and
dQ) and of smalti.ops.paged_attention, in the style of Triton's fused-attention tutorial but
with smalti's blocking and algorithm, in jax's [batch, seq, heads, head_dim] layout (grouped
K/V heads): one program per (64-row block, query head, batch); unmasked tiles in a loop,
then (causal) the masked diagonal tile; exp2 with the scale folded in; f32 softmax state;
the forward writes each row's log-sum-exp, from which the backward recomputes P."""

from __future__ import annotations

import triton
import triton.language as tl

LOG2_E: tl.constexpr = tl.constexpr(1.4426950408889634)


@triton.jit
def _rows(ptr, batch, rows, head, SEQ: tl.constexpr, HEADS: tl.constexpr, D: tl.constexpr):
    """Pointers to rows `rows` of head `head` of a [batch, SEQ, HEADS, D] array."""
    return ptr + ((batch * SEQ + rows[:, None]) * HEADS + head) * D + tl.arange(0, D)[None, :]


@triton.jit
def _forward_fold(q, k_ptr, v_ptr, batch, kv_head, start, q_rows, acc, row_max, row_sum,
                  EXP2_SCALE: tl.constexpr, SEQ: tl.constexpr, KV_HEADS: tl.constexpr,
                  D: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    """Fold the K/V tile at `start` into (O, row max, row sum)."""
    keys = start + tl.arange(0, BLOCK)
    k = tl.load(_rows(k_ptr, batch, keys, kv_head, SEQ, KV_HEADS, D))
    v = tl.load(_rows(v_ptr, batch, keys, kv_head, SEQ, KV_HEADS, D))
    s = tl.dot(q, tl.trans(k))
    if MASKED:  # the causal diagonal: key <= query
        s = tl.where(keys[None, :] <= q_rows[:, None], s, float("-inf"))
    new_max = tl.maximum(row_max, tl.max(s, axis=1))
    rescale = tl.exp2((row_max - new_max) * EXP2_SCALE)
    p = tl.exp2((s - new_max[:, None]) * EXP2_SCALE)
    row_sum = row_sum * rescale + tl.sum(p, axis=1)
    acc = tl.dot(p.to(q.dtype), v, acc * rescale[:, None])
    return acc, new_max, row_sum


@triton.jit
def attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, SEQ: tl.constexpr, HEADS: tl.constexpr,
                  KV_HEADS: tl.constexpr, D: tl.constexpr, SCALE: tl.constexpr,
                  CAUSAL: tl.constexpr, BLOCK: tl.constexpr):
    q_block, head, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    kv_head = head // (HEADS // KV_HEADS)
    q_rows = q_block * BLOCK + tl.arange(0, BLOCK)
    q = tl.load(_rows(q_ptr, batch, q_rows, head, SEQ, HEADS, D))
    acc = tl.zeros((BLOCK, D), tl.float32)
    row_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    row_sum = tl.zeros((BLOCK,), tl.float32)
    exp2_scale: tl.constexpr = SCALE * LOG2_E
    for start in range(0, q_block * BLOCK if CAUSAL else SEQ, BLOCK):
        acc, row_max, row_sum = _forward_fold(q, k_ptr, v_ptr, batch, kv_head, start, q_rows,
                                              acc, row_max, row_sum, exp2_scale, SEQ,
                                              KV_HEADS, D, BLOCK, False)
    if CAUSAL:
        acc, row_max, row_sum = _forward_fold(q, k_ptr, v_ptr, batch, kv_head, q_block * BLOCK,
                                              q_rows, acc, row_max, row_sum, exp2_scale, SEQ,
                                              KV_HEADS, D, BLOCK, True)
    tl.store(_rows(o_ptr, batch, q_rows, head, SEQ, HEADS, D),
             (acc / row_sum[:, None]).to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + (batch * HEADS + head) * SEQ + q_rows, row_max * SCALE + tl.log(row_sum))


@triton.jit
def _dkdv_fold(k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, batch, head, start, kv_rows, dk, dv,
               EXP2_SCALE: tl.constexpr, SEQ: tl.constexpr, HEADS: tl.constexpr,
               D: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    """Fold the query tile at `start` into (dK, dV), transposed: S^T = K Q^T."""
    q_rows = start + tl.arange(0, BLOCK)
    q = tl.load(_rows(q_ptr, batch, q_rows, head, SEQ, HEADS, D))
    do = tl.load(_rows(do_ptr, batch, q_rows, head, SEQ, HEADS, D))
    flat = (batch * HEADS + head) * SEQ + q_rows
    lse = tl.load(lse_ptr + flat) * LOG2_E
    delta = tl.load(delta_ptr + flat)
    p_t = tl.exp2(tl.dot(k, tl.trans(q)) * EXP2_SCALE - lse[None, :])
    if MASKED:  # the causal diagonal: query >= key
        p_t = tl.where(q_rows[None, :] >= kv_rows[:, None], p_t, 0.0)
    dv = tl.dot(p_t.to(q.dtype), do, dv)
    ds_t = p_t * (tl.dot(v, tl.trans(do)) - delta[None, :])
    dk = tl.dot(ds_t.to(q.dtype), q, dk)
    return dk, dv


@triton.jit
def attention_bwd_dkdv(q_ptr, do_ptr, k_ptr, v_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                       SEQ: tl.constexpr, HEADS: tl.constexpr, KV_HEADS: tl.constexpr,
                       D: tl.constexpr, SCALE: tl.constexpr, CAUSAL: tl.constexpr,
                       BLOCK: tl.constexpr):
    """Per-query-head f32 dK and dV [batch, SEQ, HEADS, D]."""
    kv_block, head, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    kv_head = head // (HEADS // KV_HEADS)
    kv_rows = kv_block * BLOCK + tl.arange(0, BLOCK)
    k = tl.load(_rows(k_ptr, batch, kv_rows, kv_head, SEQ, KV_HEADS, D))
    v = tl.load(_rows(v_ptr, batch, kv_rows, kv_head, SEQ, KV_HEADS, D))
    dk = tl.zeros((BLOCK, D), tl.float32)
    dv = tl.zeros((BLOCK, D), tl.float32)
    exp2_scale: tl.constexpr = SCALE * LOG2_E
    for start in range((kv_block + 1) * BLOCK if CAUSAL else 0, SEQ, BLOCK):
        dk, dv = _dkdv_fold(k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, batch, head, start,
                            kv_rows, dk, dv, exp2_scale, SEQ, HEADS, D, BLOCK, False)
    if CAUSAL:
        dk, dv = _dkdv_fold(k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, batch, head,
                            kv_block * BLOCK, kv_rows, dk, dv, exp2_scale, SEQ, HEADS, D,
                            BLOCK, True)
    tl.store(_rows(dk_ptr, batch, kv_rows, head, SEQ, HEADS, D), dk * SCALE)
    tl.store(_rows(dv_ptr, batch, kv_rows, head, SEQ, HEADS, D), dv)


@triton.jit
def _dq_fold(q, do, lse, delta, k_ptr, v_ptr, batch, kv_head, start, q_rows, dq,
             EXP2_SCALE: tl.constexpr, SEQ: tl.constexpr, KV_HEADS: tl.constexpr,
             D: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    """Fold the K/V tile at `start` into dQ."""
    keys = start + tl.arange(0, BLOCK)
    k = tl.load(_rows(k_ptr, batch, keys, kv_head, SEQ, KV_HEADS, D))
    v = tl.load(_rows(v_ptr, batch, keys, kv_head, SEQ, KV_HEADS, D))
    p = tl.exp2(tl.dot(q, tl.trans(k)) * EXP2_SCALE - lse[:, None])
    if MASKED:  # the causal diagonal: key <= query
        p = tl.where(keys[None, :] <= q_rows[:, None], p, 0.0)
    ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
    return tl.dot(ds.to(q.dtype), k, dq)


@triton.jit
def attention_bwd_dq(q_ptr, do_ptr, k_ptr, v_ptr, lse_ptr, delta_ptr, dq_ptr,
                     SEQ: tl.constexpr, HEADS: tl.constexpr, KV_HEADS: tl.constexpr,
                     D: tl.constexpr, SCALE: tl.constexpr, CAUSAL: tl.constexpr,
                     BLOCK: tl.constexpr):
    """f32 dQ [batch, SEQ, HEADS, D]."""
    q_block, head, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    kv_head = head // (HEADS // KV_HEADS)
    q_rows = q_block * BLOCK + tl.arange(0, BLOCK)
    q = tl.load(_rows(q_ptr, batch, q_rows, head, SEQ, HEADS, D))
    do = tl.load(_rows(do_ptr, batch, q_rows, head, SEQ, HEADS, D))
    flat = (batch * HEADS + head) * SEQ + q_rows
    lse = tl.load(lse_ptr + flat) * LOG2_E
    delta = tl.load(delta_ptr + flat)
    dq = tl.zeros((BLOCK, D), tl.float32)
    exp2_scale: tl.constexpr = SCALE * LOG2_E
    for start in range(0, q_block * BLOCK if CAUSAL else SEQ, BLOCK):
        dq = _dq_fold(q, do, lse, delta, k_ptr, v_ptr, batch, kv_head, start, q_rows, dq,
                      exp2_scale, SEQ, KV_HEADS, D, BLOCK, False)
    if CAUSAL:
        dq = _dq_fold(q, do, lse, delta, k_ptr, v_ptr, batch, kv_head, q_block * BLOCK, q_rows,
                      dq, exp2_scale, SEQ, KV_HEADS, D, BLOCK, True)
    tl.store(_rows(dq_ptr, batch, q_rows, head, SEQ, HEADS, D), dq * SCALE)


@triton.jit
def paged_attention(q_ptr, k_ptr, v_ptr, lengths_ptr, table_ptr, o_ptr, KV_HEADS: tl.constexpr,
                    GROUP: tl.constexpr, D: tl.constexpr, TOTAL_PAGES: tl.constexpr,
                    PAGES: tl.constexpr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    """One decoding step, as smalti.ops.paged_attention: one program per (K/V head,
    sequence) holds the head's GROUP query rows (q and o [batch, KV_HEADS, GROUP, D]) padded
    to BLOCK rows, and walks the sequence's pages (k and v [KV_HEADS, TOTAL_PAGES, BLOCK,
    D]: a page is one K/V block), each found through the page table [batch, PAGES]."""
    head, batch = tl.program_id(0), tl.program_id(1)
    rows = tl.arange(0, BLOCK)
    tokens = tl.arange(0, BLOCK)
    dims = tl.arange(0, D)
    q_rows = ((batch * KV_HEADS + head) * GROUP + rows[:, None]) * D + dims[None, :]
    q = tl.load(q_ptr + q_rows, mask=rows[:, None] < GROUP, other=0.0)
    length = tl.minimum(tl.maximum(tl.load(lengths_ptr + batch), 0), PAGES * BLOCK)
    acc = tl.zeros((BLOCK, D), tl.float32)
    row_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    row_sum = tl.zeros((BLOCK,), tl.float32)
    exp2_scale: tl.constexpr = SCALE * LOG2_E
    for block in range(0, tl.cdiv(length, BLOCK)):
        page = tl.load(table_ptr + batch * PAGES + block)
        offsets = (head * TOTAL_PAGES + page).to(tl.int64) * BLOCK * D
        within = offsets + tokens[:, None] * D + dims[None, :]
        valid = length - block * BLOCK  # keys of this block before the length
        k = tl.load(k_ptr + within)
        v = tl.load(v_ptr + within, mask=tokens[:, None] < valid, other=0.0)
        s = tl.where(tokens[None, :] < valid, tl.dot(q, tl.trans(k)), float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, axis=1))
        rescale = tl.exp2((row_max - new_max) * exp2_scale)
        p = tl.exp2((s - new_max[:, None]) * exp2_scale)
        row_sum = row_sum * rescale + tl.sum(p, axis=1)
        acc = tl.dot(p.to(q.dtype), v, acc * rescale[:, None])
        row_max = new_max
    out = acc / tl.maximum(row_sum, 1.0)[:, None]
    tl.store(o_ptr + q_rows, out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < GROUP)
