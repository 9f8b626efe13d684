"""Flash attention forward for Blackwell (sm_100a) in the Python DSL, called from JAX:
softmax(Q K^T / sqrt(d)) V for bf16 Q, K, V of shape (batch * heads, seq, head_dim),
head_dim 64 or 128, causal or not, with tcgen05 MMAs into tensor memory.

One warpgroup per 128-row block of Q, per (batch * head). The Q tile arrives in shared
memory once by TMA; 128-row K and V tiles stream through a 2-stage TMA ring, each stage with
a `full` mbarrier (its TMA bytes have landed) and a `free` one (the MMA reading its V has
completed: `tcgen05_commit` arrives on it). Per K/V tile:

- S = Q K^T by `tcgen05_mma` into a 128 x 128 f32 TMEM region: Q (128 x d) is A, K^T the
  transposed view of the K stage (B read K-major, no data movement); a commit then tells
  when S (and every earlier MMA, so the previous P V too) is complete;
- the next K/V tile's TMA loads start into the other stage once its `free` barrier says
  the previous P V no longer reads it, and run while this tile's softmax does;
- online softmax in f32 registers: `tmem_load` of S puts row t in thread t (`.32x32b`), so
  the running row max and row sum need no shuffles; exp2 with scale * log2(e). S is loaded
  twice, 64 columns at a time (for the row max, then for P): with all 128 columns live
  ptxas spills at d = 128;
- O stays in tensor memory (a 128 x d f32 accumulator): registers hold S and P already,
  and at d = 128 a register O would double that. Its rescale by exp(m_old - m_new) is a
  `tmem_load` / multiply / `tmem_store` of 32 columns at a time;
- P, rounded to bf16, is written to shared memory and O += P V by `tcgen05_mma` with P the
  A operand and the V stage B; a commit to the stage's `free` barrier releases it.

Causal: K/V tiles past the diagonal are never loaded; only the diagonal tile is masked,
`sd.where` putting -inf in S where the key's column (an iota) exceeds the query's row, in
the TMEM load's own layout. As in examples/flash_attention.py the grid is
(2, seq / 256, batch * heads), Q block 2 program_id(1) + program_id(0): program_id(1) whole
trips of the ring come before the diagonal, and the tail (the diagonal tile, after a whole
one when program_id(0) is 1) runs in loops of 0 or 1 trips (stages are Python ints).

TMEM holds S (128 columns) and O (d columns): 192 or 256 of the 512. A last commit tells
when every MMA has finished; the epilogue loads O 32 columns at a time, divides by the row
sums, rounds to bf16 into the Q tile's shared memory and writes it with one TMA store.
Run it (on a CPU the kernel's PTX runs in smalti's simulator):

    python examples/blackwell_flash_attention.py          # seq 256, head_dim 64, causal and not
    python examples/blackwell_flash_attention.py 512 128 2  # seq, head_dim, batch * heads
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_Q = 128  # rows of Q per warpgroup: the tcgen05 MMA's M, one TMEM lane per row
BLOCK_KV = 128  # rows of K and V per stage: S takes 128 TMEM columns
STAGES = 2
COLUMNS = 32  # O columns loaded from TMEM at a time (rescale and epilogue)
S_COLUMNS = 64  # S columns loaded from TMEM at a time (the row max, then P)
BF16 = jnp.bfloat16
F32 = jnp.float32
LOG2_E = 1.4426950408889634


def check_shapes(q: jax.ShapeDtypeStruct, k: jax.ShapeDtypeStruct,
                 v: jax.ShapeDtypeStruct) -> tuple[int, int, int]:
    """(batch * heads, seq, head_dim); ValueError when the kernel cannot take the shapes."""
    if not (len(q.shape) == 3 and q.shape == k.shape == v.shape):
        raise ValueError(f"blackwell flash attention needs Q, K and V of one shape "
                         f"(batch * heads, seq, head_dim); got {q.shape}, {k.shape}, {v.shape}")
    heads, seq, head_dim = q.shape
    if seq % (STAGES * BLOCK_KV) or head_dim not in (64, 128):
        raise ValueError(f"blackwell flash attention needs seq a multiple of "
                         f"{STAGES * BLOCK_KV} and head_dim 64 or 128; got seq {seq}, "
                         f"head_dim {head_dim}")
    return heads, seq, head_dim


def grid(q: jax.ShapeDtypeStruct, k: jax.ShapeDtypeStruct, v: jax.ShapeDtypeStruct
         ) -> tuple[int, int, int]:
    """(2, seq / 256, batch * heads): Q block 2 program_id(1) + program_id(0)."""
    heads, seq, _ = check_shapes(q, k, v)
    return 2, seq // (2 * BLOCK_Q), heads


def out_shape(q: jax.ShapeDtypeStruct, *others: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(q.shape, BF16)


def smem(q: jax.ShapeDtypeStruct, k: jax.ShapeDtypeStruct, v: jax.ShapeDtypeStruct
         ) -> list[object]:
    """Barriers; the Q tile (reused for O); K and V stages; P; S and O in tensor memory."""
    _, _, head_dim = check_shapes(q, k, v)
    return [
        sd.Barriers(STAGES),  # full: a stage's TMA bytes have landed
        sd.Barriers(STAGES),  # free: the P V MMA reading a stage has completed
        sd.Barriers(3),  # Q landed; S (and every MMA before it) complete; all MMAs complete
        sd.SMEM((BLOCK_Q, head_dim), BF16),
        sd.SMEM((STAGES, BLOCK_KV, head_dim), BF16),
        sd.SMEM((STAGES, BLOCK_KV, head_dim), BF16),
        sd.SMEM((BLOCK_Q, BLOCK_KV), BF16),  # P, the A operand of O += P V
        sd.TMEM((BLOCK_Q, BLOCK_KV), F32),  # S
        sd.TMEM((BLOCK_Q, head_dim), F32),  # O
    ]


def attend(q_ref: sd.Ref, k_ref: sd.Ref, v_ref: sd.Ref, o_ref: sd.Ref,
           full: sd.BarrierArray, free: sd.BarrierArray, bars: sd.BarrierArray,
           q_smem: sd.Ref, k_smem: sd.StagedRef, v_smem: sd.StagedRef, p_smem: sd.Ref,
           s_tmem: sd.TmemRef, o_tmem: sd.TmemRef, causal: bool) -> None:
    """The body of both kernels."""
    _, seq, head_dim = q_ref.shape
    half, pair, head = sd.program_id(0), sd.program_id(1), sd.program_id(2)
    rows = (pair * 2 + half) * BLOCK_Q
    q_landed, s_done, all_done = bars[0], bars[1], bars[2]
    scale = LOG2_E / math.sqrt(head_dim)  # exp(x / sqrt(d)) = exp2(x * scale)
    rounds = seq // (STAGES * BLOCK_KV)

    def fetch(stage: int, block: sd.Index | int) -> None:
        """Start the TMA loads of K/V tile `block` into `stage`."""
        kv = block * BLOCK_KV
        full[stage].arrive_expect_tx(k_smem[stage].nbytes + v_smem[stage].nbytes)
        sd.async_copy(k_ref.at[head, kv:kv + BLOCK_KV, :], k_smem[stage], full[stage])
        sd.async_copy(v_ref.at[head, kv:kv + BLOCK_KV, :], v_smem[stage], full[stage])

    def refill(r: sd.Index, s: int) -> None:
        """Tile 2 r + s is in stage s: load tile 2 r + s + 1 into the other stage once the
        P V MMA of the tile it held (2 r + s - 1) has released it."""
        if s == 0:  # stage 1 held tile 2 r - 1, if r > 0

            @sd.when(r > 0)
            def _() -> None:
                free[1].wait(r - 1)

            fetch(1, r * STAGES + 1)
        else:  # stage 0 held tile 2 r; tile 2 r + 2 exists unless this is the last trip

            @sd.when(True if causal else r + 1 < rounds)  # causal: the diagonal is >= 2 r + 2
            def _() -> None:
                free[0].wait(r)
                fetch(0, r * STAGES + 2)

    def scores(c: int, masked: bool) -> sd.Array:
        """Columns c .. c + S_COLUMNS of S; on the diagonal tile, -inf where key > query."""
        part = s_tmem[:, c:c + S_COLUMNS]
        if not masked:
            return part
        query = sd.iota((BLOCK_Q, S_COLUMNS), dimension=0)
        key = sd.iota((BLOCK_Q, S_COLUMNS), dimension=1) + c
        return sd.where(key <= query, part, -math.inf)

    def step(r: sd.Index, s: int, state: tuple[sd.Array, sd.Array], *, masked: bool = False,
             prefetch: bool = True) -> tuple[sd.Array, sd.Array]:
        """Fold K/V tile 2 r + s (in stage s) into O (in TMEM), the row max and row sum;
        `prefetch`: start the loads of the tile after it."""
        row_max, row_sum = state
        full[s].wait(r)
        sd.tcgen05_mma(s_tmem, q_smem, k_smem[s].T, accumulate=False)
        sd.tcgen05_commit(s_done)  # S, and the previous tile's P V, are complete
        if prefetch:
            refill(r, s)
        s_done.wait(s)  # s_done completes once per tile: tile 2 r + s waits on parity s
        new_max = row_max
        for c in range(0, BLOCK_KV, S_COLUMNS):
            new_max = sd.maximum(new_max, scores(c, masked).max(axis=1))
        rescale = sd.exp2((row_max - new_max) * scale)
        row_sum = row_sum * rescale
        for c in range(0, BLOCK_KV, S_COLUMNS):  # the previous P V, which read P, is complete
            p = sd.exp2((scores(c, masked) - new_max[:, None]) * scale)
            row_sum = row_sum + p.sum(axis=1)
            p_smem[:, c:c + S_COLUMNS] = p.astype(BF16)
        for c in range(0, head_dim, COLUMNS):  # no MMA writes O now: rescale it in place
            o_tmem[:, c:c + COLUMNS] = o_tmem[:, c:c + COLUMNS] * rescale[:, None]
        sd.tcgen05_mma(o_tmem, p_smem, v_smem[s], accumulate=True)
        sd.tcgen05_commit(free[s])
        return new_max, row_sum

    def ring(r: sd.Index, state: tuple[sd.Array, sd.Array]) -> tuple[sd.Array, sd.Array]:
        """One trip around the ring: K/V tiles 2 r and 2 r + 1, unmasked."""
        for s in range(STAGES):
            state = step(r, s, state)
        return state

    q_landed.arrive_expect_tx(q_smem.nbytes)
    sd.async_copy(q_ref.at[head, rows:rows + BLOCK_Q, :], q_smem, q_landed)
    fetch(0, 0)
    for c in range(0, head_dim, COLUMNS):  # the P V MMAs all accumulate
        o_tmem[:, c:c + COLUMNS] = sd.zeros((BLOCK_Q, COLUMNS))
    q_landed.wait(0)
    state = (sd.full((BLOCK_Q,), -math.inf), sd.zeros((BLOCK_Q,)))
    state = sd.fori(0, pair if causal else rounds, ring, state)
    if causal:  # Q block 2 pair + half: its diagonal tile is 2 pair + half, tile 2 pair fetched
        def off_and_diagonal(_: sd.Index, state: tuple[sd.Array, sd.Array]
                             ) -> tuple[sd.Array, sd.Array]:
            """half == 1: tile 2 pair (stage 0) is whole, tile 2 pair + 1 (stage 1) masked."""
            state = step(pair, 0, state)
            return step(pair, 1, state, masked=True, prefetch=False)

        def diagonal(_: sd.Index, state: tuple[sd.Array, sd.Array]
                     ) -> tuple[sd.Array, sd.Array]:
            """half == 0: the diagonal tile 2 pair is in stage 0."""
            return step(pair, 0, state, masked=True, prefetch=False)

        state = sd.fori(0, half, off_and_diagonal, state)
        state = sd.fori(0, 1 - half, diagonal, state)
    sd.tcgen05_commit(all_done)
    all_done.wait(0)  # no MMA reads Q any more: its tile takes O
    inverse = 1.0 / state[1]
    for c in range(0, head_dim, COLUMNS):
        q_smem[:, c:c + COLUMNS] = (o_tmem[:, c:c + COLUMNS] * inverse[:, None]).astype(BF16)
    sd.async_store(q_smem, o_ref.at[head, rows:rows + BLOCK_Q, :])
    sd.async_store_wait()


@sd.kernel(grid=grid, out_shape=out_shape, smem=smem, arch="sm_100a")
def attention(q_ref, k_ref, v_ref, o_ref, full, free, bars, q_smem, k_smem, v_smem, p_smem,
              s_tmem, o_tmem):
    """Non-causal flash attention: every K/V tile, two per trip of the ring."""
    attend(q_ref, k_ref, v_ref, o_ref, full, free, bars, q_smem, k_smem, v_smem, p_smem,
           s_tmem, o_tmem, causal=False)


@sd.kernel(grid=grid, out_shape=out_shape, smem=smem, arch="sm_100a")
def causal_attention(q_ref, k_ref, v_ref, o_ref, full, free, bars, q_smem, k_smem, v_smem,
                     p_smem, s_tmem, o_tmem):
    """Causal flash attention: K/V tiles up to the diagonal; the diagonal tile is masked."""
    attend(q_ref, k_ref, v_ref, o_ref, full, free, bars, q_smem, k_smem, v_smem, p_smem,
           s_tmem, o_tmem, causal=True)


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
        print(f"blackwell flash attention seq {seq}, head_dim {head_dim}, {heads} heads, "
              f"{'causal' if causal else 'non-causal'}, on {jax.devices()[0].platform}: "
              f"max |error| = {error:.3g}")
        failed |= not error < 2e-2
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
