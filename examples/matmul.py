"""bf16 matmul C = A @ B (f32 accumulation, bf16 out) in the Python DSL, called from JAX:
the kernel of examples/matmul_128x128x64.mlir, written in Python.

One warpgroup per 128x128 tile of C. K advances in 64-wide tiles through a 2-stage TMA
pipeline: while wgmma consumes one stage, TMA fills the other. Each stage has its own
mbarrier, whose phase parity flips every time the stage is reused. Epilogue: the f32
accumulator is rounded to bf16, stored to (swizzled) shared memory that reuses the A stages,
and written to C with one TMA store. Run it (on a CPU the kernel's PTX runs in smalti's
simulator; on a Hopper GPU it runs as a cubin):

    python examples/matmul.py            # 256x256x128
    python examples/matmul.py 512 512 512
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
    if m % BLOCK_M or n % BLOCK_N or k % (STAGES * BLOCK_K) or b.shape[0] != k:
        raise ValueError(f"matmul needs A (M, K) and B (K, N) with M, N multiples of 128 and "
                         f"K a multiple of {STAGES * BLOCK_K}; got {a.shape} and {b.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(
    grid=grid,
    out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), BF16),
    smem=[
        sd.Barriers(STAGES),
        sd.Union(sd.SMEM((STAGES, BLOCK_M, BLOCK_K), BF16),  # A stages ...
                 sd.SMEM((BLOCK_M, BLOCK_N), BF16)),  # ... reused by the epilogue's C tile
        sd.SMEM((STAGES, BLOCK_K, BLOCK_N), BF16),  # B stages
    ],
)
def matmul(a_ref, b_ref, c_ref, bars, a_smem, c_smem, b_smem):
    row = sd.program_id(0) * BLOCK_M
    col = sd.program_id(1) * BLOCK_N
    k_tiles = a_ref.shape[1] // BLOCK_K

    def fetch(stage, k_tile):
        """Start the TMA loads of K tile `k_tile` into `stage`."""
        k = k_tile * BLOCK_K
        bars[stage].arrive_expect_tx(a_smem[stage].nbytes + b_smem[stage].nbytes)
        sd.async_copy(a_ref.at[row:row + BLOCK_M, k:k + BLOCK_K], a_smem[stage], bars[stage])
        sd.async_copy(b_ref.at[k:k + BLOCK_K, col:col + BLOCK_N], b_smem[stage], bars[stage])

    fetch(0, 0)

    def two_k_tiles(it, acc):
        """K tiles 2 it (stage 0) and 2 it + 1 (stage 1); both barriers are in phase `it`."""
        k_tile = it * STAGES
        fetch(1, k_tile + 1)
        bars[0].wait(it)
        acc = sd.wgmma(acc, a_smem[0], b_smem[0])

        @sd.when(k_tile + 2 < k_tiles)
        def _():
            fetch(0, k_tile + 2)  # stage 0 is free: its wgmma has completed

        bars[1].wait(it)
        return sd.wgmma(acc, a_smem[1], b_smem[1])

    acc = sd.fori(0, k_tiles // STAGES, two_k_tiles, sd.zeros((BLOCK_M, BLOCK_N), jnp.float32))
    c_smem[...] = acc.astype(BF16)  # every wgmma has completed: the A stages are free
    sd.async_store(c_smem, c_ref.at[row:row + BLOCK_M, col:col + BLOCK_N])
    sd.async_store_wait()


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(BF16)


def main(m: int = 256, n: int = 256, k: int = 128) -> None:
    keys = jax.random.split(jax.random.key(0), 2)
    a = jax.random.normal(keys[0], (m, k), jnp.float32).astype(BF16)
    b = jax.random.normal(keys[1], (k, n), jnp.float32).astype(BF16)
    out = jax.jit(matmul)(a, b)
    expected = np.asarray(reference(a, b), np.float32)
    error = np.abs(np.asarray(out, np.float32) - expected)
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    print(f"matmul {m}x{n}x{k} on {jax.devices()[0].platform}: {int((error > ulp).sum())} "
          f"elements off by more than one bf16 ulp (max |error| {error.max():.3g})")
    if (error > ulp).any():
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
