"""sd.custom_primitive: per-thread code over the registers of arrays in declared layouts (the
escape hatch for what warpgroup semantics cannot say, such as hand-written lane shuffles).

    @sd.custom_primitive(in_layouts=["wgmma"], out_shapes=[jax.ShapeDtypeStruct((64, 8), F32)],
                         out_layouts=["wgmma"])
    def doubled(t, x):          # t: the thread's indices; x: its elements of the operand
        return [e * 2 for e in x]

    y = doubled(x_array)        # in the kernel body
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu
from jaxlib.mlir.dialects import math as math_ops

from smalti.dialect.attributes import LayoutAttrError, layout_to_text, named_layout
from smalti.dialect.bindings import gpu_dimension_attr, scalar_type
from smalti.dialect.ops_custom import (
    ADDRESS_TYPE,
    SCALAR_ELEMENTS,
    CustomPrimitiveOp,
    CustomYieldOp,
    elements_per_thread,
)
from smalti.dsl.array import Array, as_dtype, vector_type
from smalti.dsl.dtypes import is_float, mlir_name, mlir_type, numpy_dtype
from smalti.dsl.locations import user_error
from smalti.dsl.smem_refs import SharedRef
from smalti.dsl.trace import create, dsl_entry, emit, emit_value
from smalti.tiling import (
    Layout,
    LayoutError,
    Transform,
    check_layout_fits,
)

FLOAT_OPS = {"+": arith.AddFOp, "-": arith.SubFOp, "*": arith.MulFOp, "/": arith.DivFOp}
INT_OPS = {"+": arith.AddIOp, "-": arith.SubIOp, "*": arith.MulIOp, "&": arith.AndIOp,
           "|": arith.OrIOp, "^": arith.XOrIOp, "<<": arith.ShLIOp, ">>": arith.ShRSIOp}


@dataclass(frozen=True, eq=False)
class Register:
    """One per-thread scalar in a custom_primitive body: an element of the thread's fragment,
    or what the body computed from them. Arithmetic with Registers and Python numbers of its
    dtype (`+ - * /` on floats; `+ - * & | ^ << >>` on integers) and the float functions
    below (lowered as the kernel's arrays' are: exp through ex2.approx, ...)."""

    value: ir.Value

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.value.type)

    def __repr__(self) -> str:
        return f"Register({self.dtype.name})"

    def _binary(self, other: object, operator: str, reflected: bool = False) -> Register:
        floats = is_float(self.dtype)
        table = FLOAT_OPS if floats else INT_OPS
        if operator not in table:
            raise user_error(TypeError, f"'{operator}' is not defined on {self.dtype.name} "
                                        "registers")
        other = scalar(other, self.dtype)
        if other.dtype != self.dtype:
            raise user_error(TypeError, f"'{operator}' of {self.dtype.name} and "
                                        f"{other.dtype.name} registers: convert one (astype)")
        lhs, rhs = (other, self) if reflected else (self, other)
        return Register(emit_value(table[operator], [lhs.value, rhs.value], self.value.type))

    def __add__(self, other: object) -> Register:
        return self._binary(other, "+")

    def __radd__(self, other: object) -> Register:
        return self._binary(other, "+", True)

    def __sub__(self, other: object) -> Register:
        return self._binary(other, "-")

    def __rsub__(self, other: object) -> Register:
        return self._binary(other, "-", True)

    def __mul__(self, other: object) -> Register:
        return self._binary(other, "*")

    def __rmul__(self, other: object) -> Register:
        return self._binary(other, "*", True)

    def __truediv__(self, other: object) -> Register:
        return self._binary(other, "/")

    def __rtruediv__(self, other: object) -> Register:
        return self._binary(other, "/", True)

    def __and__(self, other: object) -> Register:
        return self._binary(other, "&")

    def __or__(self, other: object) -> Register:
        return self._binary(other, "|")

    def __xor__(self, other: object) -> Register:
        return self._binary(other, "^")

    def __lshift__(self, other: object) -> Register:
        return self._binary(other, "<<")

    def __rshift__(self, other: object) -> Register:
        return self._binary(other, ">>")

    def __neg__(self) -> Register:
        if is_float(self.dtype):
            return Register(emit_value(arith.NegFOp, [self.value], self.value.type))
        return scalar(0, self.dtype) - self

    def maximum(self, other: object) -> Register:
        """The larger (NaN if either is NaN, as jnp.maximum)."""
        return self._extremum(other, arith.MaximumFOp, arith.MaxSIOp)

    def minimum(self, other: object) -> Register:
        return self._extremum(other, arith.MinimumFOp, arith.MinSIOp)

    def _extremum(self, other: object, on_floats: type, on_ints: type) -> Register:
        other = scalar(other, self.dtype)
        op = on_floats if is_float(self.dtype) else on_ints
        return Register(emit_value(op, [self.value, other.value], self.value.type))

    def _unary(self, op: type[ir.OpView], name: str) -> Register:
        if not is_float(self.dtype):
            raise user_error(TypeError, f"{name} of an {self.dtype.name} register; it takes "
                                        "floats")
        return Register(emit_value(op, [self.value], self.value.type))

    def exp(self) -> Register:
        return self._unary(math_ops.ExpOp, "exp")

    def exp2(self) -> Register:
        return self._unary(math_ops.Exp2Op, "exp2")

    def log(self) -> Register:
        return self._unary(math_ops.LogOp, "log")

    def sqrt(self) -> Register:
        return self._unary(math_ops.SqrtOp, "sqrt")

    def rsqrt(self) -> Register:
        return self._unary(math_ops.RsqrtOp, "rsqrt")

    def tanh(self) -> Register:
        return self._unary(math_ops.TanhOp, "tanh")

    def abs(self) -> Register:
        return self._unary(math_ops.AbsFOp, "abs")

    def astype(self, dtype: object) -> Register:
        """Between f32 and bf16/f16 (rounding to nearest even when narrowing)."""
        dtype = as_dtype(dtype)
        if dtype == self.dtype:
            return self
        names = {mlir_name(self.dtype), mlir_name(dtype)}
        if not names <= {"f32", "bf16", "f16"} or "f32" not in names:
            raise user_error(TypeError, f"a register converts between f32 and bf16/f16, not "
                                        f"{self.dtype.name} -> {dtype.name}")
        widen = mlir_name(dtype) == "f32"
        return Register(emit_value(arith.ExtFOp if widen else arith.TruncFOp, [self.value],
                                   mlir_type(dtype)))


def scalar(value: object, dtype: np.dtype) -> Register:
    """A Register as is; a Python number as a constant register of `dtype`."""
    if isinstance(value, Register):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise user_error(TypeError, f"expected a register or a Python number, got "
                                    f"{type(value).__name__}")
    element = mlir_type(dtype)
    if is_float(dtype):
        attr = ir.FloatAttr.get(element, float(value))
    elif isinstance(value, float) and not value.is_integer():
        raise user_error(TypeError, f"{value!r} is not a {dtype.name} value")
    else:
        attr = ir.IntegerAttr.get(element, int(value))
    return Register(emit_value(arith.ConstantOp, [], element, {"value": attr}))


@dataclass(frozen=True)
class Thread:
    """The running thread's indices (int32 registers): `thread` in its warpgroup (0..127, the
    index layouts are written in), `warp` in the warpgroup (0..3), `lane` in the warp."""

    thread: Register
    warp: Register
    lane: Register


def _thread() -> Thread:
    index = ir.IndexType.get()
    i32 = mlir_type(np.dtype(np.int32))
    tid = emit(gpu.ThreadIdOp, [], [index], {"dimension": gpu_dimension_attr(0)}).results[0]
    as_i32 = Register(emit_value(arith.IndexCastOp, [tid], i32))
    lane = Register(emit_value(arith.IndexCastOp, [emit_value(gpu.LaneIdOp, [], index)], i32))
    thread = as_i32 & 127
    return Thread(thread, (thread >> 5) & 3, lane)


def layout_named(layout: Layout | str, what: str) -> Layout:
    """A layout, a canonical name ("wgmma", "wgmma-row", ...) or attribute text
    ("#smalti.strided<vec = 2>"); a located ValueError otherwise."""
    if not isinstance(layout, str):
        return layout
    try:
        return named_layout(layout)
    except (LayoutAttrError, LayoutError, ValueError) as error:
        raise user_error(ValueError, f"custom_primitive: {what} {layout!r}: {error}") from None


@dataclass(frozen=True)
class CustomPrimitive:
    """A traced per-thread body with its declared layouts; call it with the operands."""

    body: Callable[..., Any]
    in_layouts: tuple[Layout, ...]
    out_shapes: tuple[tuple[tuple[int, ...], np.dtype], ...]
    out_layouts: tuple[Layout, ...]
    in_transforms: tuple[tuple[Transform, ...], ...] | None

    def __call__(self, *operands: Array | SharedRef) -> Array | tuple[Array, ...]:
        arrays = [a for a in operands if isinstance(a, Array)]
        refs = list(operands[len(arrays):])
        if not all(isinstance(r, SharedRef) for r in refs):
            raise user_error(TypeError, "custom_primitive takes Arrays, then SharedRefs, got "
                                        + ", ".join(type(x).__name__ for x in operands))
        if len(arrays) != len(self.in_layouts):
            raise user_error(ValueError, f"custom_primitive declares {len(self.in_layouts)} "
                                         f"in_layouts for {len(arrays)} Array operands")
        transforms = self.in_transforms or tuple(() for _ in refs)
        if len(transforms) != len(refs):
            raise user_error(ValueError, f"custom_primitive declares {len(transforms)} "
                                         f"in_transforms for {len(refs)} SharedRef operands")
        for array, layout in zip(arrays, self.in_layouts, strict=True):
            _check(array.shape, array.dtype, layout, "an operand")
        op = create(CustomPrimitiveOp, values=[a.value for a in arrays] + [r.value for r in refs],
                    result_types=[vector_type(s, d) for s, d in self.out_shapes],
                    in_layouts=self.in_layouts, out_layouts=self.out_layouts,
                    in_transforms=transforms if refs else None)
        arguments = [mlir_type(a.dtype) for a, layout in zip(arrays, self.in_layouts,
                                                                strict=True)
                     for _ in range(elements_per_thread(layout, a.shape))]
        arguments += [scalar_type(ADDRESS_TYPE)] * len(refs)
        block = op.operation.regions[0].blocks.append(*arguments)
        with ir.InsertionPoint(block):
            registers = [Register(v) for v in block.arguments]
            lists, start = [], 0
            for array, layout in zip(arrays, self.in_layouts, strict=True):
                count = elements_per_thread(layout, array.shape)
                lists.append(registers[start:start + count])
                start += count
            returned = self.body(_thread(), *lists, *registers[start:])
            create(CustomYieldOp, values=self._yielded(returned))
        results = tuple(Array(r) for r in op.operation.results)
        return results[0] if len(results) == 1 else results

    def _yielded(self, returned: object) -> list[ir.Value]:
        """The body's per-result element lists, checked against the declared results."""
        per_result = [returned] if len(self.out_shapes) == 1 else returned
        if not isinstance(per_result, Sequence) or len(per_result) != len(self.out_shapes):
            raise user_error(TypeError, f"a custom_primitive body returns one list of "
                                        f"registers per result ({len(self.out_shapes)})")
        values = []
        for i, ((shape, dtype), layout, elements) in enumerate(
                zip(self.out_shapes, self.out_layouts, per_result, strict=True)):
            count = elements_per_thread(layout, shape)
            if not isinstance(elements, Sequence) or len(elements) != count:
                got = (f"{len(elements)}" if isinstance(elements, Sequence)
                       else type(elements).__name__)
                if isinstance(elements, Sequence) and elements and all(
                        isinstance(e, Sequence) for e in elements):
                    got += f" lists (result #{i} takes one list of registers)"
                raise user_error(ValueError, f"custom_primitive: result #{i} needs {count} "
                                             f"registers per thread (#smalti."
                                             f"{layout_to_text(layout)} over {shape}); the "
                                             f"body returned {got}")
            for element in elements:
                register = scalar(element, dtype)
                if register.dtype != dtype:
                    raise user_error(TypeError, f"result #{i} holds {dtype.name}, the body "
                                                f"returned a {register.dtype.name} register")
                values.append(register.value)
        return values


