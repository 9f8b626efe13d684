"""Flash attention forward in the Python DSL, called from JAX: softmax(Q K^T / sqrt(d)) V
for bf16 Q, K, V of shape (batch * heads, seq, head_dim), head_dim 64 or 128, causal or not.

One warpgroup per 64-row block of Q, per (batch * head). The Q tile arrives in shared
memory by TMA; 64-row K and V tiles stream through a 2-stage TMA pipeline (one mbarrier
per stage, whose phase parity flips on each reuse): while one stage is consumed, TMA fills
the other. Per K/V tile:

- S = Q K^T with wgmma: Q (64 x d) is the A operand in shared memory; K^T is the B operand,
  read K-major from the very bytes TMA wrote for K. The K stages are declared twice in one
  `sd.Union`, as (64, d) for TMA and as (d, 64) for wgmma, and both views are pinned to the
  same swizzled tiles with `smalti.with_transforms` (the second one transposed first), so
  wgmma reads the K tile as a transposed B without any data movement.
- online softmax in f32 registers (the WGMMA layout): running row max and row sum, rescaled
  by exp2((m_old - m_new) * log2(e) / sqrt(d)) whenever the max grows;
- O += P V with wgmma, P (rounded to bf16) fed to wgmma from registers as the A operand,
  V (64 x d) the B operand in shared memory.

The output is normalised by the row sums, rounded to bf16, written to the Q tile's shared
memory (Q is no longer read) and stored to global memory with one TMA store.

Causal: K tiles past the diagonal are skipped; only the diagonal tile is masked, inside the
kernel. Q blocks and K/V tiles are both 64 rows, so on the diagonal tile a key may be seen
by a query exactly when its column is at most the query's row: two iotas (row and column
indices) compared elementwise give that condition in the accumulator's own layout, and
`sd.where` puts -inf in S wherever it fails, before the row max. The grid is
(2, seq / 128, batch * heads): a Q block is 2 * program_id(1) + program_id(0), so the number
of whole pipeline rounds before the diagonal is program_id(1), and the odd tile (if any)
runs in a loop of 0 or 1 trips (the DSL's `when` cannot carry values, and stages are
Python ints).

    python examples/flash_attention.py                 # seq 256, head_dim 64, causal and not
    python examples/flash_attention.py 512 128 2       # seq, head_dim, batch * heads
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd
from smalti.tiling import SwizzleTransform, TileTransform, Transform, TransposeTransform

BLOCK_Q = 64  # rows of Q per warpgroup (one wgmma M block)
BLOCK_KV = 64  # rows of K and V per pipeline stage
STAGES = 2
Q_BARRIER = STAGES  # bars[0], bars[1]: the K/V stages; bars[2]: the Q tile
BF16 = jnp.bfloat16
F32 = jnp.float32
LOG2_E = 1.4426950408889634
SWIZZLE = 128  # bytes: 64 bf16 columns per swizzled tile
K_TILE: tuple[Transform, ...] = (TileTransform((BLOCK_KV, SWIZZLE // 2)),
                                 SwizzleTransform(SWIZZLE))
K_TRANSPOSED: tuple[Transform, ...] = (TransposeTransform((1, 0)), *K_TILE)


def check_shapes(q: jax.ShapeDtypeStruct, k: jax.ShapeDtypeStruct,
                 v: jax.ShapeDtypeStruct) -> tuple[int, int, int]:
    """(batch * heads, seq, head_dim); ValueError when the kernel cannot take the shapes."""
    if not (len(q.shape) == 3 and q.shape == k.shape == v.shape):
        raise ValueError(f"flash attention needs Q, K and V of one shape (batch * heads, seq, "
                         f"head_dim); got {q.shape}, {k.shape}, {v.shape}")
    heads, seq, head_dim = q.shape
    if seq % (STAGES * BLOCK_KV) or head_dim not in (64, 128):
        raise ValueError(f"flash attention needs seq a multiple of {STAGES * BLOCK_KV} and "
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
    """Barriers; the Q tile (reused for O); K stages as (64, d) and as (d, 64); V stages."""
    _, _, head_dim = check_shapes(q, k, v)
    return [
        sd.Barriers(STAGES + 1),
        sd.SMEM((BLOCK_Q, head_dim), BF16),
        sd.Union(sd.SMEM((STAGES, BLOCK_KV, head_dim), BF16),  # K, written by TMA ...
                 sd.SMEM((STAGES, head_dim, BLOCK_KV), BF16)),  # ... read as K^T by wgmma
        sd.SMEM((STAGES, BLOCK_KV, head_dim), BF16),
    ]


def attend(q_ref: sd.Ref, k_ref: sd.Ref, v_ref: sd.Ref, o_ref: sd.Ref, bars: sd.BarrierArray,
           q_smem: sd.Ref, k_smem: sd.StagedRef, kt_smem: sd.StagedRef, v_smem: sd.StagedRef,
           causal: bool) -> None:
    """The body of both kernels."""
    _, seq, head_dim = q_ref.shape
    half, pair, head = sd.program_id(0), sd.program_id(1), sd.program_id(2)
    rows = (pair * 2 + half) * BLOCK_Q
    scale = LOG2_E / math.sqrt(head_dim)  # exp(x / sqrt(d)) = exp2(x * scale)
    keys = [k_smem[s].with_transforms(*K_TILE) for s in range(STAGES)]
    keys_t = [kt_smem[s].with_transforms(*K_TRANSPOSED) for s in range(STAGES)]

    def fetch(stage: int, block: sd.Index | int) -> None:
        """Start the TMA loads of K/V tile `block` into `stage`."""
        kv = block * BLOCK_KV
        bars[stage].arrive_expect_tx(keys[stage].nbytes + v_smem[stage].nbytes)
        sd.async_copy(k_ref.at[head, kv:kv + BLOCK_KV, :], keys[stage], bars[stage])
        sd.async_copy(v_ref.at[head, kv:kv + BLOCK_KV, :], v_smem[stage], bars[stage])

    def step(stage: int, phase: sd.Index, state: tuple[sd.Array, ...], masked: bool
             ) -> tuple[sd.Array, ...]:
        """Wait for `stage` (in `phase`) and fold its K/V tile into (O, row max, row sum)."""
        o, row_max, row_sum = state
        bars[stage].wait(phase)
        s = sd.wgmma(sd.zeros((BLOCK_Q, BLOCK_KV)), q_smem, keys_t[stage])
        if masked:  # the diagonal tile: key (column) <= query (row)
            query = sd.iota((BLOCK_Q, BLOCK_KV), dimension=0)
            key = sd.iota((BLOCK_Q, BLOCK_KV), dimension=1)
            s = sd.where(key <= query, s, -math.inf)
        new_max = sd.maximum(row_max, s.max(axis=1))
        rescale = sd.exp2((row_max - new_max) * scale)
        p = sd.exp2((s - new_max[:, None]) * scale)
        row_sum = row_sum * rescale + p.sum(axis=1)
        o = sd.wgmma(o * rescale[:, None], p.astype(BF16), v_smem[stage])
        return o, new_max, row_sum

    bars[Q_BARRIER].arrive_expect_tx(q_smem.nbytes)
    sd.async_copy(q_ref.at[head, rows:rows + BLOCK_Q, :], q_smem, bars[Q_BARRIER])
    fetch(0, 0)
    bars[Q_BARRIER].wait(0)
    blocks = seq // BLOCK_KV

    def two_blocks(it: sd.Index, state: tuple[sd.Array, ...]) -> tuple[sd.Array, ...]:
        """K/V tiles 2 it (stage 0) and 2 it + 1 (stage 1), unmasked; prefetch 2 it + 2."""
        block = it * STAGES
        fetch(1, block + 1)
        state = step(0, it, state, masked=False)

        @sd.when(True if causal else block + 2 < blocks)  # causal: the diagonal is >= 2 it + 2
        def _() -> None:
            fetch(0, block + 2)  # stage 0 is free: its wgmmas have completed

        return step(1, it, state, masked=False)

    start = (sd.zeros((BLOCK_Q, head_dim)), sd.full((BLOCK_Q,), -math.inf), sd.zeros((BLOCK_Q,)))
    state = sd.fori(0, pair if causal else blocks // STAGES, two_blocks, start)
    if causal:  # Q block 2 pair + half: its diagonal tile is 2 pair + half, already fetched
        def off_and_diagonal(_: sd.Index, state: tuple[sd.Array, ...]) -> tuple[sd.Array, ...]:
            """half == 1: tile 2 pair (stage 0) is whole, tile 2 pair + 1 (stage 1) masked."""
            fetch(1, pair * 2 + 1)
            state = step(0, pair, state, masked=False)
            return step(1, pair, state, masked=True)

        def diagonal(_: sd.Index, state: tuple[sd.Array, ...]) -> tuple[sd.Array, ...]:
            """half == 0: the diagonal tile 2 pair is in stage 0."""
            return step(0, pair, state, masked=True)

        state = sd.fori(0, half, off_and_diagonal, state)
        state = sd.fori(0, 1 - half, diagonal, state)
    o, _, row_sum = state
    q_smem[...] = (o * (1.0 / row_sum)[:, None]).astype(BF16)  # every wgmma reading Q is done
    sd.async_store(q_smem, o_ref.at[head, rows:rows + BLOCK_Q, :])
    sd.async_store_wait()


@sd.kernel(grid=grid, out_shape=out_shape, smem=smem)
def attention(q_ref, k_ref, v_ref, o_ref, bars, q_smem, k_smem, kt_smem, v_smem):
    """Non-causal flash attention: every K/V tile, two per pipeline round."""
    attend(q_ref, k_ref, v_ref, o_ref, bars, q_smem, k_smem, kt_smem, v_smem, causal=False)


@sd.kernel(grid=grid, out_shape=out_shape, smem=smem)
def causal_attention(q_ref, k_ref, v_ref, o_ref, bars, q_smem, k_smem, kt_smem, v_smem):
    """Causal flash attention: K/V tiles up to the diagonal; the diagonal tile is masked."""
    attend(q_ref, k_ref, v_ref, o_ref, bars, q_smem, k_smem, kt_smem, v_smem, causal=True)


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
        print(f"flash attention seq {seq}, head_dim {head_dim}, {heads} heads, "
              f"{'causal' if causal else 'non-causal'}, on {jax.devices()[0].platform}: "
              f"max |error| = {error:.3g}")
        failed |= not error < 2e-2
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
