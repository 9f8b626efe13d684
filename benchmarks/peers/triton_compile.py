"""Triton's versions of smalti's examples, compiled for sm_90a on the CPU: the peers of
benchmarks/kernel_quality.py. The pointwise kernel does `out = a * b + c` over a 128x128 tile
with four warps; the matmul is bf16 C = A @ B with f32 accumulation and bf16 output, tiles
128x128x64, four warps (one warpgroup), two stages, like examples/matmul_128x128x64.mlir, or
128x256x64, eight warps, four stages, against examples/matmul_128x256x64_ws.mlir."""

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


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * K + (k0 + ks)[None, :])
        b = tl.load(b_ptr + (k0 + ks)[:, None] * N + cols[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16))


def _cold_compile(source, options: dict, capability: int = 90) -> tuple[object, float]:
    """The compiled kernel and the seconds a cold `triton.compile` took (empty cache), for
    sm_90a (capability 90) or sm_100a (100)."""
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        start = time.perf_counter()
        kernel = triton.compile(source, target=GPUTarget("cuda", capability, 32),
                                options=options)
        return kernel, time.perf_counter() - start


ALIGNED = {(i,): [["tt.divisibility", 16]] for i in range(4)}  # as Triton's launcher would


def compile_pointwise(dtype: str, columns: int) -> tuple[str, bytes, float]:
    """(PTX, cubin, seconds) of the pointwise kernel for sm_90a, 4 warps."""
    pointer = TRITON_TYPES[dtype]
    source = triton.compiler.ASTSource(
        fn=pointwise,
        signature={"a_ptr": pointer, "b_ptr": pointer, "c_ptr": pointer, "out_ptr": pointer,
                   "N": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"},
        constexprs={"N": columns, "BLOCK_M": 128, "BLOCK_N": 128}, attrs=ALIGNED)
    kernel, seconds = _cold_compile(source, {"num_warps": 4})
    return kernel.asm["ptx"], kernel.asm["cubin"], seconds


def compile_matmul(size: int, block_n: int = 128, num_warps: int = 4, num_stages: int = 2,
                   capability: int = 90) -> tuple[str, bytes, float]:
    """(PTX, cubin, seconds) of the bf16 matmul for sm_90a (or sm_100a: `capability` 100):
    128 x `block_n` x 64 tiles, on size x size x size."""
    source = triton.compiler.ASTSource(
        fn=matmul,
        signature={"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "constexpr",
                   "N": "constexpr", "K": "constexpr", "BLOCK_M": "constexpr",
                   "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"},
        constexprs={"M": size, "N": size, "K": size, "BLOCK_M": 128, "BLOCK_N": block_n,
                    "BLOCK_K": 64},
        attrs={(i,): [["tt.divisibility", 16]] for i in range(3)})
    kernel, seconds = _cold_compile(source, {"num_warps": num_warps, "num_stages": num_stages},
                                    capability)
    return kernel.asm["ptx"], kernel.asm["cubin"], seconds
