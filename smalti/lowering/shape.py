"""Ops that move no data between threads: broadcasts, shape_cast, transpose, iota.

Whether an op is free is decided on element maps: every element of the result must sit in
a thread that holds the corresponding source element (`element_picks`), and the result's
registers are then the source's (re-paired for 16-bit values where needed). Layout
inference chooses such layouts; anything else is reported at the op as a needed relayout.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import vector

from smalti.dialect.attributes import layout_to_text
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_compute import BroadcastInDimOp, IotaOp
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.elementwise import unpack
from smalti.lowering.layout import broadcast_splat
from smalti.lowering.packing import join
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import (
    FragmentedArray,
    ScalarValue,
    element_type,
    elements_per_register,
    fragment_geometry,
)
from smalti.ptx import Register
from smalti.tiling import WARPGROUP_SIZE, Distribution, Layout, WGSplatLayout
from smalti.tiling.layouts import unravel

Shape = tuple[int, ...]
Projection = Callable[[np.ndarray], np.ndarray]  # result indices [..., n] -> source [..., m]


def element_picks(source: Layout, source_shape: Shape, target: Layout, target_shape: Shape,
                  project: Projection) -> list[list[tuple[int, int]]] | None:
    """For every (register, slot) of `target`, the (register, slot) of `source` holding the
    projected element in every thread; None when some element is in another thread."""
    src = source.element_index(source_shape)
    want = project(target.element_index(target_shape))
    threads, registers, slots = src.shape[:3]
    src_flat = np.ravel_multi_index(tuple(np.moveaxis(src, -1, 0)), source_shape)
    want_flat = np.ravel_multi_index(tuple(np.moveaxis(want, -1, 0)), source_shape)
    columns = src_flat.reshape(threads, registers * slots).T
    lookup: dict[bytes, int] = {}
    for i, column in enumerate(columns):
        lookup.setdefault(np.ascontiguousarray(column).tobytes(), i)
    picks = []
    for r in range(want.shape[1]):
        row = []
        for s in range(want.shape[2]):
            found = lookup.get(np.ascontiguousarray(want_flat[:, r, s]).tobytes())
            if found is None:
                return None
            row.append(divmod(found, slots))
        picks.append(row)
    return picks


def regather(ctx: LoweringContext, source: FragmentedArray, picks: list[list[tuple[int, int]]],
             layout: Layout, shape: Shape) -> FragmentedArray:
    """The array of `layout` whose slot (r, s) is the source's element picks[r][s]; packed
    registers are reused whole when their elements stay together."""
    length = len(picks[0])
    pack = elements_per_register(source.element, length)
    parts: dict[tuple[int, int], list[Register]] = {}

    def element(r: int, s: int) -> Register:
        if source.pack == 1:
            return source.vectors[r][s]
        key = (r, s // source.pack)
        if key not in parts:
            parts[key] = unpack(ctx, source, source.vectors[r][key[1]])
        return parts[key][s % source.pack]

    vectors = []
    for row in picks:
        vector = []
        for i in range(0, length, pack):
            chosen = row[i:i + pack]
            (r0, s0), whole = chosen[0], source.pack == pack > 1
            if whole and s0 % pack == 0 and chosen == [(r0, s0 + j) for j in range(pack)]:
                vector.append(source.vectors[r0][s0 // pack])  # a register kept whole
            else:
                vector.append(join(ctx, source.element, [element(r, s) for r, s in chosen], 1))
        vectors.append(tuple(vector))
    return FragmentedArray(layout, shape, source.element, tuple(vectors), length)


def relabel(ctx: LoweringContext, op: ir.OpView, source: FragmentedArray,
            project: Projection) -> FragmentedArray:
    """The result of `op` (one vector) from the source's registers, moving no data."""
    result = op.result
    shape = tuple(ir.VectorType(result.type).shape)
    layout = layouts_of(op, "out_layouts", 1)[0]
    if isinstance(source.layout, WGSplatLayout):
        return broadcast_splat(ctx, FragmentedArray(source.layout, shape, source.element,
                                                    source.vectors, 1), layout)
    if isinstance(layout, WGSplatLayout):
        raise error_at(op, "cannot give a splat layout to a value built from a distributed one")
    picks = element_picks(source.layout, source.shape, layout, shape, project)
    if picks is None:
        raise error_at(op, f"result layout #smalti.{layout_to_text(layout)} moves elements "
                           f"between threads of the operand layout "
                           f"#smalti.{layout_to_text(source.layout)}; it needs a relayout")
    return regather(ctx, source, picks, layout, shape)


def splat_scalar(ctx: LoweringContext, scalar: ScalarValue, layout: Layout, shape: Shape
                 ) -> FragmentedArray:
    """A vector every element of which is `scalar`, in any layout."""
    operand = scalar.operand
    if not isinstance(operand, Register):
        register = ctx.builder.reg(scalar.type.scalar)
        ctx.builder.emit(f"mov.b{scalar.type.bits}", register, operand)
        operand = register
    one = FragmentedArray(WGSplatLayout(), shape, scalar.type, ((operand,),), 1)
    return broadcast_splat(ctx, one, layout)


