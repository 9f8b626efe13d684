"""Persistent, 2-CTA, warp-specialised bf16 matmul C = A @ B (f32 accumulation, bf16 out) for
Blackwell (sm_100a) in the Python DSL, called from JAX: cluster launch control hands each CTA
pair its next 256 x 256 tile of C, a TMA producer, an MMA issuer and an epilogue each walk
those tiles at their own pace, and a double-buffered accumulator in tensor memory lets the
epilogue of tile i overlap the MMAs of tile i + 1.

Clusters of two CTAs (ranks 0 and 1) each own a 256 x 256 tile: CTA r holds rows 128 r ..
128 r + 127 of A, of the accumulator and of C, and columns 128 r .. 128 r + 127 of B, and
rank 0's MMA issuer multiplies the pair's halves with `collective=True` MMAs (M = 256,
`.cta_group::2`), writing each CTA's 128 rows of the accumulator into its own tensor memory.
Three roles (warpgroups, each in an `sd.warpgroup_region` with a register budget):

- the producer (warpgroup 0) loads K tiles of 64 into a 4-stage ring and requests the next
  tile from cluster launch control. Both CTAs' loads complete on rank 0's `full[s]`
  (`leader_barrier=True`: `.cta_group::2` TMA, whose barrier may be the peer's), which
  rank 0's producer arms with the pair's bytes; `free[s]`: the pair's MMA that read stage s
  completed, a commit multicast to both CTAs;
- the MMA issuer (warpgroup 1) waits for the stage of both CTAs (rank 0's `full[s]`) and
  issues the pair's MMAs into accumulator buffer n % 2, `acc[n % 2]` (a stage chosen at run
  time: the TMEM address plus 256 (n % 2) columns, so each role's code exists once), once
  both CTAs' epilogues have emptied that buffer (`acc_empty`), then commits `acc_full` to
  both CTAs;
- the epilogue (warpgroup 2) waits for `acc_full`, loads the accumulator from tensor memory
  32 columns at a time, releases the buffer to the issuer (`acc_empty`, in both CTAs),
  rounds to bf16 into shared memory and writes C with one TMA store.

Every role walks the same tile sequence with `sd.role_tiles`: the producer requests pass
n + 1's tile (`clusterlaunchcontrol.try_cancel`, multicast to the pair) as pass n starts,
into a 2-slot response ring the three roles read and release; no role waits for another
between tiles except through the rings. The accumulator is one `sd.TMEM((2, 128, 256), ...,
owner=2)` region of all 512 columns, two stages: the epilogue's warpgroup allocates it for
every role and frees it after its last load. Run it (on a CPU the kernel's PTX runs in
smalti's simulator; on a Blackwell GPU it runs as a cubin):

    python examples/blackwell_matmul_persistent.py            # 512x512x256
    python examples/blackwell_matmul_persistent.py 1024 512 512
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 64  # per CTA: 128 rows of A and C, all 256 of C's columns
PAIR = 2  # CTAs per cluster: the pair's MMA is 256 x 256
HALF_N = BLOCK_N // PAIR  # columns of B each CTA loads
STAGES = 4
ACC_BUFFERS = 2  # accumulator buffers in tensor memory: 2 x 256 columns
CLC_DEPTH = 2  # try_cancel response slots
EPILOGUE_COLUMNS = 32  # accumulator columns loaded from TMEM at a time (32 registers)
PRODUCER, MMA, EPILOGUE = 0, 1, 2  # the roles' warpgroups
ROLES = 3
PRODUCER_REGISTERS, MMA_REGISTERS, EPILOGUE_REGISTERS = 40, 40, 232
BF16 = jnp.bfloat16
# Thread t holds row t, as tcgen05.ld's .32x32b shape loads it, 8 consecutive columns to a
# register vector: 16 bytes of bf16 per st.shared.v4 (see examples/blackwell_matmul.py).
ROW_VECTORS = "tiled<tiling = [[128, 8], [32, 8]], warp = [-4], lane = [-2], vector = -1>"


def grid(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct) -> tuple[int, int]:
    m, k = a.shape
    n = b.shape[1]
    if m % (PAIR * BLOCK_M) or n % BLOCK_N or k % (STAGES * BLOCK_K) or b.shape[0] != k:
        raise ValueError(f"blackwell_matmul_persistent needs A (M, K) and B (K, N) with M a "
                         f"multiple of {PAIR * BLOCK_M}, N of {BLOCK_N} and K of "
                         f"{STAGES * BLOCK_K}; got {a.shape} and {b.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(
    grid=grid,
    cluster=(PAIR, 1, 1),
    out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), BF16),
    arch="sm_100a",
    warpgroups=ROLES,
    smem=[
        sd.Barriers(STAGES),  # full (rank 0's): a stage's TMA bytes landed in both CTAs
        sd.Barriers(STAGES),  # free: the pair's MMA reading a stage completed (one commit)
        sd.Barriers(ACC_BUFFERS),  # acc_full: a buffer's MMAs completed (one commit)
        sd.Barriers(ACC_BUFFERS, arrival_count=PAIR),  # acc_empty: both epilogues loaded it
        sd.SMEM((CLC_DEPTH, 16), jnp.int8),  # try_cancel responses
        sd.Barriers(CLC_DEPTH),  # clc_full: a response landed
        sd.Barriers(CLC_DEPTH, arrival_count=ROLES * PAIR),  # clc_empty: every role read it
        sd.SMEM((STAGES, BLOCK_M, BLOCK_K), BF16),  # A stages: this CTA's 128 rows
        sd.SMEM((STAGES, BLOCK_K, HALF_N), BF16),  # B stages: this CTA's 128 columns
        sd.SMEM((BLOCK_M, BLOCK_N), BF16),  # the C tile the epilogue stores
        sd.TMEM((ACC_BUFFERS, 128, BLOCK_N), jnp.float32, owner=EPILOGUE),  # accumulators
    ],
)
def matmul(a_ref, b_ref, c_ref, full, free, acc_full, acc_empty, responses, clc_full,
           clc_empty, a_smem, b_smem, c_smem, acc):
    rounds = a_ref.shape[1] // (STAGES * BLOCK_K)  # trips of the ring per tile
    rank = sd.block_id_in_cluster(0)
    stage_bytes = a_smem[0].nbytes + b_smem[0].nbytes
    sd.cluster_barrier()  # the peer's barriers are initialised before anyone signals them

    @sd.warpgroup_region(warpgroups=PRODUCER, registers=PRODUCER_REGISTERS)
    def producer():
        @sd.role_tiles(responses, clc_full, clc_empty, request=True)
        def loads(ids, n):
            row = ids[0] * BLOCK_M
            col = ids[1] * BLOCK_N + rank * HALF_N

            def fill_ring(r, _):
                """K tiles 4 r .. 4 r + 3 of this tile, each once the pair's MMA freed its
                stage (round n * rounds + r of the ring)."""
                trip = n * rounds + r
                for s in range(STAGES):
                    k = (r * STAGES + s) * BLOCK_K
                    free[s].wait(trip + 1)  # trip - 1 completed (a fresh barrier: at once)
                    sd.when(rank == 0)(lambda s=s: full[s].arrive_expect_tx(PAIR * stage_bytes))
                    sd.async_copy(a_ref.at[row:row + BLOCK_M, k:k + BLOCK_K], a_smem[s], full[s],
                                  leader_barrier=True)
                    sd.async_copy(b_ref.at[k:k + BLOCK_K, col:col + HALF_N], b_smem[s], full[s],
                                  leader_barrier=True)

            sd.fori(0, rounds, fill_ring)

    @sd.warpgroup_region(warpgroups=MMA, registers=MMA_REGISTERS)
    def issuer():
        @sd.role_tiles(responses, clc_full, clc_empty)
        def mmas(ids, n):
            del ids  # the stages hold this pass's tile
            buffer = n % ACC_BUFFERS  # used for the (n // 2)-th time
            acc_empty[buffer].wait(n // ACC_BUFFERS + 1)  # both epilogues loaded it
            into = acc[buffer]  # its TMEM columns, chosen at run time

            def drain_ring(r, _):
                trip = n * rounds + r
                for s in range(STAGES):
                    # both CTAs' halves landed (rank 0 issues the pair's MMAs)
                    sd.when(rank == 0)(lambda s=s, trip=trip: full[s].wait(trip))
                    sd.tcgen05_mma(into, a_smem[s], b_smem[s],
                                   accumulate=True if s else r > 0, collective=True)
                    sd.tcgen05_commit(free[s], collective=True)

            sd.fori(0, rounds, drain_ring)
            sd.tcgen05_commit(acc_full[buffer], collective=True)

    @sd.warpgroup_region(warpgroups=EPILOGUE, registers=EPILOGUE_REGISTERS)
    def epilogue():
        @sd.role_tiles(responses, clc_full, clc_empty)
        def stores(ids, n):
            row = ids[0] * BLOCK_M
            col = ids[1] * BLOCK_N
            buffer = n % ACC_BUFFERS  # pass n's tile, from accumulator buffer n % 2 to C
            acc_full[buffer].wait(n // ACC_BUFFERS)
            sd.async_store_wait()  # the previous tile's store has read c_smem
            out_of = acc[buffer]
            for j in range(0, BLOCK_N, EPILOGUE_COLUMNS):
                part = out_of[:, j:j + EPILOGUE_COLUMNS].astype(BF16)
                c_smem[:, j:j + EPILOGUE_COLUMNS] = sd.layout_cast(part, ROW_VECTORS)
            acc_empty[buffer].arrive(collective=0)  # the pair's issuer may reuse it
            sd.async_store(c_smem, c_ref.at[row:row + BLOCK_M, col:col + BLOCK_N])

        del stores
        sd.async_store_wait()


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(BF16)


def main(m: int = 512, n: int = 512, k: int = 256) -> None:
    keys = jax.random.split(jax.random.key(0), 2)
    a = jax.random.normal(keys[0], (m, k), jnp.float32).astype(BF16)
    b = jax.random.normal(keys[1], (k, n), jnp.float32).astype(BF16)
    out = jax.jit(matmul)(a, b)
    expected = np.asarray(reference(a, b), np.float32)
    error = np.abs(np.asarray(out, np.float32) - expected)
    # One bf16 ulp, plus the f32 summation-order bound for sums that cancel to near zero.
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    slack = 2.0**-20 * (np.abs(np.asarray(a, np.float32)) @ np.abs(np.asarray(b, np.float32)))
    off = int((error > ulp + slack).sum())
    print(f"blackwell persistent matmul {m}x{n}x{k} on {jax.devices()[0].platform}: {off} "
          f"elements off by more than one bf16 ulp (max |error| {error.max():.3g})")
    if off:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
