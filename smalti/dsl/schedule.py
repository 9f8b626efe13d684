"""`record_schedule`: stamp the schedule a kernel body follows on the kernel being traced, so
that `smalti-opt --smalti-explain-schedule` can check it against the cost model.

    schedule = plan_collective_matmul(CollectiveMatmulProblem("all_gather_matmul", ...))

    @sd.kernel(...)
    def ag_matmul(a_ref, b_ref, out_ref, ...):
        sd.record_schedule(schedule)
        ... walk schedule.source_offsets in chunks of schedule.chunk_rows ...
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.launch import is_kernel
from smalti.dialect.schedule_attr import set_kernel_schedule
from smalti.dsl.locations import user_error
from smalti.dsl.trace import active
from smalti.schedule import CollectiveSchedule, schedule_fields


def record_schedule(schedule: CollectiveSchedule) -> None:
    """Record `schedule` (its problem and choice) as the traced kernel's `smalti.schedule`."""
    info = active()
    if not isinstance(schedule, CollectiveSchedule):
        raise user_error(TypeError, f"record_schedule takes the CollectiveSchedule that "
                                    f"plan_collective_matmul returns, got "
                                    f"{type(schedule).__name__}")
    devices = schedule.problem.devices
    if info.devices is not None and info.devices != devices:
        raise user_error(ValueError, f"kernel {info.name} runs on {info.devices} devices, but "
                                     f"the recorded schedule is for {devices}")
    set_kernel_schedule(_traced_kernel(), schedule_fields(schedule))


def _traced_kernel() -> ir.Operation:
    """The kernel function whose body is being traced (from the insertion point up)."""
    op = ir.InsertionPoint.current.block.owner
    while op is not None and not is_kernel(op.operation):
        op = op.operation.parent
    if op is None:
        raise user_error(RuntimeError, "record_schedule found no kernel function around the "
                                       "traced code")
    return op.operation
