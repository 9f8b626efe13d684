"""Matmul with a fused epilogue, `matmul(a, b, *, bias=None, activation=None, out_dtype=None)`,
as a persistent, warp-specialised Hopper kernel on `sd.emit_pipeline_warp_specialized`.

Three warpgroups per block: the pipeline's producer issues the TMA loads of each
BLOCK_K-wide K tile into a ring of STAGES stages, and two consumers each run one wgmma per
step on their own BLOCK_M / 2 rows of A (f32 accumulators). Each consumer's epilogue adds
the bias (f32), applies the activation, rounds to out_dtype into its own shared-memory tile
and writes it with one TMA store. The grid is min(SMS, output tiles) blocks; block p walks
the output tiles p, p + grid, ... of the grouped order (groups of GROUP_ROWS rows of tiles,
column by column within a group, so that the blocks running together share A's rows and
B's columns in L2), the pipeline's ring running on across its tiles (`tiles=`). Ragged M,
N and K need no padding: TMA loads of windows hanging over an array's end fill the outside
with zeros (which add nothing to the dot products), and TMA stores clip."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp

import smalti.dsl as sd

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
STAGES = 4
CONSUMERS = 2
ROWS = BLOCK_M // CONSUMERS  # rows of a tile per consumer warpgroup
GROUP_ROWS = 8  # rows of tiles per group of the tile order (L2 reuse)
SMS = 132  # an H100 SXM's streaming multiprocessors: the persistent grid's size
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 56, 224  # 40 spills the tile arithmetic
MULTIPLE = 8  # TMA needs 16-byte row strides: 8 elements of 2 bytes
INPUT_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
OUT_DTYPES = (*INPUT_DTYPES, jnp.dtype(jnp.float32))
F32 = jnp.float32
GELU_CUBIC = 0.044715
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _relu(x: sd.Array) -> sd.Array:
    return sd.maximum(x, 0.0)


def _silu(x: sd.Array) -> sd.Array:
    return x / (1.0 + sd.exp(-x))


def _gelu(x: sd.Array) -> sd.Array:
    """jax.nn.gelu(approximate=True): the tanh form."""
    return 0.5 * x * (1.0 + sd.tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x)))


ACTIVATIONS: dict[str | None, Callable[[sd.Array], sd.Array] | None] = {
    None: None, "relu": _relu, "silu": _silu, "gelu": _gelu}


def tile_counts(m: int, n: int) -> tuple[int, int]:
    """The output tiles along M and N (the last ones may hang over the edge)."""
    return -(-m // BLOCK_M), -(-n // BLOCK_N)


def grouped_tile(pid: sd.Index, tiles_m: int, tiles_n: int) -> tuple[sd.Index, sd.Index]:
    """Block `pid`'s output tile (row, column) in the grouped order: groups of GROUP_ROWS
    rows of tiles (the last group holds the remainder), each walked column by column."""
    group = min(GROUP_ROWS, tiles_m)
    full_groups, last = divmod(tiles_m, group)
    span = group * tiles_n  # blocks per full group
    size: sd.Index | int = group
    if last:  # pid // (full_groups * span) is 1 in the last, partial group, else 0
        size = group - (group - last) * (pid // (full_groups * span))
    first = pid // span
    local = pid - first * span
    # The column is < tiles_n already; the remainder tells the window checks so (a traced
    # pid's bounds are too loose for them to see it).
    return first * group + local % size, (local // size) % tiles_n


def _check_operands(a: jax.Array, b: jax.Array) -> tuple[int, int, int]:
    """M, N, K of a [m, k] @ b [k, n] (ValueError naming the op, argument, constraint)."""
    for name, value in (("a", a), ("b", b)):
        if value.ndim != 2 or 0 in value.shape:
            raise ValueError(f"smalti.ops.matmul: {name} must be a non-empty 2-D array, "
                             f"got shape {tuple(value.shape)}")
        if value.dtype not in INPUT_DTYPES:
            raise ValueError(f"smalti.ops.matmul: {name} must be bfloat16 or float16, got "
                             f"{value.dtype}")
        if any(d % MULTIPLE for d in value.shape):
            raise ValueError(f"smalti.ops.matmul: both dims of {name} must be multiples of "
                             f"{MULTIPLE}, got shape {tuple(value.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"smalti.ops.matmul: a and b must have the same dtype, got {a.dtype} "
                         f"and {b.dtype}")
    (m, k), (k_b, n) = a.shape, b.shape
    if k_b != k:
        raise ValueError(f"smalti.ops.matmul: b must have shape ({k}, n) (its rows a's "
                         f"columns), got {tuple(b.shape)}")
    return m, n, k


def _check_epilogue(bias: jax.Array | None, activation: object, out_dtype: object,
                    n: int, default: jnp.dtype) -> jnp.dtype:
    """The output dtype, once bias, activation and out_dtype are checked."""
    if bias is not None:
        if bias.dtype not in OUT_DTYPES:
            raise ValueError(f"smalti.ops.matmul: bias must be float32, bfloat16 or float16, "
                             f"got {bias.dtype}")
        if tuple(bias.shape) != (n,):
            raise ValueError(f"smalti.ops.matmul: bias must have shape ({n},) (b's columns), "
                             f"got {tuple(bias.shape)}")
    if not isinstance(activation, str | None) or activation not in ACTIVATIONS:
        raise ValueError(f"smalti.ops.matmul: activation must be None, 'relu', 'silu' or "
                         f"'gelu', got {activation!r}")
    try:
        dtype = jnp.dtype(default if out_dtype is None else out_dtype)
    except TypeError:
        dtype = None
    if dtype not in OUT_DTYPES:
        raise ValueError(f"smalti.ops.matmul: out_dtype must be float32, bfloat16 or float16, "
                         f"got {repr(out_dtype) if dtype is None else dtype}")
    return dtype


def blocks(m: int, n: int, sms: int) -> int:
    """The persistent grid: one block per SM, or per output tile when there are fewer."""
    return min(sms, math.prod(tile_counts(m, n)))


@dataclass(frozen=True)
class Operands:
    """How the kernel reads A and B: as given ([m, k] and [k, n]), or transposed (A given as
    [k, m], B as [n, k]), which the backward's products dA = dC B^T and dB = A^T dC need;
    wgmma reads 16-bit operands either way from shared memory."""

    transpose_a: bool = False
    transpose_b: bool = False

    def dims(self, a: object, b: object) -> tuple[int, int, int]:
        """M, N, K of the product from the arrays (or specs) as given."""
        (m, k), n = a.shape[::-1] if self.transpose_a else a.shape, b.shape[
            0 if self.transpose_b else 1]
        return m, n, k

    def specs(self, tile: Callable[[sd.Index], tuple[sd.Index, sd.Index]]
              ) -> tuple[list[sd.BlockSpec], tuple[int, None]]:
        """The pipeline's block specs of A and B for output tile `tile(t)`, and the dim of A's
        block that the consumers split (its rows of the product)."""
        a_spec = (sd.BlockSpec((BLOCK_K, BLOCK_M), lambda t, k: (k, tile(t)[0]))
                  if self.transpose_a else
                  sd.BlockSpec((BLOCK_M, BLOCK_K), lambda t, k: (tile(t)[0], k)))
        b_spec = (sd.BlockSpec((BLOCK_N, BLOCK_K), lambda t, k: (tile(t)[1], k))
                  if self.transpose_b else
                  sd.BlockSpec((BLOCK_K, BLOCK_N), lambda t, k: (k, tile(t)[1])))
        return [a_spec, b_spec], (1 if self.transpose_a else 0, None)


def _tile(a_ref: sd.Ref, b_ref: sd.Ref, bias_ref: sd.Ref | None, c_ref: sd.Ref,
          c_smems: tuple[sd.SharedRef, ...], activation: str | None, sms: int,
          operands: Operands) -> None:
    """One block: for each of its output tiles, the pipelined K loop, then each consumer's
    epilogue."""
    apply, out_dtype = ACTIVATIONS[activation], c_ref.dtype
    m_size, n_size, k_size = operands.dims(a_ref, b_ref)
    counts = tile_counts(m_size, n_size)
    grid, pid = blocks(m_size, n_size, sms), sd.program_id(0)

    def tile(t):  # this block's t-th tile: every grid-th of the grouped order
        return grouped_tile(pid + t * grid, *counts)

    def k_step(indices, a_rows, b_block, acc):
        return sd.wgmma(acc, a_rows.T if operands.transpose_a else a_rows,
                        b_block.T if operands.transpose_b else b_block)

    def epilogue(consumer, acc, t):
        m, n = tile(t)
        rows, col = m * BLOCK_M + consumer * ROWS, n * BLOCK_N
        if bias_ref is not None:
            acc = acc + bias_ref[col:col + BLOCK_N]
        if apply is not None:
            acc = apply(acc)
        c_smem = c_smems[consumer]
        c_smem[...] = acc if out_dtype == jnp.dtype(F32) else acc.astype(out_dtype)
        sd.async_store(c_smem, c_ref.at[rows:rows + ROWS, col:col + BLOCK_N])
        sd.async_store_wait()
        sd.warpgroup_barrier()  # the store has read c_smem before the next tile writes it

    in_specs, split = operands.specs(tile)
    sd.emit_pipeline_warp_specialized(
        k_step,
        grid=(-(-k_size // BLOCK_K),),
        in_specs=in_specs,
        split=split,
        max_concurrent_steps=STAGES,
        memory_registers=PRODUCER_REGISTERS, compute_registers=CONSUMER_REGISTERS,
        init_carry=lambda: sd.zeros((ROWS, BLOCK_N), F32),
        epilogue=epilogue,
        tiles=(math.prod(counts) - pid + grid - 1) // grid,  # pid, pid + grid, ...
    )(a_ref, b_ref)


@functools.cache
def matmul_kernel(out_dtype: jnp.dtype, activation: str | None, with_bias: bool,
                  sms: int = SMS, operands: Operands = Operands()) -> sd.Kernel:
    """The kernel of one epilogue: inputs a, b (and, with_bias, an f32 bias padded to whole
    tiles), one shared-memory output tile per consumer; a grid of at most `sms` blocks."""
    def grid(a, b, *_):
        m, n, _ = operands.dims(a, b)
        return (blocks(m, n, sms),)

    def out_shape(a, b, *_):
        m, n, _ = operands.dims(a, b)
        return jax.ShapeDtypeStruct((m, n), out_dtype)

    transposed = ("at" * operands.transpose_a, "bt" * operands.transpose_b)
    decorate = sd.kernel(
        grid=grid, warpgroups=1 + CONSUMERS, out_shape=out_shape,
        name="_".join(part for part in ("matmul", *transposed, "bias" * with_bias, activation)
                      if part),
        smem=[sd.SMEM((ROWS, BLOCK_N), out_dtype)] * CONSUMERS)
    if with_bias:
        def body(a_ref, b_ref, bias_ref, c_ref, c0_smem, c1_smem):
            _tile(a_ref, b_ref, bias_ref, c_ref, (c0_smem, c1_smem), activation, sms,
                  operands)
    else:
        def body(a_ref, b_ref, c_ref, c0_smem, c1_smem):
            _tile(a_ref, b_ref, None, c_ref, (c0_smem, c1_smem), activation, sms, operands)
    return decorate(body)


def matmul(a: jax.Array, b: jax.Array, *, bias: jax.Array | None = None,
           activation: str | None = None, out_dtype: object = None) -> jax.Array:
    """activation(a @ b + bias) in out_dtype (default a's), with f32 accumulation and a f32
    epilogue; differentiable (`jax.grad` runs the same kernel on transposed operands).

    a [m, k], b [k, n]: both bfloat16 or both float16, every dim a multiple of 8. bias:
    [n], any float dtype (added in f32). activation: None, "relu", "silu" or "gelu"
    (jax.nn.gelu(approximate=True)). out_dtype: float32, bfloat16 or float16."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    _check_operands(a, b)
    bias = None if bias is None else jnp.asarray(bias)
    dtype = _check_epilogue(bias, activation, out_dtype, b.shape[1], a.dtype)
    return _differentiable(a, b, bias, activation, dtype)


def _product(a: jax.Array, b: jax.Array, bias: jax.Array | None, activation: str | None,
             dtype: jnp.dtype, operands: Operands = Operands()) -> jax.Array:
    """One launch of the kernel for `operands` (the arrays as the kernel reads them)."""
    kernel = matmul_kernel(dtype, activation, bias is not None, operands=operands)
    if bias is None:
        return kernel(a, b)
    # f32 and padded to whole tiles, for the epilogue's register loads
    return kernel(a, b, jnp.pad(bias.astype(F32), (0, -bias.shape[0] % BLOCK_N)))


REFERENCE_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu, "silu": jax.nn.silu,
    "gelu": functools.partial(jax.nn.gelu, approximate=True)}


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _differentiable(a, b, bias, activation, dtype):
    return _product(a, b, bias, activation, dtype)


def _differentiable_fwd(a, b, bias, activation, dtype):
    return _product(a, b, bias, activation, dtype), (a, b, bias)


def _differentiable_bwd(activation, dtype, residuals, d_out):
    """dA = dZ B^T and dB = A^T dZ by the kernel reading B (or A) transposed in place, dZ
    the cotangent through the activation (its pre-activation recomputed by the kernel, in
    f32) rounded to the inputs' dtype for the tensor cores; dbias = dZ summed over rows."""
    a, b, bias = residuals
    d_z = d_out.astype(F32)
    if activation is not None:
        z = _product(a, b, bias, None, jnp.dtype(F32))
        d_z = jax.vjp(REFERENCE_ACTIVATIONS[activation], z)[1](d_z)[0]
    d_z_in = d_z.astype(a.dtype)
    d_a = _product(d_z_in, b, None, None, a.dtype, Operands(transpose_b=True))
    d_b = _product(a, d_z_in, None, None, b.dtype, Operands(transpose_a=True))
    return d_a, d_b, None if bias is None else d_z.sum(axis=0).astype(bias.dtype)


_differentiable.defvjp(_differentiable_fwd, _differentiable_bwd)
