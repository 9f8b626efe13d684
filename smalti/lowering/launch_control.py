"""persistent_tiles: a loop over the block's own tile, then the tiles of clusters it cancels.

Before the loop, thread 0 of the block initialises an mbarrier (arrival count 1) in a static
shared slot beside a 16-byte response slot, and the block (the cluster, in clusters of
several CTAs) meets. Each pass runs the body with the block ids in index registers, then:

    @first mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 16;
    @leader clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes
            {.multicast::cluster::all}.b128 [response], [bar];
    wait: mbarrier.try_wait.parity{.acquire.cluster}.shared::cta.b64 %p, [bar], %phase; ...
    ld.shared.b128 %q, [response];  clusterlaunchcontrol.query_cancel.is_canceled ...
    fence.proxy.async.shared::cta;  bar.sync 0 (barrier.cluster in a cluster)
    @!canceled bra.uni end;  get_first_ctaid (+ %cluster_ctaid);  bra.uni loop

`first` is thread 0 of each CTA, `leader` thread 0 of cluster rank 0 (the multicast response
lands, and completes 16 bytes of tx, in every CTA of the cluster: PTX ISA,
"clusterlaunchcontrol.try_cancel"). The fence and the meeting order every thread's read of the
response before the next request's asynchronous write. Along an axis where the grid has one
block, the id is the constant 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir

from smalti.dialect.ops_launch_control import RESPONSE_BYTES, PersistentTilesOp
from smalti.lowering.barriers import BARRIER_BYTES, SINK
from smalti.lowering.context import LoweringContext
from smalti.lowering.proxy import writes_smem
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar
from smalti.lowering.smem_order import loop_carried
from smalti.lowering.values import ELEMENT_TYPES, ScalarValue
from smalti.ptx import Address, Guard, Immediate, Register, VectorOperand

INDEX = ELEMENT_TYPES["index"]
AXES = "xyz"


@lowering_rule(PersistentTilesOp)
def _persistent_tiles(ctx: LoweringContext, op: PersistentTilesOp) -> None:
    """The barrier and response slots, then the loop: body, request, wait, decode, meet."""
    b = ctx.builder
    clustered = ctx.signature.cluster != (1, 1, 1)
    response = b.compute("mov.u32", "u32", ctx.scratch_shared("clc_response", RESPONSE_BYTES,
                                                              align=RESPONSE_BYTES))
    barrier = b.compute("mov.u32", "u32", ctx.scratch_shared("clc_barrier", BARRIER_BYTES,
                                                             align=BARRIER_BYTES))
    first = b.compute("setp.eq.u32", "pred", b.special("%tid.x"), 0)
    b.emit("mbarrier.init.shared::cta.b64", Address(barrier), Immediate(1), guard=Guard(first))
    b.emit("fence.mbarrier_init.release.cluster")
    _block_sync(ctx, clustered)
    leader = cluster_issuer(ctx, first, clustered)
    axes, ids = block_ids(ctx)
    phase = b.compute("mov.b32", "b32", 0)
    ctx.thread_index()  # read once before the loop, not in every pass
    start, end = b.new_label("tiles"), b.new_label("tiles_end")
    with ctx.region():
        b.place(start)
        bind_block_ids(ctx, op.body.arguments, ids)
        lower_pass_body(ctx, op.body)
        canceled, first_ids = _next_cluster(ctx, response, barrier, phase, first, leader,
                                            clustered, axes)
        b.emit("bra.uni", end, guard=Guard(canceled, negated=True))
        advance_block_ids(ctx, ids, first_ids)
        b.emit("bra.uni", start)
    b.place(end)
    ctx.smem_pending = ()  # the pass ended at a meeting of the block


def _next_cluster(ctx: LoweringContext, response: Register, barrier: Register,
                  phase: Register, first: Register, leader: Register, clustered: bool,
                  axes: list[int]) -> tuple[Register, dict[int, Register]]:
    """Request, wait for and decode the next cluster: (canceled, first ctaid per axis); the
    block (cluster) has met after its threads read the response."""
    b = ctx.builder
    request_cancel(ctx, response, barrier, first, leader, clustered)
    wait_parity(ctx, barrier, phase, clustered, "clc_wait")
    b.emit("xor.b32", phase, phase, 1)
    # decoded before the meeting (the next request may overwrite the slot after it)
    canceled, first_ids = decode_response(ctx, response, axes)
    b.emit("fence.proxy.async.shared::cta")
    _block_sync(ctx, clustered)
    return canceled, first_ids


def cluster_issuer(ctx: LoweringContext, first: Register, clustered: bool) -> Register:
    """`first` in the cluster's rank-0 CTA (the thread that issues try_cancel requests)."""
    if not clustered:
        return first
    b = ctx.builder
    rank0 = b.compute("setp.eq.u32", "pred", b.special("%cluster_ctarank"), 0)
    return b.compute("and.pred", "pred", first, rank0)


