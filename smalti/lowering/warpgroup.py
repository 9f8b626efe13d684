"""Warp-specialised regions: a branch on the warpgroup index, then setmaxnreg, then the body.

    shr.u32 %wg, %tid.x, 7;  setp.ne.u32 %p, %wg, 1;  @%p bra $role_end;
    setmaxnreg.inc.sync.aligned.u32 232;  ...body...;  $role_end:

The branch is uniform within each warp (not across the block), so it is a plain `bra`.
A budget above the kernel's entry budget (ptxas derives it from `.maxntid` and
`.minnctapersm 1`, which kernels with budgets declare) is an `.inc`, below it a `.dec`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jaxlib.mlir import ir

from smalti.dialect.ops_warpgroup import WarpgroupRegionOp, entry_register_budget
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.ptx import Guard, Immediate, Register, Symbol
from smalti.ptx.module import PredicatePair
from smalti.tiling import WARP_SIZE, WARPGROUP_SIZE

MIN_CTAS_DIRECTIVE = ".minnctapersm 1"
WARP_BITS = WARP_SIZE.bit_length() - 1  # a thread's warp: %tid.x >> 5 ...
WARPGROUP_WARP_BITS = (WARPGROUP_SIZE // WARP_SIZE).bit_length() - 1  # ... of 4
FULL_MASK = 0xFFFFFFFF


RUNNING = "warpgroups_running"  # ctx.cache key: the warpgroups that run the current region


def known_warpgroup(ctx: LoweringContext) -> int | None:
    """The warpgroup running the code being lowered, when only one can (or None)."""
    running = ctx.cache.get(RUNNING, tuple(range(ctx.signature.warpgroups)))
    return running[0] if len(running) == 1 else None


def warpgroup_index(ctx: LoweringContext) -> Register:
    """%tid.x / 128 (memoised in the current region)."""
    if "warpgroup_index" not in ctx.cache:
        ctx.cache["warpgroup_index"] = ctx.builder.compute(
            "shr.u32", "u32", ctx.builder.special("%tid.x"), WARPGROUP_SIZE.bit_length() - 1)
    return ctx.cache["warpgroup_index"]


def _not_issuing_warp(ctx: LoweringContext, pair: bool) -> Register:
    """True in every warp but warp 0 of the warpgroup (and, with `pair`, in the pair's odd
    CTA): warp-uniform, as ptxas can tell, since the warp index is broadcast from lane 0 by
    shfl.sync (memoised)."""
    key = ("not_issuing_warp", pair)
    if key not in ctx.cache:
        b = ctx.builder
        warp = b.compute("bfe.u32", "b32", ctx.thread_index(), WARP_BITS, WARPGROUP_WARP_BITS)
        uniform = b.compute("shfl.sync.idx.b32", "b32", warp, 0, WARP_SIZE - 1, FULL_MASK)
        other = b.compute("setp.ne.u32", "pred", uniform, 0)
        if pair:
            odd = b.compute("and.b32", "b32", b.special("%cluster_ctarank"), 1)
            other = b.compute("setp.ne.or.b32", "pred", odd, 0, other)
        ctx.cache[key] = other
    return ctx.cache[key]


@contextmanager
def issued_by_one_thread(ctx: LoweringContext, pair: bool) -> Iterator[Guard]:
    """Code that warp 0 of the warpgroup (of the even CTA, with `pair`) branches into, where
    `elect.sync` picks its lane 0, thread 0 of the warpgroup, to issue (the guard yielded):
    TMA copies and tcgen05 ops. Electing in a warp-uniform branch lets ptxas issue each
    UTMALDG / UTC* instruction once; under a per-thread predicate it wraps every one in a
    loop electing a thread. Operands must be computed before: registers set inside are not
    set in the other threads. (Control flow in a smalti kernel is uniform over the
    warpgroup, so warp 0 arrives converged, as elect.sync needs.)"""
    b = ctx.builder
    skip = b.new_label("issued")
    b.emit("bra", skip, guard=Guard(_not_issuing_warp(ctx, pair)))
    elected = b.reg("pred")
    b.emit("elect.sync", PredicatePair(Symbol("_"), elected), Immediate(FULL_MASK))
    yield Guard(elected)
    b.place(skip)


def warpgroup_sync(ctx: LoweringContext) -> None:
    """Named barrier 1 + warpgroup index over the warpgroup's 128 threads (id 1 when the
    kernel has one warpgroup)."""
    b = ctx.builder
    ctx.smem_pending = ()  # the barrier orders every access before it
    if ctx.signature.warpgroups == 1:
        b.emit("bar.sync", Immediate(1), Immediate(WARPGROUP_SIZE))
        return
    known = known_warpgroup(ctx)
    if known is not None:  # a constant id: ptxas then reserves only the barriers used
        b.emit("bar.sync", Immediate(1 + known), Immediate(WARPGROUP_SIZE))
        return
    ident = b.compute("add.u32", "u32", warpgroup_index(ctx), 1)
    b.emit("bar.sync", ident, Immediate(WARPGROUP_SIZE))


def kernel_directives(func: ir.Operation) -> tuple[str, ...]:
    """`.minnctapersm 1` when some role sets a budget: without it ptxas ignores setmaxnreg
    (C7508), because it cannot know the registers a thread starts with."""
    found: list[bool] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        view = op.operation.opview
        if isinstance(view, WarpgroupRegionOp) and view.max_registers is not None:
            found.append(True)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return (MIN_CTAS_DIRECTIVE,) if found else ()


def _runs_region(ctx: LoweringContext, warpgroups: tuple[int, ...]) -> Register | None:
    """A predicate true in the threads of `warpgroups`; None when every warpgroup runs it."""
    total = ctx.signature.warpgroups
    chosen = sorted(set(warpgroups))
    if chosen == list(range(total)):
        return None
    b = ctx.builder
    index = warpgroup_index(ctx)
    if chosen == list(range(chosen[0], chosen[-1] + 1)):  # a range: at most two compares
        if len(chosen) == 1:
            return b.compute("setp.eq.u32", "pred", index, chosen[0])
        offset = b.compute("sub.u32", "u32", index, chosen[0]) if chosen[0] else index
        return b.compute("setp.lt.u32", "pred", offset, len(chosen))
    mask = sum(1 << w for w in chosen)
    bit = b.compute("shr.u32", "u32", b.compute("mov.b32", "b32", mask), index)
    bit = b.compute("and.b32", "u32", bit, 1)
    return b.compute("setp.ne.u32", "pred", bit, 0)


@lowering_rule(WarpgroupRegionOp)
def _warpgroup_region(ctx: LoweringContext, region: WarpgroupRegionOp) -> None:
    b = ctx.builder
    runs = _runs_region(ctx, region.warpgroups)
    end = b.new_label("role_end")
    if runs is not None:
        b.emit("bra", end, guard=Guard(runs, negated=True))
    with ctx.region():
        ctx.cache[RUNNING] = tuple(sorted(set(region.warpgroups)))
        budget = region.max_registers
        entry = entry_register_budget(ctx.signature.warpgroups)
        if budget is not None and budget != entry:
            direction = "inc" if budget > entry else "dec"
            b.emit(f"setmaxnreg.{direction}.sync.aligned.u32", budget)
        if region.body is not None:
            ctx.lower_block(region.body)
    b.place(end)
