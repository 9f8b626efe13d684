"""Layout inference time on generated modules, against Mosaic GPU's `infer_layout`.

    python benchmarks/inference.py [--sizes 1000 10000 100000] [--repeats 3]

Both engines get the same program (loads of 128x128 f32 tiles, a random DAG of elementwise
ops over them, splat constants, stores), written in each one's dialect. Parsing is not
timed; the figure is the median wall time of inference alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from jaxlib.mlir import ir

from smalti.dialect import make_context, parse_module
from smalti.layout_inference import infer_layouts

TILE = "vector<128x128xf32>"
REF = "memref<128x128xf32>"
BINARY = ("arith.addf", "arith.mulf", "arith.maximumf", "arith.subf")


def program(n_ops: int, kind: str = "dag", seed: int = 0) -> list[tuple]:
    """A dialect-neutral op list: ("load", i), ("const",), ("bin", op, a, b), ("store", a, i).

    "dag": each op reads two random values among the last 64, with 5% splat constants;
    "chain": each op adds the first load to the previous value (the easiest program).
    """
    rng = random.Random(seed)
    loads = 8
    ops: list[tuple] = [("load", i) for i in range(loads)]
    values = list(range(loads))
    while len(ops) < n_ops - loads:
        if kind == "chain":
            ops.append(("bin", "arith.addf", values[-1], 0))
        elif rng.random() < 0.05:
            ops.append(("const",))
        else:
            ops.append(("bin", rng.choice(BINARY), rng.choice(values[-64:]),
                        rng.choice(values[-64:])))
        values.append(len(values))
    ops.extend(("store", values[-1 - i], i) for i in range(loads))
    return ops


def smalti_text(ops: list[tuple]) -> str:
    refs = ", ".join(f"%r{i}: {REF}" for i in range(8))
    lines = [f"func.func @k({refs}) {{", "  %c0 = arith.constant 0 : index"]
    value = 0
    for op in ops:
        match op:
            case ("load", i):
                lines.append(f'  %v{value} = "smalti.vector_load"(%r{i}, %c0, %c0) : '
                             f"({REF}, index, index) -> {TILE}")
            case ("const",):
                lines.append(f"  %v{value} = arith.constant dense<1.5> : {TILE}")
            case ("bin", name, a, b):
                lines.append(f"  %v{value} = {name} %v{a}, %v{b} : {TILE}")
            case ("store", a, i):
                lines.append(f'  "smalti.vector_store"(%v{a}, %r{i}, %c0, %c0) : '
                             f"({TILE}, {REF}, index, index) -> ()")
                continue
        value += 1
    lines += ["  return", "}"]
    return "\n".join(lines)


def mosaic_text(ops: list[tuple]) -> str:
    refs = ", ".join(f"%r{i}: {REF}" for i in range(8))
    lines = [f"func.func @k({refs}) {{"]
    value = 0
    for op in ops:
        match op:
            case ("load", i):
                lines.append(f'  %v{value} = "mosaic_gpu.vector_load"(%r{i}) : ({REF}) -> {TILE}')
            case ("const",):
                lines.append(f"  %v{value} = arith.constant dense<1.5> : {TILE}")
            case ("bin", name, a, b):
                lines.append(f"  %v{value} = {name} %v{a}, %v{b} : {TILE}")
            case ("store", a, i):
                lines.append(f'  "mosaic_gpu.vector_store"(%v{a}, %r{i}) : ({TILE}, {REF}) -> ()')
                continue
        value += 1
    lines += ["  return", "}"]
    return "\n".join(lines)


def time_smalti(ops: list[tuple]) -> float:
    context = make_context()
    module = parse_module(smalti_text(ops), "bench.mlir", context)
    with context:
        start = time.perf_counter()
        infer_layouts(module)
        return time.perf_counter() - start


def time_mosaic(ops: list[tuple]) -> float:
    from jax._src.interpreters import mlir as jax_mlir
    from jax.experimental.mosaic import gpu as mosaic_gpu
    from jax.experimental.mosaic.gpu import layout_inference

    context = jax_mlir.make_ir_context()
    mosaic_gpu.dialect.register_dialect(context)
    with context, ir.Location.unknown():
        module = ir.Module.parse(mosaic_text(ops))
        start = time.perf_counter()
        layout_inference.infer_layout(module)
        return time.perf_counter() - start


def median(fn: Callable[[list[tuple]], float], ops: list[tuple], repeats: int) -> float:
    return statistics.median(fn(ops) for _ in range(repeats))


def mosaic_in_subprocess(size: int, kind: str, repeats: int, timeout_s: float
                         ) -> float | None:
    """Mosaic GPU's median time for `size` ops, or None past `timeout_s` (it grows faster
    than linearly, so large sizes are bounded rather than waited for)."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "import inference as b; "
            f"print(b.median(b.time_mosaic, b.program({size}, {kind!r}), {repeats}))")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout_s, check=True)
    except subprocess.TimeoutExpired:
        return None
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--program", choices=("dag", "chain"), default="dag")
    parser.add_argument("--no-peer", action="store_true", help="skip Mosaic GPU")
    parser.add_argument("--peer-timeout", type=float, default=600,
                        help="seconds Mosaic GPU gets per size (default 600)")
    args = parser.parse_args()
    print("| ops | smalti (s) | smalti µs/op | Mosaic GPU (s) | Mosaic / smalti |", flush=True)
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        ops = program(size, args.program)
        ours = median(time_smalti, ops, args.repeats)
        line = f"| {size:,} | {ours:.3f} | {ours / size * 1e6:.1f} |"
        if args.no_peer:
            print(line + " - | - |")
            continue
        repeats = args.repeats if size <= 1000 else 1
        theirs = mosaic_in_subprocess(size, args.program, repeats, args.peer_timeout)
        if theirs is None:
            print(f"{line} > {args.peer_timeout:.0f} | > {args.peer_timeout / ours:.0f}x |",
                  flush=True)
        else:
            print(f"{line} {theirs:.3f} | {theirs / ours:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
