"""A pipeline schedule as flat fields (what a kernel records in `smalti.schedule`), read back
and explained: the recorded stage count against the model's own choice.

    {kind = "pipeline", variant = "emit_pipeline", at = "matmul.py:47", stages = 2 : i64,
     given = 1 : i64, step_bytes = 32768 : i64, flops_per_step = 2097152 : i64, ...}

`variant` says who wrote the ring: `emit_pipeline`, `emit_pipeline_warp_specialized`, or
`hand_written` (a ring found in the IR; its stage count is checked, never rewritten).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from smalti.schedule.hardware import H100_SXM, Hardware
from smalti.schedule.pipeline import PipelineProblem, PipelineSchedule, plan_pipeline

PIPELINE = "pipeline"
VARIANTS = ("emit_pipeline", "emit_pipeline_warp_specialized", "hand_written")
Field = int | str | tuple[int, ...]

_INTS = ("stages", "given", "step_bytes", "flops_per_step", "other_smem_bytes", "steps",
         "epilogue_bytes", "stage_bytes")
_STRINGS = ("kind", "variant", "at", "dtype")
_REQUIRED = ("kind", "variant", "stages", "step_bytes", "flops_per_step")


def pipeline_fields(schedule: PipelineSchedule, variant: str, at: str) -> dict[str, Field]:
    """The problem, the stage count and who chose it, as flat fields."""
    p = schedule.problem
    return {"kind": PIPELINE, "variant": variant, "at": at, "stages": schedule.stages,
            "given": int(schedule.given), "step_bytes": p.step_bytes,
            "stage_bytes": p.stage_bytes or p.step_bytes, "flops_per_step": p.flops_per_step,
            "dtype": p.dtype, "other_smem_bytes": p.other_smem_bytes,
            "steps": p.steps or 0, "epilogue_bytes": p.epilogue_bytes}


def pipeline_from_fields(fields: Mapping[str, Field], hardware: Hardware = H100_SXM
                         ) -> PipelineSchedule:
    """The recorded stage count evaluated again; ValueError naming a bad field."""
    unknown = sorted(set(fields) - set(_INTS) - set(_STRINGS))
    if unknown:
        raise ValueError(f"unknown pipeline field(s) {', '.join(unknown)}")
    missing = [name for name in _REQUIRED if name not in fields]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    for name in _INTS:
        if name in fields and not isinstance(fields[name], int):
            raise ValueError(f"field '{name}' must be an integer, got {fields[name]!r}")
    for name in _STRINGS:
        if name in fields and not isinstance(fields[name], str):
            raise ValueError(f"field '{name}' must be a string, got {fields[name]!r}")
    if fields["variant"] not in VARIANTS:
        raise ValueError(f"unknown pipeline variant {fields['variant']!r} (known: "
                         f"{', '.join(VARIANTS)})")
    steps = int(fields.get("steps", 0))
    problem = PipelineProblem(
        step_bytes=int(fields["step_bytes"]), flops_per_step=int(fields["flops_per_step"]),
        dtype=str(fields.get("dtype", "none")),
        other_smem_bytes=int(fields.get("other_smem_bytes", 0)),
        steps=steps or None, epilogue_bytes=int(fields.get("epilogue_bytes", 0)),
        stage_bytes=int(fields.get("stage_bytes", 0)) or None,
        warp_specialized=fields["variant"] == "emit_pipeline_warp_specialized")
    schedule = plan_pipeline(problem, hardware, stages=int(fields["stages"]))
    return dataclasses.replace(schedule, given=bool(fields.get("given", 1)))


def explain_pipeline(fields: Mapping[str, Field], hardware: Hardware = H100_SXM) -> str:
    """The recorded pipeline, its stage count and prefetch distance, why, and the verdict."""
    recorded = pipeline_from_fields(fields, hardware)
    best = plan_pipeline(recorded.problem, hardware)
    variant, at = fields["variant"], fields.get("at", "?")
    how = ("written by hand (checked, not rewritten)" if variant == "hand_written" else
           "given (checked, not rewritten)" if recorded.given else
           "chosen by the model")
    lines = [f"pipeline ({variant}) at {at}:",
             f"  choice: stages={recorded.stages}, prefetch distance={recorded.prefetch} "
             f"[{how}]",
             "  why:",
             *(f"    {line}" for line in recorded.reasons())]
    if best.stages == recorded.stages:
        lines.append(f"  the model recommends the same: stages={best.stages}")
    else:
        compared = _compare(recorded, best)
        lines.append(f"  note: the model recommends stages={best.stages} (prefetch distance "
                     f"{best.prefetch})" + (f": {compared}" if compared else ""))
    lines.append(f"  constants: local_latency_s = {recorded.latency_s * 1e6:.2f} us, "
                 f"sm_copy_bytes_per_s = {hardware.sm_copy_bytes_per_s / 1e9:.0f} GB/s, "
                 f"smem_bytes_per_block = {hardware.smem_bytes_per_block} B "
                 f"({hardware.name}; sources: smalti/schedule/hardware.py)")
    return "\n".join(lines)


def _compare(recorded: PipelineSchedule, best: PipelineSchedule) -> str:
    """How the recorded count compares: slower, or as fast with shared memory to spare."""
    if recorded.stages > best.stages and recorded.covers_latency:
        spare = (recorded.stages - best.stages) * recorded.problem.ring_bytes
        return (f"stages beyond {best.stages} buy no speed in the model and take {spare} B "
                "of shared memory")
    if recorded.predicted_s is None or best.predicted_s is None:
        return ""
    return (f"predicted {best.predicted_s * 1e6:.2f} us against "
            f"{recorded.predicted_s * 1e6:.2f} us")
