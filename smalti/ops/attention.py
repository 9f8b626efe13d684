"""Scaled dot-product attention (forward), as a smalti flash-attention kernel, in
jax.nn.dot_product_attention's [batch, seq, heads, head_dim] layout.

One warpgroup per (64-row block of Q, query head, batch). The Q tile arrives by TMA (rows past
the query length are zero-filled, and clipped when O is stored); K and V tiles of the query
head's K/V head (head // (heads // kv_heads): grouped- and multi-query attention read the
shared heads through the pipeline's index maps, never a copy) stream through
`sd.emit_pipeline` with the online-softmax state (O, row max, row sum) as its carry. The
last step is masked: the causal diagonal, or the key/value tail (keys at or past the
key/value length get -inf scores). Besides O, the kernel writes each row's log-sum-exp of
the scaled scores, which a backward pass needs."""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp

import smalti.dsl as sd
from smalti.ops.attention_backward import attention_backward

BLOCK_Q = 64  # rows of Q per warpgroup (one wgmma M block)
BLOCK_KV = 64  # rows of K and V per pipeline step
HEAD_DIMS = (64, 128)
DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
F32 = jnp.float32
LOG2_E = 1.4426950408889634
State = tuple[sd.Array, sd.Array, sd.Array]  # O, row max, row sum


