"""bf16 matmul C = A @ B (f32 accumulation, bf16 out) with `sd.emit_pipeline`: the kernel of
examples/matmul.py without a hand-written pipeline.

One warpgroup per 128x128 tile of C. The K loop is one `emit_pipeline` over K tiles: its
body is a single wgmma on the step's A and B blocks, carrying the accumulator; the pipeline
allocates the stage ring, issues the TMA loads ahead and waits on the stage barriers.
(examples/matmul.py writes the same pipeline by hand.) Epilogue: the accumulator is rounded
to bf16 in shared memory that reuses the pipeline's (scoped) bytes, then stored with TMA.
Any M, N that are multiples of 128 and K a multiple of 64 (the K tiles need not fill whole
rounds of stages):

    python examples/matmul_pipelined.py            # 256x384x192
    python examples/matmul_pipelined.py 512 512 512
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
STAGES = 2
BF16 = jnp.bfloat16


def grid(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct) -> tuple[int, int]:
    m, k = a.shape
    n = b.shape[1]
    if m % BLOCK_M or n % BLOCK_N or k % BLOCK_K or b.shape[0] != k:
        raise ValueError(f"matmul_pipelined needs A (M, K) and B (K, N) with M, N multiples "
                         f"of {BLOCK_M} and K of {BLOCK_K}; got {a.shape} and {b.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(grid=grid,
           out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), BF16))
def matmul(a_ref, b_ref, c_ref):
    m, n = sd.program_id(0), sd.program_id(1)

    def k_step(indices, a_block, b_block, acc):
        return sd.wgmma(acc, a_block, b_block)

    acc = sd.emit_pipeline(
        k_step,
        grid=(a_ref.shape[1] // BLOCK_K,),
        in_specs=[sd.BlockSpec((BLOCK_M, BLOCK_K), lambda k: (m, k)),
                  sd.BlockSpec((BLOCK_K, BLOCK_N), lambda k: (k, n))],
        max_concurrent_steps=STAGES,
        init_carry=sd.zeros((BLOCK_M, BLOCK_N), jnp.float32),
    )(a_ref, b_ref)
    with sd.scoped_smem(sd.SMEM((BLOCK_M, BLOCK_N), BF16)) as (c_smem,):  # the ring's bytes
        c_smem[...] = acc.astype(BF16)
        sd.async_store(c_smem, c_ref.at[m * BLOCK_M:(m + 1) * BLOCK_M,
                                        n * BLOCK_N:(n + 1) * BLOCK_N])
        sd.async_store_wait()


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(BF16)


def main(m: int = 256, n: int = 384, k: int = 192) -> None:
    keys = jax.random.split(jax.random.key(0), 2)
    a = jax.random.normal(keys[0], (m, k), jnp.float32).astype(BF16)
    b = jax.random.normal(keys[1], (k, n), jnp.float32).astype(BF16)
    out = jax.jit(matmul)(a, b)
    expected = np.asarray(reference(a, b), np.float32)
    error = np.abs(np.asarray(out, np.float32) - expected)
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    print(f"matmul_pipelined {m}x{n}x{k} on {jax.devices()[0].platform}: "
          f"{int((error > ulp).sum())} elements off by more than one bf16 ulp "
          f"(max |error| {error.max():.3g})")
    if (error > ulp).any():
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
