"""The hardware constants of the schedule cost models, each with its source, in one place.

A constant marked "estimate" has no published figure we could cite; its comment says why the
value is reasonable. Predictions built from these numbers are to be checked on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

# Sources, cited by key in the comments below.
SOURCES: dict[str, str] = {
    "datasheet": "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column), "
                 "https://www.nvidia.com/en-us/data-center/h100/",
    "hopper-blog": "NVIDIA Hopper Architecture In-Depth (NVIDIA technical blog, 2022), "
                   "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/",
    "klockwood": "G. Lockwood, H100 notes (dense/sparse TFLOPS table from the whitepaper), "
                 "https://glennklockwood.com/garden/processors/h100",
    "luo2025": "W. Luo et al., Dissecting the NVIDIA Hopper Architecture through "
               "Microbenchmarking and Multiple Level Analysis (2025), "
               "https://arxiv.org/abs/2501.12084",
    "interconnect": "NVLink, NVSwitch, and GPU Interconnect (latency table: NVLink ~1-2 us), "
                    "https://fridayswithfaraday.com/posts/gpu-hw-nvlink-nvswitch-interconnect",
    "cuda-guide": "CUDA C++ Programming Guide, Technical Specifications per Compute Capability "
                  "(9.0: 227 KB of shared memory per thread block), "
                  "https://docs.nvidia.com/cuda/cuda-c-programming-guide/",
}


@dataclass(frozen=True)
class Hardware:
    """One GPU model and its NVLink fabric, as the schedule cost models see it."""

    name: str
    sms: int  # streaming multiprocessors
    dense_flops: tuple[tuple[str, float], ...]  # (dtype, dense tensor-core flop/s, whole GPU)
    nvlink_bytes_per_s: float  # NVLink bandwidth per GPU, one direction
    hbm_bytes_per_s: float  # HBM bandwidth, whole GPU
    sm_copy_bytes_per_s: float  # what one SM's TMA moves into shared memory per second
    local_latency_s: float  # a TMA load from local HBM/L2 until its mbarrier completes
    remote_latency_s: float  # the same for a load from a peer over NVLink
    semaphore_s: float  # a system-scope semaphore signal observed by a peer's wait
    step_overhead_s: float  # per pipeline step: mbarrier wait, wgmma commit/drain, fences
    smem_bytes_per_block: int = 227 * 1024  # dynamic shared memory one block may take
    sources: tuple[tuple[str, str], ...] = ()  # (constant, where its value comes from)

    def flops_per_s(self, dtype: str) -> float:
        """Dense tensor-core flop/s of the whole GPU for operands of `dtype`."""
        for name, value in self.dense_flops:
            if name == dtype:
                return value
        known = ", ".join(name for name, _ in self.dense_flops)
        raise ValueError(f"{self.name} has no tensor-core rate for dtype {dtype!r} "
                         f"(known: {known})")

    def constants(self) -> tuple[tuple[str, str, str], ...]:
        """(name, value, source) of every constant, for reports."""
        sources = dict(self.sources)
        return tuple((name, value, sources.get(name, "no source given"))
                     for name, value in _formatted(self))


def _formatted(hw: Hardware) -> list[tuple[str, str]]:
    """Each constant's name and value in the units a reader expects."""
    rows = [("sms", str(hw.sms))]
    rows += [(f"dense_flops[{d}]", f"{v / 1e12:.1f} TFLOP/s") for d, v in hw.dense_flops]
    return [*rows,
            ("nvlink_bytes_per_s", f"{hw.nvlink_bytes_per_s / 1e9:.0f} GB/s"),
            ("hbm_bytes_per_s", f"{hw.hbm_bytes_per_s / 1e12:.2f} TB/s"),
            ("sm_copy_bytes_per_s", f"{hw.sm_copy_bytes_per_s / 1e9:.0f} GB/s"),
            ("local_latency_s", f"{hw.local_latency_s * 1e6:.2f} us"),
            ("remote_latency_s", f"{hw.remote_latency_s * 1e6:.2f} us"),
            ("semaphore_s", f"{hw.semaphore_s * 1e6:.2f} us"),
            ("step_overhead_s", f"{hw.step_overhead_s * 1e6:.2f} us"),
            ("smem_bytes_per_block", f"{hw.smem_bytes_per_block // 1024} KiB")]


