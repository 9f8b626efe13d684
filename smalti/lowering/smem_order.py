"""Ordering the warpgroup's own shared-memory accesses (warpgroup semantics).

A kernel body is written as if the warpgroup were one thread: a load sees the stores before
it, a store does not overwrite what an earlier load still reads. The threads are many, so
where an access may touch elements other threads accessed since the last barrier (a load
in another layout than the store, a TMA refill of a tile the threads read), the lowering
puts the warpgroup's named barrier (`warpgroup_sync`) before it. The pending accesses are
`LoweringContext.smem_pending`, byte ranges of the dynamic buffer; any barrier clears them.
Accesses in which each thread touches only elements it accessed itself (the same ref and a
layout without replicas) need none; async-proxy accesses are ordered by mbarriers and the
proxy fence (`smalti.lowering.proxy`), except a TMA write after generic reads.
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from smalti.dialect.attributes import attr_to_layouts
from smalti.dialect.checks import is_smem_type
from smalti.dialect.definition import Proxy, SmaltiOp
from smalti.dialect.ops import LayoutCastOp
from smalti.lowering.context import LoweringContext, SmemAccess
from smalti.lowering.warpgroup import warpgroup_sync
from smalti.tiling import Layout, WGSplatLayout

UNKNOWN = (0, math.inf)
# The static scratch that relayouts through shared memory share (smalti.lowering.
# relayout_smem): outside the dynamic buffer, so a range no dynamic access overlaps.
RELAYOUT_SCRATCH = (-1, 0)


def owner(ref: object, indices: list[ir.Value], layout: Layout, shape: tuple[int, ...]
          ) -> object | None:
    """The identity of an access in which each thread touches only its own elements (the
    ref, the window's start, the layout), when the layout gives every element one thread;
    else None. Two accesses with one owner touch the same elements from the same threads."""
    if isinstance(layout, WGSplatLayout) or layout.distribution(shape).replica_mask:
        return None
    return (ref, tuple(indices), layout, shape)


def _conflicts(pending: SmemAccess, start: int, stop: float, write: bool,
               who: object | None) -> bool:
    overlap = pending.start < stop and start < pending.stop
    hazard = pending.write or write  # read after read needs no order
    same_threads = who is not None and pending.owner == who
    return overlap and hazard and not same_threads


def order_generic_access(ctx: LoweringContext, start: int, stop: float, write: bool,
                         who: object | None) -> None:
    """Before an ld/st.shared of bytes [start, stop): meet if it may touch elements other
    threads accessed since the last barrier (unless read after read); then note it."""
    if any(_conflicts(p, start, stop, write, who) for p in ctx.smem_pending):
        warpgroup_sync(ctx)
    ctx.smem_pending = (*ctx.smem_pending, SmemAccess(start, stop, write, who))


def order_async_write(ctx: LoweringContext, start: int, stop: float) -> None:
    """Before a TMA write to bytes [start, stop): meet if the threads accessed them since the
    last barrier (they must be done reading before the copy overwrites them)."""
    if any(_conflicts(p, start, stop, True, None) for p in ctx.smem_pending):
        warpgroup_sync(ctx)


def loop_carried(ctx: LoweringContext, body: ir.Block) -> tuple[SmemAccess, ...]:
    """The generic shared-memory accesses `body` makes (nested regions included): at the
    top of an iteration they are pending from the previous one (a layout_cast: its reads
    of the relayout scratch). A ref the body defines itself, or whose layout is not
    inferred, counts as all of shared memory."""
    found: list[SmemAccess] = []
    for op in body.operations:
        view = op.operation.opview
        if isinstance(view, LayoutCastOp):  # its last loads of the scratch (if it has any)
            found.append(SmemAccess(*RELAYOUT_SCRATCH, False))
        if isinstance(view, SmaltiOp):
            for effect, value in view.memory_effects():
                if effect.proxy is Proxy.GENERIC and is_smem_type(value.type):
                    found.append(_static_access(ctx, view, value, effect.kind == "write"))
        for region in op.operation.regions:
            for block in region.blocks:
                found.extend(loop_carried(ctx, block))
    return tuple(dict.fromkeys(found))


def _static_access(ctx: LoweringContext, op: SmaltiOp, ref: ir.Value, write: bool
                   ) -> SmemAccess:
    """What one generic access op touches, as far as is known before it is lowered."""
    lowered = ctx.values.get(ref)
    if lowered is None or not hasattr(lowered, "stop"):
        return SmemAccess(*UNKNOWN, write)
    start, stop = lowered.start, lowered.stop
    vectors = [v for v in op.operation.operands if isinstance(v.type, ir.VectorType)] + [
        v for v in op.operation.results if isinstance(v.type, ir.VectorType)]
    attr = "in_layouts" if write else "out_layouts"
    if len(vectors) != 1 or attr not in op.operation.attributes:
        return SmemAccess(start, stop, write)
    layout = attr_to_layouts(op.operation.attributes[attr])[0]
    shape = tuple(ir.VectorType(vectors[0].type).shape)
    indices = list(getattr(op, "indices", ()))
    return SmemAccess(start, stop, write, owner(lowered, indices, layout, shape))