def _check(shape: tuple[int, ...], dtype: np.dtype, layout: Layout, what: str) -> None:
    if mlir_name(dtype) not in SCALAR_ELEMENTS:
        raise user_error(TypeError, f"custom_primitive: {what} of {dtype.name}; registers "
                                    f"hold {', '.join(sorted(SCALAR_ELEMENTS))}")
    try:
        check_layout_fits(layout, shape)
    except LayoutError as error:
        raise user_error(ValueError, f"custom_primitive: #smalti.{layout_to_text(layout)} "
                                     f"cannot hold {what} of shape {shape}: {error}"
                         ) from None


@dsl_entry(CustomPrimitiveOp)
def custom_primitive(*, in_layouts: Sequence[Layout | str], out_shapes: Sequence[Any],
                     out_layouts: Sequence[Layout | str],
                     in_transforms: Sequence[Sequence[Transform]] | None = None
                     ) -> Callable[[Callable[..., Any]], CustomPrimitive]:
    """Decorator: a per-thread body over the registers of arrays in declared layouts.

    The body gets a `Thread` (its indices), then for each Array operand the thread's elements
    in register order (a list of `Register`), then each SharedRef's shared address (an int32
    Register; its bytes are laid out by `in_transforms`); it returns each result's list of
    elements (a list for one result, a tuple of lists for several). Inference takes the
    layouts and transforms as given and relays out around them."""
    layouts_in = tuple(layout_named(x, "in_layouts entry") for x in in_layouts)
    layouts_out = tuple(layout_named(x, "out_layouts entry") for x in out_layouts)
    shapes = tuple((tuple(s.shape), as_dtype(s.dtype)) for s in out_shapes)
    if len(shapes) != len(layouts_out):
        raise user_error(ValueError, f"custom_primitive: {len(layouts_out)} out_layouts for "
                                     f"{len(shapes)} out_shapes")
    for (shape, dtype), layout in zip(shapes, layouts_out, strict=True):
        _check(shape, dtype, layout, "a result")
    transforms = None if in_transforms is None else tuple(tuple(t) for t in in_transforms)

    def decorate(body: Callable[..., Any]) -> CustomPrimitive:
        if not callable(body):
            raise user_error(TypeError, "custom_primitive decorates a function, got "
                                        f"{type(body).__name__}")
        return CustomPrimitive(body, layouts_in, shapes, layouts_out, transforms)

    return decorate


__all__ = ["CustomPrimitive", "Register", "Thread", "custom_primitive"]
