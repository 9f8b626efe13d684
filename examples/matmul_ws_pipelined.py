"""Warp-specialised bf16 matmul C = A @ B (f32 accumulation, bf16 out) with
`sd.emit_pipeline_warp_specialized`: the kernel of examples/matmul_ws.py without a
hand-written pipeline.

Three warpgroups per 128x256 tile of C: the pipeline's producer (warpgroup 0, 40 registers)
issues the TMA loads of each 64-wide K tile into a 4-stage ring, and its two consumers
(warpgroups 1 and 2, 232 registers each) run the step's body, one wgmma on their own 64
rows of A (`split=(0, None)`: A's block is split by rows between them, B's is shared) and
all of B. The full/empty barriers and their parities are the pipeline's. Each consumer's
epilogue rounds its accumulator to bf16 and stores its rows of C. Any M a multiple of 128,
N of 256 and K of 64:

    python examples/matmul_ws_pipelined.py            # 256x512x320
    python examples/matmul_ws_pipelined.py 512 512 1024
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
BF16 = jnp.bfloat16


def grid(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct) -> tuple[int, int]:
    m, k = a.shape
    n = b.shape[1]
    if m % BLOCK_M or n % BLOCK_N or k % BLOCK_K or b.shape[0] != k:
        raise ValueError(f"matmul_ws_pipelined needs A (M, K) and B (K, N) with M a multiple "
                         f"of {BLOCK_M}, N of {BLOCK_N} and K of {BLOCK_K}; got {a.shape} "
                         f"and {b.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(grid=grid, warpgroups=1 + CONSUMERS,
           out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), BF16))
def matmul_ws(a_ref, b_ref, c_ref):
    m, n = sd.program_id(0), sd.program_id(1)

    def k_step(indices, a_rows, b_block, acc):
        return sd.wgmma(acc, a_rows, b_block)

    def store_rows(consumer, acc):
        rows = m * BLOCK_M + consumer * ROWS
        c_ref[rows:rows + ROWS, n * BLOCK_N:(n + 1) * BLOCK_N] = acc.astype(BF16)

    sd.emit_pipeline_warp_specialized(
        k_step,
        grid=(a_ref.shape[1] // BLOCK_K,),
        in_specs=[sd.BlockSpec((BLOCK_M, BLOCK_K), lambda k: (m, k)),
                  sd.BlockSpec((BLOCK_K, BLOCK_N), lambda k: (k, n))],
        split=(0, None),
        max_concurrent_steps=STAGES,
        memory_registers=40, compute_registers=232,
        init_carry=lambda: sd.zeros((ROWS, BLOCK_N), jnp.float32),
        epilogue=store_rows,
    )(a_ref, b_ref)


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(BF16)


def main(m: int = 256, n: int = 512, k: int = 320) -> None:
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
    print(f"matmul_ws_pipelined {m}x{n}x{k} on {jax.devices()[0].platform}: {off} elements "
          f"off by more than one bf16 ulp (max |error| {error.max():.3g})")
    if off:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
