"""Row-wise ops' shared pieces: argument checks, flattening to rows, and a block's rows and
their column tiles that the kernels loop over (the last block may hang over the rows' end:
its loads and stores are masked, so nothing is padded)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_ROWS = 64  # one warpgroup's rows: a block of the wgmma accumulator layout
MAX_TILE_COLS = 128  # 64 x 128 f32 is 64 registers per thread per live tile
MIN_TILE_COLS = 8  # the layout's tiles are 8 columns wide
FLOAT_DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
F32 = jnp.float32

# The wgmma accumulator layout as attribute text (smalti.dsl takes it so): each row lives in
# one quad of lanes, so row reductions are shuffles and row broadcasts stay in registers.
ROW_TILE_LAYOUT = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
                   "lane = [-3, -2], vector = -1>")


def check_float(op: str, name: str, value: object) -> jnp.dtype:
    """`value`'s dtype, which must be f32, bf16 or f16 (ValueError naming op and argument)."""
    dtype = jnp.dtype(value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype)
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"smalti.ops.{op}: {name} must be float32, bfloat16 or float16, "
                         f"got {dtype}")
    return dtype


def check_hidden(op: str, name: str, shape: tuple[int, ...], axis: int = -1) -> int:
    """The size of `axis` (the one the op reduces over), which must be a multiple of
    MIN_TILE_COLS, in a non-empty `shape`."""
    if len(shape) < 1 or math.prod(shape) == 0:
        raise ValueError(f"smalti.ops.{op}: {name} must be a non-empty array with at least "
                         f"one axis, got shape {shape}")
    hidden = shape[axis]
    if hidden % MIN_TILE_COLS:
        which = "the last axis" if axis in (-1, len(shape) - 1) else f"axis {axis}"
        raise ValueError(f"smalti.ops.{op}: {which} of {name} must be a multiple of "
                         f"{MIN_TILE_COLS}, got shape {shape}")
    return hidden


def check_vector(op: str, name: str, value: object, hidden: int) -> None:
    """A per-feature parameter: float, shape (hidden,)."""
    check_float(op, name, value)
    shape = tuple(jnp.shape(value))
    if shape != (hidden,):
        raise ValueError(f"smalti.ops.{op}: {name} must have shape ({hidden},) (the last axis "
                         f"of x), got {shape}")


def to_rows(x: jax.Array) -> jax.Array:
    """`x` as [rows, hidden] (a reshape: no copy)."""
    return x.reshape(-1, x.shape[-1])


def tile_cols(hidden: int) -> int:
    """The column tile the kernels loop over: the widest power of two up to MAX_TILE_COLS
    that divides the hidden size."""
    return math.gcd(hidden, MAX_TILE_COLS)


def row_blocks(rows: int) -> int:
    """Blocks of BLOCK_ROWS rows covering `rows` (the last one may hang over)."""
    return -(-rows // BLOCK_ROWS)


def row_grid(x: object) -> tuple[int]:
    """One block per BLOCK_ROWS rows."""
    return (row_blocks(x.shape[0]),)


def f32(x: sd.Array) -> sd.Array:
    """`x` in float32 (the ops' statistics and math are f32 whatever the input)."""
    return x if x.dtype == jnp.dtype(F32) else x.astype(F32)


@dataclass(frozen=True)
class RowBlock:
    """This block's BLOCK_ROWS rows of [rows, hidden] arrays, from row `start`; `inside`
    (None when every block is whole) says which of them exist: the last block's loads
    read zeros past the end, and its stores leave it alone."""

    start: sd.Index
    inside: sd.Array | None

    @staticmethod
    def of(rows: int) -> RowBlock:
        """Block program_id(0) of an array of `rows` rows."""
        start = sd.program_id(0) * BLOCK_ROWS
        if rows % BLOCK_ROWS == 0:
            return RowBlock(start, None)
        return RowBlock(start, sd.iota((BLOCK_ROWS,), dimension=0) + start < rows)

    def _mask(self, ndim: int) -> sd.Array | None:
        if self.inside is None:
            return None
        return self.inside if ndim == 1 else self.inside[:, None]

    def load(self, ref: sd.Ref, col: object = None, cols: int = 0) -> sd.Array:
        """The block's rows of a per-row vector ref, or of columns [col, col + cols)."""
        window = (ref.at[self.start:self.start + BLOCK_ROWS] if col is None else
                  ref.at[self.start:self.start + BLOCK_ROWS, col:col + cols])
        return sd.load(window, mask=self._mask(1 if col is None else 2))

    def store(self, ref: sd.Ref, value: sd.Array, col: object = None, cols: int = 0) -> None:
        """`value` into the block's rows of `ref` (columns [col, col + cols) if given)."""
        window = (ref.at[self.start:self.start + BLOCK_ROWS] if col is None else
                  ref.at[self.start:self.start + BLOCK_ROWS, col:col + cols])
        sd.store(window, value, mask=self._mask(1 if col is None else 2))

    def tile_loader(self, ref: sd.Ref, cols: int) -> Callable[[object], sd.Array]:
        """Loads of column tile j, in f32 and the row layout."""
        def load(j: object) -> sd.Array:
            return sd.layout_cast(f32(self.load(ref, j * cols, cols)), ROW_TILE_LAYOUT)
        return load

    def store_tile(self, ref: sd.Ref, j: object, cols: int, value: sd.Array) -> None:
        """Column tile j of `ref` from an f32 `value`, rounded to ref's dtype."""
        self.store(ref, value.astype(ref.dtype) if value.dtype != ref.dtype else value,
                   j * cols, cols)


def vector_tile(ref: sd.Ref, j: object, cols: int) -> sd.Array:
    """Tile j of a per-feature vector (weight, bias) in f32."""
    col = j * cols
    return f32(ref[col:col + cols])


def sum_blocks(partials: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """The per-block partial sums of a parameter's gradient, reduced over blocks."""
    return jnp.sum(partials, axis=0).astype(dtype)
