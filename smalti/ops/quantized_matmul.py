"""Weight-only quantized matmul, `quantized_matmul(x, w, scales, *, group_size=128,
out_dtype=None)`: x @ (w * scales repeated along K), w int8 or int4, on Hopper wgmma.

One warpgroup per BLOCK_M x BLOCK_N output tile, K in BLOCK_K-wide steps. Step s converts
w's tile, loaded into registers at its own width (int4 two per byte) during step s - 1,
with sitofp (a few prmt/lop3 per register), multiplies it by its group's scales (f32),
rounds it to x's dtype and stores it to swizzled shared memory; it starts the TMA load of
x's next tile (two stages) and the register load of w's next tile, then one wgmma adds
the step's product to the f32 accumulator while those loads are in flight. BLOCK_K
divides every supported group size, so a step reads one row of scales. Ragged M needs no
padding: TMA loads of x's last row tile fill past its end with zeros and the TMA store of
the output clips."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
STAGES = 2  # x's tile for the next step loads while this step's wgmma runs
MULTIPLE = 8  # TMA needs 16-byte row strides: 8 elements of 2 bytes
INPUT_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
WEIGHT_DTYPES = (jnp.dtype(jnp.int8), jnp.dtype(jnp.int4))
OUT_DTYPES = (*INPUT_DTYPES, jnp.dtype(jnp.float32))
F32 = jnp.float32
OP = "smalti.ops.quantized_matmul"
# The weight tile's register layout: 8 consecutive columns per register (an int4 register
# holds 8, an int8 one 4 twice), 8 rows x 4 column groups of lanes, a warp per 8 rows.
WEIGHT_LAYOUT = ("#smalti.tiled<tiling = [[32, 128], [8, 32], [1, 8]], warp = [-6], "
                 "lane = [-4, -3], vector = -1>")


def _error(message: str) -> ValueError:
    return ValueError(f"{OP}: {message}")


def _check(x: jax.Array, w: jax.Array, scales: jax.Array, group_size: object,
           out_dtype: object) -> jnp.dtype:
    """The output dtype, once every argument is checked (ValueError naming the argument)."""
    for name, value in (("x", x), ("w", w), ("scales", scales)):
        if value.ndim != 2 or 0 in value.shape:
            raise _error(f"{name} must be a non-empty 2-D array, got shape "
                         f"{tuple(value.shape)}")
    if x.dtype not in INPUT_DTYPES:
        raise _error(f"x must be bfloat16 or float16, got {x.dtype}")
    if w.dtype not in WEIGHT_DTYPES:
        raise _error(f"w must be int8 or int4, got {w.dtype}")
    if scales.dtype not in (x.dtype, jnp.dtype(F32)):
        raise _error(f"scales must be float32 or x's dtype ({x.dtype}), got {scales.dtype}")
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size <= 0 \
            or group_size % BLOCK_K:
        raise _error(f"group_size must be a positive multiple of {BLOCK_K}, got "
                     f"{group_size!r}")
    (m, k), (k_w, n) = x.shape, w.shape
    if k_w != k:
        raise _error(f"w must have shape ({k}, n) (its rows x's columns), got "
                     f"{tuple(w.shape)}")
    if m % MULTIPLE or n % BLOCK_N or k % group_size:
        raise _error(f"x's rows must be a multiple of {MULTIPLE}, w's columns of {BLOCK_N} "
                     f"and K of group_size ({group_size}); got x {tuple(x.shape)} and w "
                     f"{tuple(w.shape)}")
    if tuple(scales.shape) != (k // group_size, n):
        raise _error(f"scales must have shape ({k // group_size}, {n}) (K // group_size, "
                     f"w's columns), got {tuple(scales.shape)}")
    try:
        dtype = jnp.dtype(x.dtype if out_dtype is None else out_dtype)
    except TypeError:
        dtype = None
    if dtype not in OUT_DTYPES:
        raise _error(f"out_dtype must be float32, bfloat16 or float16, got {out_dtype!r}")
    return dtype


@functools.cache
def quantized_matmul_kernel(dtype: jnp.dtype, out_dtype: jnp.dtype,
                            group_size: int) -> sd.Kernel:
    """The kernel for x of `dtype`, f32 scales, output `out_dtype` and one group size."""

    @sd.kernel(
        grid=lambda x, w, s: (-(-x.shape[0] // BLOCK_M), w.shape[1] // BLOCK_N),
        name="quantized_matmul",
        out_shape=lambda x, w, s: jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), out_dtype),
        smem=[sd.Barriers(STAGES), sd.SMEM((STAGES, BLOCK_M, BLOCK_K), dtype),
              sd.SMEM((BLOCK_K, BLOCK_N), dtype), sd.SMEM((BLOCK_M, BLOCK_N), out_dtype)])
    def kernel(x_ref, w_ref, s_ref, out_ref, bars, x_smem, w_smem, out_smem):
        row, col = sd.program_id(0) * BLOCK_M, sd.program_id(1) * BLOCK_N
        steps = x_ref.shape[1] // BLOCK_K

        def fetch_x(step):  # start the TMA load of x's tile for `step` into its stage
            stage, k = step % STAGES, step * BLOCK_K
            bars[stage].arrive_expect_tx(x_smem[stage].nbytes)
            sd.async_copy(x_ref.at[row:row + BLOCK_M, k:k + BLOCK_K], x_smem[stage],
                          bars[stage])

        def load_w(step):  # w's tile for `step`, still int8/int4, in registers
            k = step * BLOCK_K
            return sd.layout_cast(w_ref[k:k + BLOCK_K, col:col + BLOCK_N], WEIGHT_LAYOUT)

        def k_step(step, carry):
            acc, weights = carry

            @sd.when(step + 1 < steps)
            def _():
                fetch_x(step + 1)  # its stage's last reader, step - 1's wgmma, has completed

            start = step * BLOCK_K // group_size * w_ref.shape[1] + col  # scales: flattened
            scaled = weights.astype(F32) * s_ref[start:start + BLOCK_N]
            w_smem[...] = scaled.astype(dtype)
            upcoming = load_w((step + 1) % steps)  # in flight during this step's wgmma
            stage = step % STAGES
            bars[stage].wait(step // STAGES)
            return sd.wgmma(acc, x_smem[stage], w_smem), upcoming

        fetch_x(0)
        acc, _ = sd.fori(0, steps, k_step, (sd.zeros((BLOCK_M, BLOCK_N), F32), load_w(0)))
        out_smem[...] = acc if out_dtype == jnp.dtype(F32) else acc.astype(out_dtype)
        sd.async_store(out_smem, out_ref.at[row:row + BLOCK_M, col:col + BLOCK_N])
        sd.async_store_wait()

    return kernel


def quantized_matmul(x: jax.Array, w: jax.Array, scales: jax.Array, *, group_size: int = 128,
                     out_dtype: object = None) -> jax.Array:
    """x @ (w * scales repeated group_size times along K), f32 accumulation, in out_dtype
    (default x's).

    x [m, k] bfloat16 or float16; w [k, n] int8 or int4; scales [k // group_size, n] in
    float32 or x's dtype. Each dequantised weight is w * scale in f32, rounded once to x's
    dtype. m a multiple of 8, n of 128; group_size a multiple of 64 dividing k."""
    x, w, scales = jnp.asarray(x), jnp.asarray(w), jnp.asarray(scales)
    dtype = _check(x, w, scales, group_size, out_dtype)
    kernel = quantized_matmul_kernel(x.dtype, dtype, group_size)
    m = x.shape[0]
    if m < BLOCK_M:  # a TMA box may hang over an array's end but not be longer than it
        x = jnp.pad(x, ((0, BLOCK_M - m), (0, 0)))
    return kernel(x, w, scales.astype(F32).reshape(-1))[:m]
