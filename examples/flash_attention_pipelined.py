"""Flash attention forward with `sd.emit_pipeline`: the kernel of examples/flash_attention.py
without a hand-written pipeline. softmax(Q K^T / sqrt(d)) V for bf16 Q, K, V of shape
(batch * heads, seq, head_dim), head_dim 64 or 128, causal or not; the same grid and shapes.

One warpgroup per 64-row block of Q, per (batch * head). The Q tile arrives in shared memory
by TMA; K and V are streamed by one `emit_pipeline` over the 64-row K/V tiles, whose
BlockSpecs squeeze the (batch * head) dim (`None` in the block shape), so each step's blocks
are (64, d). The pipeline's stage count is left to the scheduling model (the choice and its
reasons land in the kernel's `smalti.schedule`: `smalti-opt --smalti-explain-schedule`). The
online-softmax state (O, row max, row sum) is the pipeline's carry; a step is

- S = Q K^T with wgmma, K^T being `k_block.T`, the transposed view of the bytes TMA wrote;
- the running max and sum, rescaled by exp2((m_old - m_new) * log2(e) / sqrt(d));
- O += P V with wgmma, P (rounded to bf16) from registers.

Causal: the pipeline runs over the K/V tiles up to the diagonal only (a step count traced
from program_id), and its `last_step` is the diagonal tile, masked where a key's column
exceeds the query's row; the loop itself holds only unmasked steps, as in the hand-written
kernel. The output is normalised, rounded to bf16, written over the Q tile and stored by TMA.

    python examples/flash_attention_pipelined.py                 # seq 256, head_dim 64
    python examples/flash_attention_pipelined.py 512 128 2       # seq, head_dim, batch * heads
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_Q = 64  # rows of Q per warpgroup (one wgmma M block)
BLOCK_KV = 64  # rows of K and V per pipeline step
BF16 = jnp.bfloat16
F32 = jnp.float32
LOG2_E = 1.4426950408889634
State = tuple[sd.Array, sd.Array, sd.Array]  # O, row max, row sum


def check_shapes(q: jax.ShapeDtypeStruct, k: jax.ShapeDtypeStruct,
                 v: jax.ShapeDtypeStruct) -> tuple[int, int, int]:
    """(batch * heads, seq, head_dim); ValueError when the kernel cannot take the shapes."""
    if not (len(q.shape) == 3 and q.shape == k.shape == v.shape):
        raise ValueError(f"flash attention needs Q, K and V of one shape (batch * heads, seq, "
                         f"head_dim); got {q.shape}, {k.shape}, {v.shape}")
    heads, seq, head_dim = q.shape
    if seq % (2 * BLOCK_Q) or head_dim not in (64, 128):
        raise ValueError(f"flash attention needs seq a multiple of {2 * BLOCK_Q} and "
                         f"head_dim 64 or 128; got seq {seq}, head_dim {head_dim}")
    return heads, seq, head_dim


def grid(q: jax.ShapeDtypeStruct, k: jax.ShapeDtypeStruct, v: jax.ShapeDtypeStruct
         ) -> tuple[int, int, int]:
    heads, seq, _ = check_shapes(q, k, v)
    return 2, seq // (2 * BLOCK_Q), heads


def out_shape(q: jax.ShapeDtypeStruct, *others: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(q.shape, BF16)


def smem(q: jax.ShapeDtypeStruct, k: jax.ShapeDtypeStruct, v: jax.ShapeDtypeStruct
         ) -> list[object]:
    """The Q tile's barrier and the Q tile (reused for O); the pipeline scopes the rest."""
    _, _, head_dim = check_shapes(q, k, v)
    return [sd.Barriers(1), sd.SMEM((BLOCK_Q, head_dim), BF16)]


