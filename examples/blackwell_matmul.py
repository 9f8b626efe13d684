"""bf16 matmul C = A @ B (f32 accumulation, bf16 out) for Blackwell (sm_100a) in the Python
DSL, called from JAX: TMA loads into a multi-stage shared-memory ring, tcgen05 MMAs into an
f32 accumulator in tensor memory, commits that release the stages.

One warpgroup per 128x128 tile of C. K advances in 64-wide tiles through a 4-stage ring;
each stage has two mbarriers: `full` (its TMA bytes have landed) and `free` (the MMA that
read it has completed: `tcgen05_commit` arrives on it). Thread 0 issues each MMA
asynchronously; while the tensor cores run MMA k, the warpgroup waits for MMA k - 1 to
finish and refills that stage with K tile k + 3. A last commit tells when every MMA has
finished; the epilogue loads the accumulator from tensor memory (tcgen05.ld, 32 columns at
a time), rounds it to bf16, stores it to shared memory that reuses the A stages, and writes
C with one TMA store. Run it (on a CPU the kernel's PTX runs in smalti's simulator; on a
Blackwell GPU it runs as a cubin):

    python examples/blackwell_matmul.py            # 256x256x512
    python examples/blackwell_matmul.py 512 512 1024
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
STAGES = 4
EPILOGUE_COLUMNS = 32  # accumulator columns loaded from TMEM at a time (32 registers)
BF16 = jnp.bfloat16


def grid(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct) -> tuple[int, int]:
    m, k = a.shape
    n = b.shape[1]
    if m % BLOCK_M or n % BLOCK_N or k % (STAGES * BLOCK_K) or b.shape[0] != k:
        raise ValueError(f"blackwell matmul needs A (M, K) and B (K, N) with M, N multiples "
                         f"of 128 and K a multiple of {STAGES * BLOCK_K}; got {a.shape} and "
                         f"{b.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(
    grid=grid,
    out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), BF16),
    arch="sm_100a",
    smem=[
        sd.Barriers(STAGES),  # full: a stage's TMA bytes have landed
        sd.Barriers(STAGES),  # free: the MMA reading a stage has completed (one commit)
        sd.Barriers(1),  # done: every MMA has completed
        sd.Union(sd.SMEM((STAGES, BLOCK_M, BLOCK_K), BF16),  # A stages ...
                 sd.SMEM((BLOCK_M, BLOCK_N), BF16)),  # ... reused by the epilogue's C tile
        sd.SMEM((STAGES, BLOCK_K, BLOCK_N), BF16),  # B stages
        sd.TMEM((BLOCK_M, BLOCK_N), jnp.float32),  # the accumulator: 128 TMEM columns
    ],
)
def matmul(a_ref, b_ref, c_ref, full, free, done, a_smem, c_smem, b_smem, acc):
    row = sd.program_id(0) * BLOCK_M
    col = sd.program_id(1) * BLOCK_N
    rounds = a_ref.shape[1] // (STAGES * BLOCK_K)  # trips of the ring

    def fetch(stage, k_tile):
        """Start the TMA loads of K tile `k_tile` into `stage`."""
        k = k_tile * BLOCK_K
        full[stage].arrive_expect_tx(a_smem[stage].nbytes + b_smem[stage].nbytes)
        sd.async_copy(a_ref.at[row:row + BLOCK_M, k:k + BLOCK_K], a_smem[stage], full[stage])
        sd.async_copy(b_ref.at[k:k + BLOCK_K, col:col + BLOCK_N], b_smem[stage], full[stage])

    for stage in range(STAGES):
        fetch(stage, stage)

    def consume(r, s):
        """K tile STAGES r + s, in stage s (whose barriers are in phase r for it): issue its
        MMA, then refill the stage before it (K tile STAGES r + s - 1) with the tile STAGES
        later once that tile's MMA has completed, while the MMA just issued runs."""
        full[s].wait(r)
        sd.tcgen05_mma(acc, a_smem[s], b_smem[s], accumulate=True if s else r > 0)
        sd.tcgen05_commit(free[s])
        previous = (s - 1) % STAGES
        if s == 0:  # the last stage of the previous trip, if there was one

            @sd.when(r > 0)
            def _():
                free[previous].wait(r - 1)
                fetch(previous, r * STAGES + STAGES - 1)
        else:  # the tile STAGES later exists unless this is the last trip

            @sd.when(r + 1 < rounds)
            def _():
                free[previous].wait(r)
                fetch(previous, (r + 1) * STAGES + s - 1)

    def ring(r, _):
        """One trip around the ring: K tiles STAGES r .. STAGES r + STAGES - 1."""
        for s in range(STAGES):
            consume(r, s)

    sd.fori(0, rounds, ring)
    sd.tcgen05_commit(done[0])  # arrives once every MMA above has completed
    done[0].wait(0)
    for j in range(0, BLOCK_N, EPILOGUE_COLUMNS):  # the A stages are free: no MMA reads them
        part = acc[:, j:j + EPILOGUE_COLUMNS].astype(BF16)  # a row per thread, 8 to a vector
        c_smem[:, j:j + EPILOGUE_COLUMNS] = part
    sd.async_store(c_smem, c_ref.at[row:row + BLOCK_M, col:col + BLOCK_N])
    sd.async_store_wait()


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(BF16)


def main(m: int = 256, n: int = 256, k: int = 512) -> None:
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
    print(f"blackwell matmul {m}x{n}x{k} on {jax.devices()[0].platform}: {off} elements off "
          f"by more than one bf16 ulp (max |error| {error.max():.3g})")
    if off:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
