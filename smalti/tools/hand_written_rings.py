"""Stage rings written by hand, found in a kernel's IR so that `--smalti-explain-schedule` can
check their stage count against the pipeline model (never rewrite them).

A ring is an mbarrier array that TMA loads (`smalti.async_load`) complete and that a loop
(`scf.for`) waits on: its stages are the barrier indices the loop waits on (all of the
array's barriers when an index is computed at run time), a step's bytes the largest
`arrive_expect_tx` on it, a step's tensor-core work the loop's wgmmas per wait on it (times
the warpgroups of an enclosing warpgroup_region; summed over the roles that consume the ring,
the largest of one role's loops), and the kernel's other shared memory what
its `slice_smem` views reach beyond the ring's buffers and barriers.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import scf

from smalti.dialect.bindings import file_line_col, nested_ops
from smalti.dialect.checks import constant_index
from smalti.dialect.ops_memory import AsyncLoadOp, SliceSmemOp
from smalti.dialect.ops_mma import WgmmaOp
from smalti.dialect.ops_sync import ArriveExpectTxOp, WaitOp
from smalti.dialect.ops_warpgroup import WarpgroupRegionOp
from smalti.dialect.schedule_attr import wgmma_work
from smalti.schedule import PipelineProblem, pipeline_fields, plan_pipeline
from smalti.schedule.pipeline import BARRIER_BYTES

Fields = dict[str, int | str | tuple[int, ...]]


def _memref_bytes(value: ir.Value) -> int:
    memref = ir.MemRefType(value.type)
    bits = memref.element_type.width if hasattr(memref.element_type, "width") else 32
    count = 1
    for size in memref.shape:
        count *= size
    return count * bits // 8


def _where(op: ir.Operation) -> str:
    """`file:line` of the loop (the file's base name), or '<unknown>'."""
    position = file_line_col(op.location)
    return "<unknown>" if position is None else f"{position[0].rsplit('/', 1)[-1]}:{position[1]}"


def _trip_count(loop: scf.ForOp) -> int | None:
    bounds = [constant_index(v) for v in (loop.lowerBound, loop.upperBound, loop.step)]
    if any(b is None for b in bounds):
        return None
    low, high, step = bounds
    return max(0, -(-(high - low) // step))


def _region(op: ir.Operation) -> WarpgroupRegionOp | None:
    parent = op.parent
    while parent is not None:
        if isinstance(parent.opview, WarpgroupRegionOp):
            return parent.opview
        parent = parent.parent
    return None


def _in_region(op: ir.Operation) -> bool:
    return _region(op) is not None


def _region_warpgroups(op: ir.Operation) -> int:
    region = _region(op)
    return 1 if region is None else len(region.warpgroups)


def hand_written_rings(func: ir.Operation) -> list[Fields]:
    """A `hand_written` pipeline record per ring of `func` (see the module docstring)."""
    ops = nested_ops(func)
    loaded = {AsyncLoadOp(op.operation).barriers for op in ops if isinstance(op, AsyncLoadOp)}
    expect: dict[ir.Value, int] = {}
    for op in ops:
        if isinstance(op, ArriveExpectTxOp):
            expect[op.barriers] = max(expect.get(op.barriers, 0), op.bytes)
    used = 0
    for op in ops:
        if isinstance(op, SliceSmemOp) and (offset := constant_index(op.offset)) is not None:
            used = max(used, offset + _memref_bytes(op.result))
    rings: dict[ir.Value, list[tuple[ir.Operation, list[ir.OpView]]]] = {}
    for loop in (op for op in ops if isinstance(op, scf.ForOp)):
        inner = nested_ops(loop.operation)
        if any(isinstance(op, scf.ForOp) for op in inner[:-1]):
            continue  # the innermost loops only (walk is post-order: the loop is last)
        for bars in dict.fromkeys(op.barriers for op in inner if isinstance(op, WaitOp)):
            if bars in loaded and bars in expect:
                rings.setdefault(bars, []).append((loop.operation, inner))
    return [_record(bars, loops, expect[bars], used) for bars, loops in rings.items()]


def _record(bars: ir.Value, loops: list[tuple[ir.Operation, list[ir.OpView]]],
            step_bytes: int, used: int) -> Fields:
    """The ring of `bars`, consumed by `loops` (one per consumer role): its stages, and a
    step's work summed over the consumers."""
    count = ir.MemRefType(bars.type).shape[0]
    stages, dtype, steps = 0, "none", None
    per_role: dict[object, int] = {}  # a step's flops per consumer role (region)
    for loop, inner in loops:
        waits = [op for op in inner if isinstance(op, WaitOp) and op.barriers == bars]
        indices = {constant_index(op.index) for op in waits}
        stages = max(stages, count if None in indices else len(indices))
        work = [wgmma_work(op) for op in inner if isinstance(op, WgmmaOp)]
        flops = _region_warpgroups(loop) * sum(f for f, _ in work) // len(waits)
        role = _region(loop)
        key = None if role is None else role.operation
        per_role[key] = max(per_role.get(key, 0), flops)  # sequential loops of one role
        dtype = work[0][1] if work else dtype
        trips = _trip_count(loop.opview)
        steps = steps or (trips * len(waits) if trips else None)
    flops = sum(per_role.values())
    first = loops[0][0]
    problem = PipelineProblem(
        step_bytes=step_bytes, flops_per_step=flops, dtype=dtype,
        other_smem_bytes=max(0, used - stages * step_bytes - BARRIER_BYTES * count),
        steps=steps, warp_specialized=_in_region(first))
    return pipeline_fields(plan_pipeline(problem, stages=stages), "hand_written", _where(first))
