"""Triton's version of the pointwise example (`out = a * b + c` over 128x128 tiles, four
warps), compiled for sm_90a on the CPU: the peer of benchmarks/kernel_quality.py."""

from __future__ import annotations

import os
import tempfile
import time

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "0")  # like smalti: mul and add round apart

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

TRITON_TYPES = {"f32": "*fp32", "bf16": "*bf16"}


@triton.jit
def pointwise(a_ptr, b_ptr, c_ptr, out_ptr, N: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    row_block = tl.program_id(1)
    col_block = tl.program_id(0)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    offsets = rows * N + cols
    a = tl.load(a_ptr + offsets)
    b = tl.load(b_ptr + offsets)
    c = tl.load(c_ptr + offsets)
    tl.store(out_ptr + offsets, a * b + c)


def compile_pointwise(dtype: str, columns: int) -> tuple[bytes, float]:
    """(cubin, seconds) of a cold `triton.compile` (empty cache) for sm_90a, 4 warps, with
    the 16-byte pointer alignment Triton's launcher would specialise on."""
    pointer = TRITON_TYPES[dtype]
    source = triton.compiler.ASTSource(
        fn=pointwise,
        signature={"a_ptr": pointer, "b_ptr": pointer, "c_ptr": pointer, "out_ptr": pointer,
                   "N": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"},
        constexprs={"N": columns, "BLOCK_M": 128, "BLOCK_N": 128},
        attrs={(i,): [["tt.divisibility", 16]] for i in range(4)},
    )
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        start = time.perf_counter()
        kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                options={"num_warps": 4})
        seconds = time.perf_counter() - start
    return kernel.asm["cubin"], seconds
