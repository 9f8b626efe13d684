"""The autotuner's static model: how fast a compiled kernel should run on an H100, from what
ptxas and nvdisasm say of it (registers, shared memory, the SASS main loop: read by
smalti.runtime.machine_code) and its grid.

It ranks configs of one kernel against each other; its numbers are not predictions of
seconds. Every constant is here, with its source. The model, per config:

- CTAs per SM: the fewest the threads, the registers (allocated per warp in units of 256)
  and the shared memory (plus the 1 KiB the system reserves per CTA) allow, at most 32.
- The grid's CTAs spread over the 132 SMs first: the busiest SM runs P = ceil(CTAs / 132)
  of them, T = min(P, CTAs per SM) at a time (P / T waves).
- With a main loop (the innermost SASS loop holding an HGMMA): one
  warpgroup's iteration issues `loop` instructions on the SM's 4 schedulers (its 4 warps,
  one per scheduler: `loop` cycles) and `macs` multiply-accumulates on the tensor cores
  (`macs / 2048` cycles). With R = T x warpgroups per CTA resident, one warpgroup's issue
  overlaps another's tensor work: cycles per MAC = max(1/2048, loop/macs,
  (1/2048 + loop/macs) / R) (a producer warpgroup counts in R too: a simplification).
  Score: P x cycles per MAC / CTAs (each CTA does 1/CTAs of the work).
- Without one (no HGMMA in a loop, or a UTC*MMA loop on sm_100a, whose MMA shapes SASS
  does not show), or when any config lacks one: score = P x all SASS instructions x
  warps / 4, the issue cycles of the busiest SM.
Lower is better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from smalti.schedule.hardware import H100_SXM

# H100 SXM5 (compute capability 9.0). CUDA C++ Programming Guide, "Technical Specifications
# per Compute Capability" (cc 9.0): resident CTAs, threads, registers and shared memory per SM.
MAX_CTAS_PER_SM = 32
MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 65536
SHARED_BYTES_PER_SM = 228 * 1024
# CUDA Occupancy Calculator (cc 9.0 sheet): registers are allocated per warp in units of 256;
# `cudaDevAttrReservedSharedMemoryPerBlock` is 1 KiB on sm_90 (Hopper tuning guide).
REGISTER_ALLOCATION_UNIT = 256
RESERVED_SHARED_BYTES_PER_CTA = 1024
SHARED_ALLOCATION_UNIT = 128
# NVIDIA H100 Tensor Core GPU Architecture whitepaper: an H100 SM's tensor cores do twice
# the dense FP16/BF16 multiply-accumulates per clock of an A100 SM's (1024), 2048; each SM
# has 4 warp schedulers issuing one warp instruction per cycle each. SMs: hardware.H100_SXM.
SMS = H100_SXM.sms
TENSOR_MACS_PER_SM_CYCLE = 2048
SCHEDULERS_PER_SM = 4
WARP = 32


@dataclass(frozen=True)
class Occupancy:
    """Resident CTAs per SM and which resource bounds them ('threads', 'registers',
    'shared memory' or 'CTAs')."""

    ctas_per_sm: int
    limited_by: str


def occupancy(threads: int, registers: int, shared_bytes: int) -> Occupancy:
    """CTAs of `threads` threads using `registers` per thread and `shared_bytes` each that
    fit on one SM at once."""
    warps = math.ceil(threads / WARP)
    per_warp = math.ceil(max(registers, 1) * WARP / REGISTER_ALLOCATION_UNIT) \
        * REGISTER_ALLOCATION_UNIT
    shared = math.ceil((shared_bytes + RESERVED_SHARED_BYTES_PER_CTA)
                       / SHARED_ALLOCATION_UNIT) * SHARED_ALLOCATION_UNIT
    bounds = {
        "threads": MAX_THREADS_PER_SM // (warps * WARP),
        "registers": (REGISTERS_PER_SM // per_warp) // warps,
        "shared memory": SHARED_BYTES_PER_SM // shared,
        "CTAs": MAX_CTAS_PER_SM,
    }
    limited_by = min(bounds, key=lambda name: bounds[name])
    return Occupancy(bounds[limited_by], limited_by)


@dataclass(frozen=True)
class StaticEstimate:
    """One config as the model sees it, and its score (lower is faster)."""

    registers: int
    threads: int
    shared_bytes: int
    occupancy: Occupancy
    ctas: int
    waves: int
    loop_instructions: int | None  # the main loop's SASS instructions (None: no loop)
    loop_macs: int | None  # its HGMMAs' multiply-accumulates per iteration
    sass_instructions: int
    score: float

    def describe(self) -> str:
        work = (f"main loop {self.loop_instructions} SASS for {self.loop_macs} MACs "
                f"({1000 * self.loop_instructions / self.loop_macs:.2f} per 1k MACs)"
                if self.loop_instructions is not None and self.loop_macs
                else f"{self.sass_instructions} SASS, no HGMMA loop")
        return (f"{self.registers} registers, {self.shared_bytes} B shared, "
                f"{self.occupancy.ctas_per_sm} CTA/SM (by {self.occupancy.limited_by}), "
                f"{self.ctas} CTAs in {self.waves} wave(s), {work}; score {self.score:.4g}")


def estimate(*, registers: int, threads: int, shared_bytes: int, ctas: int,
             loop_instructions: int | None, loop_macs: int | None, sass_instructions: int,
             warpgroups: int, use_loop: bool = True) -> StaticEstimate:
    """The model's view of one compiled config (see the module's docstring): its main loop's
    SASS instructions and HGMMA multiply-accumulates (None without one), all its SASS
    instructions. `use_loop` False scores by all SASS, so that configs with and without a
    main loop are scored alike."""
    resident = occupancy(threads, registers, shared_bytes)
    per_sm = math.ceil(ctas / SMS)  # the busiest SM's CTAs: CTAs spread over the SMs first
    together = min(max(resident.ctas_per_sm, 1), per_sm)
    waves = math.ceil(per_sm / together)
    if use_loop and loop_instructions is not None and loop_macs:
        tensor = 1 / TENSOR_MACS_PER_SM_CYCLE
        issue = loop_instructions / loop_macs
        per_mac = max(tensor, issue, (tensor + issue) / (together * warpgroups))
        score = per_sm * per_mac / ctas  # each CTA does 1/ctas of the work
    else:
        score = per_sm * sass_instructions * math.ceil(threads / WARP) / SCHEDULERS_PER_SM
        loop_instructions = loop_macs = None
    return StaticEstimate(registers, threads, shared_bytes, resident, ctas, waves,
                          loop_instructions, loop_macs, sass_instructions, score)
