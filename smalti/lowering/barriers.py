"""mbarriers in shared memory and the warpgroup barrier.

initialize_barrier: thread 0 of the block inits every barrier, fences the inits, and the
block meets (bar.sync 0). invalidate_barrier: the block meets, thread 0 invalidates every
barrier (mbarrier.inval), the block meets again. arrive: every thread of the warpgroup
arrives. arrive_expect_tx: thread 0 of the warpgroup announces the bytes and arrives.
wait: a try_wait.parity loop (then `tcgen05.fence::after_thread_sync` when a tcgen05_commit
may arrive on the barrier: the threads' tcgen05.ld of the MMAs' results come after the wait).
warpgroup_barrier: `bar.sync 1 + warpgroup, 128`. cluster_barrier: barrier.cluster arrive
(release) then wait (acquire), by every thread of every CTA of the cluster.

A collective arrive (PTX ISA, "mbarrier.arrive", "mapa"): the warpgroup meets, then thread k
(k < n, the CTAs along the collective dims) maps the barrier's address into the k-th of them
(`mapa.shared::cluster`) and arrives there with `.release.cluster`: the bar.sync orders every
thread's earlier accesses before thread k's release, which is cumulative. A wait on a
barrier that other CTAs signal (collective arrives, or the complete-tx of a peer's multicast,
which the ISA gives `.release` at `.cluster` scope) acquires at `.cluster` scope: an acquire
at the default `.cta` scope does not synchronise with a release by a thread of another CTA.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from jaxlib.mlir import ir

from smalti.dialect.checks import constant_index, smem_size_bytes
from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import enclosing_kernel
from smalti.dialect.ops_memory import AsyncLoadOp, SliceSmemOp, WithTransformsOp
from smalti.dialect.ops_sync import (
    ArriveExpectTxOp,
    ArriveOp,
    ClusterBarrierOp,
    InitializeBarrierOp,
    InvalidateBarrierOp,
    WaitOp,
    WarpgroupBarrierOp,
)
from smalti.dialect.ops_tcgen05 import Tcgen05CommitOp
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.lowering.smem import SMEM_SYMBOL, SmemRef, smem_address, smem_base, smem_ref
from smalti.lowering.warpgroup import warpgroup_sync
from smalti.ptx import Address, Guard, Immediate, Register, Symbol

BARRIER_BYTES = 8
SINK = Symbol("_")


def leader(ctx: LoweringContext) -> Register:
    """A predicate true in thread 0 of each warpgroup (memoised)."""
    if "wg_leader" not in ctx.cache:
        ctx.cache["wg_leader"] = ctx.builder.compute("setp.eq.u32", "pred", ctx.thread_index(), 0)
    return ctx.cache["wg_leader"]


def barrier_address(ctx: LoweringContext, op: ir.OpView, bars: SmemRef,
                    index: ir.Value) -> Address:
    """The shared address of barrier `index` of the array."""
    scalar = ctx.scalar(op, index)
    if scalar.constant is not None:
        return Address(smem_address(ctx, bars), BARRIER_BYTES * int(scalar.constant))
    b = ctx.builder
    low = b.compute("cvt.u32.u64", "u32", scalar.operand)
    return Address(b.compute("mad.lo.u32", "u32", low, BARRIER_BYTES, smem_address(ctx, bars)))


@lowering_rule(InitializeBarrierOp)
def _initialize(ctx: LoweringContext, op: InitializeBarrierOp) -> None:
    bars = smem_ref(ctx, op, op.barriers)
    count = op.arrival_count
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
    ctx.smem_pending = ()  # the block met: every access before is ordered


@lowering_rule(InvalidateBarrierOp)
def _invalidate(ctx: LoweringContext, op: InvalidateBarrierOp) -> None:
    bars = smem_ref(ctx, op, op.barriers)
    b = ctx.builder
    b.emit("bar.sync", Immediate(0))  # every thread is done with the barriers
    # The address and thread index read afresh, not the prologue's registers: those kept
    # live through a pipeline's loop cost ptxas registers (and copies) inside the loop.
    smem_base(ctx)  # declares the buffer
    base = b.compute("mov.u32", "u32", Symbol(SMEM_SYMBOL))
    if bars.offset or bars.dynamic is not None:
        base = smem_address_from(ctx, base, bars)
    first = b.compute("setp.eq.u32", "pred", b.compute("mov.u32", "u32", Symbol("%tid.x")), 0)
    for i in range(bars.shape[0]):
        b.emit("mbarrier.inval.shared::cta.b64", Address(base, BARRIER_BYTES * i),
               guard=Guard(first))
    b.emit("bar.sync", Immediate(0))  # no thread reuses the bytes before they are invalid
    ctx.smem_pending = ()


def smem_address_from(ctx: LoweringContext, base: Register, ref: SmemRef) -> Register:
    """`ref`'s shared address from a fresh read of the buffer's address."""
    b = ctx.builder
    address = b.compute("add.u32", "u32", base, ref.offset) if ref.offset else base
    if ref.dynamic is not None:
        address = b.compute("add.u32", "u32", address, ref.dynamic)
    return address


@lowering_rule(ArriveOp)
def _arrive(ctx: LoweringContext, op: ArriveOp) -> None:
    address = barrier_address(ctx, op, smem_ref(ctx, op, op.barriers), op.index)
    dims = op.collective
    if not dims:
        ctx.builder.emit("mbarrier.arrive.shared::cta.b64", SINK, address)
        return
    b = ctx.builder
    warpgroup_sync(ctx)
    rank, guard = _peer_rank(ctx, dims)
    local = address.base if address.offset == 0 else b.compute("add.u32", "u32", address.base,
                                                                address.offset)
    remote = b.compute("mapa.shared::cluster.u32", "u32", local, rank, guard=guard)
    b.emit("mbarrier.arrive.release.cluster.shared::cluster.b64", SINK, Address(remote),
           guard=guard)


def _peer_rank(ctx: LoweringContext, dims: tuple[int, ...]) -> tuple[Register, Guard]:
    """(the cluster rank thread k of the warpgroup arrives on: the k-th CTA along `dims`,
    x-fastest among them; the guard k < n), memoised per dims."""
    key = ("arrive_peer", tuple(sorted(dims)))
    if key not in ctx.cache:
        b = ctx.builder
        cluster = ctx.signature.cluster
        strides = (1, cluster[0], cluster[0] * cluster[1])  # %cluster_ctarank is x-fastest
        lane = ctx.thread_index()
        rank: Register = b.special("%cluster_ctarank")
        scale = 1
        ordered = sorted(dims)
        for d in ordered:
            size = cluster[d]
            coord = lane if scale == 1 else b.compute("div.u32", "u32", lane, scale)
            if d != ordered[-1]:  # the last coordinate is below its size already (k < n)
                coord = b.compute("rem.u32", "u32", coord, size)
            mine = b.special(f"%cluster_ctaid.{'xyz'[d]}")
            step = b.compute("sub.u32", "u32", coord, mine)  # mod 2^32: the sum wraps back
            rank = (b.compute("add.u32", "u32", rank, step) if strides[d] == 1
                    else b.compute("mad.lo.u32", "u32", step, strides[d], rank))
            scale *= size
        ctx.cache[key] = (rank, Guard(b.compute("setp.lt.u32", "pred", lane, scale)))
    return ctx.cache[key]


@lowering_rule(ArriveExpectTxOp)
def _arrive_expect_tx(ctx: LoweringContext, op: ArriveExpectTxOp) -> None:
    address = barrier_address(ctx, op, smem_ref(ctx, op, op.barriers), op.index)
    ctx.builder.emit("mbarrier.arrive.expect_tx.shared::cta.b64", SINK, address,
                     Immediate(op.bytes), guard=Guard(leader(ctx)))


def _parity(ctx: LoweringContext, op: ir.OpView, value: ir.Value) -> Register | Immediate:
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


@lowering_rule(WaitOp)
def _wait(ctx: LoweringContext, op: WaitOp) -> None:
    address = barrier_address(ctx, op, smem_ref(ctx, op, op.barriers), op.index)
    parity = _parity(ctx, op, op.parity)
    b = ctx.builder
    loop = b.new_label("wait")
    b.place(loop)
    scope = ".acquire.cluster" if _signalled_by_peers(ctx, op) else ""
    done = b.compute(f"mbarrier.try_wait.parity{scope}.shared::cta.b64", "pred", address,
                     parity)
    b.emit("bra", loop, guard=Guard(done, negated=True))
    if _tracks_tcgen05(ctx, op):  # the MMAs' results are read after the wait (PTX ISA
        b.emit("tcgen05.fence::after_thread_sync")  # "tcgen05.fence", "tcgen05.commit")


def _tracks_tcgen05(ctx: LoweringContext, op: WaitOp) -> bool:
    """Whether a tcgen05_commit may arrive on the wait's barriers (then tcgen05.ld of what
    the committed MMAs wrote must be ordered after the wait)."""
    if "tcgen05_barriers" not in ctx.cache:
        ctx.cache["tcgen05_barriers"] = _barrier_ranges(
            op, lambda view: isinstance(view, Tcgen05CommitOp))
    bars = smem_ref(ctx, op, op.barriers)
    end = bars.offset + bars.size_bytes
    return any(start < end and bars.offset < stop
               for start, stop in ctx.cache["tcgen05_barriers"])


def _signalled_by_peers(ctx: LoweringContext, op: WaitOp) -> bool:
    """Whether other CTAs of the cluster may complete phases of the wait's barriers: a
    collective arrive or a collective async_load names barriers overlapping them."""
    if ctx.peer_barriers is None:
        ctx.peer_barriers = _peer_barrier_ranges(op)
    ranges = ctx.peer_barriers
    bars = smem_ref(ctx, op, op.barriers)
    end = bars.offset + bars.size_bytes
    return any(start < end and bars.offset < stop for start, stop in ranges)


def _peer_barrier_ranges(op: WaitOp) -> tuple[tuple[int, float], ...]:
    """Byte ranges of the barrier arrays other CTAs signal, in the kernel enclosing `op`."""
    return _barrier_ranges(op, _signals_peers)


def _signals_peers(view: ir.OpView) -> bool:
    """Collective arrives, multicast loads and commits signal other CTAs' barriers, and so
    does a load completing on the pair leader's barrier (`cta_group = 2`)."""
    if isinstance(view, AsyncLoadOp) and view.cta_group == 2:
        return True
    return isinstance(view, ArriveOp | AsyncLoadOp | Tcgen05CommitOp) and bool(view.collective)


