"""Row softmax written per thread with `sd.custom_primitive`: the reductions that warpgroup
semantics would express as `x.max(axis=1)` are written by hand, as a CUDA programmer would,
over the thread's registers of the WGMMA layout and two butterfly shuffles per row.

In the WGMMA layout over a 64 x C block, thread t holds, for each 8-column group g, the pair
of row 16 (t // 32) + (t % 32) // 4 and the pair 8 rows below it, at columns 8 g + 2 (t % 4)
and one more: its elements 4 g, 4 g + 1 are in the first row, 4 g + 2, 4 g + 3 in the second.
The four lanes 4 q .. 4 q + 3 hold the whole of those two rows.

    python examples/custom_primitive_softmax.py            # 1024 x 64 f32
    python examples/custom_primitive_softmax.py 256 128
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import smalti.dsl as sd

BLOCK_ROWS = 64


def shfl_xor(value: sd.Register, mask: int) -> sd.Register:
    """The value of the lane whose index differs from this one's in the bits of `mask`."""
    return sd.inline_ptx(f"shfl.sync.bfly.b32 $0, $1, {mask}, 0x1f, 0xffffffff;", "=f,f",
                         value, result_dtypes=jnp.float32)


def quad_reduce(value: sd.Register, combine) -> sd.Register:
    """`combine` over the four lanes of this thread's quad (which hold one row)."""
    for mask in (1, 2):
        value = combine(value, shfl_xor(value, mask))
    return value


def row_softmax(cols: int) -> Callable[[sd.Array], sd.Array]:
    """The per-thread softmax of a 64 x `cols` f32 block in the WGMMA layout."""

    @sd.custom_primitive(in_layouts=["wgmma"], out_layouts=["wgmma"],
                         out_shapes=[jax.ShapeDtypeStruct((BLOCK_ROWS, cols), jnp.float32)])
    def softmax(t: sd.Thread, x: list[sd.Register]) -> list[sd.Register]:
        del t
        out = list(x)
        for half in (0, 1):  # this thread's row, then the row 8 below it
            mine = [k for k in range(len(x)) if (k // 2) % 2 == half]
            largest = x[mine[0]]
            for k in mine[1:]:
                largest = largest.maximum(x[k])
            largest = quad_reduce(largest, sd.Register.maximum)
            for k in mine:
                out[k] = ((x[k] - largest) * math.log2(math.e)).exp2()
            total = out[mine[0]]
            for k in mine[1:]:
                total = total + out[k]
            total = quad_reduce(total, lambda a, b: a + b)
            inverse = 1.0 / total
            for k in mine:
                out[k] = out[k] * inverse
        return out

    return softmax


@sd.kernel(grid=lambda x: (x.shape[0] // BLOCK_ROWS,),
           out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype))
def softmax(x_ref, out_ref):
    rows = sd.program_id(0) * BLOCK_ROWS
    block = row_softmax(x_ref.shape[1])
    out_ref[rows:rows + BLOCK_ROWS, :] = block(x_ref[rows:rows + BLOCK_ROWS, :])


def main(rows: int = 1024, cols: int = 64) -> None:
    x = jax.random.normal(jax.random.key(0), (rows, cols), jnp.float32)
    out = jax.jit(softmax)(x)
    error = float(np.max(np.abs(np.asarray(out) - np.asarray(jax.nn.softmax(x, axis=-1)))))
    print(f"custom_primitive softmax {rows}x{cols} on {jax.devices()[0].platform}: "
          f"max |error| = {error:.2e}")
    if not error < 1e-6:
        raise SystemExit(1)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
