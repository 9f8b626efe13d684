"""Layout inference time on generated modules, against Mosaic GPU's `infer_layout`.

    python benchmarks/inference.py [--program dag|chain|mixed|relayouts] [--sizes 1000 10000 100000]
                                   [--repeats 3] [--no-peer] [--peer-timeout 600]

Both engines get the same program, written in each one's dialect. Parsing is not timed; the
figure is the median wall time of inference alone (in one process, so from the second
repeat on the layout algebra's memo tables are warm), next to that of parsing and verifying
the same text; `ops` counts every op of the kernel body (loads, constants, loop bodies and
stores included).

- "chain": loads of 128x128 f32 tiles, each op adding the first load to the previous value
  (the easiest program), stores.
- "dag": loads, a random DAG of elementwise ops over the last 64 values with 5% splat
  constants, stores.
- "mixed": blocks of real kernels over one 128x128 tile each: a softmax over rows (row max
  and sum reductions, broadcasts back), a normalisation over columns (a column reduction
  and its broadcast), half the blocks accumulating in an `scf.for`, a transpose, a store;
  each block starts from a load cast to the WGMMA layout (as kernels that feed wgmma do) and
  each reduction has its own zero accumulator. Mosaic GPU has no register transpose: its
  program has a `math.absf` in its place.
- "relayouts": blocks without a single layout assignment, where inference inserts
  relayouts: a tile's column sums added to its row sums (one relayout by shuffles) and
  broadcast back, the tile added to its own transpose (one through shared memory), a
  store. Mosaic GPU (with `math.absf` for the transpose) refuses the row plus column sums.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from jaxlib.mlir import ir

from smalti.dialect import make_context, parse_module
from smalti.dialect.verifier import verify
from smalti.layout_inference import infer_layouts

TILE = "vector<128x128xf32>"
ROW = "vector<128xf32>"
REF = "memref<128x128xf32>"
BINARY = ("arith.addf", "arith.mulf", "arith.maximumf", "arith.subf")
WGMMA = {
    "smalti": "#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
              "lane = [-3, -2], vector = -1>",
    "mosaic": "#mosaic_gpu.TiledLayout<[[64, 8], [16, 8], [8, 8], [2]], warp_dims = [-7], "
              "lane_dims = [-3, -2], vector_dim = -1>",
}

# A program is a dialect-neutral list of ops, each producing value number `dst` (or none):
#   ("load", dst, ref)  ("const", dst)  ("const1", dst)  ("bin", dst, name, a, b)
#   ("un", dst, name, a)  ("cast", dst, a)  ("reduce", dst, combiner, a, acc, axis)
#   ("bcast", dst, a, kept_dim)  ("transpose", dst, a)  ("loop", dst, init, other)
#   ("rowbin", dst, name, a, b) (on 1-D rows)  ("store", a, ref)


def program(n_ops: int, kind: str = "dag", seed: int = 0) -> list[tuple]:
    """The op list of a generated program of about `n_ops` ops."""
    if kind == "mixed":
        return _mixed(n_ops, seed)
    if kind == "relayouts":
        return _relayouts(n_ops)
    rng = random.Random(seed)
    loads = 8
    ops: list[tuple] = [("load", i, i) for i in range(loads)]
    values = list(range(loads))
    while len(ops) < n_ops - loads:
        dst = len(values)
        if kind == "chain":
            ops.append(("bin", dst, "arith.addf", values[-1], 0))
        elif rng.random() < 0.05:
            ops.append(("const", dst))
        else:
            ops.append(("bin", dst, rng.choice(BINARY), rng.choice(values[-64:]),
                        rng.choice(values[-64:])))
        values.append(dst)
    ops.extend(("store", values[-1 - i], i) for i in range(loads))
    return ops


def _emitter(ops: list[tuple]) -> Callable[..., int]:
    """`emit(kind, *operands)`: appends the op with the next value number, returns it."""
    values = itertools.count()

    def emit(*op: object) -> int:
        number = next(values)
        ops.append((op[0], number, *op[1:]))
        return number
    return emit


def _mixed(n_ops: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    ops: list[tuple] = []
    emit = _emitter(ops)

    while ops_count(ops) < n_ops:
        ref = len(ops) % 8
        x = emit("cast", emit("load", ref))
        m = emit("reduce", "maximumf", x, emit("const1"), 1)          # row max
        e = emit("un", "math.exp", emit("bin", "arith.subf", x, emit("bcast", m, 0)))
        s = emit("reduce", "add", e, emit("const1"), 1)                 # row sum
        p = emit("bin", "arith.divf", e, emit("bcast", s, 0))
        c = emit("reduce", "add", p, emit("const1"), 0)                 # column sum
        q = emit("bin", "arith.mulf", p, emit("bcast", c, 1))
        if rng.random() < 0.5:
            q = emit("loop", q, x)
        ops.append(("store", emit("transpose", q), ref))
    return ops


def _relayouts(n_ops: int) -> list[tuple]:
    ops: list[tuple] = []
    emit = _emitter(ops)

    while ops_count(ops) < n_ops:
        ref = len(ops) % 8
        x = emit("load", ref)
        columns = emit("reduce", "add", x, emit("const1"), 0)
        rows = emit("reduce", "add", x, emit("const1"), 1)
        sums = emit("bcast", emit("rowbin", "arith.addf", columns, rows), 0)
        both = emit("bin", "arith.addf", x, emit("transpose", x))
        ops.append(("store", emit("bin", "arith.mulf", both, sums), ref))
    return ops


def ops_count(ops: list[tuple]) -> int:
    """Ops of the kernel body as parsed: a loop is the scf.for, its addf and its yield."""
    return sum(3 if op[0] == "loop" else 1 for op in ops)


def module_text(ops: list[tuple], dialect: str) -> str:
    """The program as MLIR for "smalti" or "mosaic" (Mosaic GPU's dialect)."""
    refs = ", ".join(f"%r{i}: {REF}" for i in range(8))
    lines = [f"func.func @k({refs}) {{", "  %c0 = arith.constant 0 : index",
             "  %c1 = arith.constant 1 : index", "  %c4 = arith.constant 4 : index"]
    smalti = dialect == "smalti"
    for op in ops:
        match op:
            case ("load", dst, ref):
                lines.append(f'  %v{dst} = "smalti.vector_load"(%r{ref}, %c0, %c0) : '
                             f"({REF}, index, index) -> {TILE}" if smalti else
                             f'  %v{dst} = "mosaic_gpu.vector_load"(%r{ref}) : ({REF}) -> {TILE}')
            case ("const", dst):
                lines.append(f"  %v{dst} = arith.constant dense<1.5> : {TILE}")
            case ("const1", dst):
                lines.append(f"  %v{dst} = arith.constant dense<0.0> : {ROW}")
            case ("bin", dst, name, a, b):
                lines.append(f"  %v{dst} = {name} %v{a}, %v{b} : {TILE}")
            case ("rowbin", dst, name, a, b):
                lines.append(f"  %v{dst} = {name} %v{a}, %v{b} : {ROW}")
            case ("un", dst, name, a):
                lines.append(f"  %v{dst} = {name} %v{a} : {TILE}")
            case ("cast", dst, a):
                name = "smalti.layout_cast" if smalti else "mosaic_gpu.layout_cast"
                lines.append(f'  %v{dst} = "{name}"(%v{a}) {{new_layout = {WGMMA[dialect]}}} : '
                             f"({TILE}) -> {TILE}")
            case ("reduce", dst, combiner, a, acc, axis):
                lines.append(f"  %v{dst} = vector.multi_reduction <{combiner}>, %v{a}, %v{acc} "
                             f"[{axis}] : {TILE} to {ROW}")
            case ("bcast", dst, a, kept):
                name = "smalti.broadcast_in_dim" if smalti else "mosaic_gpu.broadcast_in_dim"
                lines.append(f'  %v{dst} = "{name}"(%v{a}) {{broadcast_dimensions = '
                             f"array<i64: {kept}>}} : ({ROW}) -> {TILE}")
            case ("transpose", dst, a):
                lines.append(f"  %v{dst} = vector.transpose %v{a}, [1, 0] : {TILE} to {TILE}"
                             if smalti else f"  %v{dst} = math.absf %v{a} : {TILE}")
            case ("loop", dst, init, other):
                lines += [f"  %v{dst} = scf.for %i{dst} = %c0 to %c4 step %c1 "
                          f"iter_args(%a{dst} = %v{init}) -> ({TILE}) {{",
                          f"    %s{dst} = arith.addf %a{dst}, %v{other} : {TILE}",
                          f"    scf.yield %s{dst} : {TILE}", "  }"]
            case ("store", a, ref):
                lines.append(f'  "smalti.vector_store"(%v{a}, %r{ref}, %c0, %c0) : '
                             f"({TILE}, {REF}, index, index) -> ()" if smalti else
                             f'  "mosaic_gpu.vector_store"(%v{a}, %r{ref}) : ({TILE}, {REF}) -> ()')
    lines += ["  return", "}"]
    return "\n".join(lines)


def smalti_text(ops: list[tuple]) -> str:
    return module_text(ops, "smalti")


def mosaic_text(ops: list[tuple]) -> str:
    return module_text(ops, "mosaic")


def time_smalti(ops: list[tuple]) -> float:
    context = make_context()
    module = parse_module(smalti_text(ops), "bench.mlir", context)
    with context:
        start = time.perf_counter()
        infer_layouts(module)
        return time.perf_counter() - start


def time_parse_and_verify(ops: list[tuple]) -> float:
    """What reading the kernel costs before inference: parsing and smalti-verify."""
    text = smalti_text(ops)
    context = make_context()
    start = time.perf_counter()
    module = parse_module(text, "bench.mlir", context)
    with context:
        verify(module.operation)
    return time.perf_counter() - start


def time_mosaic(ops: list[tuple]) -> float:
    """Mosaic GPU's inference time. Its search recurses once per decision, deeper than
    Python's default limit on large programs: it runs on a thread with a 1 GiB stack and a
    recursion limit to match."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax.experimental.mosaic import gpu as mosaic_gpu
    from jax.experimental.mosaic.gpu import layout_inference

    def run() -> float:
        context = jax_mlir.make_ir_context()
        mosaic_gpu.dialect.register_dialect(context)
        with context, ir.Location.unknown():
            module = ir.Module.parse(mosaic_text(ops))
            start = time.perf_counter()
            layout_inference.infer_layout(module)
            return time.perf_counter() - start

    result: list[float | BaseException] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1_000_000))
    threading.stack_size(1 << 30)
    thread = threading.Thread(target=lambda: result.append(_catching(run)))
    thread.start()
    thread.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def _catching(fn: Callable[[], float]) -> float | BaseException:
    try:
        return fn()
    except BaseException as error:  # handed to the caller's thread
        return error


def median(fn: Callable[[list[tuple]], float], ops: list[tuple], repeats: int) -> float:
    return statistics.median(fn(ops) for _ in range(repeats))


def mosaic_in_subprocess(size: int, kind: str, repeats: int, timeout_s: float
                         ) -> float | str | None:
    """Mosaic GPU's median time for `size` ops, None past `timeout_s` (it grows faster
    than linearly, so large sizes are bounded rather than waited for), or the last line of
    its error when it fails."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "import inference as b; "
            f"print(b.median(b.time_mosaic, b.program({size}, {kind!r}), {repeats}))")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode:
        lines = (done.stderr or f"exit status {done.returncode}").strip().splitlines()
        return lines[-1][:80]
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--program", choices=("dag", "chain", "mixed", "relayouts"), default="dag")
    parser.add_argument("--no-peer", action="store_true", help="skip Mosaic GPU")
    parser.add_argument("--peer-timeout", type=float, default=600,
                        help="seconds Mosaic GPU gets per size (default 600)")
    args = parser.parse_args()
    print("| program | ops | parse + verify (s) | smalti (s) | smalti µs/op | Mosaic GPU (s) "
          "| Mosaic / smalti |", flush=True)
    print("|---|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        ops = program(size, args.program)
        count = ops_count(ops) + 3  # and the index constants
        reading = median(time_parse_and_verify, ops, args.repeats)
        ours = median(time_smalti, ops, args.repeats)
        line = (f"| {args.program} | {count:,} | {reading:.3f} | {ours:.3f} | "
                f"{ours / count * 1e6:.1f} |")
        if args.no_peer:
            print(line + " - | - |", flush=True)
            continue
        repeats = args.repeats if size <= 1000 else 1
        theirs = mosaic_in_subprocess(size, args.program, repeats, args.peer_timeout)
        if theirs is None:
            print(f"{line} > {args.peer_timeout:.0f} | > {args.peer_timeout / ours:.0f}x |",
                  flush=True)
        elif isinstance(theirs, str):
            print(f"{line} failed: {theirs} | - |", flush=True)
        else:
            print(f"{line} {theirs:.3f} | {theirs / ours:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
