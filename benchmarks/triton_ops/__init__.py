"""Triton peers of smalti.ops (benchmarks/ops_quality.py), written by us in the style of
Triton's tutorials, and the one call that compiles them for sm_90a on a machine without a
GPU. Importing this package needs Triton (`pip install -e '.[bench]'`)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "0")  # like smalti: mul and add round apart

import triton
from triton.backends.compiler import GPUTarget

HOPPER = GPUTarget("cuda", 90, 32)  # sm_90a


@dataclass(frozen=True)
class TritonKernel:
    """A Triton kernel compiled for sm_90a: its PTX and the dynamic shared memory (bytes)
    its launch asks for."""

    ptx: str
    dynamic_smem: int


def compile_for_hopper(fn: object, pointers: dict[str, str], constexprs: dict[str, object],
                       *, num_warps: int, num_stages: int) -> TritonKernel:
    """Compile `fn` with `pointers` (argument name -> Triton pointer type, e.g. '*bf16'; all
    16-byte aligned, as Triton's launcher specialises them) and the other arguments as
    `constexprs`, in a fresh cache so that nothing stale is read."""
    signature = {**pointers, **dict.fromkeys(constexprs, "constexpr")}
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(len(pointers))}
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs,
                                       attrs=aligned)
    with tempfile.TemporaryDirectory() as cache:
        previous = os.environ.get("TRITON_CACHE_DIR")
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            kernel = triton.compile(source, target=HOPPER,
                                    options={"num_warps": num_warps, "num_stages": num_stages})
        finally:
            if previous is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = previous
    return TritonKernel(kernel.asm["ptx"], kernel.metadata.shared)
