"""The bf16 matmul of examples/matmul.py, autotuned over its tile shape and stage count.

`make_matmul(config)` is that kernel with BLOCK_M, BLOCK_N and STAGES taken from the config
(and the stage of K tile k chosen at run time, `smem[k % stages]`). `@sd.autotune` builds it
for each config, prunes those that cannot compile (here the 8-stage one: its stages need
256 KiB of shared memory, more than the 227 KiB a block may use), ranks the rest (on a GPU
by timing them; on a CPU by a static model of their SASS) and runs the best. The choice is
cached per (M, N, K) on disk. Run it (on a CPU the chosen kernel runs in the simulator):

    python examples/matmul_autotuned.py            # 256x256x128, prints the report
    python examples/matmul_autotuned.py 512 256 256
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_K = 64
BF16 = jnp.bfloat16

CONFIGS = [
    sd.Config(block_m=128, block_n=128, stages=2),
    sd.Config(block_m=128, block_n=128, stages=4),
    sd.Config(block_m=64, block_n=128, stages=3),
    sd.Config(block_m=128, block_n=128, stages=8),  # 8 x 32 KiB of stages: pruned
]


@sd.autotune(configs=CONFIGS, key=["M", "N", "K"], dims=("M K", "K N"))
def matmul(config: sd.Config) -> sd.Kernel:
    """C = A @ B in tiles of block_m x block_n, K in 64-wide tiles through `stages` stages."""
    block_m, block_n, stages = config.block_m, config.block_n, config.stages

    def grid(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct) -> tuple[int, int]:
        (m, k), n = a.shape, b.shape[1]
        if m % block_m or n % block_n or k % BLOCK_K or b.shape[0] != k:
            raise ValueError(f"matmul needs A (M, K) and B (K, N) with M a multiple of "
                             f"{block_m}, N of {block_n} and K of {BLOCK_K}; got {a.shape} "
                             f"and {b.shape}")
        return m // block_m, n // block_n

    @sd.kernel(
        grid=grid,
        out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), BF16),
        smem=[
            sd.Barriers(stages),
            sd.Union(sd.SMEM((stages, block_m, BLOCK_K), BF16),  # A stages ...
                     sd.SMEM((block_m, block_n), BF16)),  # ... reused by the C tile
            sd.SMEM((stages, BLOCK_K, block_n), BF16),  # B stages
        ],
        name=f"matmul_{block_m}x{block_n}_{stages}stages",
    )
    def kernel(a_ref, b_ref, c_ref, bars, a_smem, c_smem, b_smem):
        row = sd.program_id(0) * block_m
        col = sd.program_id(1) * block_n
        k_tiles = a_ref.shape[1] // BLOCK_K

        def fetch(k_tile):
            """Start the TMA loads of K tile `k_tile` into its stage."""
            stage, k = k_tile % stages, k_tile * BLOCK_K
            bars[stage].arrive_expect_tx(a_smem[0].nbytes + b_smem[0].nbytes)
            sd.async_copy(a_ref.at[row:row + block_m, k:k + BLOCK_K], a_smem[stage], bars[stage])
            sd.async_copy(b_ref.at[k:k + BLOCK_K, col:col + block_n], b_smem[stage], bars[stage])

        for k_tile in range(min(stages - 1, k_tiles)):
            fetch(k_tile)

        def step(k_tile, acc):
            stage = k_tile % stages
            bars[stage].wait(k_tile // stages)
            acc = sd.wgmma(acc, a_smem[stage], b_smem[stage])

            @sd.when(k_tile + stages - 1 < k_tiles)
            def _():
                fetch(k_tile + stages - 1)  # its stage's wgmma (K tile k_tile - 1) is done

            return acc

        acc = sd.fori(0, k_tiles, step, sd.zeros((block_m, block_n), jnp.float32))
        c_smem[...] = acc.astype(BF16)  # every wgmma has completed: the A stages are free
        sd.async_store(c_smem, c_ref.at[row:row + block_m, col:col + block_n])
        sd.async_store_wait()

    return kernel


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(BF16)


def main(m: int = 256, n: int = 256, k: int = 128) -> None:
    keys = jax.random.split(jax.random.key(0), 2)
    a = jax.random.normal(keys[0], (m, k), jnp.float32).astype(BF16)
    b = jax.random.normal(keys[1], (k, n), jnp.float32).astype(BF16)
    out = jax.jit(matmul)(a, b)
    print(matmul.report)
    expected = np.asarray(reference(a, b), np.float32)
    error = np.abs(np.asarray(out, np.float32) - expected)
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    print(f"matmul {m}x{n}x{k} on {jax.devices()[0].platform} with "
          f"{matmul.report.chosen.config}: {int((error > ulp).sum())} elements off by more "
          f"than one bf16 ulp (max |error| {error.max():.3g})")
    if (error > ulp).any():
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
