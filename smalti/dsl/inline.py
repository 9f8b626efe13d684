"""sd.inline_ptx: elementwise PTX text over arrays' registers, or per thread over a
custom_primitive body's registers (the escape hatch)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.ops_inline import InlinePtxOp, Slot, check_signature, parse_constraints
from smalti.dsl.array import Array, as_dtype, vector_type
from smalti.dsl.custom import Register, scalar
from smalti.dsl.dtypes import mlir_name, mlir_type
from smalti.dsl.index import Index, as_index
from smalti.dsl.locations import user_error
from smalti.dsl.trace import create, dsl_entry

Operand = Array | Register | Index | int | float


@dsl_entry(InlinePtxOp)
def inline_ptx(text: str, constraints: str, *args: Operand, result_dtypes: object,
               pack: int = 1, has_side_effects: bool = False
               ) -> Array | Register | tuple[Array | Register, ...] | None:
    """Run PTX `text` once per group of `pack` elements of the Array `args` (of one shape),
    like Triton's inline_asm_elementwise: `$0..` name the results' registers, then the args';
    `constraints` gives each a register kind ("=r,r,r": r .b32, h .b16, l .b64, f .f32).
    Scalar args (an Index or a Python int: an index, read by 'r' as its low 32 bits or by
    'l'; a Python float: an f32) are one register in every group. In a custom_primitive body
    the args are Registers (and scalars) and the text runs once per thread, giving Registers.
    `result_dtypes` is one dtype (one result) or a sequence of them (a tuple; an empty one
    for none, with has_side_effects). `has_side_effects=True` keeps every copy of the text
    (smalti-cse merges identical pure ones and drops unused ones)."""
    if not isinstance(text, str) or not isinstance(constraints, str):
        raise user_error(TypeError, "inline_ptx takes the PTX text and the constraint string "
                                    "as strings")
    if not isinstance(has_side_effects, bool):
        raise user_error(TypeError, "inline_ptx's has_side_effects must be a bool")
    arrays = [a for a in args if isinstance(a, Array)]
    registers = [a for a in args if isinstance(a, Register)]
    if arrays and registers:
        raise user_error(TypeError, "inline_ptx takes Arrays (in a kernel body) or Registers "
                                    "(in a custom_primitive body), not both")
    if not arrays and not registers:
        raise user_error(TypeError, "inline_ptx needs an Array operand (or, in a "
                                    "custom_primitive body, a Register)")
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise user_error(ValueError, "inline_ptx's operands must have one shape, got "
                                     + ", ".join(str(s) for s in sorted(shapes)))
    single = not isinstance(result_dtypes, Sequence) or isinstance(result_dtypes, str)
    dtypes = [as_dtype(d) for d in ([result_dtypes] if single else result_dtypes)]
    if not isinstance(pack, int) or pack not in (1, 2, 4):
        raise user_error(ValueError, f"inline_ptx's pack must be 1, 2 or 4, got {pack!r}")
    values = [_operand(a) for a in args]
    try:
        slots = [Slot(mlir_name(a.dtype)) if isinstance(a, Array) else
                 Slot(type_name(v.type) or str(v.type), scalar=True)
                 for a, v in zip(args, values, strict=True)]
        outputs = [Slot(mlir_name(d), scalar=not arrays) for d in dtypes]
        check_signature(parse_constraints(constraints), outputs, slots, pack, text)
    except ValueError as error:
        raise user_error(ValueError, f"inline_ptx: {error}") from None
    result_types = ([vector_type(arrays[0].shape, d) for d in dtypes] if arrays
                    else [mlir_type(d) for d in dtypes])
    op = create(InlinePtxOp, values=values, result_types=result_types, ptx=text,
                constraints=constraints, pack=pack, has_side_effects=has_side_effects or None)
    wrap = Array if arrays else Register
    results = tuple(wrap(r) for r in op.operation.results)
    if single:
        return results[0]
    return results or None


def _operand(value: object) -> ir.Value:
    """An operand's value: an Array's or Register's; an Index or int as an index; a float
    as an f32 constant."""
    if isinstance(value, Array | Register):
        return value.value
    if isinstance(value, float):
        return scalar(value, np.dtype(np.float32)).value
    return as_index(value, "an inline_ptx operand (an Array, a Register, an Index or a "
                           "Python number)").materialize()


__all__ = ["inline_ptx"]
