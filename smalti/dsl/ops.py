"""Functions of the kernel body: program ids, math on arrays, constants, iotas, selects and
layout hints."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu
from jaxlib.mlir.dialects import math as math_ops

from smalti.dialect.attributes import LayoutAttrError, layout_to_text, named_layout
from smalti.dialect.bindings import gpu_dimension_attr
from smalti.dialect.ops import LayoutCastOp
from smalti.dialect.ops_compute import IotaOp
from smalti.dialect.ops_debug import DebugPrintOp
from smalti.dsl.array import (
    Array,
    Shape,
    as_dtype,
    coerce,
    index_array,
    scalar_array,
    splat,
    vector_type,
)
from smalti.dsl.index import Index, as_index
from smalti.dsl.locations import user_error
from smalti.dsl.trace import active, create, dsl_entry, emit_value
from smalti.tiling import Layout, LayoutError, check_layout_fits


def check_axis(axis: object, what: str) -> int:
    """A grid or cluster axis: 0 (x), 1 (y) or 2 (z); a located ValueError otherwise."""
    if isinstance(axis, bool) or axis not in (0, 1, 2):
        raise user_error(ValueError, f"{what} axis must be 0, 1 or 2, got {axis!r}")
    return int(axis)  # type: ignore[call-overload]


def launch_id(op: type[ir.OpView], axis: int, count: int, what: str) -> Index:
    """gpu id op `op` (gpu.BlockIdOp, gpu.ClusterIdOp, ...) along `axis`, as an Index taking
    `count` values (0 to count - 1); `what` names it in messages."""
    value = emit_value(op, [], ir.IndexType.get(), {"dimension": gpu_dimension_attr(axis)})
    return Index.of(value, 0, count - 1, what)


def program_id(axis: int) -> Index:
    """The block's index along grid `axis` (gpu.block_id)."""
    axis = check_axis(axis, "program_id")
    return launch_id(gpu.BlockIdOp, axis, active().grid[axis], f"program_id({axis})")


def num_programs(axis: int) -> int:
    """The grid size along `axis` (static: known while tracing)."""
    return active().grid[check_axis(axis, "num_programs")]


def _array(x: object, what: str) -> Array:
    if not isinstance(x, Array):
        raise user_error(TypeError, f"{what} takes a traced Array, got {type(x).__name__}")
    return x


def exp(x: Array) -> Array:
    return _array(x, "exp").float_unary(math_ops.ExpOp, "exp")


def exp2(x: Array) -> Array:
    return _array(x, "exp2").float_unary(math_ops.Exp2Op, "exp2")


def log(x: Array) -> Array:
    return _array(x, "log").float_unary(math_ops.LogOp, "log")


def sqrt(x: Array) -> Array:
    return _array(x, "sqrt").float_unary(math_ops.SqrtOp, "sqrt")


def rsqrt(x: Array) -> Array:
    return _array(x, "rsqrt").float_unary(math_ops.RsqrtOp, "rsqrt")


def tanh(x: Array) -> Array:
    return _array(x, "tanh").float_unary(math_ops.TanhOp, "tanh")


def abs(x: Array) -> Array:
    return _array(x, "abs").__abs__()


def maximum(x: Array | Index | float, y: Array | Index | float) -> Array | Index:
    """Elementwise maximum with broadcasting (NaN-propagating for floats); of two indices
    (ints or traced), the greater one as an Index (arith.maxsi)."""
    return _binary(x, y, "max", "maximum")


def minimum(x: Array | Index | float, y: Array | Index | float) -> Array | Index:
    """Elementwise minimum with broadcasting (NaN-propagating for floats); of two indices
    (ints or traced), the lesser one as an Index (arith.minsi)."""
    return _binary(x, y, "min", "minimum")


def _binary(x: object, y: object, operation: str, what: str) -> Array | Index:
    if isinstance(x, Array):
        return x._binary(y, operation)
    if isinstance(y, Array):
        return y._binary(x, operation, reverse=True)
    if isinstance(x, Index) or isinstance(y, Index):
        return _index_extreme(as_index(x, f"an operand of {what}"),
                              as_index(y, f"an operand of {what}"), operation == "max")
    raise user_error(TypeError, f"{what} needs at least one traced Array or Index")


def _index_extreme(x: Index, y: Index, largest: bool) -> Index:
    """max(x, y) or min(x, y) of indices: a Python int when both are known, the winner when
    the bounds decide, else arith.maxsi / minsi with the bounds that follow from the
    operands'."""
    pick = max if largest else min
    if x.static is not None and y.static is not None:
        return Index((), pick(x.static, y.static))
    mine, theirs = x.bounds(), y.bounds()
    if mine is not None and theirs is not None:  # one side always wins: no op
        if (mine[0] >= theirs[1]) if largest else (mine[1] <= theirs[0]):
            return x
        if (theirs[0] >= mine[1]) if largest else (theirs[1] <= mine[0]):
            return y
    value = emit_value(arith.MaxSIOp if largest else arith.MinSIOp,
                       [x.materialize(), y.materialize()], ir.IndexType.get())
    if mine is None or theirs is None:
        return Index.of(value)
    return Index.of(value, pick(mine[0], theirs[0]), pick(mine[1], theirs[1]),
                    f"a {'maximum' if largest else 'minimum'} of indices")


