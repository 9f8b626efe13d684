"""Weight-only quantized matmul, `quantized_matmul(x, w, scales, *, group_size=128,
out_dtype=None)`: x @ (w * scales repeated along K), w int8 or int4, on Hopper wgmma.

One warpgroup per BLOCK_M x BLOCK_N output tile, K in BLOCK_K-wide steps. Step s converts
w's tile, loaded into registers at its own width (int4 two per byte) during step s - 1,
with sitofp (a few prmt/lop3 per register), multiplies it by its group's scales (f32),
rounds it to x's dtype and stores it to swizzled shared memory; it starts the TMA load of
x's next tile (two stages) and the register load of w's next tile, then one wgmma adds
the step's product to the f32 accumulator while those loads are in flight. The weight
tile's register layout is layout inference's (smalti/layout_inference/widening.py: a
conversion layout whose registers hold 8 consecutive columns, one 16-byte store of bf16
each). BLOCK_K divides every supported group size, so a step reads one row of scales.

Ragged M needs no padding: TMA loads of x's last row tile fill past its end with zeros
and the TMA store of the output clips. Ragged N: the last column tile ends at n,
overlapping the one before (whose columns it computes again, to the same values), so the
register loads of w and the scales stay within them; n below one tile pads w and the
scales (small then) with zero columns, whose outputs the TMA store clips. w is not read
through TMA and shared memory (as CUTLASS's mixed-input GEMM does): TMA needs 16-byte row
strides (n a multiple of 16 int8 or 32 int4 columns) and threads cannot load 4-bit shared
memory yet, and the register loads cost fewer SASS instructions per K tile (562 against
634 for int8, bf16)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
STAGES = 2  # x's tile for the next step loads while this step's wgmma runs
MULTIPLE = 8  # n: the output's 16-byte TMA row stride; the last tile's start, whole registers
INPUT_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
WEIGHT_DTYPES = (jnp.dtype(jnp.int8), jnp.dtype(jnp.int4))
OUT_DTYPES = (*INPUT_DTYPES, jnp.dtype(jnp.float32))
F32 = jnp.float32
OP = "smalti.ops.quantized_matmul"


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
    k, (k_w, n) = x.shape[1], w.shape
    if k_w != k:
        raise _error(f"w must have shape ({k}, n) (its rows x's columns), got "
                     f"{tuple(w.shape)}")
    if n % MULTIPLE or k % group_size:
        raise _error(f"w's columns must be a multiple of {MULTIPLE} and K of group_size "
                     f"({group_size}); got x {tuple(x.shape)} and w {tuple(w.shape)}")
    if tuple(scales.shape) != (k // group_size, n):
        raise _error(f"scales must have shape ({k // group_size}, {n}) (K // group_size, "
                     f"w's columns), got {tuple(scales.shape)}")
    try:
        dtype = jnp.dtype(x.dtype if out_dtype is None else out_dtype)
    except TypeError:
        dtype = None
    if dtype not in OUT_DTYPES:
        raise _error(f"out_dtype must be float32, bfloat16 or float16, got "
                     f"{repr(out_dtype) if dtype is None else dtype}")
    return dtype


def column_start(tile: sd.Index, n: int) -> sd.Index:
    """The first column of output tile `tile`: BLOCK_N apart, but the last tile of a ragged
    n ends at n (it overlaps the one before, whose columns it computes again, alike), so
    that every register load of w and the scales stays within them. One tile (n <=
    BLOCK_N) starts at 0. Counted in MULTIPLE-column units (so the start is known to be a
    multiple of 8: whole registers of int4); the remainder by the number of starts,
    which changes no value, tells the window checks the range (a quotient's bounds are
    too loose for them)."""
    tiles, short = -(-n // BLOCK_N), -n % BLOCK_N
    if tiles == 1 or short == 0:
        return tile * BLOCK_N
    unit = BLOCK_N // MULTIPLE
    start = tile * unit - tile // (tiles - 1) * (short // MULTIPLE)  # // : 1 if last
    return MULTIPLE * (start % ((n - BLOCK_N) // MULTIPLE + 1))


@functools.cache
def quantized_matmul_kernel(dtype: jnp.dtype, out_dtype: jnp.dtype, group_size: int,
                            n: int) -> sd.Kernel:
    """The kernel for x of `dtype`, f32 scales, an output of n columns in `out_dtype` and
    one group size; w (and the scales, flattened) at least BLOCK_N columns wide."""

    @sd.kernel(
        grid=lambda x, w, s: (-(-x.shape[0] // BLOCK_M), -(-n // BLOCK_N)),
        name="quantized_matmul",
        out_shape=lambda x, w, s: jax.ShapeDtypeStruct((x.shape[0], n), out_dtype),
        smem=[sd.Barriers(STAGES), sd.SMEM((STAGES, BLOCK_M, BLOCK_K), dtype),
              sd.SMEM((BLOCK_K, BLOCK_N), dtype), sd.SMEM((BLOCK_M, BLOCK_N), out_dtype)])
    def kernel(x_ref, w_ref, s_ref, out_ref, bars, x_smem, w_smem, out_smem):
        row, col = sd.program_id(0) * BLOCK_M, column_start(sd.program_id(1), n)
        steps, width = x_ref.shape[1] // BLOCK_K, w_ref.shape[1]

        def fetch_x(step):  # start the TMA load of x's tile for `step` into its stage
            stage, k = step % STAGES, step * BLOCK_K
            bars[stage].arrive_expect_tx(x_smem[stage].nbytes)
            sd.async_copy(x_ref.at[row:row + BLOCK_M, k:k + BLOCK_K], x_smem[stage],
                          bars[stage])

        def load_w(step):  # w's tile for `step`, still int8/int4, in registers
            k = step * BLOCK_K
            return w_ref[k:k + BLOCK_K, col:col + BLOCK_N]

        def k_step(step, carry):
            acc, weights = carry

            @sd.when(step + 1 < steps)
            def _():
                fetch_x(step + 1)  # its stage's last reader, step - 1's wgmma, has completed

            start = step * BLOCK_K // group_size * width + col  # scales: flattened
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
    dtype. n a multiple of 8; group_size a multiple of 64 dividing k."""
    x, w, scales = jnp.asarray(x), jnp.asarray(w), jnp.asarray(scales)
    dtype = _check(x, w, scales, group_size, out_dtype)
    n = w.shape[1]
    kernel = quantized_matmul_kernel(x.dtype, dtype, group_size, n)
    scales = scales.astype(F32)
    if n < BLOCK_N:  # one column tile, wider than w: zero columns (the output's TMA store
        # clips what they give); small, as w is
        w = jnp.pad(w, ((0, 0), (0, BLOCK_N - n)))
        scales = jnp.pad(scales, ((0, 0), (0, BLOCK_N - n)))
    return kernel(x, w, scales.reshape(-1))
