"""mbarriers in shared memory and the warpgroup barrier.

initialize_barrier: thread 0 of the block inits every barrier, fences the inits, and the
block meets (bar.sync 0). arrive: every thread of the warpgroup arrives. arrive_expect_tx:
thread 0 of the warpgroup announces the bytes and arrives. wait: a try_wait.parity loop.
warpgroup_barrier: `bar.sync 1 + warpgroup, 128`. cluster_barrier: barrier.cluster arrive
(release) then wait (acquire), by every thread of every CTA of the cluster.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.lowering.smem import SmemRef, smem_address, smem_ref
from smalti.ptx import Address, Guard, Immediate, Register, Symbol
from smalti.tiling import WARPGROUP_SIZE

BARRIER_BYTES = 8
SINK = Symbol("_")


def leader(ctx: LoweringContext) -> Register:
    """A predicate true in thread 0 of each warpgroup (memoised)."""
    if "wg_leader" not in ctx.cache:
        ctx.cache["wg_leader"] = ctx.builder.compute("setp.eq.u32", "pred", ctx.thread_index(), 0)
    return ctx.cache["wg_leader"]


def warpgroup_sync(ctx: LoweringContext) -> None:
    """Named barrier 1 + warpgroup index over the warpgroup's 128 threads (id 1 when the
    kernel has one warpgroup)."""
    b = ctx.builder
    if ctx.signature.warpgroups == 1:
        b.emit("bar.sync", Immediate(1), Immediate(WARPGROUP_SIZE))
        return
    from smalti.lowering.warpgroup import known_warpgroup, warpgroup_index

    known = known_warpgroup(ctx)
    if known is not None:  # a constant id: ptxas then reserves only the barriers used
        b.emit("bar.sync", Immediate(1 + known), Immediate(WARPGROUP_SIZE))
        return
    ident = b.compute("add.u32", "u32", warpgroup_index(ctx), 1)
    b.emit("bar.sync", ident, Immediate(WARPGROUP_SIZE))


def barrier_address(ctx: LoweringContext, op: ir.Operation, bars: SmemRef,
                    index: ir.Value) -> Address:
    """The shared address of barrier `index` of the array."""
    scalar = ctx.scalar(op, index)
    if scalar.constant is not None:
        return Address(smem_address(ctx, bars), BARRIER_BYTES * int(scalar.constant))
    b = ctx.builder
    low = b.compute("cvt.u32.u64", "u32", scalar.operand)
    return Address(b.compute("mad.lo.u32", "u32", low, BARRIER_BYTES, smem_address(ctx, bars)))


@lowering_rule("smalti.initialize_barrier")
def _initialize(ctx: LoweringContext, op: ir.Operation) -> None:
    bars = smem_ref(ctx, op, op.operands[0])
    count = ir.IntegerAttr(op.attributes["arrival_count"]).value
    b = ctx.builder
    base = smem_address(ctx, bars)  # before the branch: later ops reuse it (memoised)
    first = b.compute("setp.eq.u32", "pred", b.special("%tid.x"), 0)
    skip = b.new_label("barriers_ready")
    b.emit("bra", skip, guard=Guard(first, negated=True))
    for i in range(bars.shape[0]):
        b.emit("mbarrier.init.shared::cta.b64", Address(base, BARRIER_BYTES * i),
               Immediate(count))
    b.emit("fence.mbarrier_init.release.cluster")
    b.place(skip)
    b.emit("bar.sync", Immediate(0))


@lowering_rule("smalti.arrive")
def _arrive(ctx: LoweringContext, op: ir.Operation) -> None:
    address = barrier_address(ctx, op, smem_ref(ctx, op, op.operands[0]), op.operands[1])
    ctx.builder.emit("mbarrier.arrive.shared::cta.b64", SINK, address)


@lowering_rule("smalti.arrive_expect_tx")
def _arrive_expect_tx(ctx: LoweringContext, op: ir.Operation) -> None:
    address = barrier_address(ctx, op, smem_ref(ctx, op, op.operands[0]), op.operands[1])
    count = ir.IntegerAttr(op.attributes["bytes"]).value
    ctx.builder.emit("mbarrier.arrive.expect_tx.shared::cta.b64", SINK, address,
                     Immediate(count), guard=Guard(leader(ctx)))


def _parity(ctx: LoweringContext, op: ir.Operation, value: ir.Value) -> Register | Immediate:
    scalar = ctx.scalar(op, value)
    if scalar.constant is not None:
        return Immediate(int(scalar.constant) & 1)
    b = ctx.builder
    match scalar.type.scalar:
        case "pred":
            return b.compute("selp.u32", "u32", Immediate(1), Immediate(0), scalar.operand)
        case "s64" | "u64":
            low = b.compute("cvt.u32.u64", "u32", scalar.operand)
        case "s32" | "u32":
            low = scalar.operand
        case other:
            raise error_at(op, f"parity of type {other} is not supported")
    return b.compute("and.b32", "u32", low, 1)


@lowering_rule("smalti.wait")
def _wait(ctx: LoweringContext, op: ir.Operation) -> None:
    address = barrier_address(ctx, op, smem_ref(ctx, op, op.operands[0]), op.operands[1])
    parity = _parity(ctx, op, op.operands[2])
    b = ctx.builder
    loop = b.new_label("wait")
    b.place(loop)
    done = b.compute("mbarrier.try_wait.parity.shared::cta.b64", "pred", address, parity)
    b.emit("bra", loop, guard=Guard(done, negated=True))


@lowering_rule("smalti.warpgroup_barrier")
def _warpgroup_barrier(ctx: LoweringContext, op: ir.Operation) -> None:
    del op
    warpgroup_sync(ctx)


@lowering_rule("smalti.cluster_barrier")
def _cluster_barrier(ctx: LoweringContext, op: ir.Operation) -> None:
    """The default semantics (arrive.release, wait.acquire) order shared-memory accesses and
    mbarrier inits across the cluster."""
    del op
    ctx.builder.emit("barrier.cluster.arrive.aligned")
    ctx.builder.emit("barrier.cluster.wait.aligned")
