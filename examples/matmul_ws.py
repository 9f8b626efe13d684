"""Warp-specialised bf16 matmul C = A @ B (f32 accumulation, bf16 out) in the Python DSL,
called from JAX: the kernel of examples/matmul_128x256x64_ws.mlir, written in Python.

Three warpgroups per 128x256 tile of C, each in its own `sd.warpgroup_region`: a producer
(warpgroup 0) issues the TMA loads, and two consumers (warpgroups 1 and 2) issue wgmma, each
on a 64x256 half of the tile (its own 64 rows of A, all of B). K advances in 64-wide tiles
through a 4-stage ring. Stage s has a "full" mbarrier (the producer announces the stage's
48 KiB, TMA completes them) and an "empty" one (all 256 consumer threads arrive once their
wgmma has read the stage). Round r = k_tile // 4 uses phase r of every barrier: consumers
wait on full[s] with parity r, the producer on empty[s] with parity r + 1 (on a fresh
barrier that wait passes at once). Register budgets (setmaxnreg): the producer gives
registers back (40), the consumers take them (232 each; 40 + 2 * 232 = 504 <= 65536 / 128).
Epilogue: each consumer rounds its accumulator to bf16, stores it to (swizzled) shared
memory that reuses its own A stages, and writes its half of C with one TMA store. Run it
(on a CPU the kernel's PTX runs in smalti's simulator; on a Hopper GPU it runs as a cubin):

    python examples/matmul_ws.py            # 256x512x256
    python examples/matmul_ws.py 512 512 1024
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 64
STAGES = 4
CONSUMERS = 2
ROWS = BLOCK_M // CONSUMERS  # rows of the tile per consumer warpgroup
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232
BF16 = jnp.bfloat16


def grid(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct) -> tuple[int, int]:
    m, k = a.shape
    n = b.shape[1]
    if m % BLOCK_M or n % BLOCK_N or k % (STAGES * BLOCK_K) or b.shape[0] != k:
        raise ValueError(f"matmul_ws needs A (M, K) and B (K, N) with M a multiple of "
                         f"{BLOCK_M}, N of {BLOCK_N} and K of {STAGES * BLOCK_K}; got "
                         f"{a.shape} and {b.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(
    grid=grid,
    out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), BF16),
    warpgroups=1 + CONSUMERS,
    smem=[
        sd.Barriers(STAGES),  # full: a stage's TMA bytes have landed
        sd.Barriers(STAGES, arrival_count=CONSUMERS * 128),  # empty: both consumers read it
        sd.Union(sd.SMEM((STAGES, ROWS, BLOCK_K), BF16),  # consumer 0's A stages ...
                 sd.SMEM((ROWS, BLOCK_N), BF16)),  # ... reused by its half of C
        sd.Union(sd.SMEM((STAGES, ROWS, BLOCK_K), BF16),  # consumer 1's likewise
                 sd.SMEM((ROWS, BLOCK_N), BF16)),
        sd.SMEM((STAGES, BLOCK_K, BLOCK_N), BF16),  # B stages, read by both consumers
    ],
)
def matmul_ws(a_ref, b_ref, c_ref, full, empty, a0_smem, c0_smem, a1_smem, c1_smem, b_smem):
    row = sd.program_id(0) * BLOCK_M
    col = sd.program_id(1) * BLOCK_N
    rounds = a_ref.shape[1] // (STAGES * BLOCK_K)
    a_halves = (a0_smem, a1_smem)  # consumer c's 64 rows of A, per stage
    stage_bytes = a0_smem[0].nbytes + a1_smem[0].nbytes + b_smem[0].nbytes

    @sd.warpgroup_region(warpgroups=0, registers=PRODUCER_REGISTERS)
    def producer():
        def fill_ring(r, _):
            """K tiles 4 r .. 4 r + 3 into stages 0 .. 3, each once the consumers freed it."""
            for s in range(STAGES):
                k = (r * STAGES + s) * BLOCK_K
                empty[s].wait(r + 1)
                full[s].arrive_expect_tx(stage_bytes)
                for c, a_smem in enumerate(a_halves):
                    rows = row + c * ROWS
                    sd.async_copy(a_ref.at[rows:rows + ROWS, k:k + BLOCK_K], a_smem[s], full[s])
                sd.async_copy(b_ref.at[k:k + BLOCK_K, col:col + BLOCK_N], b_smem[s], full[s])

        sd.fori(0, rounds, fill_ring)

    def consumer(c, a_smem, c_smem):
        """Consumer c (warpgroup 1 + c): wgmma over every K tile of its rows, then its
        half of C."""
        rows = row + c * ROWS

        def drain_ring(r, acc):
            for s in range(STAGES):
                full[s].wait(r)
                acc = sd.wgmma(acc, a_smem[s], b_smem[s])
                empty[s].arrive()  # the wgmma has completed: the producer may refill s
            return acc

        @sd.warpgroup_region(warpgroups=1 + c, registers=CONSUMER_REGISTERS)
        def _():
            acc = sd.fori(0, rounds, drain_ring, sd.zeros((ROWS, BLOCK_N), jnp.float32))
            c_smem[...] = acc.astype(BF16)  # only this consumer ever read these A stages
            sd.async_store(c_smem, c_ref.at[rows:rows + ROWS, col:col + BLOCK_N])
            sd.async_store_wait()

    consumer(0, a0_smem, c0_smem)
    consumer(1, a1_smem, c1_smem)


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(BF16)


def main(m: int = 256, n: int = 512, k: int = 256) -> None:
    keys = jax.random.split(jax.random.key(0), 2)
    a = jax.random.normal(keys[0], (m, k), jnp.float32).astype(BF16)
    b = jax.random.normal(keys[1], (k, n), jnp.float32).astype(BF16)
    out = jax.jit(matmul_ws)(a, b)
    expected = np.asarray(reference(a, b), np.float32)
    error = np.abs(np.asarray(out, np.float32) - expected)
    # One bf16 ulp, plus the f32 summation-order bound for sums that cancel to near zero.
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    slack = 2.0**-20 * (np.abs(np.asarray(a, np.float32)) @ np.abs(np.asarray(b, np.float32)))
    off = int((error > ulp + slack).sum())
    print(f"matmul_ws {m}x{n}x{k} on {jax.devices()[0].platform}: {off} elements off by more "
          f"than one bf16 ulp (max |error| {error.max():.3g})")
    if off:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
