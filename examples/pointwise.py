"""Fused multiply-add with broadcasting, written in the Python DSL and called from JAX:

    out[i, j] = x[i, j] * scale[j] + shift[i]

One warpgroup per 128x128 block on a 2-D grid. Run it (on a CPU the kernel's PTX runs in
smalti's simulator; on a Hopper GPU it runs as a cubin):

    python examples/pointwise.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd
from smalti.tiling import WGMMA_LAYOUT

BLOCK = 128


@sd.kernel(grid=lambda x, scale, shift: (x.shape[1] // BLOCK, x.shape[0] // BLOCK),
           out_shape=lambda x, scale, shift: jax.ShapeDtypeStruct(x.shape, x.dtype))
def scale_shift(x_ref, scale_ref, shift_ref, out_ref):
    row = sd.program_id(1) * BLOCK
    col = sd.program_id(0) * BLOCK
    # The hint puts the block in the WGMMA accumulator layout, in which row and column
    # vectors broadcast without moving data between threads.
    x = sd.layout_cast(x_ref[row:row + BLOCK, col:col + BLOCK], WGMMA_LAYOUT)
    scale = scale_ref[col:col + BLOCK]  # (128,): broadcast along rows (vector.broadcast)
    shift = shift_ref[row:row + BLOCK]  # (128,): broadcast along columns via [:, None]
    out_ref[row:row + BLOCK, col:col + BLOCK] = x * scale + shift[:, None]


def reference(x: jax.Array, scale: jax.Array, shift: jax.Array) -> jax.Array:
    return x * scale + shift[:, None]


def main(rows: int = 256, cols: int = 512) -> None:
    keys = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(keys[0], (rows, cols), jnp.float32)
    scale = jax.random.normal(keys[1], (cols,), jnp.float32)
    shift = jax.random.normal(keys[2], (rows,), jnp.float32)
    out = jax.jit(scale_shift)(x, scale, shift)
    exact = np.array_equal(np.asarray(out), np.asarray(reference(x, scale, shift)))
    print(f"scale_shift {rows}x{cols} on {jax.devices()[0].platform}: "
          f"{'matches' if exact else 'DIFFERS FROM'} jax.numpy exactly")
    if not exact:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