# Where each H100 SXM constant comes from (keys of SOURCES, or "estimate: why").
CONSTANT_SOURCES: dict[str, str] = {
    "sms": "hopper-blog: H100 SXM5 has 132 SMs",
    "dense_flops[bf16]": "datasheet: 1,979 TFLOP/s with sparsity, dense is half "
                         "(klockwood: 989.4)",
    "dense_flops[f16]": "datasheet: 1,979 TFLOP/s with sparsity, dense is half "
                        "(klockwood: 989.4)",
    "dense_flops[f8E4M3FN]": "datasheet: 3,958 TFLOP/s with sparsity, dense is half "
                             "(klockwood: 1978.9)",
    "dense_flops[f8E5M2]": "datasheet: FP8 (either format) 3,958 TFLOP/s with sparsity, dense "
                           "is half (klockwood: 1978.9)",
    "dense_flops[tf32]": "datasheet: TF32 989 TFLOP/s with sparsity, dense is half "
                         "(klockwood: 494.7)",
    "nvlink_bytes_per_s": "datasheet/hopper-blog: NVLink 4, 18 links, 900 GB/s both "
                          "directions together, so 450 GB/s each way",
    "hbm_bytes_per_s": "datasheet: HBM3 3.35 TB/s",
    "sm_copy_bytes_per_s": "estimate: 64 B per clock per SM at the 1.755 GHz boost clock; "
                           "one SM cannot drain a whole NVLink port, which is why a one-CTA "
                           "kernel is bounded by its own copies",
    "local_latency_s": "estimate: global-memory latency of several hundred cycles (luo2025) "
                       "plus the mbarrier completion, about 0.5 us",
    "remote_latency_s": "estimate: interconnect quotes NVLink latency as ~1-2 us; we take "
                        "1.5 us for a TMA load from a peer",
    "semaphore_s": "estimate: a release at system scope (a fence that waits for prior "
                   "writes to reach the peer) plus the remote add and the waiter's poll "
                   "seeing it: two NVLink latencies, 3 us",
    "step_overhead_s": "estimate: per pipeline step the consumer waits on an mbarrier, "
                       "commits and drains its wgmma group and fences before the buffer is "
                       "refilled: a few hundred cycles, 0.25 us",
    "smem_bytes_per_block": "cuda-guide: compute capability 9.0 allows 227 KB of shared "
                            "memory per thread block (232,448 B)",
}

# An 8-GPU HGX H100 board: every GPU reaches every other through the NVSwitches, so a GPU's
# NVLink bandwidth is shared only by the transfers that leave (or enter) that GPU.
# Each value's source is in CONSTANT_SOURCES under the field's name (printed by `explain`).
H100_SXM = Hardware(
    name="H100 SXM5 (HGX, NVSwitch)",
    sms=132,  # hopper-blog
    dense_flops=(("bf16", 989.4e12),  # datasheet (1,979 sparse / 2), klockwood
                 ("f16", 989.4e12),  # datasheet (1,979 sparse / 2), klockwood
                 ("f8E4M3FN", 1978.9e12),  # datasheet (3,958 sparse / 2), klockwood
                 ("f8E5M2", 1978.9e12),  # datasheet (3,958 sparse / 2), klockwood
                 ("tf32", 494.7e12)),  # datasheet (989 sparse / 2), klockwood
    nvlink_bytes_per_s=450e9,  # datasheet: 900 GB/s bidirectional, half each way
    hbm_bytes_per_s=3.35e12,  # datasheet
    sm_copy_bytes_per_s=64 * 1.755e9,  # estimate: 64 B/clock/SM at the boost clock
    local_latency_s=0.5e-6,  # estimate from luo2025's global-memory latency
    remote_latency_s=1.5e-6,  # estimate from interconnect's ~1-2 us
    semaphore_s=3.0e-6,  # estimate: two NVLink latencies
    step_overhead_s=0.25e-6,  # estimate: a few hundred cycles per pipeline step
    sources=tuple(CONSTANT_SOURCES.items()),
)
