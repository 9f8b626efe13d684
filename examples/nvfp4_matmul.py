"""NVFP4 block-scaled matmul C = dequant(A) @ dequant(B).T (bf16 out) for Blackwell (sm_100a)
in the Python DSL, called from JAX.

NVIDIA's NVFP4 format: A (M, K) and B (N, K) hold float4_e2m1fn elements (two per byte,
the lower index in the low nibble, as jax stores jnp.float4_e2m1fn), and each block of 16
consecutive elements along K shares one scale, a UE4M3 (an e4m3 with its sign bit clear,
carried as float8_e4m3fn) in A_scale (M, K / 16) and B_scale (N, K / 16); the value of
A[m, k] is A[m, k] * A_scale[m, k // 16]. (NVFP4's per-tensor f32 scale is one multiply of
C, left to the caller.) B is stored N x K (K contiguous), the layout tcgen05 reads 4-bit
operands in (as a Linear layer's weight is stored).

examples/mxfp8_matmul.py with 4-bit operands: one warpgroup per 128x128 tile of C; K advances
in 256-wide tiles (128 bytes of packed e2m1: a 128-byte swizzle) through a 4-stage ring of
shared memory that TMA fills with A's and B's packed tiles and their scales, each tile's
128 x 16 scales as four 512-byte blocks that tcgen05.cp `.32x128b.warpx4` spreads over the
lanes, 4 columns each (`scale_blocks` rearranges them once, in JAX). Thread 0 copies a
stage's scales into tensor memory (`sd.tcgen05_copy`) and issues the block-scaled MMAs
(`tcgen05.mma .kind::mxf4nvf4.block_scale.scale_vec::4X`, one per 64 of K, four scales per
row each) into an f32 accumulator in tensor memory; `tcgen05_commit` frees the stage when
the MMA has read it. The epilogue loads the accumulator, rounds it to bf16, stages it in
shared memory (reusing the A stages) and writes it with one TMA store. Run it (on a CPU the
kernel's PTX runs in smalti's simulator; on a Blackwell GPU it runs as a cubin):

    python examples/nvfp4_matmul.py            # 256x256x1024
    python examples/nvfp4_matmul.py 256 384 2048
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 256  # 256 e2m1 elements of K: 128 bytes
STAGES = 4  # the kernel takes one TMEM scale array pair per stage: 4 of each
NV_BLOCK = 16  # elements of K sharing one scale (NVFP4)
COPIES = BLOCK_K // NV_BLOCK // 4  # .32x128b.warpx4 copies per K tile: 4 scales per column
SCALE_ROWS, SCALE_BYTES = 32, 16  # one tcgen05.cp .32x128b.warpx4 block: 32 rows of 16 bytes
E2M1_MAX = 6.0  # e2m1's largest magnitude
EPILOGUE_COLUMNS = 32  # accumulator columns loaded from TMEM at a time
E2M1, UE4M3, BF16 = jnp.float4_e2m1fn, jnp.float8_e4m3fn, jnp.bfloat16


def scale_blocks(scales: jax.Array) -> jax.Array:
    """(R, K / 16) scales -> (R / 128, K / 256, 4, 32, 16): per 128 rows and 256 of K, the
    four blocks tcgen05.cp `.32x128b.warpx4` copies to consecutive groups of 4 TMEM columns,
    byte 4c + s of row j of block g being scale 4g + s of row 32c + j
    (smalti/dialect/ops_tcgen05.py, "Scale factors in TMEM")."""
    rows, blocks = scales.shape
    per_tile = BLOCK_K // NV_BLOCK  # 16 scales per row per K tile
    split = scales.reshape(rows // BLOCK_M, BLOCK_M // SCALE_ROWS, SCALE_ROWS,
                           blocks // per_tile, COPIES, 4)  # (tile, c, j, k tile, g, s)
    return split.transpose(0, 3, 4, 2, 1, 5).reshape(rows // BLOCK_M, blocks // per_tile,
                                                     COPIES, SCALE_ROWS, SCALE_BYTES)


def grid(a, a_scale, b, b_scale) -> tuple[int, int]:
    m, k = a.shape
    n = b.shape[0]
    if m % BLOCK_M or n % BLOCK_N or k % (STAGES * BLOCK_K) or b.shape[1] != k:
        raise ValueError(f"nvfp4 matmul needs A (M, K) and B (N, K) with M, N multiples of 128 "
                         f"and K a multiple of {STAGES * BLOCK_K}; got {a.shape} and {b.shape}")
    return m // BLOCK_M, n // BLOCK_N


@sd.kernel(
    grid=grid,
    out_shape=lambda a, a_scale, b, b_scale: jax.ShapeDtypeStruct((a.shape[0], b.shape[0]),
                                                                  BF16),
    arch="sm_100a",
    smem=[
        sd.Barriers(STAGES),  # full: a stage's TMA bytes have landed
        sd.Barriers(STAGES),  # free: the MMA reading a stage has completed
        sd.Barriers(1),  # done: every MMA has completed
        sd.Union(sd.SMEM((STAGES, BLOCK_M, BLOCK_K), E2M1),  # A stages (16 KiB each) ...
                 sd.SMEM((BLOCK_M, BLOCK_N), BF16)),  # ... reused by the epilogue's C tile
        sd.SMEM((STAGES, BLOCK_N, BLOCK_K), E2M1),  # B stages, N x K
        sd.SMEM((STAGES * COPIES, SCALE_ROWS, SCALE_BYTES), UE4M3),  # A's scale blocks
        sd.SMEM((STAGES * COPIES, SCALE_ROWS, SCALE_BYTES), UE4M3),  # B's scale blocks
        sd.TMEM((BLOCK_M, BLOCK_N), jnp.float32),  # the accumulator
        *[sd.TMEM((BLOCK_M, COPIES * SCALE_BYTES), UE4M3)
          for _ in range(2 * STAGES)],  # A, B per stage
    ],
)
def matmul(a_ref, sa_ref, b_ref, sb_ref, c_ref, full, free, done, a_smem, c_smem, b_smem,
           sa_smem, sb_smem, acc, a_scale0, a_scale1, a_scale2, a_scale3, b_scale0, b_scale1,
           b_scale2, b_scale3):
    i, j = sd.program_id(0), sd.program_id(1)
    row, col = i * BLOCK_M, j * BLOCK_N
    rounds = a_ref.shape[1] // (STAGES * BLOCK_K)  # trips of the ring
    a_scales = (a_scale0, a_scale1, a_scale2, a_scale3)  # one pair per stage
    b_scales = (b_scale0, b_scale1, b_scale2, b_scale3)

    def fetch(stage, k_tile):
        """Start the TMA loads of K tile `k_tile` and its scales into `stage` (the packed
        bytes: nbytes counts two e2m1 elements per byte)."""
        k = k_tile * BLOCK_K
        blocks = range(COPIES * stage, COPIES * (stage + 1))  # the stage's scale blocks
        full[stage].arrive_expect_tx(a_smem[stage].nbytes + b_smem[stage].nbytes + sum(
            sa_smem[g].nbytes + sb_smem[g].nbytes for g in blocks))
        sd.async_copy(a_ref.at[row:row + BLOCK_M, k:k + BLOCK_K], a_smem[stage], full[stage])
        sd.async_copy(b_ref.at[col:col + BLOCK_N, k:k + BLOCK_K], b_smem[stage], full[stage])
        for g, block in enumerate(blocks):
            sd.async_copy(sa_ref.at[i, k_tile, g], sa_smem[block], full[stage])
            sd.async_copy(sb_ref.at[j, k_tile, g], sb_smem[block], full[stage])

    for stage in range(STAGES):
        fetch(stage, stage)

    def consume(r, s):
        """K tile STAGES r + s, in stage s: copy its scales to TMEM and issue its MMAs, then
        refill the stage before it once that stage's MMAs have completed."""
        full[s].wait(r)
        for g in range(COPIES):  # block g: 4 TMEM columns, scales 4g .. 4g + 3 of each row
            columns = slice(SCALE_BYTES * g, SCALE_BYTES * (g + 1))
            sd.tcgen05_copy(sa_smem[COPIES * s + g], a_scales[s].at[:, columns])
            sd.tcgen05_copy(sb_smem[COPIES * s + g], b_scales[s].at[:, columns])
        sd.tcgen05_mma(acc, a_smem[s], b_smem[s].T, accumulate=True if s else r > 0,
                       a_scale=a_scales[s], b_scale=b_scales[s])
        sd.tcgen05_commit(free[s])
        previous = (s - 1) % STAGES
        if s == 0:

            @sd.when(r > 0)
            def _():
                free[previous].wait(r - 1)
                fetch(previous, r * STAGES + STAGES - 1)
        else:

            @sd.when(r + 1 < rounds)
            def _():
                free[previous].wait(r)
                fetch(previous, (r + 1) * STAGES + s - 1)

    def ring(r, _):
        for s in range(STAGES):
            consume(r, s)

    sd.fori(0, rounds, ring)
    sd.tcgen05_commit(done[0])  # arrives once every MMA above has completed
    done[0].wait(0)
    for c in range(0, BLOCK_N, EPILOGUE_COLUMNS):  # the A stages are free: no MMA reads them
        c_smem[:, c:c + EPILOGUE_COLUMNS] = acc[:, c:c + EPILOGUE_COLUMNS].astype(BF16)
    sd.async_store(c_smem, c_ref.at[row:row + BLOCK_M, col:col + BLOCK_N])
    sd.async_store_wait()


