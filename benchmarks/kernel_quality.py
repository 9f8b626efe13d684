"""Static kernel quality and compile latency of the pointwise examples, against Triton.

    python benchmarks/kernel_quality.py [--repeats 5]

For each example: registers, spills, SASS instructions (ptxas -v and nvdisasm from the same
toolchain for both), and the cold compile time from source to cubin (smalti: `.mlir` text
through the pipeline, PTX, ptxas; Triton: `triton.compile` with an empty cache), medians of
`--repeats` runs, each in a fresh process so that nothing is cached.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"pointwise_f32": ("f32", 256), "pointwise_bf16": ("bf16", 256)}

SMALTI_ONE_RUN = """
import json, sys, time
from smalti.runtime import compile_mlir
from smalti.ptx.toolchain import disassemble, sass_opcode_counts
path = sys.argv[1]
start = time.perf_counter()
compiled = compile_mlir(open(path).read(), path)
result = compiled.assemble()
seconds = time.perf_counter() - start
report = next(iter(result.reports.values()))
counts = sass_opcode_counts(disassemble(result.cubin))
print(json.dumps({"seconds": seconds, "registers": report.registers,
                  "spills": report.spill_stores + report.spill_loads,
                  "sass": sum(counts.values()), "ldg": counts["LDG"], "stg": counts["STG"]}))
"""

TRITON_ONE_RUN = """
import json, sys
sys.path.insert(0, sys.argv[3])
from triton_pointwise import compile_pointwise
from smalti.ptx.toolchain import disassemble, sass_opcode_counts
cubin, seconds = compile_pointwise(sys.argv[1], int(sys.argv[2]))
counts = sass_opcode_counts(disassemble(cubin))
print(json.dumps({"seconds": seconds, "sass": sum(counts.values()),
                  "ldg": counts["LDG"], "stg": counts["STG"]}))
"""


def run_json(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def triton_registers(dtype: str, columns: int) -> tuple[int, int]:
    """Registers and spill bytes ptxas reports for Triton's PTX (same ptxas as smalti's)."""
    code = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).parent / "peers")!r})
import triton_pointwise as tp
import triton
from triton.backends.compiler import GPUTarget
source = triton.compiler.ASTSource(fn=tp.pointwise, signature={{"a_ptr": tp.TRITON_TYPES[{dtype!r}], "b_ptr": tp.TRITON_TYPES[{dtype!r}], "c_ptr": tp.TRITON_TYPES[{dtype!r}], "out_ptr": tp.TRITON_TYPES[{dtype!r}], "N": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}}, constexprs={{"N": {columns}, "BLOCK_M": 128, "BLOCK_N": 128}}, attrs={{(i,): [["tt.divisibility", 16]] for i in range(4)}})
kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={{"num_warps": 4}})
from smalti.ptx.toolchain import compile_ptx
report = next(iter(compile_ptx(kernel.asm["ptx"]).reports.values()))
print(json.dumps([report.registers, report.spill_stores + report.spill_loads]))
"""
    registers, spills = run_json(code)
    return registers, spills


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-peer", action="store_true", help="skip Triton")
    args = parser.parse_args()
    print("| kernel | compiler | registers | spills (B) | SASS instrs | LDG | STG | "
          "compile (s) | Triton / smalti compile |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (dtype, columns) in EXAMPLES.items():
        path = str(ROOT / "examples" / f"{name}.mlir")
        ours = [run_json(SMALTI_ONE_RUN, path) for _ in range(args.repeats)]
        ours_s = statistics.median(r["seconds"] for r in ours)
        o = ours[0]
        print(f"| {name} | smalti | {o['registers']} | {o['spills']} | {o['sass']} | "
              f"{o['ldg']} | {o['stg']} | {ours_s:.3f} | |", flush=True)
        if args.no_peer:
            continue
        peers = str(Path(__file__).parent / "peers")
        theirs = [run_json(TRITON_ONE_RUN, dtype, str(columns), peers)
                  for _ in range(args.repeats)]
        theirs_s = statistics.median(r["seconds"] for r in theirs)
        t = theirs[0]
        registers, spills = triton_registers(dtype, columns)
        print(f"| {name} | Triton | {registers} | {spills} | {t['sass']} | {t['ldg']} | "
              f"{t['stg']} | {theirs_s:.3f} | {theirs_s / ours_s:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
