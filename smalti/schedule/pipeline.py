"""The cost model of TMA/mbarrier software pipelines: how many stages a ring needs, and how
far ahead its loads are issued.

A step of the pipeline loads `step_bytes` by TMA and runs `flops_per_step` of tensor-core
work on them. In the steady state a step takes `step_s = max(mma_s, copy_s)`: the tensor
cores' time at the SM's share of the dense peak, or the TMA copy of its bytes at one SM's
copy rate. A load issued `prefetch` steps before its data is needed has `prefetch * step_s`
to land; it needs `latency + copy_s` (the TMA latency, then its bytes). So the latency is
hidden when `prefetch >= ceil((latency + copy_s) / step_s)`, and the ring holds one stage
more than the loads in flight (the stage being read): `stages = prefetch + 1`. Stages are
capped by shared memory (the block's budget minus the kernel's other buffers, the output
blocks and the barriers) and by the step count when it is static: a stage more than that
buys nothing and takes memory the epilogue or a second block could use.

Predicted time: the fill (the first load's latency and bytes), then each step at
`max(step_s, (latency + copy_s) / prefetch)` (latency not hidden shows as a longer step),
then the epilogue (its output bytes at the copy rate, plus one latency). Not modelled: L2
hits, wgmma issue overhead, occupancy of more than one block per SM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from smalti.schedule.hardware import H100_SXM, Hardware

BARRIER_BYTES = 8  # one mbarrier object per stage
NO_MMA = "none"  # the dtype of a pipeline whose body issues no wgmma


@dataclass(frozen=True)
class PipelineProblem:
    """What the model needs of one pipeline (all per block, bytes and flops per step)."""

    step_bytes: int  # bytes the step's TMA loads bring (every input block)
    flops_per_step: int  # tensor-core flops of one step's body (2 M N K per wgmma)
    dtype: str = NO_MMA  # the wgmma operands' dtype (its tensor-core rate)
    other_smem_bytes: int = 0  # shared memory the rest of the kernel holds meanwhile
    steps: int | None = None  # the step count when static
    epilogue_bytes: int = 0  # bytes the output blocks store after the loop
    stage_bytes: int | None = None  # shared memory per stage (default: step_bytes)
    warp_specialized: bool = False  # a producer warpgroup issues the loads

    def __post_init__(self) -> None:
        for name in ("step_bytes", "flops_per_step", "other_smem_bytes", "epilogue_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        if self.step_bytes == 0:
            raise ValueError("a pipeline loads something: step_bytes must be positive")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be positive, got {self.steps}")

    @property
    def ring_bytes(self) -> int:
        """Shared memory one stage takes: its buffers and its barrier."""
        return (self.stage_bytes or self.step_bytes) + BARRIER_BYTES


@dataclass(frozen=True)
class PipelineSchedule:
    """A stage count for a problem (chosen or given), its timings and the reasons."""

    problem: PipelineProblem
    hardware: Hardware
    stages: int
    given: bool  # the stage count was written by a person (checked, not replaced)
    mma_s: float  # tensor-core time of one step
    copy_s: float  # TMA time of one step's bytes
    latency_s: float  # TMA latency until the stage's mbarrier completes
    needed: int  # the fewest stages that hide the latency
    fits: int  # the most stages shared memory holds

    @property
    def prefetch(self) -> int:
        """How many steps ahead a step's loads are issued (the loads in flight)."""
        return max(self.stages - 1, 0)

    @property
    def step_s(self) -> float:
        return max(self.mma_s, self.copy_s)

    @property
    def bound(self) -> str:
        return "tensor cores" if self.mma_s >= self.copy_s else "TMA bandwidth"

    @property
    def covers_latency(self) -> bool:
        return self.stages >= self.needed

    @property
    def fits_smem(self) -> bool:
        return 1 <= self.stages <= self.fits

    @property
    def effective_step_s(self) -> float:
        """A step's time with this many stages: exposed latency lengthens it."""
        if self.prefetch == 0:
            return self.step_s + self.latency_s + self.copy_s
        return max(self.step_s, (self.latency_s + self.copy_s) / self.prefetch)

    @property
    def epilogue_s(self) -> float:
        if not self.problem.epilogue_bytes:
            return 0.0
        return self.latency_s + self.problem.epilogue_bytes / self.hardware.sm_copy_bytes_per_s

    @property
    def predicted_s(self) -> float | None:
        """The whole pipeline's time (None when its step count is traced)."""
        steps = self.problem.steps
        if steps is None:
            return None
        fill = self.latency_s + self.copy_s
        return fill + steps * self.effective_step_s + self.epilogue_s

    def reasons(self) -> tuple[str, ...]:
        """Why this stage count, in sentences for `--smalti-explain-schedule`."""
        p = self.problem
        us = _us
        lines = [
            f"per step: {p.step_bytes} B by TMA ({us(self.copy_s)} at one SM's copy rate), "
            + (f"{p.flops_per_step} {p.dtype} tensor-core flops ({us(self.mma_s)} at the SM's "
               f"share of the dense peak)" if p.flops_per_step else "no tensor-core work")
            + f": a step takes {us(self.step_s)}, bound by {self.bound}",
            f"a load needs {us(self.latency_s + self.copy_s)} (TMA latency "
            f"{us(self.latency_s)} + its bytes): hidden with {self.needed - 1} load(s) in "
            f"flight, so {self.needed} stages",
            f"shared memory holds at most {self.fits} stage(s) of {p.ring_bytes} B "
            f"({self.hardware.smem_bytes_per_block} B less {p.other_smem_bytes} B of the "
            f"kernel's other buffers)",
        ]
        if p.steps is not None and self.needed > p.steps:
            lines.append(f"only {p.steps} step(s): more stages than steps buy nothing")
        if p.warp_specialized:
            lines.append("warp-specialised: the producer warpgroup keeps the ring full")
        if not self.fits_smem:
            lines.append(f"warning: {self.stages} stage(s) do not fit in shared memory "
                         f"(at most {self.fits})")
        elif not self.covers_latency:
            lines.append(f"warning: {self.stages} stage(s) cannot cover the TMA latency (the "
                         f"model wants {self.needed}): each step waits "
                         f"{us(self.effective_step_s - self.step_s)} for its data")
        if self.predicted_s is not None:
            lines.append(f"predicted: {us(self.predicted_s)} for {p.steps} step(s) "
                         f"(step {us(self.effective_step_s)}, epilogue {us(self.epilogue_s)})")
        return tuple(lines)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} us"


def plan_pipeline(problem: PipelineProblem, hardware: Hardware = H100_SXM, *,
                  stages: int | None = None) -> PipelineSchedule:
    """The model's stage count for `problem` (the fewest that hide the TMA latency, capped by
    shared memory and the step count), or the given `stages` evaluated as written."""
    copy_s = problem.step_bytes / hardware.sm_copy_bytes_per_s
    mma_s = 0.0
    if problem.flops_per_step:
        mma_s = problem.flops_per_step / (hardware.flops_per_s(problem.dtype) / hardware.sms)
    latency_s = hardware.local_latency_s
    step_s = max(mma_s, copy_s)
    needed = math.ceil((latency_s + copy_s) / step_s - 1e-9) + 1
    left = hardware.smem_bytes_per_block - problem.other_smem_bytes
    fits = max(left // problem.ring_bytes, 0)
    given = stages is not None
    if stages is None:
        stages = min(needed, fits)
        if problem.steps is not None:
            stages = min(stages, problem.steps)
        stages = max(stages, 1)
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise ValueError(f"stages must be a positive int, got {stages!r}")
    return PipelineSchedule(problem, hardware, stages, given, mma_s, copy_s, latency_s,
                            needed, fits)