def _barrier_ranges(op: WaitOp, names: Callable[[ir.OpView], bool]
                    ) -> tuple[tuple[int, float], ...]:
    """Byte ranges of the barrier arrays of the ops `names` picks, in the kernel enclosing
    `op`."""
    func = enclosing_kernel(op.operation)
    ranges: list[tuple[int, float]] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        view = inner.operation.opview
        if names(view):
            ranges.append(_static_range(view.barriers))
        return ir.WalkResult.ADVANCE

    if func is not None:
        func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return tuple(ranges)


def _static_range(value: ir.Value) -> tuple[int, float]:
    """The bytes of the dynamic shared buffer an SMEM ref views (all of them, if unknown)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return (0, math.inf)
    owner = owner.operation.opview
    if isinstance(owner, WithTransformsOp):
        return _static_range(owner.source)
    offset = constant_index(owner.offset) if isinstance(owner, SliceSmemOp) else None
    if offset is None:
        return (0, math.inf)
    return (offset, offset + smem_size_bytes(value.type))


@lowering_rule(WarpgroupBarrierOp)
def _warpgroup_barrier(ctx: LoweringContext, op: WarpgroupBarrierOp) -> None:
    del op
    warpgroup_sync(ctx)


@lowering_rule(ClusterBarrierOp)
def _cluster_barrier(ctx: LoweringContext, op: ClusterBarrierOp) -> None:
    """The default semantics (arrive.release, wait.acquire) order shared-memory accesses and
    mbarrier inits across the cluster."""
    del op
    ctx.builder.emit("barrier.cluster.arrive.aligned")
    ctx.builder.emit("barrier.cluster.wait.aligned")
    ctx.smem_pending = ()
