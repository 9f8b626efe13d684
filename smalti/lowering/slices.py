"""Strided slices of tiled (or splat) vectors: whole register vectors, selected or replaced.

Inference guarantees the slice is made of whole tiles of the layout's first tiling level,
so every register vector of the slice is a register vector of the large array, at the same
thread-relative position, shifted by the offsets."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import vector

from smalti.dialect.diagnostics import error_at
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import FragmentedArray
from smalti.ptx import Register
from smalti.tiling import WGSplatLayout


def _offsets(op: vector.ExtractStridedSliceOp | vector.InsertStridedSliceOp, rank: int
             ) -> tuple[int, ...]:
    offsets = tuple(int(ir.IntegerAttr(a).value) for a in op.offsets)
    return offsets + (0,) * (rank - len(offsets))


def _register_positions(large: FragmentedArray, small_shape: tuple[int, ...],
                        offsets: tuple[int, ...], op: ir.OpView) -> list[int]:
    """For each register vector of the slice, the index of the same vector in `large`."""
    index_of = {origin: r for r, origin in
                enumerate(large.layout.distribution(large.shape).register_origins)}
    positions = []
    for origin in large.layout.distribution(small_shape).register_origins:
        shifted = tuple(o + s for o, s in zip(origin, offsets, strict=True))
        if shifted not in index_of:
            raise error_at(op, "the slice does not fall on whole register vectors; run "
                               "smalti-infer-layouts to check its alignment")
        positions.append(index_of[shifted])
    return positions


@lowering_rule(vector.ExtractStridedSliceOp)
def _extract(ctx: LoweringContext, op: vector.ExtractStridedSliceOp) -> None:
    source = ctx.array(op, op.source)
    shape = tuple(ir.VectorType(op.result.type).shape)
    if layouts_of(op, "out_layouts", 1)[0] != source.layout:
        raise error_at(op, "the slice must keep its source's layout")
    if isinstance(source.layout, WGSplatLayout):
        vectors = source.vectors
    else:
        offsets = _offsets(op, len(source.shape))
        vectors = tuple(source.vectors[r]
                        for r in _register_positions(source, shape, offsets, op))
    ctx.set(op.result, FragmentedArray(source.layout, shape, source.element, vectors,
                                       source.vector_length))


@lowering_rule(vector.InsertStridedSliceOp)
def _insert(ctx: LoweringContext, op: vector.InsertStridedSliceOp) -> None:
    source = ctx.array(op, op.valueToStore)
    destination = ctx.array(op, op.dest)
    if source.layout != destination.layout:
        raise error_at(op, "the inserted value must have the destination's layout")
    if isinstance(destination.layout, WGSplatLayout):
        raise error_at(op, "inserting into a splat changes its elements: give the "
                           "destination a distributed layout")
    offsets = _offsets(op, len(destination.shape))
    vectors: list[tuple[Register, ...]] = list(destination.vectors)
    positions = _register_positions(destination, source.shape, offsets, op)
    for small, large in enumerate(positions):
        vectors[large] = source.vectors[small]
    ctx.set(op.result, FragmentedArray(destination.layout, destination.shape,
                                       destination.element, tuple(vectors),
                                       destination.vector_length))