def block_ids(ctx: LoweringContext) -> tuple[list[int], dict[int, Register]]:
    """The grid axes with several blocks, and an index register per axis holding %ctaid."""
    b = ctx.builder
    axes = [axis for axis in range(3) if ctx.signature.grid[axis] > 1]
    return axes, {axis: b.compute("cvt.u64.u32", "s64", b.special(f"%ctaid.{AXES[axis]}"))
                  for axis in axes}


def bind_block_ids(ctx: LoweringContext, arguments: Sequence[ir.Value],
                   ids: dict[int, Register]) -> None:
    """Binds the body's block-id arguments (x, y, z): a register, or 0 on a one-block axis."""
    for axis, argument in enumerate(arguments):
        ctx.set(argument, ScalarValue(ids[axis], INDEX, 1) if axis in ids
                else constant_scalar(0))


def lower_pass_body(ctx: LoweringContext, body: ir.Block) -> None:
    """Lowers one pass of a tile loop's body, ordering its shared memory with the last pass."""
    if writes_smem(body):  # the previous pass's stores precede this one's reads
        ctx.unpublished_smem_writes = True
    ctx.smem_pending = tuple(dict.fromkeys((*ctx.smem_pending, *loop_carried(ctx, body))))
    ctx.lower_block(body)


def advance_block_ids(ctx: LoweringContext, ids: dict[int, Register],
                      first_ids: dict[int, Register]) -> None:
    """Moves the ids to this CTA's block of the canceled cluster (its first ctaid + rank)."""
    b = ctx.builder
    for axis, coordinate in first_ids.items():
        if ctx.signature.cluster[axis] > 1:
            coordinate = b.compute("add.u32", "u32", coordinate,
                                   b.special(f"%cluster_ctaid.{AXES[axis]}"))
        b.emit("cvt.u64.u32", ids[axis], coordinate)


def request_cancel(ctx: LoweringContext, response: Register, barrier: Register,
                   first: Register, issuer: Register, clustered: bool) -> None:
    """Expects the 16-byte response on `barrier` (in each CTA) and issues the try_cancel."""
    b = ctx.builder
    b.emit("mbarrier.arrive.expect_tx.shared::cta.b64", SINK, Address(barrier),
           Immediate(RESPONSE_BYTES), guard=Guard(first))
    multicast = ".multicast::cluster::all" if clustered else ""
    b.emit("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
           f"{multicast}.b128", Address(response), Address(barrier), guard=Guard(issuer))


def wait_parity(ctx: LoweringContext, barrier: Register, parity: Register | Immediate,
                clustered: bool, label: str) -> None:
    """A try_wait.parity loop (acquiring at cluster scope, where a peer completes it)."""
    b = ctx.builder
    loop = b.new_label(label)
    b.place(loop)
    scope = ".acquire.cluster" if clustered else ""
    done = b.compute(f"mbarrier.try_wait.parity{scope}.shared::cta.b64", "pred",
                     Address(barrier), parity)
    b.emit("bra", loop, guard=Guard(done, negated=True))


def decode_response(ctx: LoweringContext, response: Register,
                    axes: list[int]) -> tuple[Register, dict[int, Register]]:
    """Reads a try_cancel response: (canceled, first ctaid per axis in `axes`)."""
    b = ctx.builder
    value = b.compute("ld.shared.b128", "b128", Address(response))
    canceled = b.compute("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128", "pred",
                         value)
    first_ids = {axis: b.reg("b32") for axis in axes}
    if axes:  # a failed request's ids are undefined and unused
        b.emit("clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128",
               VectorOperand((*(first_ids.get(a, SINK) for a in range(3)), SINK)), value,
               guard=Guard(canceled))
    return canceled, first_ids


def cluster_sync(ctx: LoweringContext) -> None:
    """Every thread of the cluster meets (barrier.cluster, release / acquire)."""
    ctx.builder.emit("barrier.cluster.arrive.release.aligned")
    ctx.builder.emit("barrier.cluster.wait.acquire.aligned")


def _block_sync(ctx: LoweringContext, clustered: bool) -> None:
    """Every thread of the block meets (of the cluster, when it has several CTAs)."""
    b = ctx.builder
    if clustered:
        cluster_sync(ctx)
    else:
        b.emit("bar.sync", Immediate(0))

