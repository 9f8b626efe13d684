"""sd.inline_ptx: elementwise PTX text over arrays' registers (the escape hatch)."""

from __future__ import annotations

from collections.abc import Sequence

from smalti.dialect.ops_inline import InlinePtxOp, check_signature, parse_constraints
from smalti.dsl.array import Array, as_dtype, vector_type
from smalti.dsl.dtypes import mlir_name
from smalti.dsl.locations import user_error
from smalti.dsl.trace import create, dsl_entry


@dsl_entry(InlinePtxOp)
def inline_ptx(text: str, constraints: str, *args: Array, result_dtypes: object,
               pack: int = 1) -> Array | tuple[Array, ...]:
    """Run PTX `text` once per group of `pack` elements of `args` (arrays of one shape), like
    Triton's inline_asm_elementwise: `$0..` name the results' registers, then the args';
    `constraints` gives each a register kind ("=r,r,r": r .b32, h .b16, l .b64, f .f32).
    `result_dtypes` is one dtype (one result) or a sequence of them (a tuple of results)."""
    if not isinstance(text, str) or not isinstance(constraints, str):
        raise user_error(TypeError, "inline_ptx takes the PTX text and the constraint string "
                                    "as strings")
    if not args or not all(isinstance(a, Array) for a in args):
        raise user_error(TypeError, "inline_ptx's operands must be Arrays, got "
                                    + ", ".join(type(a).__name__ for a in args)
                         if args else "inline_ptx needs at least one Array operand")
    shapes = {a.shape for a in args}
    if len(shapes) != 1:
        raise user_error(ValueError, "inline_ptx's operands must have one shape, got "
                                     + ", ".join(str(s) for s in sorted(shapes)))
    single = not isinstance(result_dtypes, Sequence) or isinstance(result_dtypes, str)
    dtypes = [as_dtype(d) for d in ([result_dtypes] if single else result_dtypes)]
    if not isinstance(pack, int) or pack not in (1, 2, 4):
        raise user_error(ValueError, f"inline_ptx's pack must be 1, 2 or 4, got {pack!r}")
    try:
        check_signature(parse_constraints(constraints), [mlir_name(d) for d in dtypes],
                        [mlir_name(a.dtype) for a in args], pack, text)
    except ValueError as error:
        raise user_error(ValueError, f"inline_ptx: {error}") from None
    shape = args[0].shape
    op = create(InlinePtxOp, values=[a.value for a in args],
                result_types=[vector_type(shape, d) for d in dtypes],
                ptx=text, constraints=constraints, pack=pack)
    results = tuple(Array(r) for r in op.operation.results)
    return results[0] if single else results


__all__ = ["inline_ptx"]
