"""Static kernel quality and compile latency of smalti's examples, against Triton.

    python benchmarks/kernel_quality.py [--repeats 5] [--no-peer]

For each example: registers, spills, SASS instructions in all and in the main loop (for
matmuls: the innermost SASS loop holding the first MMA (HGMMA on sm_90a, UTC*MMA on
sm_100a), and that loop's instructions per 64-wide K tile of one warpgroup, since loops may
be unrolled), MMA/UTMALDG/LDG counts
(ptxas -v and nvdisasm from the same toolchain for both compilers), and the cold compile
time from source to cubin (smalti: `.mlir` text through the pipeline, PTX, ptxas; Triton:
`triton.compile` with an empty cache), medians of `--repeats` runs, each in a fresh process
so that nothing is cached. smalti's time is broken down by pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = str(Path(__file__).parent / "peers")
# example -> (the Triton peer's compile call, MMAs one warpgroup issues per 64-wide K tile).
# Triton's matmuls get K = 4096: with a small constant K it unrolls the whole K loop.
EXAMPLES = {
    "pointwise_f32": ("compile_pointwise('f32', 256)", None),
    "pointwise_bf16": ("compile_pointwise('bf16', 256)", None),
    "matmul_128x128x64": ("compile_matmul(4096)", 8),  # 2 row blocks x 4 K steps
    "matmul_128x256x64_ws": ("compile_matmul(4096, 256, 8, 4)", 4),  # 64 rows per warpgroup
}
# The matmuls written in the DSL (examples/matmul.py, matmul_ws.py): Python source to cubin.
DSL_MATMUL = """
import os, sys, tempfile, time
os.environ["SMALTI_CACHE_DIR"] = tempfile.mkdtemp()  # cold: nothing cached
sys.path.insert(0, sys.argv[1])
import importlib
import jax, jax.numpy as jnp
module, function, size = sys.argv[2], sys.argv[3], int(sys.argv[4])
example = importlib.import_module(module)
spec = jax.ShapeDtypeStruct((size, size), jnp.bfloat16)
start = time.perf_counter()
traced, compiled = getattr(example, function).compile(spec, spec)
seconds = time.perf_counter() - start
measure(compiled.ptx, compiled.cubin, seconds, k_tile_hgmma=int(sys.argv[5]))
"""
# row name -> (module, function, size, MMAs per K tile per warpgroup, Triton peer or None)
DSL_MATMULS = {
    "matmul_128x128x64 (DSL source)": ("matmul", "matmul", 512, 8, None),
    "matmul_128x256x64_ws (DSL source)": ("matmul_ws", "matmul_ws", 512, 4, None),
    # sm_100a: a 128x128 tile, 64-wide K tiles of four K=16 tcgen05.mma each, 4 stages; Triton's
    # same tile for sm_100 (4 warps, 4 stages).
    "blackwell_matmul 128x128x64 (sm_100a)": (
        "blackwell_matmul", "matmul", 512, 4, "compile_matmul(4096, 128, 4, 4, capability=100)"),
    # persistent, 2-CTA (256x256 per pair, the even CTA issuing), warp-specialised: the MMA
    # issuer's loop, four K=16 UTCHMMA.2CTA per 64-wide K tile.
    "blackwell_matmul_persistent 256x256x64 (sm_100a)": (
        "blackwell_matmul_persistent", "matmul", 1024, 4, None),
}

MEASURE = """
import json
import re
from smalti.ptx.sass import main_loop
from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts

def measure(ptx, cubin, seconds, extra=None, k_tile_hgmma=None):
    arch = re.search(r"^\\s*\\.target\\s+(sm_\\w+)", ptx, re.M).group(1)  # sm_90a or sm_100a
    report = next(iter(compile_ptx(ptx, arch=arch).reports.values()))
    sass = disassemble(cubin)
    counts = sass_opcode_counts(sass)
    loop = main_loop(sass)  # the innermost SASS loop holding the first MMA
    per_k_tile = None
    if loop is not None and k_tile_hgmma:
        per_k_tile = round(loop.length * k_tile_hgmma / loop.mma)
    print(json.dumps({"seconds": seconds, "registers": report.registers,
                      "spills": report.spill_stores + report.spill_loads,
                      "sass": sum(counts.values()),
                      "loop": None if loop is None else loop.length, "per_k_tile": per_k_tile,
                      "hgmma": sum(n for op, n in counts.items()
                                   if op in ("HGMMA", "UTCHMMA", "UTCQMMA", "UTCOMMA")),
                      "utmaldg": counts["UTMALDG"],
                      "ldg": counts["LDG"] + counts["LDGSTS"], "passes": extra or {}}))
