"""Row softmax in the Python DSL: each block owns 128 rows and streams over them in 128-column
tiles twice, first for the running max and sum (online softmax), then to write the result.

    python examples/softmax.py          # 4096x4096 f32 (slow on the CPU simulator)
    python examples/softmax.py 256 512  # a small instance
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd
from smalti.tiling import WGMMA_LAYOUT

BLOCK_ROWS = 128
BLOCK_COLS = 128


@sd.kernel(grid=lambda x: (x.shape[0] // BLOCK_ROWS,),
           out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype))
def softmax(x_ref, out_ref):
    rows = sd.program_id(0) * BLOCK_ROWS
    tiles = x_ref.shape[1] // BLOCK_COLS

    def tile(j):
        col = j * BLOCK_COLS
        block = x_ref[rows:rows + BLOCK_ROWS, col:col + BLOCK_COLS]
        return sd.layout_cast(block, WGMMA_LAYOUT)  # rows reduce within quads of lanes

    def statistics(j, carry):
        running_max, running_sum = carry
        x = tile(j)
        new_max = sd.maximum(running_max, x.max(axis=1))
        rescaled = running_sum * sd.exp(running_max - new_max)
        return new_max, rescaled + sd.exp(x - new_max[:, None]).sum(axis=1)

    start = (sd.full((BLOCK_ROWS,), -math.inf), sd.zeros((BLOCK_ROWS,)))
    row_max, row_sum = sd.fori(0, tiles, statistics, start)
    inverse = 1.0 / row_sum

    def normalize(j, _):
        col = j * BLOCK_COLS
        probabilities = sd.exp(tile(j) - row_max[:, None]) * inverse[:, None]
        out_ref[rows:rows + BLOCK_ROWS, col:col + BLOCK_COLS] = probabilities

    sd.fori(0, tiles, normalize)


def main(rows: int = 4096, cols: int = 4096) -> None:
    x = jax.random.normal(jax.random.key(0), (rows, cols), jnp.float32)
    out = jax.jit(softmax)(x)
    error = float(np.max(np.abs(np.asarray(out) - np.asarray(jax.nn.softmax(x, axis=-1)))))
    print(f"softmax {rows}x{cols} on {jax.devices()[0].platform}: max |error| = {error:.2e}")
    if not error < 1e-6:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
