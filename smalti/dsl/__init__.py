"""The Python kernel DSL: trace functions over refs into smalti kernels and call them from JAX.

    @smalti.dsl.kernel(grid=(2,), out_shape=jax.ShapeDtypeStruct((128, 256), jnp.float32))
    def add(a_ref, b_ref, out_ref):
        col = smalti.dsl.program_id(0) * 128
        out_ref[:, col:col + 128] = a_ref[:, col:col + 128] + b_ref[:, col:col + 128]
"""

from smalti.dsl.array import Array
from smalti.dsl.control import fori
from smalti.dsl.index import Index
from smalti.dsl.kernel import Kernel, Traced, kernel
from smalti.dsl.ops import (
    abs,
    astype,
    broadcast_to,
    exp,
    exp2,
    full,
    layout_cast,
    log,
    maximum,
    minimum,
    num_programs,
    program_id,
    rsqrt,
    sqrt,
    tanh,
    zeros,
)
from smalti.dsl.refs import Ref
from smalti.dsl.specs import ArraySpec

__all__ = [
    "Array", "ArraySpec", "Index", "Kernel", "Ref", "Traced", "abs", "astype", "broadcast_to",
    "exp", "exp2", "fori", "full", "kernel", "layout_cast", "log", "maximum", "minimum",
    "num_programs", "program_id", "rsqrt", "sqrt", "tanh", "zeros",
]