@lowering_rule(vector.BroadcastOp)
def _broadcast(ctx: LoweringContext, op: vector.BroadcastOp) -> None:
    operand, result = op.source, op.result
    if not isinstance(operand.type, ir.VectorType):
        layout = layouts_of(op, "out_layouts", 1)[0]
        shape = tuple(ir.VectorType(result.type).shape)
        ctx.set(result, splat_scalar(ctx, ctx.scalar(op, operand), layout, shape))
        return
    source = ctx.array(op, operand)
    added = len(ir.VectorType(result.type).shape) - len(source.shape)
    dims = tuple(range(added, added + len(source.shape)))
    ctx.set(result, relabel(ctx, op, source, _broadcast_projection(source.shape, dims)))


@lowering_rule(BroadcastInDimOp)
def _broadcast_in_dim(ctx: LoweringContext, op: BroadcastInDimOp) -> None:
    source = ctx.array(op, op.source)
    projection = _broadcast_projection(source.shape, op.broadcast_dimensions)
    ctx.set(op.result, relabel(ctx, op, source, projection))


def _broadcast_projection(shape: Shape, dims: tuple[int, ...]) -> Projection:
    """Result index -> operand index: operand dim i is result dim dims[i] (0 if stretched)."""

    def project(index: np.ndarray) -> np.ndarray:
        picked = index[..., list(dims)]
        return np.where(np.array(shape) == 1, 0, picked)

    return project


@lowering_rule(vector.TransposeOp)
def _transpose(ctx: LoweringContext, op: vector.TransposeOp) -> None:
    source = ctx.array(op, op.vector)
    permutation = [int(p) for p in ir.DenseI64ArrayAttr(op.permutation)]
    inverse = [permutation.index(d) for d in range(len(permutation))]
    ctx.set(op.result, relabel(ctx, op, source, lambda index: index[..., inverse]))


@lowering_rule(vector.ShapeCastOp)
def _shape_cast(ctx: LoweringContext, op: vector.ShapeCastOp) -> None:
    source = ctx.array(op, op.source)
    new_shape = tuple(ir.VectorType(op.result.type).shape)

    def project(index: np.ndarray) -> np.ndarray:
        flat = np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), new_shape)
        return unravel(flat, source.shape)

    ctx.set(op.result, relabel(ctx, op, source, project))


@lowering_rule(IotaOp)
def _iota(ctx: LoweringContext, op: IotaOp) -> None:
    """Each thread computes the indices it holds: a thread part (from the layout's thread
    terms, or the flat position for carrying strided layouts) plus a constant per slot."""
    result = op.result
    vector_type = ir.VectorType(result.type)
    element = element_type(vector_type.element_type)
    shape = tuple(vector_type.shape)
    dim = op.dimension
    layout = layouts_of(op, "out_layouts", 1)[0]
    if element is None or element.name != "i32":
        raise error_at(op, f"iota of {vector_type.element_type} is not supported (i32 only)")
    if isinstance(layout, WGSplatLayout):
        raise error_at(op, "iota needs a distributed layout, not a splat")
    dist = layout.distribution(shape)
    b = ctx.builder
    count, length = fragment_geometry(layout, shape)
    constants: dict[tuple[Register | None, int], Register] = {}

    def value(base: Register | None, offset: int) -> Register:
        if (base, offset) not in constants:
            constants[(base, offset)] = (
                b.compute("add.s32", "s32", base, offset) if base is not None and offset
                else base if base is not None else b.compute("mov.b32", "s32", offset))
        return constants[(base, offset)]

    vectors = []
    for r in range(count):
        if dist.separable:
            base, origin = _thread_coordinate(ctx, dist, dim), dist.register_origins[r][dim]
        else:
            base, origin = _flat_coordinate(ctx, dist, dim, r), 0
        step = dist.vector_step if dist.vector_dim == dim else 0
        vectors.append(tuple(value(base, origin + s * step) for s in range(length)))
    ctx.set(result, FragmentedArray(layout, shape, element, tuple(vectors), length))


def _thread_coordinate(ctx: LoweringContext, dist: Distribution, dim: int) -> Register | None:
    """sum of ((tid / divisor) % modulus) * scale over the thread terms of `dim`; memoised."""
    terms = tuple(t for t in dist.thread_terms if t.dim == dim)
    key = ("thread_coordinate", terms)
    if key in ctx.cache:
        return ctx.cache[key]  # type: ignore[return-value]
    b = ctx.builder
    total: Register | None = None
    for term in terms:
        part = ctx.thread_index()
        if term.divisor > 1:
            part = b.compute("div.u32", "u32", part, term.divisor) if not _pow2(term.divisor) \
                else b.compute("shr.u32", "u32", part, term.divisor.bit_length() - 1)
        if term.divisor * term.modulus < WARPGROUP_SIZE:
            part = b.compute("rem.u32", "u32", part, term.modulus) if not _pow2(term.modulus) \
                else b.compute("and.b32", "u32", part, term.modulus - 1)
        total = (b.compute("mul.lo.u32", "u32", part, term.scale) if total is None
                 else b.compute("mad.lo.u32", "u32", part, term.scale, total))
    ctx.cache[key] = total
    return total


def _flat_coordinate(ctx: LoweringContext, dist: Distribution, dim: int, register: int
                     ) -> Register:
    """Index along `dim` of the first element of a strided register, from its flat position."""
    b = ctx.builder
    flat = b.compute("mad.lo.u32", "u32", ctx.thread_index(), dist.vector_length,
                     register * WARPGROUP_SIZE * dist.vector_length)
    inner = math.prod(dist.shape[dim + 1:])
    index = b.compute("div.u32", "u32", flat, inner) if inner > 1 else flat
    return b.compute("rem.u32", "u32", index, dist.shape[dim])


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0
