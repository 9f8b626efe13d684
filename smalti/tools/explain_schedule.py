"""`smalti-opt --smalti-explain-schedule`: for each kernel, the cost model's verdict on the
schedule it recorded (`smalti.schedule`), and the model's own choice when that differs.
The recorded choice is checked, never rewritten: the IR is not changed."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import kernel_functions, kernel_name
from smalti.dialect.schedule_attr import SCHEDULE_ATTR, kernel_schedule
from smalti.schedule import explain, plan_collective_matmul, schedule_from_fields


def explain_kernel(func: ir.Operation) -> str:
    """The report for one kernel; a located error when its schedule attribute is malformed."""
    name = kernel_name(func)
    fields = kernel_schedule(func)
    if fields is None:
        return f"@{name}: no schedule recorded ('{SCHEDULE_ATTR}' is absent)"
    try:
        recorded = schedule_from_fields(fields)
    except ValueError as error:
        raise error_at(func, f"kernel @{name}: invalid '{SCHEDULE_ATTR}': {error}") from None
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