"""

SMALTI_ONE_RUN = MEASURE + """
import sys, time
from smalti.dialect import make_context, parse_module
from smalti.passes import DEFAULT_PIPELINE, run_pipeline
from smalti.lowering import lower_module
from smalti.ptx import print_module
from smalti.runtime import compile_mlir
path = sys.argv[1]
start = time.perf_counter()
compiled = compile_mlir(open(path).read(), path)
result = compiled.assemble()
seconds = time.perf_counter() - start
stamps = {}
last = [time.perf_counter()]
def tick(index, element, module):
    now = time.perf_counter(); stamps[element] = now - last[0]; last[0] = now
context = make_context()
module = parse_module(open(path).read(), path, context)
stamps["parse"] = time.perf_counter() - last[0]; last[0] = time.perf_counter()
with context:
    run_pipeline(module, DEFAULT_PIPELINE, after_pass=tick)
    last[0] = time.perf_counter(); text = print_module(lower_module(module).ptx)
    stamps["lower-to-ptx"] = time.perf_counter() - last[0]
last[0] = time.perf_counter(); compile_ptx(text); stamps["ptxas"] = time.perf_counter() - last[0]
measure(compiled.ptx, result.cubin, seconds, stamps, k_tile_hgmma=eval(sys.argv[2]))
"""

TRITON_ONE_RUN = MEASURE + """
import sys
sys.path.insert(0, sys.argv[1])
import triton_compile as tc
ptx, cubin, seconds = eval("tc." + sys.argv[2])
measure(ptx, cubin, seconds, k_tile_hgmma=eval(sys.argv[3]))
"""


def run_json(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(name: str, compiler: str, runs: list[dict], ratio: str = "") -> str:
    r = runs[0]
    seconds = statistics.median(x["seconds"] for x in runs)
    loop = "-" if r["loop"] is None else f"{r['loop']} ({r['per_k_tile']})"
    return (f"| {name} | {compiler} | {r['registers']} | {r['spills']} | {r['sass']} | {loop} | "
            f"{r['hgmma']} | {r['utmaldg']} | {r['ldg']} | {seconds:.3f} | {ratio} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-peer", action="store_true", help="skip Triton")
    args = parser.parse_args()
    print("| kernel | compiler | registers | spills (B) | SASS | main loop (per K tile) | "
          "MMA | UTMALDG | LDG(STS) | compile (s) | Triton / smalti compile |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    breakdowns = {}
    for name, (peer_call, k_tile_hgmma) in EXAMPLES.items():
        path = str(ROOT / "examples" / f"{name}.mlir")
        ours = [run_json(SMALTI_ONE_RUN, path, repr(k_tile_hgmma)) for _ in range(args.repeats)]
        breakdowns[name] = {k: statistics.median(r["passes"][k] for r in ours)
                            for k in ours[0]["passes"]}
        print(row(name, "smalti", ours), flush=True)
        if args.no_peer:
            continue
        theirs = [run_json(TRITON_ONE_RUN, PEERS, peer_call, repr(k_tile_hgmma))
                  for _ in range(args.repeats)]
        ratio = (statistics.median(r["seconds"] for r in theirs)
                 / statistics.median(r["seconds"] for r in ours))
        print(row(name, "Triton", theirs, f"{ratio:.1f}x"), flush=True)
    for name, (module, function, size, k_tile_mma, peer_call) in DSL_MATMULS.items():
        dsl = [run_json(MEASURE + DSL_MATMUL, str(ROOT / "examples"), module, function,
                        str(size), str(k_tile_mma)) for _ in range(args.repeats)]
        print(row(name, "smalti", dsl), flush=True)
        if args.no_peer or peer_call is None:
            continue
        theirs = [run_json(TRITON_ONE_RUN, PEERS, peer_call, repr(k_tile_mma))
                  for _ in range(args.repeats)]
        ratio = (statistics.median(r["seconds"] for r in theirs)
                 / statistics.median(r["seconds"] for r in dsl))
        print(row(name, "Triton", theirs, f"{ratio:.1f}x"), flush=True)
    print("\nsmalti compile time by stage (s, median):\n")
    stages = list(next(iter(breakdowns.values())))
    print("| kernel | " + " | ".join(stages) + " |")
    print("|---|" + "---:|" * len(stages))
    for name, stamps in breakdowns.items():
        print(f"| {name} | " + " | ".join(f"{stamps[s]:.3f}" for s in stages) + " |")


if __name__ == "__main__":
    main()