@dsl_entry(IotaOp)
def iota(shape: Shape | int, dtype: object = np.int32, dimension: int | None = None) -> Array:
    """An array of `shape` whose elements hold their index along `dimension` (smalti.iota,
    converted to `dtype`); `dimension` may be left out for a 1-D shape."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not shape or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                            for n in shape):
        raise user_error(ValueError, f"iota needs a shape of positive Python ints, got {shape!r}")
    if dimension is None:
        if len(shape) != 1:
            raise user_error(ValueError, f"iota of a rank-{len(shape)} shape needs `dimension` "
                                         "(the axis whose index each element holds)")
        dimension = 0
    if (not isinstance(dimension, int) or isinstance(dimension, bool)
            or not -len(shape) <= dimension < len(shape)):
        raise user_error(ValueError, f"iota's dimension {dimension!r} is not an axis of shape "
                                     f"{shape}")
    target = as_dtype(dtype)
    if target == np.bool_:
        raise user_error(TypeError, "iota needs a numeric dtype, not bool")
    indices = create(IotaOp, dimension=dimension % len(shape),
                     result_types=[vector_type(shape, np.dtype(np.int32))])
    return Array(indices.result).astype(target)


def where(condition: Array, x: Array | float, y: Array | float) -> Array:
    """Elementwise `x` where `condition` holds, else `y` (arith.select), with broadcasting;
    `condition` is a bool array (a comparison) and Python numbers take the other's dtype."""
    if not isinstance(condition, Array) or condition.dtype != np.bool_:
        got = (condition.dtype.name if isinstance(condition, Array)
               else type(condition).__name__)
        raise user_error(TypeError, f"where's condition must be a bool Array (a comparison such "
                                    f"as `a < b`), got {got}")
    arrays = [v for v in (x, y) if isinstance(v, Array)]
    dtype = arrays[0].dtype if arrays else np.dtype(
        np.float32 if any(isinstance(v, float | np.floating) for v in (x, y)) else np.int32)
    if any(a.dtype != dtype for a in arrays):
        raise user_error(TypeError, f"where's x and y have different dtypes "
                                    f"{arrays[0].dtype.name} and {arrays[1].dtype.name}; cast "
                                    "one with .astype")
    try:
        shape = tuple(np.broadcast_shapes(condition.shape, *(a.shape for a in arrays)))
    except ValueError:
        shapes = ", ".join(str(v.shape) for v in (condition, *arrays))
        raise user_error(ValueError, f"where's operands have shapes {shapes}, which do not "
                                     "broadcast") from None
    chosen = [v.broadcast_to(shape) if isinstance(v, Array) else scalar_array(v, shape, dtype)
              for v in (condition, x, y)]
    return Array(emit_value(arith.SelectOp, [v.value for v in chosen], chosen[1].value.type))


def full(shape: Shape, value: float | int | Index, dtype: object = np.float32) -> Array:
    """An array of `shape` filled with `value` (an Index: its run-time value, converted)."""
    if isinstance(value, Index):
        return index_array(value, tuple(shape), dtype)
    if not isinstance(value, int | float | np.number | np.bool_):
        hint = " (an array: sd.broadcast_to)" if isinstance(value, Array) else ""
        raise user_error(TypeError, f"full's value must be a Python number or an Index, got "
                                    f"{type(value).__name__}{hint}")
    return splat(value, tuple(shape), dtype)


def zeros(shape: Shape, dtype: object = np.float32) -> Array:
    return splat(0, tuple(shape), dtype)


def broadcast_to(x: Array, shape: Shape) -> Array:
    """`x` broadcast to `shape` by numpy rules."""
    return _array(x, "broadcast_to").broadcast_to(tuple(shape))


def astype(x: Array, dtype: object) -> Array:
    return _array(x, "astype").astype(as_dtype(dtype))


@dsl_entry(DebugPrintOp)
def debug_print(format: str, value: Array | Index | int) -> None:
    """Print `format` with its one `{}` replaced by `value` (an array in whatever layout, or a
    traced index) from inside the kernel: on CPU the simulator prints as the kernel runs, on
    CUDA the lines come after it finishes; each line starts with the user's file:line."""
    if not isinstance(format, str) or format.count("{}") != 1:
        raise user_error(ValueError, f"debug_print's format must be a string with exactly one "
                                     f"'{{}}', got {format!r}")
    if isinstance(value, Array):
        operand = value.value
    else:
        operand = as_index(value, "an Array or an index to print").materialize()
    create(DebugPrintOp, value=operand, format=format)


@dsl_entry(LayoutCastOp)
def layout_cast(x: Array, layout: Layout | str) -> Array:
    """The same array, required to be in register `layout` (a hint to inference; the lowering
    converts when the operand's layout differs). `layout` is a smalti.tiling layout, its
    attribute text, e.g. "strided<vec = 4>" or "#smalti.splat", or a canonical layout's
    name, e.g. "wgmma"."""
    x = _array(x, "layout_cast")
    if isinstance(layout, str):
        try:
            layout = named_layout(layout)
        except (LayoutAttrError, LayoutError, ValueError) as error:
            raise user_error(ValueError, f"bad layout {layout!r}: {error}") from None
    try:
        check_layout_fits(layout, x.shape)
    except LayoutError as error:
        raise user_error(ValueError, f"layout #smalti.{layout_to_text(layout)} cannot hold an "
                                     f"array of shape {x.shape}: {error}") from None
    return Array(create(LayoutCastOp, source=x.value, new_layout=layout).result)


__all__ = ["abs", "astype", "broadcast_to", "coerce", "debug_print", "exp", "exp2", "full", "iota",
           "layout_cast", "log", "maximum", "minimum", "num_programs", "program_id", "rsqrt",
           "sqrt", "tanh", "where", "zeros"]
