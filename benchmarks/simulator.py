"""Simulator throughput against Triton's interpreter, on the same shapes, in one run.

    .venv/bin/python benchmarks/simulator.py [--runs 3] [--only pointwise|matmul]

(a) out = a*b + c on 4096x4096 f32: smalti compiles a generated `.mlir` kernel
(`compile_mlir`, 128x128 tiles over a 2-D grid) and runs it with `run_simulated`;
(b) a 512x512x512 bf16 wgmma matmul: the nvcc-compiled fixture
`tests/fixtures/cuda/wgmma_matmul.ptx` (64x64 tiles, 8x8 CTAs) run with `run_ptx`;
(c) FlashAttention forward, f16, 16 heads x 128 x 64, full and causal: one Triton kernel
(`tests/fixtures/foreign_ptx/triton_kernels.py`), run by Triton's interpreter and, as the PTX
Triton 3.9 compiled from it for sm_90a (the corpus fixtures), by smalti's simulator.
The peers are `benchmarks/peers/triton_kernels.py` under TRITON_INTERPRET=1 (needs
`pip install triton torch`, CPU builds). Prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from smalti.runtime import compile_mlir, run_simulated  # noqa: E402
from smalti.sim import run_ptx  # noqa: E402

N_POINTWISE = 4096
N_MATMUL = 512
TILE = 128
WGMMA_PTX = ROOT / "tests" / "fixtures" / "cuda" / "wgmma_matmul.ptx"
WGMMA_KERNEL = "_Z12wgmma_matmulPK13__nv_bfloat16S1_Pfii"


def pointwise_mlir(n: int) -> str:
    """out = a * b + c on n x n f32: one warpgroup per 128x128 tile, a 2-D grid of tiles."""
    t = f"memref<{n}x{n}xf32>"
    grid = n // TILE
    loads = "\n".join(
        f'  %v{x} = "smalti.vector_load"(%{x}, %row, %col) : ({t}, index, index) '
        f"-> vector<{TILE}x{TILE}xf32>" for x in "abc")
    return f"""func.func @pointwise(%a: {t}, %b: {t}, %c: {t}, %out: {t})
    attributes {{smalti.kernel, smalti.grid = array<i64: {grid}, {grid}>}} {{
  %bx = gpu.block_id x
  %by = gpu.block_id y
  %c128 = arith.constant {TILE} : index
  %col = arith.muli %bx, %c128 : index
  %row = arith.muli %by, %c128 : index
{loads}
  %ab = arith.mulf %va, %vb : vector<{TILE}x{TILE}xf32>
  %r = arith.addf %ab, %vc : vector<{TILE}x{TILE}xf32>
  "smalti.vector_store"(%r, %out, %row, %col) : (vector<{TILE}x{TILE}xf32>, {t}, index, index) -> ()
  return
}}
"""


def timed(fn: Callable[[], np.ndarray], runs: int) -> tuple[float, np.ndarray]:
    """Median wall time of `runs` calls, and the last result."""
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def bench_pointwise(runs: int, peer) -> dict:
    rng = np.random.default_rng(0)
    n = N_POINTWISE
    a, b, c = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(3))
    expected = a * b + c
    compiled = compile_mlir(pointwise_mlir(n), "pointwise.mlir")
    ours, out = timed(lambda: run_simulated(compiled, a, b, c, np.zeros_like(a))[-1], runs)
    assert np.array_equal(out, expected), "smalti's simulator differs from numpy"
    row = {"case": f"pointwise f32 {n}x{n} (out = a*b+c)", "smalti": ours}
    if peer is not None:
        theirs, out = timed(lambda: peer.pointwise(a, b, c), runs)
        assert np.array_equal(out, expected), "Triton's interpreter differs from numpy"
        row["triton"] = theirs
    return row


def bench_matmul(runs: int, peer) -> dict:
    rng = np.random.default_rng(1)
    n = N_MATMUL
    a = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    expected = a.astype(np.float32) @ b.astype(np.float32).T
    ptx = WGMMA_PTX.read_text()

    def ours_once() -> np.ndarray:
        out = np.zeros((n, n), np.float32)
        run_ptx(ptx, WGMMA_KERNEL, (n // 64, n // 64), 128, [a, b, out, n, n])
        return out

    ours, out = timed(ours_once, runs)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
    row = {"case": f"wgmma bf16 matmul {n}x{n}x{n}", "smalti": ours}
    if peer is not None:
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        theirs, out = timed(lambda: peer.matmul(a32, b32), runs)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
        row["triton"] = theirs
    return row


ATTENTION_HEADS = 16
ATTENTION_PTX = ROOT / "tests" / "fixtures" / "foreign_ptx" / "triton"


def reference_attention(q, k, v, scale: float, causal: bool) -> np.ndarray:
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("hqk,hkd->hqd", p / p.sum(-1, keepdims=True), v.astype(np.float64))


def bench_attention(runs: int, peer, causal: bool) -> dict:
    """Triton's own attention kernel: its PTX in smalti's simulator, its source in Triton's
    interpreter, same inputs, both checked against numpy."""
    name = "attention_fwd_fp16" + ("_causal" if causal else "")
    ptx = (ATTENTION_PTX / f"{name}.ptx").read_text()
    launch = json.loads((ATTENTION_PTX / f"{name}.json").read_text())
    n_ctx, head_dim = launch["constexprs"]["N_CTX"], launch["constexprs"]["HEAD_DIM"]
    block = launch["constexprs"]["BLOCK_M"]
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((ATTENTION_HEADS, n_ctx, head_dim)).astype(np.float16)
               for _ in range(3))
    scale = 1 / np.sqrt(head_dim)
    expected = reference_attention(q, k, v, scale, causal)

    def ours_once() -> np.ndarray:
        out = np.zeros_like(q)
        run_ptx(ptx, launch["kernel"], (n_ctx // block, ATTENTION_HEADS), launch["block"],
                [q, k, v, out, np.float32(scale), 0, 0], launch["shared_bytes"])
        return out

    ours, out = timed(ours_once, runs)
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=1e-2, rtol=1e-2)
    row = {"case": f"attention fwd f16 {ATTENTION_HEADS}x{n_ctx}x{head_dim}"
                   f"{' causal' if causal else ''} (Triton's PTX / its source)", "smalti": ours}
    if peer is not None:
        theirs, out = timed(lambda: peer.attention(q, k, v, float(scale), causal, block),
                            runs)
        np.testing.assert_allclose(out.astype(np.float64), expected, atol=1e-2, rtol=1e-2)
        row["triton"] = theirs
    return row


def load_peer():
    """Triton's interpreter kernels, or None when triton/torch are not installed."""
    try:
        from benchmarks.peers import triton_kernels
    except ImportError as e:
        print(f"(Triton peer unavailable: {e})", file=sys.stderr)
        return None
    return triton_kernels


def table(rows: list[dict], runs: int) -> str:
    lines = [f"| case | smalti simulator (s, median of {runs}) | Triton interpreter (s) | "
             "ratio Triton / smalti |", "|---|---:|---:|---:|"]
    for row in rows:
        theirs = row.get("triton")
        ratio = f"{theirs / row['smalti']:.2f}x" if theirs else "n/a"
        shown = f"{theirs:.2f}" if theirs else "n/a"
        lines.append(f"| {row['case']} | {row['smalti']:.2f} | {shown} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("pointwise", "matmul", "attention"))
    args = parser.parse_args(argv)
    peer = load_peer()
    rows = []
    if args.only in (None, "pointwise"):
        rows.append(bench_pointwise(args.runs, peer))
    if args.only in (None, "matmul"):
        rows.append(bench_matmul(args.runs, peer))
    if args.only in (None, "attention"):
        rows.append(bench_attention(args.runs, peer, causal=False))
        rows.append(bench_attention(args.runs, peer, causal=True))
    print(table(rows, args.runs))


if __name__ == "__main__":
    main()
