"""role_tiles: one warp-specialised role's loop over the tiles cluster launch control hands
its block (smalti/dialect/ops_launch_control.py has the semantics).

Pass n (n = 0, 1, ...) uses response slot s = n % D with phase parity (n / D) & 1. The
requesting role starts each pass by asking for pass n + 1's cluster, as soon as every role
has released slot s for pass n + 1 - D (on a fresh barrier the wait for parity 1 passes):

    @!%issuer bra $request;                      // thread 0 of the cluster's rank-0 CTA
    $empty: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p, [empty_s], !par;
            @!%p bra $empty;
    $request:
    @%first mbarrier.arrive.expect_tx.shared::cta.b64 _, [full_s], 16;    // every CTA
    @%issuer clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes
             .multicast::cluster::all.b128 [response_s], [full_s];

Every role then runs the body, and ends the pass by reading the response:

    $full: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p, [full_s], par; ...
    ld.shared.b128 %q, [response_s];  query_cancel.is_canceled / get_first_ctaid
    fence.proxy.async.shared::cta;  bar.sync 1 + warpgroup, 128;
    @%canceled&%first mbarrier.arrive.release.cluster.shared::cluster.b64 _, [mapa(empty_s, 0)];
    @!%canceled bra.uni $end;  ids = first ctaid + %cluster_ctaid;  bra.uni $loop;

`first` is thread 0 of each warpgroup of the role. The fence and the warpgroup barrier
order every thread's read of the slot before its release (and so before the next
asynchronous response written there). A failed response is not released: no request
follows it. Without a cluster the waits and the arrive are CTA-scoped and the request is
not multicast. Along an axis where the grid has one block, the id is the constant 0. After
the last pass the result is the pass count, and in a cluster every thread meets the others
(`barrier.cluster.arrive.release` / `wait.acquire`).
"""

from __future__ import annotations

from dataclasses import dataclass

from smalti.dialect.ops_launch_control import RESPONSE_BYTES, RoleTilesOp
from smalti.lowering.barriers import BARRIER_BYTES, SINK, leader
from smalti.lowering.context import LoweringContext
from smalti.lowering.launch_control import (
    INDEX,
    advance_block_ids,
    bind_block_ids,
    block_ids,
    cluster_issuer,
    cluster_sync,
    decode_response,
    lower_pass_body,
    request_cancel,
    wait_parity,
)
from smalti.lowering.registry import lowering_rule
from smalti.lowering.smem import smem_address, smem_ref
from smalti.lowering.values import ScalarValue
from smalti.lowering.warpgroup import warpgroup_sync
from smalti.ptx import Address, Guard, Immediate, Register


@lowering_rule(RoleTilesOp)
def _role_tiles(ctx: LoweringContext, op: RoleTilesOp) -> None:
    """The ring's addresses, then the loop: request (the requesting role), body, decode."""
    b = ctx.builder
    clustered = ctx.signature.cluster != (1, 1, 1)
    depth = op.depth()
    bases = tuple(smem_address(ctx, smem_ref(ctx, op, ref))
                  for ref in (op.responses, op.full, op.empty))
    first = leader(ctx)
    issuer = cluster_issuer(ctx, first, clustered)
    axes, ids = block_ids(ctx)
    passes = b.compute("mov.u32", "u32", 0)
    pass_index = b.compute("mov.u64", "s64", 0)
    start, end = b.new_label("role_tiles"), b.new_label("role_tiles_end")
    with ctx.region():
        b.place(start)
        slot = _Slot.of(ctx, passes, depth, bases)
        if op.request:
            _request(ctx, slot, first, issuer, clustered)
        bind_block_ids(ctx, list(op.body.arguments)[:3], ids)
        ctx.set(op.body.arguments[3], ScalarValue(pass_index, INDEX, 1))
        lower_pass_body(ctx, op.body)
        canceled, first_ids = _next(ctx, slot, first, clustered, axes)
        b.emit("bra.uni", end, guard=Guard(canceled, negated=True))
        advance_block_ids(ctx, ids, first_ids)
        b.emit("add.u32", passes, passes, 1)
        b.emit("add.s64", pass_index, pass_index, 1)
        b.emit("bra.uni", start)
    b.place(end)
    ctx.set(op.result, ScalarValue(b.compute("add.s64", "s64", pass_index, 1), INDEX, 1))
    if clustered:  # no CTA leaves while a peer may still signal or write it
        cluster_sync(ctx)
        ctx.smem_pending = ()


@dataclass(frozen=True)
class _Slot:
    """The addresses of pass n's response slot and barriers, and the phase parity."""

    response: Register
    full: Register
    empty: Register
    parity: Register

    @staticmethod
    def of(ctx: LoweringContext, passes: Register, depth: int,
           bases: tuple[Register, Register, Register]) -> _Slot:
        """Slot n % D, parity (n / D) & 1, computed in every thread (before any branch)."""
        b = ctx.builder
        index = b.compute("rem.u32", "u32", passes, depth) if depth > 1 else None
        rounds = b.compute("div.u32", "u32", passes, depth) if depth > 1 else passes
        parity = b.compute("and.b32", "b32", rounds, 1)
        responses, full, empty = bases
        if index is None:
            return _Slot(responses, full, empty, parity)
        return _Slot(b.compute("mad.lo.u32", "u32", index, RESPONSE_BYTES, responses),
                     b.compute("mad.lo.u32", "u32", index, BARRIER_BYTES, full),
                     b.compute("mad.lo.u32", "u32", index, BARRIER_BYTES, empty), parity)


def _request(ctx: LoweringContext, slot: _Slot, first: Register, issuer: Register,
             clustered: bool) -> None:
    """Ask for the next pass's cluster into the slot once every role released it."""
    b = ctx.builder
    requested = b.new_label("role_tiles_request")
    b.emit("bra", requested, guard=Guard(issuer, negated=True))
    wait_parity(ctx, slot.empty, b.compute("xor.b32", "b32", slot.parity, 1), clustered,
                "role_tiles_wait")
    b.place(requested)
    request_cancel(ctx, slot.response, slot.full, first, issuer, clustered)


def _next(ctx: LoweringContext, slot: _Slot, first: Register, clustered: bool,
          axes: list[int]) -> tuple[Register, dict[int, Register]]:
    """Wait for, read, decode and release the slot: (canceled, first ctaid per axis)."""
    b = ctx.builder
    wait_parity(ctx, slot.full, slot.parity, clustered, "role_tiles_wait")
    canceled, first_ids = decode_response(ctx, slot.response, axes)
    b.emit("fence.proxy.async.shared::cta")
    warpgroup_sync(ctx)
    releases = b.compute("and.pred", "pred", canceled, first)
    if clustered:
        remote = b.compute("mapa.shared::cluster.u32", "u32", slot.empty, Immediate(0))
        b.emit("mbarrier.arrive.release.cluster.shared::cluster.b64", SINK, Address(remote),
               guard=Guard(releases))
    else:
        b.emit("mbarrier.arrive.shared::cta.b64", SINK, Address(slot.empty),
               guard=Guard(releases))
    return canceled, first_ids
