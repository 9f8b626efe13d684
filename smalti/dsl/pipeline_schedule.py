"""The scheduling pass of `emit_pipeline`: a step's work measured by tracing it once into a
throwaway op, the stage count the pipeline model (smalti.schedule.plan_pipeline) chooses
from it, and the record of that choice in the kernel's `smalti.schedule` attribute (what
`smalti-opt --smalti-explain-schedule` prints)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import nested_ops
from smalti.dialect.launch import is_kernel
from smalti.dialect.ops_mma import WgmmaOp
from smalti.dialect.schedule_attr import add_kernel_schedule, wgmma_work
from smalti.dsl.locations import user_error
from smalti.dsl.trace import active
from smalti.schedule import PipelineSchedule, pipeline_fields

PROBE = "smalti.pipeline_probe"  # never left in the IR: erased right after it is traced


@dataclass(frozen=True)
class StepWork:
    """What one step's body issues on the tensor cores."""

    flops: int
    dtype: str


def probe_step_work(trace: Callable[[], int]) -> StepWork:
    """Run `trace` (which traces the pipeline once and returns how many times it traced the
    body) inside a throwaway op, and measure the body's wgmmas per step; the IR and the
    tracing state are left as they were."""
    info = active()
    saved = (info.smem.top, info.smem.peak, len(info.roles), len(info.collective_copies),
             dict(info.ranges), list(info.smem.retired))
    probe = ir.Operation.create(PROBE, regions=1)
    block = probe.regions[0].blocks.append()
    try:
        with ir.InsertionPoint(block):
            calls = trace()
        work = [wgmma_work(op) for op in nested_ops(probe) if isinstance(op, WgmmaOp)]
    finally:
        probe.erase()
        info.smem.top, info.smem.peak = saved[0], saved[1]
        del info.roles[saved[2]:], info.collective_copies[saved[3]:]
        info.ranges.clear()
        info.ranges.update(saved[4])
        info.smem.retired[:] = saved[5]
    flops = sum(f for f, _ in work) // max(calls, 1)
    return StepWork(flops, work[0][1] if work else "none")


def work_after(block: ir.Block, skip: int, calls: int, consumers: int = 1) -> StepWork:
    """The wgmmas traced in `block` after its first `skip` ops, per step: `calls` bodies
    were traced, each step's by each of `consumers` warpgroups."""
    work = [wgmma_work(op) for k, top in enumerate(block.operations) if k >= skip
            for op in nested_ops(top.operation) if isinstance(op, WgmmaOp)]
    steps = max(calls // max(consumers, 1), 1)
    return StepWork(sum(f for f, _ in work) // steps, work[0][1] if work else "none")


def record_pipeline(schedule: PipelineSchedule, variant: str, at: str) -> None:
    """Append the pipeline's schedule to the traced kernel's `smalti.schedule`."""
    add_kernel_schedule(traced_kernel(), pipeline_fields(schedule, variant, at))


def traced_kernel() -> ir.Operation:
    """The kernel function whose body is being traced (from the insertion point up)."""
    op = ir.InsertionPoint.current.block.owner
    while op is not None and not is_kernel(op.operation):
        op = op.operation.parent
    if op is None:
        raise user_error(RuntimeError, "found no kernel function around the traced code")
    return op.operation