def attend(q_ref: sd.Ref, k_ref: sd.Ref, v_ref: sd.Ref, o_ref: sd.Ref, q_bar: sd.BarrierArray,
           q_smem: sd.Ref, causal: bool) -> None:
    """The body of both kernels."""
    _, seq, head_dim = q_ref.shape
    half, pair, head = sd.program_id(0), sd.program_id(1), sd.program_id(2)
    q_block = pair * 2 + half
    rows = q_block * BLOCK_Q
    scale = LOG2_E / math.sqrt(head_dim)  # exp(x / sqrt(d)) = exp2(x * scale)
    q_bar[0].arrive_expect_tx(q_smem.nbytes)
    sd.async_copy(q_ref.at[head, rows:rows + BLOCK_Q, :], q_smem, q_bar[0])
    q_bar[0].wait(0)

    def fold(k_block: sd.Ref, v_block: sd.Ref, state: State, masked: bool) -> State:
        """Fold one K/V tile into (O, row max, row sum)."""
        o, row_max, row_sum = state
        s = sd.wgmma(sd.zeros((BLOCK_Q, BLOCK_KV)), q_smem, k_block.T)
        if masked:  # the diagonal tile: key (column) <= query (row)
            query = sd.iota((BLOCK_Q, BLOCK_KV), dimension=0)
            key = sd.iota((BLOCK_Q, BLOCK_KV), dimension=1)
            s = sd.where(key <= query, s, -math.inf)
        new_max = sd.maximum(row_max, s.max(axis=1))
        rescale = sd.exp2((row_max - new_max) * scale)
        p = sd.exp2((s - new_max[:, None]) * scale)
        row_sum = row_sum * rescale + p.sum(axis=1)
        o = sd.wgmma(o * rescale[:, None], p.astype(BF16), v_block)
        return o, new_max, row_sum

    def kv_step(_: tuple[sd.Index, ...], k_block: sd.Ref, v_block: sd.Ref, state: State
                ) -> State:
        return fold(k_block, v_block, state, masked=False)

    def diagonal(_: tuple[sd.Index, ...], k_block: sd.Ref, v_block: sd.Ref, state: State
                 ) -> State:
        return fold(k_block, v_block, state, masked=True)

    kv_tile = sd.BlockSpec((None, BLOCK_KV, head_dim), lambda j: (head, j, 0))
    start = (sd.zeros((BLOCK_Q, head_dim)), sd.full((BLOCK_Q,), -math.inf),
             sd.zeros((BLOCK_Q,)))
    o, _, row_sum = sd.emit_pipeline(
        kv_step, grid=(q_block + 1 if causal else seq // BLOCK_KV,),
        in_specs=[kv_tile, kv_tile], init_carry=start,
        last_step=diagonal if causal else None)(k_ref, v_ref)
    q_smem[...] = (o * (1.0 / row_sum)[:, None]).astype(BF16)  # every wgmma reading Q is done
    sd.async_store(q_smem, o_ref.at[head, rows:rows + BLOCK_Q, :])
    sd.async_store_wait()


@sd.kernel(grid=grid, out_shape=out_shape, smem=smem)
def attention(q_ref, k_ref, v_ref, o_ref, q_bar, q_smem):
    """Non-causal flash attention: every K/V tile."""
    attend(q_ref, k_ref, v_ref, o_ref, q_bar, q_smem, causal=False)


@sd.kernel(grid=grid, out_shape=out_shape, smem=smem)
def causal_attention(q_ref, k_ref, v_ref, o_ref, q_bar, q_smem):
    """Causal flash attention: K/V tiles up to the diagonal; the diagonal tile is masked."""
    attend(q_ref, k_ref, v_ref, o_ref, q_bar, q_smem, causal=True)


def flash_attention(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool = False
                    ) -> jax.Array:
    """softmax(q k^T / sqrt(d)) v per leading index; q, k, v bf16 (batch * heads, seq, d)."""
    return (causal_attention if causal else attention)(q, k, v)


def reference(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool = False) -> jax.Array:
    """The same attention in f32 with jax.numpy, rounded to bf16."""
    q, k, v = (x.astype(F32) for x in (q, k, v))
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        scores = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), scores, -jnp.inf)
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v).astype(BF16)


def main(seq: int = 256, head_dim: int = 64, heads: int = 1) -> None:
    keys = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(key, (heads, seq, head_dim), F32).astype(BF16)
               for key in keys)
    failed = False
    for causal in (False, True):
        out = jax.jit(flash_attention, static_argnames="causal")(q, k, v, causal=causal)
        expected = np.asarray(reference(q, k, v, causal), np.float32)
        error = float(np.abs(np.asarray(out, np.float32) - expected).max())
        print(f"flash attention (pipelined) seq {seq}, head_dim {head_dim}, {heads} heads, "
              f"{'causal' if causal else 'non-causal'}, on {jax.devices()[0].platform}: "
              f"max |error| = {error:.3g}")
        failed |= not error < 2e-2
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
