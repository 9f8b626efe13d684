"""Schedule cost models: plain functions over the hardware constants in `hardware.py`.

Pure: imports nothing else of smalti, so the DSL, the tools and the benchmarks all use it.

    from smalti.schedule import CollectiveMatmulProblem, plan_collective_matmul
    schedule = plan_collective_matmul(CollectiveMatmulProblem("all_gather_matmul", m=128,
                                                              n=128, k=128, devices=4))
    pipeline = plan_pipeline(PipelineProblem(step_bytes=32768, flops_per_step=2 * 128**2 * 64,
                                             dtype="bf16"))
"""

from smalti.schedule.collective import (
    Breakdown,
    Candidate,
    CollectiveSchedule,
    Step,
    plan_collective_matmul,
)
from smalti.schedule.explain import explain
from smalti.schedule.fields import schedule_fields, schedule_from_fields
from smalti.schedule.hardware import H100_SXM, Hardware
from smalti.schedule.pipeline import PipelineProblem, PipelineSchedule, plan_pipeline
from smalti.schedule.pipeline_record import (
    PIPELINE,
    explain_pipeline,
    pipeline_fields,
    pipeline_from_fields,
)
from smalti.schedule.problem import (
    ALL_GATHER_MATMUL,
    KINDS,
    MATMUL_REDUCE_SCATTER,
    ORDERS,
    CollectiveMatmulProblem,
)

__all__ = [
    "ALL_GATHER_MATMUL",
    "H100_SXM",
    "KINDS",
    "MATMUL_REDUCE_SCATTER",
    "ORDERS",
    "PIPELINE",
    "Breakdown",
    "Candidate",
    "CollectiveMatmulProblem",
    "CollectiveSchedule",
    "Hardware",
    "PipelineProblem",
    "PipelineSchedule",
    "Step",
    "explain",
    "explain_pipeline",
    "pipeline_fields",
    "pipeline_from_fields",
    "plan_collective_matmul",
    "plan_pipeline",
    "schedule_fields",
    "schedule_from_fields",
]
