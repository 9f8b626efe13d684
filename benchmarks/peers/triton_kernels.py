"""Triton peers of the simulator benchmark, run by Triton's interpreter (TRITON_INTERPRET=1).

Import this module only after setting TRITON_INTERPRET=1: Triton reads it at import time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "foreign_ptx"
sys.path.insert(0, str(CORPUS))

import triton_kernels as corpus  # noqa: E402  (the attention kernel whose PTX smalti runs)

POINTWISE_BLOCK = (128, 128)
MATMUL_BLOCK = (128, 128, 64)


@triton.jit
def pointwise_kernel(a, b, c, out, n: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """out = a * b + c over an n x n f32 array, one BM x BN tile per program."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    cols = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    offsets = rows * n + cols
    x = tl.load(a + offsets) * tl.load(b + offsets) + tl.load(c + offsets)
    tl.store(out + offsets, x)


@triton.jit
def matmul_kernel(a, b, c, n: tl.constexpr, k: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, BK: tl.constexpr):
    """c (f32) = a @ b.T with a (m x k) and b (n x k) bf16 row-major, one BM x BN tile each."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k, BK):
        ta = tl.load(a + rows[:, None] * k + (k0 + ks)[None, :])
        tb = tl.load(b + cols[:, None] * k + (k0 + ks)[None, :])
        # The interpreter's tl.dot on bf16 tiles returns garbage (triton 3.9); bf16 products
        # are exact in f32, so upcasting the tiles gives the same sums.
        acc = tl.dot(ta.to(tl.float32), tl.trans(tb.to(tl.float32)), acc, input_precision="ieee")
    tl.store(c + rows[:, None] * n + cols[None, :], acc)


def pointwise(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """out = a * b + c for square f32 arrays, through the interpreter."""
    n = a.shape[0]
    ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
    out = torch.empty_like(ta)
    bm, bn = POINTWISE_BLOCK
    pointwise_kernel[(n // bm, n // bn)](ta, tb, tc, out, n, bm, bn)
    return out.numpy()


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b.T (bf16 inputs given as float32 arrays of bf16 values) in f32."""
    m, k = a.shape
    n = b.shape[0]
    ta = torch.from_numpy(a).to(torch.bfloat16)
    tb = torch.from_numpy(b).to(torch.bfloat16)
    out = torch.empty((m, n), dtype=torch.float32)
    bm, bn, bk = MATMUL_BLOCK
    matmul_kernel[(m // bm, n // bn)](ta, tb, out, n, k, bm, bn, bk)
    return out.numpy()


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool,
              block: int = 64) -> np.ndarray:
    """The corpus's attention_fwd (heads x n_ctx x head_dim, f16) through the interpreter,
    with the constexprs its PTX fixture was compiled with."""
    heads, n_ctx, head_dim = q.shape
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    out = torch.empty_like(tq)
    corpus.attention_fwd[(n_ctx // block, heads)](tq, tk, tv, out, scale, n_ctx, head_dim,
                                                   block, block, causal)
    return out.numpy()
