"""Traced arrays: a warpgroup-owned vector value with numpy-like arithmetic, comparisons,
broadcasting, reductions and casts, each op located at the user's line."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, vector
from jaxlib.mlir.dialects import math as math_ops

from smalti.dialect.bindings import combining_kind_attr
from smalti.dialect.ops_compute import BroadcastInDimOp
from smalti.dsl.dtypes import bit_width, is_float, mlir_name, mlir_type, numpy_dtype
from smalti.dsl.index import Index, IndexOperand
from smalti.dsl.locations import user_error
from smalti.dsl.trace import create, dsl_entry, emit_value

Shape = tuple[int, ...]

FLOAT_BINARY: dict[str, type[ir.OpView]] = {
    "add": arith.AddFOp, "sub": arith.SubFOp, "mul": arith.MulFOp, "div": arith.DivFOp,
    "max": arith.MaximumFOp, "min": arith.MinimumFOp}
BITWISE: dict[str, type[ir.OpView]] = {"and": arith.AndIOp, "or": arith.OrIOp,
                                       "xor": arith.XOrIOp}
INT_BINARY: dict[str, type[ir.OpView]] = {
    "add": arith.AddIOp, "sub": arith.SubIOp, "mul": arith.MulIOp, "max": arith.MaxSIOp,
    "min": arith.MinSIOp, **BITWISE}
# Integer-only operators with numpy's meaning: `//` rounds toward -inf, `<<`/`>>` by the bit
# width or more give 0 (or -1 for `>>` of a negative number), as PTX's clamped shifts do;
# `%` is a - (a // b) * b (the divisor's sign), made of these ops.
INT_ONLY: dict[str, type[ir.OpView]] = {
    "//": arith.FloorDivSIOp, "<<": arith.ShLIOp, ">>": arith.ShRSIOp}
# arith.cmpf predicates: ordered comparisons (false on NaN), except "!=", which is unordered
# (true on NaN), as in numpy. arith.cmpi predicates: signed.
FLOAT_PREDICATES = {"==": 1, ">": 2, ">=": 3, "<": 4, "<=": 5, "!=": 13}
INT_PREDICATES = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
FLOAT_KINDS = {"sum": "add", "max": "maximumf", "min": "minimumf"}
INT_KINDS = {"sum": "add", "max": "maxsi", "min": "minsi"}


@IndexOperand.register
class Array:
    """A traced array of static `shape` and `dtype`; `x[:, None]`-style views carry unit dims
    that are only made real (by a broadcast op) where they meet another shape."""

    __array_priority__ = 1000  # numpy scalars on the left defer to Array's operators

    def __init__(self, value: ir.Value, shape: Shape | None = None,
                 dims: tuple[int, ...] | None = None) -> None:
        vector_type = ir.VectorType(value.type)
        self._value = value
        self._real_shape: Shape = tuple(vector_type.shape)
        self.shape: Shape = self._real_shape if shape is None else tuple(shape)
        # Logical dim of each real dim (identity unless unit dims were inserted).
        self._dims = tuple(range(len(self._real_shape))) if dims is None else dims
        self.dtype: np.dtype = numpy_dtype(vector_type.element_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def value(self) -> ir.Value:
        """The MLIR value with this array's (logical) shape."""
        if self.shape == self._real_shape:
            return self._value
        return emit_value(vector.ShapeCastOp, [self._value], vector_type(self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"Array(shape={self.shape}, dtype={self.dtype.name})"

    def __bool__(self) -> bool:
        raise user_error(TypeError, "a traced Array has no truth value while tracing (use "
                                    "smalti.dsl.fori for loops; Python `if` sees only Python "
                                    "values)")

    def __iter__(self):
        raise user_error(TypeError, "a traced Array cannot be iterated while tracing")

    # Broadcasting ---------------------------------------------------------------------
    @dsl_entry(BroadcastInDimOp)
    def broadcast_to(self, shape: Shape) -> Array:
        """This array broadcast (numpy rules) to `shape`."""
        shape = tuple(shape)
        if shape == self.shape:
            return self
        try:
            if np.broadcast_shapes(self.shape, shape) != shape:
                raise ValueError
        except ValueError:
            raise user_error(ValueError, f"cannot broadcast an array of shape {self.shape} to "
                                         f"{shape}") from None
        offset = len(shape) - len(self.shape)
        targets = tuple(offset + d for d in self._dims)
        if self._real_shape == shape:
            return Array(self._value)
        result = vector_type(shape, self.dtype)
        trailing = targets == tuple(range(len(shape) - len(targets), len(shape)))
        if trailing:
            return Array(emit_value(vector.BroadcastOp, [self._value], result))
        return Array(create(BroadcastInDimOp, source=self._value, broadcast_dimensions=targets,
                            result_types=[result]).result)

    def __getitem__(self, key: object) -> Array:
        """`x[:, None]` (new unit dims) or static slices `x[0:64, :]`."""
        key = key if isinstance(key, tuple) else (key,)
        if any(k is None for k in key):
            return self._expand(key)
        return self._slice(key)

    def _expand(self, key: tuple) -> Array:
        if sum(k is Ellipsis for k in key) > 1:
            raise user_error(IndexError, "an index can only have a single ellipsis ('...')")
        existing = sum(k is not None and k is not Ellipsis for k in key)
        if Ellipsis in key:
            at = key.index(Ellipsis)
            key = (*key[:at], *([slice(None)] * (self.ndim - existing)), *key[at + 1:])
        else:
            key = (*key, *([slice(None)] * (self.ndim - existing)))
        shape, logical = [], []
        source = 0
        for k in key:
            if k is None:
                shape.append(1)
                continue
            if not (isinstance(k, slice) and k == slice(None)):
                raise user_error(IndexError, "with None (new axes), every other index must be "
                                             "':' (slice the array first)")
            if source >= self.ndim:
                raise user_error(IndexError, f"too many indices for an array of rank {self.ndim}")
            logical.append(len(shape))
            shape.append(self.shape[source])
            source += 1
        if source != self.ndim:
            raise user_error(IndexError, f"too few indices for an array of rank {self.ndim}")
        dims = tuple(logical[d] for d in self._dims)
        return Array(self._value, tuple(shape), dims)

    def _slice(self, key: tuple) -> Array:
        if Ellipsis in key:
            at = key.index(Ellipsis)
            key = (*key[:at], *([slice(None)] * (self.ndim - len(key) + 1)), *key[at + 1:])
        if len(key) > self.ndim:
            raise user_error(IndexError, f"too many indices for an array of rank {self.ndim}")
        key = (*key, *([slice(None)] * (self.ndim - len(key))))
        offsets, sizes = [], []
        for dim, (k, size) in enumerate(zip(key, self.shape, strict=True)):
            if not isinstance(k, slice) or k.step not in (None, 1) or not all(
                    isinstance(v, int | None) for v in (k.start, k.stop)):
                raise user_error(IndexError, f"arrays take static slices `start:stop` (Python "
                                             f"ints) in every dim; got {k!r} in dim {dim}")
            start, stop, _ = k.indices(size)
            if stop <= start:
                raise user_error(IndexError, f"empty slice {k!r} of dim {dim} (size {size})")
            offsets.append(start)
            sizes.append(stop - start)
        if tuple(sizes) == self.shape:
            return self
        attributes = {"offsets": _i64_list(offsets), "sizes": _i64_list(sizes),
                      "strides": _i64_list([1] * len(sizes))}
        return Array(emit_value(vector.ExtractStridedSliceOp, [self.value],
                                vector_type(tuple(sizes), self.dtype), attributes))

    @property
    def T(self) -> Array:
        """The transpose of a 2-D array (vector.transpose)."""
        if self.ndim != 2:
            raise user_error(ValueError, f".T needs a 2-D array, got shape {self.shape}")
        return Array(emit_value(vector.TransposeOp, [self.value],
                                vector_type(self.shape[::-1], self.dtype),
                                {"permutation": _i64_array([1, 0])}))

    # Arithmetic -----------------------------------------------------------------------
    def _pair(self, other: object, operation: str, reverse: bool = False
              ) -> tuple[Array, Array]:
        """The operands of a binary op: one dtype, broadcast to one shape."""
        a, b = (coerce(other, self), self) if reverse else (self, coerce(other, self))
        if a.dtype != b.dtype:
            raise user_error(TypeError, f"operands of '{operation}' have different dtypes "
                                        f"{a.dtype.name} and {b.dtype.name}; cast one with "
                                        ".astype")
        try:
            shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        except ValueError:
            raise user_error(ValueError, f"operands of '{operation}' have shapes {a.shape} and "
                                         f"{b.shape}, which do not broadcast") from None
        return a.broadcast_to(shape), b.broadcast_to(shape)

    def _on_real_shape(self, other: object, apply: Callable[[Array], Array]) -> Array | None:
        """With a scalar operand (not an Array), an op of a view with inserted unit dims
        (`rows[:, None] < n`) computed on the array's real shape and viewed as before, so
        no (64, 1)-shaped vector is made; None for other operands or a plain array."""
        if isinstance(other, Array) or self.shape == self._real_shape:
            return None
        result = apply(Array(self._value))
        return Array(result._value, self.shape, self._dims)

    def _binary(self, other: object, operation: str, reverse: bool = False) -> Array:
        viewed = self._on_real_shape(other, lambda a: a._binary(other, operation, reverse))
        if viewed is not None:
            return viewed
        table = BITWISE if self.dtype == np.bool_ else FLOAT_BINARY if is_float(self.dtype) \
            else INT_BINARY
        if operation not in table:
            raise user_error(TypeError, f"'{operation}' is not supported for {self.dtype.name}")
        a, b = self._pair(other, operation, reverse)
        return Array(emit_value(table[operation], [a.value, b.value], a.value.type))

    def _integer(self, other: object, operation: str, reverse: bool = False) -> Array:
        """`//`, `%`, `<<`, `>>` of integer arrays, as numpy computes them (INT_ONLY). Division
        by zero is undefined (numpy gives 0)."""
        if is_float(self.dtype) or self.dtype == np.bool_:
            raise user_error(TypeError, f"'{operation}' is supported for integer arrays only, "
                                        f"not {self.dtype.name}")
        viewed = self._on_real_shape(other, lambda a: a._integer(other, operation, reverse))
        if viewed is not None:
            return viewed
        a, b = self._pair(other, operation, reverse)
        if operation == "%":
            quotient = Array(emit_value(arith.FloorDivSIOp, [a.value, b.value], a.value.type))
            return a - quotient * b
        return Array(emit_value(INT_ONLY[operation], [a.value, b.value], a.value.type))

    def __floordiv__(self, other: object) -> Array:
        return self._integer(other, "//")

    def __rfloordiv__(self, other: object) -> Array:
        return self._integer(other, "//", reverse=True)

    def __mod__(self, other: object) -> Array:
        return self._integer(other, "%")

    def __rmod__(self, other: object) -> Array:
        return self._integer(other, "%", reverse=True)

    def __lshift__(self, other: object) -> Array:
        return self._integer(other, "<<")

    def __rlshift__(self, other: object) -> Array:
        return self._integer(other, "<<", reverse=True)

    def __rshift__(self, other: object) -> Array:
        return self._integer(other, ">>")

    def __rrshift__(self, other: object) -> Array:
        return self._integer(other, ">>", reverse=True)

    # Comparisons: bool arrays (vectors of i1), e.g. the condition of smalti.dsl.where -----
    def _compare(self, other: object, operation: str) -> Array:
        if self.dtype == np.bool_:
            raise user_error(TypeError, f"'{operation}' does not compare bool arrays; compare "
                                        "the values they were computed from")
        viewed = self._on_real_shape(other, lambda a: a._compare(other, operation))
        if viewed is not None:
            return viewed
        a, b = self._pair(other, operation)
        compare, table = ((arith.CmpFOp, FLOAT_PREDICATES) if is_float(a.dtype)
                          else (arith.CmpIOp, INT_PREDICATES))
        predicate = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), table[operation])
        return Array(emit_value(compare, [a.value, b.value],
                                vector_type(a.shape, np.dtype(bool)), {"predicate": predicate}))

    def __lt__(self, other: object) -> Array:
        return self._compare(other, "<")

    def __le__(self, other: object) -> Array:
        return self._compare(other, "<=")

    def __gt__(self, other: object) -> Array:
        return self._compare(other, ">")

    def __ge__(self, other: object) -> Array:
        return self._compare(other, ">=")

    def __eq__(self, other: object) -> Array:  # type: ignore[override]
        if not _comparable(other):
            return NotImplemented
        return self._compare(other, "==")

    def __ne__(self, other: object) -> Array:  # type: ignore[override]
        if not _comparable(other):
            return NotImplemented
        return self._compare(other, "!=")

    __hash__ = object.__hash__  # identity, as before == became elementwise

    def __add__(self, other: object) -> Array:
        return self._binary(other, "add")

    def __radd__(self, other: object) -> Array:
        return self._binary(other, "add", reverse=True)

    def __sub__(self, other: object) -> Array:
        return self._binary(other, "sub")

    def __rsub__(self, other: object) -> Array:
        return self._binary(other, "sub", reverse=True)

    def __mul__(self, other: object) -> Array:
        return self._binary(other, "mul")

    def __rmul__(self, other: object) -> Array:
        return self._binary(other, "mul", reverse=True)

    def __truediv__(self, other: object) -> Array:
        return self._binary(other, "div")

    def __rtruediv__(self, other: object) -> Array:
        return self._binary(other, "div", reverse=True)

    def __and__(self, other: object) -> Array:
        return self._binary(other, "and")

    def __rand__(self, other: object) -> Array:
        return self._binary(other, "and", reverse=True)

    def __or__(self, other: object) -> Array:
        return self._binary(other, "or")

    def __ror__(self, other: object) -> Array:
        return self._binary(other, "or", reverse=True)

    def __xor__(self, other: object) -> Array:
        return self._binary(other, "xor")

    def __rxor__(self, other: object) -> Array:
        return self._binary(other, "xor", reverse=True)

    def __invert__(self) -> Array:
        """Logical not of a bool array, bitwise not of an integer one (as numpy's ~)."""
        if is_float(self.dtype):
            raise user_error(TypeError, f"'~' is not supported for {self.dtype.name}")
        return self._binary(True if self.dtype == np.bool_ else -1, "xor")

    def __neg__(self) -> Array:
        if is_float(self.dtype):
            return self._unary(arith.NegFOp)
        return 0 - self

    def __pos__(self) -> Array:
        return self

    def __abs__(self) -> Array:
        return self._unary(math_ops.AbsFOp if is_float(self.dtype) else math_ops.AbsIOp)

    def _unary(self, op: type[ir.OpView]) -> Array:
        value = self.value
        return Array(emit_value(op, [value], value.type))

    def float_unary(self, op: type[ir.OpView], what: str) -> Array:
        """A math op defined on floats only (exp, sqrt, ...)."""
        if not is_float(self.dtype):
            raise user_error(TypeError, f"{what} needs a float array, got {self.dtype.name}")
        return self._unary(op)

    def astype(self, dtype: object) -> Array:
        """Convert elements: extf/truncf between floats, sitofp/fptosi/extsi/trunci otherwise;
        to bool is `!= 0` and from bool selects 1 or 0, as in numpy."""
        target = as_dtype(dtype)
        if target == self.dtype:
            return self
        if target == np.bool_:
            return self != 0
        if self.dtype == np.bool_:
            one, zero = splat(1, self.shape, target), splat(0, self.shape, target)
            return Array(emit_value(arith.SelectOp, [self.value, one.value, zero.value],
                                    one.value.type))
        source_float, target_float = is_float(self.dtype), is_float(target)
        source_bits, target_bits = bit_width(self.dtype), bit_width(target)
        match source_float, target_float:
            case True, True:
                convert = arith.ExtFOp if target_bits > source_bits else arith.TruncFOp
                if target_bits == source_bits:
                    raise user_error(TypeError, f"cannot convert {self.dtype.name} to "
                                                f"{target.name} (same width)")
            case False, True:
                convert = arith.SIToFPOp
            case True, False:
                convert = arith.FPToSIOp
            case _:
                convert = arith.ExtSIOp if target_bits > source_bits else arith.TruncIOp
        return Array(emit_value(convert, [self.value], vector_type(self.shape, target)))

    # Reductions -----------------------------------------------------------------------
    def _reduce(self, how: str, axis: int | Sequence[int] | None, keepdims: bool) -> Array:
        axes = _normalize_axes(axis, self.ndim)
        kept = tuple(size for d, size in enumerate(self.shape) if d not in axes)
        if not kept:
            raise user_error(ValueError, f"reducing every axis of a {self.shape} array gives a "
                                         "scalar; keep at least one axis")
        kinds = FLOAT_KINDS if is_float(self.dtype) else INT_KINDS
        result_type = vector_type(kept, self.dtype)
        accumulator = splat(_identity(how, self.dtype), kept, self.dtype)
        attributes = {"kind": combining_kind_attr(kinds[how]),
                      "reduction_dims": _i64_array(list(axes))}
        reduced = Array(emit_value(vector.MultiDimReductionOp,
                                   [self.value, accumulator.value], result_type, attributes))
        if not keepdims:
            return reduced
        shape = tuple(1 if d in axes else size for d, size in enumerate(self.shape))
        return Array(reduced._value, shape, tuple(d for d in range(self.ndim) if d not in axes))

    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
        return self._reduce("sum", axis, keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
        return self._reduce("max", axis, keepdims)

    def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
        return self._reduce("min", axis, keepdims)


def _comparable(other: object) -> bool:
    """Whether `==` / `!=` compare elementwise (else Python's identity comparison applies)."""
    return isinstance(other, Array | Index | int | float | np.number) and not isinstance(other,
                                                                                     bool)


def _normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    normalized = []
    for a in axes:
        if not isinstance(a, int) or not -ndim <= a < ndim:
            raise user_error(ValueError, f"axis {a!r} is out of range for an array of rank {ndim}")
        normalized.append(a % ndim)
    if len(set(normalized)) != len(normalized):
        raise user_error(ValueError, f"repeated axis in {axis!r}")
    return tuple(sorted(normalized))


def _identity(how: str, dtype: np.dtype) -> float | int:
    if is_float(dtype):
        return {"sum": 0.0, "max": -math.inf, "min": math.inf}[how]
    info = np.iinfo(dtype)
    return {"sum": 0, "max": int(info.min), "min": int(info.max)}[how]


def _i64_array(values: Sequence[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def _i64_list(values: Sequence[int]) -> ir.Attribute:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.IntegerAttr.get(i64, int(v)) for v in values])


def as_dtype(dtype: object) -> np.dtype:
    """A supported numpy dtype; a located TypeError otherwise."""
    if mlir_name(dtype) is None:
        raise user_error(TypeError, f"unsupported dtype {dtype!r}")
    return np.dtype(dtype)


def vector_type(shape: Shape, dtype: np.dtype) -> ir.VectorType:
    return ir.VectorType.get(list(shape), mlir_type(dtype))


def splat(value: float | int, shape: Shape, dtype: object) -> Array:
    """An array of `shape` whose elements all equal `value` (a splat arith.constant)."""
    dtype = as_dtype(dtype)
    element = mlir_type(dtype)
    if is_float(dtype):
        attr = ir.FloatAttr.get(element, float(value))
    else:
        if isinstance(value, float) and not value.is_integer():
            raise user_error(TypeError, f"{value!r} is not a {dtype.name} value")
        attr = ir.IntegerAttr.get(element, int(value))
    result = vector_type(tuple(shape), dtype)
    dense = ir.DenseElementsAttr.get_splat(result, attr)
    return Array(emit_value(arith.ConstantOp, [], result, {"value": dense}))


def coerce(value: object, like: Array) -> Array:
    """An Array as is; a Python number as a splat of `like`'s shape and dtype."""
    if isinstance(value, Array):
        return value
    return scalar_array(value, like.shape, like.dtype)


def scalar_array(value: object, shape: Shape, dtype: np.dtype) -> Array:
    """A Python number (a bool for a bool array) or an Index (a traced int, for a numeric
    array) as a splat array; a located TypeError for anything else."""
    if isinstance(value, Index):
        if dtype == np.bool_:
            raise user_error(TypeError, f"cannot combine a bool array with an index {value!r}")
        return index_array(value, shape, dtype)
    if not isinstance(value, int | float | np.number | np.bool_):
        raise user_error(TypeError, f"cannot combine an Array with {type(value).__name__}")
    if isinstance(value, bool | np.bool_) != (dtype == np.bool_):
        raise user_error(TypeError, f"cannot combine a {dtype.name} array with {value!r}")
    if isinstance(value, float | np.floating) and not is_float(dtype):
        raise user_error(TypeError, f"cannot combine a {dtype.name} array with the float "
                                    f"{value!r}")
    return splat(value, shape, dtype)


def index_array(index: Index, shape: Shape, dtype: object) -> Array:
    """`index` (a traced int: a program id, a loop counter, a value read at run time) in every
    element of an array of `shape`, converted to `dtype` as a Python int would be (numpy's
    rule: `x * n` of a float array is float). An int64 array gets the index whole; others get
    it as int32 (arith.index_cast) and convert from there."""
    dtype = as_dtype(dtype)
    if index.static is not None:
        return splat(index.static, tuple(shape), dtype)
    wide = np.dtype(np.int64 if dtype == np.int64 else np.int32)
    scalar = emit_value(arith.IndexCastOp, [index.materialize()], mlir_type(wide))
    array = Array(emit_value(vector.BroadcastOp, [scalar], vector_type(tuple(shape), wide)))
    return array.astype(dtype)
