"""MXFP8 block-scaled matmul C = dequant(A) @ dequant(B).T (bf16 out) for Blackwell (sm_100a)
in the Python DSL, called from JAX.

The OCP Microscaling (MX) format: A (M, K) and B (N, K) hold float8_e4m3fn elements, and each
block of 32 consecutive elements along K shares one power-of-two scale, a float8_e8m0fnu in
A_scale (M, K / 32) and B_scale (N, K / 32); the value of A[m, k] is
A[m, k] * A_scale[m, k // 32]. B is stored N x K (K contiguous), the layout tcgen05 reads
8-bit operands in (as a Linear layer's weight is stored).

One warpgroup per 128x128 tile of C. K advances in 128-wide tiles (128 bytes of e4m3: a
128-byte swizzle) through a 4-stage ring of shared memory that TMA fills with A's and B's
tiles and their scales, each tile's 128 x 4 scales as the 512-byte block that tcgen05.cp
`.32x128b.warpx4` spreads over the lanes (`scale_blocks` rearranges them once, in JAX).
Thread 0 copies a stage's scales into tensor memory (`sd.tcgen05_copy`: each stage its own
TMEM scale arrays, since an MMA still running may read the previous tile's) and issues the
block-scaled MMA (`tcgen05.mma .kind::mxf8f6f4.block_scale`, one per 32 of K) into an f32
accumulator in tensor memory; `tcgen05_commit` frees the stage when the MMA has read it. The
epilogue loads the accumulator, rounds it to bf16, stages it in shared memory (reusing the
A stages) and writes it with one TMA store. Run it (on a CPU the kernel's PTX runs in
smalti's simulator; on a Blackwell GPU it runs as a cubin):

    python examples/mxfp8_matmul.py            # 256x256x512
    python examples/mxfp8_matmul.py 256 384 1024
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 128
STAGES = 4  # the kernel takes one TMEM scale array pair per stage: 4 of each
MX_BLOCK = 32  # elements of K sharing one scale (OCP MX)
E4M3_EMAX = 8  # e4m3's largest exponent: its largest normal is 1.75 * 2^8 = 448
SCALE_ROWS, SCALE_BYTES = 32, 16  # one tcgen05.cp .32x128b.warpx4 block: 32 rows of 16 bytes
EPILOGUE_COLUMNS = 32  # accumulator columns loaded from TMEM at a time
E4M3, E8M0, BF16 = jnp.float8_e4m3fn, jnp.float8_e8m0fnu, jnp.bfloat16


def scale_blocks(scales: jax.Array) -> jax.Array:
    """(R, K / 32) scales -> (R / 128, K / 128, 32, 16): per 128 rows and 128 of K, the bytes
    tcgen05.cp `.32x128b.warpx4` copies, byte 4c + s of row j being scale s of row 32c + j
    (smalti/dialect/ops_tcgen05.py, "Scale factors in TMEM")."""
    rows, blocks = scales.shape
    per_tile = BLOCK_K // MX_BLOCK  # 4 scales per row per K tile
    split = scales.reshape(rows // BLOCK_M, BLOCK_M // SCALE_ROWS, SCALE_ROWS,
                           blocks // per_tile, per_tile)  # (tile, c, j, k tile, s)
    return split.transpose(0, 3, 2, 1, 4).reshape(rows // BLOCK_M, blocks // per_tile,
                                                  SCALE_ROWS, SCALE_BYTES)


def grid(a, a_scale, b, b_scale) -> tuple[int, int]:
    m, k = a.shape
    n = b.shape[0]
    if m % BLOCK_M or n % BLOCK_N or k % (STAGES * BLOCK_K) or b.shape[1] != k:
        raise ValueError(f"mxfp8 matmul needs A (M, K) and B (N, K) with M, N multiples of 128 "
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
        sd.Union(sd.SMEM((STAGES, BLOCK_M, BLOCK_K), E4M3),  # A stages ...
                 sd.SMEM((BLOCK_M, BLOCK_N), BF16)),  # ... reused by the epilogue's C tile
        sd.SMEM((STAGES, BLOCK_N, BLOCK_K), E4M3),  # B stages, N x K
        sd.SMEM((STAGES, SCALE_ROWS, SCALE_BYTES), E8M0),  # A's scale blocks
        sd.SMEM((STAGES, SCALE_ROWS, SCALE_BYTES), E8M0),  # B's scale blocks
        sd.TMEM((BLOCK_M, BLOCK_N), jnp.float32),  # the accumulator
        *[sd.TMEM((BLOCK_M, SCALE_BYTES), E8M0) for _ in range(2 * STAGES)],  # A, B per stage
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
        """Start the TMA loads of K tile `k_tile` and its scales into `stage`."""
        k = k_tile * BLOCK_K
        full[stage].arrive_expect_tx(a_smem[stage].nbytes + b_smem[stage].nbytes
                                     + sa_smem[stage].nbytes + sb_smem[stage].nbytes)
        sd.async_copy(a_ref.at[row:row + BLOCK_M, k:k + BLOCK_K], a_smem[stage], full[stage])
        sd.async_copy(b_ref.at[col:col + BLOCK_N, k:k + BLOCK_K], b_smem[stage], full[stage])
        sd.async_copy(sa_ref.at[i, k_tile], sa_smem[stage], full[stage])
        sd.async_copy(sb_ref.at[j, k_tile], sb_smem[stage], full[stage])

    for stage in range(STAGES):
        fetch(stage, stage)

    def consume(r, s):
        """K tile STAGES r + s, in stage s: copy its scales to TMEM and issue its MMA, then
        refill the stage before it once that stage's MMA has completed (as
        examples/blackwell_matmul.py does)."""
        full[s].wait(r)
        sd.tcgen05_copy(sa_smem[s], a_scales[s])
        sd.tcgen05_copy(sb_smem[s], b_scales[s])
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
def mxfp8_matmul(a: jax.Array, a_scale: jax.Array, b: jax.Array, b_scale: jax.Array
                 ) -> jax.Array:
    """C (M, N) bf16 = (A * A_scale) @ (B * B_scale).T, A (M, K) and B (N, K) float8_e4m3fn,
    A_scale (M, K / 32) and B_scale (N, K / 32) float8_e8m0fnu."""
    return matmul(a, scale_blocks(a_scale), b, scale_blocks(b_scale))


def dequantize(x: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """x (rows, K) times its scale per 32 elements of K, in f32 (exact: the scales are powers
    of two)."""
    return np.asarray(x, np.float32) * np.repeat(np.asarray(scales, np.float32), MX_BLOCK,
                                                 axis=1)


def reference(a, a_scale, b, b_scale) -> np.ndarray:
    """The dequantised product in f64, then rounded to bf16 (numpy)."""
    product = dequantize(a, a_scale).astype(np.float64) @ dequantize(b, b_scale).astype(
        np.float64).T
    return product.astype(np.float32).astype(jnp.bfloat16)


def quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MX quantisation (OCP MX 1.0, section 6.3): per block of 32 along K the scale
    2^(floor(log2(amax)) - 8), 8 being e4m3's largest exponent, and the elements divided by
    it, clamped to e4m3's largest normal (448) and rounded to nearest even."""
    rows, k = x.shape
    blocks = x.reshape(rows, k // MX_BLOCK, MX_BLOCK)
    largest = np.maximum(np.abs(blocks).max(axis=2), np.finfo(np.float32).tiny)
    scales = np.exp2(np.floor(np.log2(largest)) - E4M3_EMAX).astype(np.float32)
    limit = float(ml_dtypes.finfo(E4M3).max)
    elements = np.clip(blocks / scales[..., None], -limit, limit).reshape(rows, k)
    return elements.astype(E4M3), scales.astype(E8M0)


def main(m: int = 256, n: int = 256, k: int = 512) -> None:
    rng = np.random.default_rng(0)
    a, a_scale = quantize(rng.standard_normal((m, k)).astype(np.float32))
    b, b_scale = quantize(rng.standard_normal((n, k)).astype(np.float32))
    out = np.asarray(mxfp8_matmul(a, a_scale, b, b_scale), np.float32)
    expected = reference(a, a_scale, b, b_scale).astype(np.float32)
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    off = int((np.abs(out - expected) > ulp).sum())
    print(f"mxfp8 matmul {m}x{n}x{k} on {jax.devices()[0].platform}: {off} elements off by "
          f"more than one bf16 ulp")
    if off:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
