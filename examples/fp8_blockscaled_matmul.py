"""FP8 matmul with per-block scales, as DeepSeek-V3 trains: out = (A * sa) @ (B * sb) in
bf16, with A [M, K] and B^T [N, K] float8_e4m3fn, one f32 scale per row and 128 columns of A
(1x128 blocks of activations) and one per 128x128 block of B (weights).

One warpgroup per 64x128 tile of out. K advances in 128-wide tiles, each exactly one scale
block, through a 2-stage TMA pipeline. The tensor cores multiply a tile in f32 (e4m3 wgmma,
A and B both K-major); its product is scaled by the tile's row scales and block scale and
added to the f32 total in registers: the scales are applied in the main loop, with
promotion to f32 every 128 K, so no precision is lost to the tensor cores' limited
accumulation over long K. Run it (on a CPU in smalti's simulator):

    python examples/fp8_blockscaled_matmul.py            # 256x256x512
    python examples/fp8_blockscaled_matmul.py 128 256 1024
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import smalti.dsl as sd

BLOCK_M, BLOCK_N = 64, 128
SCALE_BLOCK = 128  # K per scale block, and per K tile (128 one-byte elements: one 128 B row)
E4M3, F32, BF16 = jnp.float8_e4m3fn, jnp.float32, jnp.bfloat16


def grid(a: jax.ShapeDtypeStruct, a_scale: jax.ShapeDtypeStruct, bt: jax.ShapeDtypeStruct,
         bt_scale: jax.ShapeDtypeStruct) -> tuple[int, int]:
    (m, k), n = a.shape, bt.shape[0]
    if (m % BLOCK_M or n % BLOCK_N or k % (2 * SCALE_BLOCK) or bt.shape[1] != k
            or a_scale.shape != (m, k // SCALE_BLOCK)
            or bt_scale.shape != (n // SCALE_BLOCK, k // SCALE_BLOCK)):
        raise ValueError(
            f"fp8_matmul needs A [M, K], its scales [M, K/128], B^T [N, K] and its scales "
            f"[N/128, K/128], with M a multiple of {BLOCK_M}, N of {BLOCK_N} and K of "
            f"{2 * SCALE_BLOCK}; got {a.shape}, {a_scale.shape}, {bt.shape}, {bt_scale.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(
    grid=grid,
    out_shape=lambda a, a_scale, bt, bt_scale: jax.ShapeDtypeStruct((a.shape[0], bt.shape[0]),
                                                                    BF16),
    smem=[sd.Barriers(2),
          sd.SMEM((2, BLOCK_M, SCALE_BLOCK), E4M3),  # A tiles
          sd.SMEM((2, BLOCK_N, SCALE_BLOCK), E4M3),  # B^T tiles (K-major)
          sd.SMEM((BLOCK_M, BLOCK_N), BF16)],  # the out tile
)
def fp8_matmul(a_ref, a_scale_ref, bt_ref, bt_scale_ref, out_ref, bars, a_smem, bt_smem,
               c_smem):
    row = sd.program_id(0) * BLOCK_M
    block_n = sd.program_id(1)
    col = block_n * BLOCK_N
    k_tiles = a_ref.shape[1] // SCALE_BLOCK

    def fetch(stage: int, k_tile: object) -> None:
        """Start the TMA loads of K tile `k_tile` into `stage`."""
        k = k_tile * SCALE_BLOCK
        bars[stage].arrive_expect_tx(a_smem[stage].nbytes + bt_smem[stage].nbytes)
        sd.async_copy(a_ref.at[row:row + BLOCK_M, k:k + SCALE_BLOCK], a_smem[stage],
                      bars[stage])
        sd.async_copy(bt_ref.at[col:col + BLOCK_N, k:k + SCALE_BLOCK], bt_smem[stage],
                      bars[stage])

    def scaled(total: object, stage: int, k_tile: object) -> object:
        """total + K tile `k_tile`'s product, scaled by its row and block scales."""
        part = sd.wgmma(sd.zeros((BLOCK_M, BLOCK_N), F32), a_smem[stage], bt_smem[stage].T)
        rows = a_scale_ref[row:row + BLOCK_M, k_tile][:, None]
        block = bt_scale_ref[block_n:block_n + 1, k_tile:k_tile + 1].broadcast_to(
            (BLOCK_M, BLOCK_N))
        return total + part * rows * block

    fetch(0, 0)

    def two_k_tiles(it: object, total: object) -> object:
        """K tiles 2 it (stage 0) and 2 it + 1 (stage 1); both barriers are in phase `it`."""
        k_tile = it * 2
        fetch(1, k_tile + 1)
        bars[0].wait(it)
        total = scaled(total, 0, k_tile)

        @sd.when(k_tile + 2 < k_tiles)
        def _():
            fetch(0, k_tile + 2)  # stage 0 is free: its wgmma has completed

        bars[1].wait(it)
        return scaled(total, 1, k_tile + 1)

    total = sd.fori(0, k_tiles // 2, two_k_tiles, sd.zeros((BLOCK_M, BLOCK_N), F32))
    c_smem[...] = total.astype(BF16)
    sd.async_store(c_smem, out_ref.at[row:row + BLOCK_M, col:col + BLOCK_N])
    sd.async_store_wait()


def quantize(x: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """x [R, K] as e4m3 with one f32 scale per `rows` x 128 block (its max maps to 448, e4m3's
    largest finite value)."""
    r, k = x.shape
    blocks = x.reshape(r // rows, rows, k // SCALE_BLOCK, SCALE_BLOCK)
    scale = np.maximum(np.abs(blocks).max((1, 3)), 1e-12) / 448.0
    q = (blocks / scale[:, None, :, None]).astype(ml_dtypes.float8_e4m3fn)
    return q.reshape(r, k), scale.astype(np.float32)


def reference(a: np.ndarray, a_scale: np.ndarray, bt: np.ndarray, bt_scale: np.ndarray
              ) -> np.ndarray:
    """The dequantized product in f64: (A * sa) @ (B^T * sb)^T."""
    a64 = a.astype(np.float64) * np.repeat(a_scale, SCALE_BLOCK, axis=1)
    b64 = bt.astype(np.float64) * np.repeat(np.repeat(bt_scale, SCALE_BLOCK, 0),
                                            SCALE_BLOCK, 1)
    return a64 @ b64.T


def main(m: int = 256, n: int = 256, k: int = 512) -> None:
    rng = np.random.default_rng(0)
    a, a_scale = quantize(rng.standard_normal((m, k)), 1)
    bt, bt_scale = quantize(rng.standard_normal((n, k)), SCALE_BLOCK)
    out = np.asarray(jax.jit(fp8_matmul)(a, a_scale, bt, bt_scale), np.float32)
    expected = reference(a, a_scale, bt, bt_scale)
    ulp = np.spacing(np.abs(expected).astype(ml_dtypes.bfloat16)).astype(np.float64)
    bad = np.abs(out - expected) > ulp + 1e-3
    print(f"fp8 block-scaled matmul {m}x{n}x{k} on {jax.devices()[0].platform}: "
          f"{int(bad.sum())} elements off by more than one bf16 ulp "
          f"(max |error| {np.abs(out - expected).max():.3g})")
    if bad.any():
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
