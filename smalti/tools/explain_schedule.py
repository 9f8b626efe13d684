"""`smalti-opt --smalti-explain-schedule`: for each kernel, the cost models' verdict on the
schedules it recorded (`smalti.schedule`): a collective matmul's chunks and order, each
pipeline's stage count and prefetch distance, with the model's own choice where it differs;
and each ring written by hand (smalti.schedule.rings) against the model's recommendation.
Recorded choices are checked, never rewritten: the IR is not changed."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import kernel_functions, kernel_name
from smalti.dialect.schedule_attr import SCHEDULE_ATTR, kernel_schedules
from smalti.schedule import (
    PIPELINE,
    explain,
    explain_pipeline,
    plan_collective_matmul,
    schedule_from_fields,
)
from smalti.tools.hand_written_rings import hand_written_rings


def explain_kernel(func: ir.Operation) -> str:
    """The report for one kernel; a located error when its schedule attribute is malformed."""
    name = kernel_name(func)
    recorded = kernel_schedules(func)
    lines = []
    for fields in recorded:
        try:
            if fields.get("kind") == PIPELINE:
                lines.append(f"@{name}: recorded {explain_pipeline(fields)}")
            else:
                lines.append(_explain_collective(name, fields))
        except ValueError as error:
            raise error_at(func, f"kernel @{name}: invalid '{SCHEDULE_ATTR}': {error}"
                           ) from None
    if not any(fields.get("kind") == PIPELINE for fields in recorded):
        lines.extend(f"@{name}: {explain_pipeline(fields)}" for fields in hand_written_rings(func))
    if not lines:
        return f"@{name}: no schedule recorded ('{SCHEDULE_ATTR}' is absent)"
    return "\n".join(lines)


def _explain_collective(name: str, fields: dict) -> str:
    recorded = schedule_from_fields(fields)
    best = plan_collective_matmul(recorded.problem, recorded.hardware)
    lines = [f"@{name}: recorded schedule", _indent(explain(recorded))]
    if (best.chunk_rows, best.choice.sources) == (recorded.chunk_rows,
                                                 recorded.choice.sources):
        lines.append(f"@{name}: the recorded schedule is the model's best choice")
    else:
        slower = recorded.predicted_s / best.predicted_s
        lines.append(f"@{name}: the model's best choice differs (the recorded one is "
                     f"{slower:.2f}x its predicted time)")
        lines.append(_indent(explain(best)))
    return "\n".join(lines)


def explain_module(module: ir.Operation) -> str:
    """The reports of every kernel of `module`, in order."""
    return "\n".join(explain_kernel(func) for func in kernel_functions(module))


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