@jax.jit
def nvfp4_matmul(a: jax.Array, a_scale: jax.Array, b: jax.Array, b_scale: jax.Array
                 ) -> jax.Array:
    """C (M, N) bf16 = (A * A_scale) @ (B * B_scale).T, A (M, K) and B (N, K) float4_e2m1fn,
    A_scale (M, K / 16) and B_scale (N, K / 16) float8_e4m3fn (UE4M3: non-negative)."""
    return matmul(a, scale_blocks(a_scale), b, scale_blocks(b_scale))


def dequantize(x: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """x (rows, K) times its scale per 16 elements of K, in f64 (exact: a 2-bit significand
    times a 4-bit one)."""
    return np.asarray(x, np.float64) * np.repeat(np.asarray(scales, np.float64), NV_BLOCK,
                                                 axis=1)


def reference(a, a_scale, b, b_scale) -> np.ndarray:
    """The dequantised product in f64, then rounded to bf16 (numpy)."""
    product = dequantize(a, a_scale) @ dequantize(b, b_scale).T
    return product.astype(np.float32).astype(BF16)


def quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NVFP4 quantisation: per block of 16 along K the scale amax / 6 (e2m1's largest
    magnitude) rounded to UE4M3, and the elements divided by it, clamped to +-6 and rounded
    to nearest even e2m1. An all-zero block gets scale 1."""
    rows, k = x.shape
    blocks = x.reshape(rows, k // NV_BLOCK, NV_BLOCK)
    largest = np.abs(blocks).max(axis=2)
    scales = (largest / E2M1_MAX).astype(UE4M3)
    divisor = scales.astype(np.float32)
    divisor[divisor == 0] = 1
    scales[largest == 0] = 1
    elements = np.clip(blocks / divisor[..., None], -E2M1_MAX, E2M1_MAX).reshape(rows, k)
    return elements.astype(E2M1), scales


def main(m: int = 256, n: int = 256, k: int = 1024) -> None:
    rng = np.random.default_rng(0)
    a, a_scale = quantize(rng.standard_normal((m, k)).astype(np.float32))
    b, b_scale = quantize(rng.standard_normal((n, k)).astype(np.float32))
    out = np.asarray(nvfp4_matmul(a, a_scale, b, b_scale), np.float32)
    expected = reference(a, a_scale, b, b_scale).astype(np.float32)
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    off = int((np.abs(out - expected) > ulp).sum())
    print(f"nvfp4 matmul {m}x{n}x{k} on {jax.devices()[0].platform}: {off} elements off by "
          f"more than one bf16 ulp")
    if off:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