def _q_blocks(q_len: int) -> int:
    return -(-q_len // BLOCK_Q)


def _grid(q: object, k: object, v: object) -> tuple[int, int, int]:
    batch, q_len, heads, _ = q.shape
    return _q_blocks(q_len), heads, batch


def _out_shape(q: object, k: object, v: object) -> tuple[jax.ShapeDtypeStruct, ...]:
    """O (q's shape and dtype) and the flat f32 log-sum-exp, one per (batch, head, padded
    query row)."""
    batch, q_len, heads, _ = q.shape
    rows = batch * heads * _q_blocks(q_len) * BLOCK_Q
    return jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((rows,), F32)


def _smem(q: object, k: object, v: object) -> list[object]:
    """The Q tile's barrier and the Q tile (reused for O); the pipeline scopes the rest."""
    return [sd.Barriers(1), sd.SMEM((BLOCK_Q, q.shape[3]), q.dtype)]


@functools.cache
def _forward(scale: float, causal: bool, kv_len: int) -> sd.Kernel:
    """The forward kernel for one scale, causality and key/value length (the last K/V tile
    may hang over the keys' end: TMA fills it with zeros and the keys from kv_len on are
    masked). Causal kernels take a query no longer than the keys (`_attention` splits the
    rest off)."""
    exp2_scale = scale * LOG2_E  # exp(x * scale) = exp2(x * exp2_scale)
    tail = kv_len % BLOCK_KV  # valid keys of the last K/V tile, 0 if it is whole

    @sd.kernel(grid=_grid, out_shape=_out_shape, smem=_smem,
               name="dot_product_attention_causal_fwd" if causal else
               "dot_product_attention_fwd")
    def kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, q_bar, q_smem):
        _, q_len, heads, head_dim = q_ref.shape
        kv_tiles, kv_heads = -(-k_ref.shape[1] // BLOCK_KV), k_ref.shape[2]
        q_block, head, batch = sd.program_id(0), sd.program_id(1), sd.program_id(2)
        kv_head = head // (heads // kv_heads)
        rows = q_block * BLOCK_Q
        q_bar[0].arrive_expect_tx(q_smem.nbytes)
        sd.async_copy(q_ref.at[batch, rows:rows + BLOCK_Q, head, :], q_smem, q_bar[0])
        q_bar[0].wait(0)

        def fold(k_block: sd.Ref, v_block: sd.Ref, state: State, masked: bool) -> State:
            """Fold one K/V tile into (O, row max, row sum)."""
            o, row_max, row_sum = state
            s = sd.wgmma(sd.zeros((BLOCK_Q, BLOCK_KV)), q_smem, k_block.T)
            if masked:
                key = sd.iota((BLOCK_Q, BLOCK_KV), dimension=1)
                # causal: the diagonal tile, key <= query (a real query row never reaches a
                # key past kv_len: its keys end at its row, below the query length <= kv_len)
                visible = key <= sd.iota((BLOCK_Q, BLOCK_KV), dimension=0) if causal \
                    else key < tail
                s = sd.where(visible, s, -math.inf)
            new_max = sd.maximum(row_max, s.max(axis=1))
            rescale = sd.exp2((row_max - new_max) * exp2_scale)
            p = sd.exp2((s - new_max[:, None]) * exp2_scale)
            row_sum = row_sum * rescale + p.sum(axis=1)
            o = sd.wgmma(o * rescale[:, None], p.astype(q_ref.dtype), v_block)
            return o, new_max, row_sum

        def kv_step(_: tuple[sd.Index, ...], k_block: sd.Ref, v_block: sd.Ref, state: State
                    ) -> State:
            return fold(k_block, v_block, state, masked=False)

        def last_step(_: tuple[sd.Index, ...], k_block: sd.Ref, v_block: sd.Ref,
                      state: State) -> State:
            return fold(k_block, v_block, state, masked=True)

        kv_tile = sd.BlockSpec((None, BLOCK_KV, None, head_dim),
                               lambda j: (batch, j, kv_head, 0))
        start = (sd.zeros((BLOCK_Q, head_dim)), sd.full((BLOCK_Q,), -math.inf),
                 sd.zeros((BLOCK_Q,)))
        o, row_max, row_sum = sd.emit_pipeline(
            kv_step, grid=(q_block + 1 if causal else kv_tiles,),
            in_specs=[kv_tile, kv_tile], init_carry=start,
            last_step=last_step if causal or tail else None)(k_ref, v_ref)
        q_smem[...] = (o * (1.0 / row_sum)[:, None]).astype(q_ref.dtype)
        sd.async_store(q_smem, o_ref.at[batch, rows:rows + BLOCK_Q, head, :])
        lse_row = ((batch * heads + head) * _q_blocks(q_len) + q_block) * BLOCK_Q
        lse_ref[lse_row:lse_row + BLOCK_Q] = row_max * scale + sd.log(row_sum)
        sd.async_store_wait()

    return kernel


def _run(query: jax.Array, key: jax.Array, value: jax.Array, scale: float, causal: bool
         ) -> tuple[jax.Array, jax.Array]:
    """One kernel launch: O and the log-sum-exp as [batch, heads, q_len]. Tiles hanging over
    the query's or the keys' end need no padding: TMA fills them with zeros (masked keys,
    rows nobody keeps) and clips O's store."""
    batch, q_len, heads, _ = query.shape
    out, lse = _forward(scale, causal, key.shape[1])(query, key, value)
    return out, lse.reshape(batch, heads, _q_blocks(q_len) * BLOCK_Q)[:, :, :q_len]


def _attention(query: jax.Array, key: jax.Array, value: jax.Array, scale: float,
               causal: bool) -> tuple[jax.Array, jax.Array]:
    """O and the log-sum-exp. Causal with the query longer than the keys (jax's mask is
    top-left: query i sees keys j <= i): the rows from kv_len on see every key, so they are
    a non-causal launch of their own."""
    kv_len = key.shape[1]
    if not causal or query.shape[1] <= kv_len:
        return _run(query, key, value, scale, causal)
    head_out, head_lse = _run(query[:, :kv_len], key, value, scale, True)
    rest_out, rest_lse = _run(query[:, kv_len:], key, value, scale, False)
    return (jnp.concatenate([head_out, rest_out], axis=1),
            jnp.concatenate([head_lse, rest_lse], axis=2))


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _differentiable(query, key, value, scale, causal):
    return _attention(query, key, value, scale, causal)


def _differentiable_fwd(query, key, value, scale, causal):
    out, lse = _attention(query, key, value, scale, causal)
    return (out, lse), (query, key, value, out, lse)


def _differentiable_bwd(scale, causal, residuals, cotangents):
    """dQ, dK, dV by the backward kernels (smalti/ops/attention_backward.py)."""
    query, key, value, out, lse = residuals
    d_out, d_lse = cotangents
    return attention_backward(query, key, value, out, lse, d_out, d_lse, scale, causal)


_differentiable.defvjp(_differentiable_fwd, _differentiable_bwd)


def _check(query: object, key: object, value: object, scale: object, is_causal: object
           ) -> float:
    """ValueErrors naming the op, the argument and the constraint; the scale to use."""
    op = "smalti.ops.dot_product_attention"
    arrays = {"query": query, "key": key, "value": value}
    for name, array in arrays.items():
        shape = tuple(jnp.shape(array))
        if len(shape) != 4 or math.prod(shape) == 0:
            raise ValueError(f"{op}: {name} must be a non-empty [batch, seq, heads, head_dim] "
                             f"array, got shape {shape}")
        if jnp.dtype(jnp.result_type(array)) not in DTYPES:
            raise ValueError(f"{op}: {name} must be bfloat16 or float16, got "
                             f"{jnp.result_type(array)}")
    q_shape, k_shape, v_shape = (tuple(jnp.shape(a)) for a in arrays.values())
    if len({jnp.result_type(a) for a in arrays.values()}) != 1:
        raise ValueError(f"{op}: query, key and value must share one dtype, got "
                         f"{', '.join(str(jnp.result_type(a)) for a in arrays.values())}")
    if k_shape != v_shape:
        raise ValueError(f"{op}: key and value must have one shape [batch, kv_seq, kv_heads, "
                         f"head_dim], got {k_shape} and {v_shape}")
    if q_shape[3] not in HEAD_DIMS:
        raise ValueError(f"{op}: head_dim (the last axis of query) must be 64 or 128, got "
                         f"shape {q_shape}")
    if (k_shape[0], k_shape[3]) != (q_shape[0], q_shape[3]):
        raise ValueError(f"{op}: key must have query's batch and head_dim, got query "
                         f"{q_shape} and key {k_shape}")
    if q_shape[2] % k_shape[2]:
        raise ValueError(f"{op}: key's heads ({k_shape[2]}) must divide query's heads "
                         f"({q_shape[2]})")
    if not isinstance(is_causal, bool):
        raise ValueError(f"{op}: is_causal must be a Python bool, got {is_causal!r}")
    if scale is None:
        return 1.0 / math.sqrt(q_shape[3])
    if (not isinstance(scale, numbers.Real) or isinstance(scale, bool)
            or not 0 < scale < math.inf):
        raise ValueError(f"{op}: scale must be a positive finite Python number (it is "
                         f"compiled into the kernel), got {scale!r}")
    return float(scale)


def dot_product_attention_with_lse(query: jax.Array, key: jax.Array, value: jax.Array, *,
                                   scale: float | None = None, is_causal: bool = False
                                   ) -> tuple[jax.Array, jax.Array]:
    """`dot_product_attention`'s output and each query row's log-sum-exp of the scaled
    (and masked) scores, f32 [batch, heads, q_seq]: what a backward pass reads."""
    scale = _check(query, key, value, scale, is_causal)
    return _differentiable(jnp.asarray(query), jnp.asarray(key), jnp.asarray(value), scale,
                           is_causal)


def dot_product_attention(query: jax.Array, key: jax.Array, value: jax.Array, *,
                          scale: float | None = None, is_causal: bool = False) -> jax.Array:
    """softmax(scale * Q K^T [+ causal mask]) V, as jax.nn.dot_product_attention.

    query [batch, q_seq, heads, head_dim]; key and value [batch, kv_seq, kv_heads, head_dim],
    kv_heads dividing heads (query head h reads K/V head h // (heads // kv_heads)); bf16 or
    f16, head_dim 64 or 128, any sequence lengths. `scale` defaults to 1 / sqrt(head_dim);
    `is_causal` masks as jax does (query i sees keys j <= i). Softmax math is f32; the result
    is in query's dtype. Differentiable: jax.grad runs the backward kernels of
    smalti/ops/attention_backward.py from the saved log-sum-exp."""
    return dot_product_attention_with_lse(query, key, value, scale=scale,
                                          is_causal=is_causal)[0]
