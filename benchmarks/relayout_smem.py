"""Static quality of relayouts across warps (through shared memory), from ptxas and nvdisasm.

    python benchmarks/relayout_smem.py

For each relayout, a kernel that loads a value in the source layout, casts it to the
target layout and stores it, and the same kernel without the cast (stored from the source
layout): ptxas -v registers and spills, SASS instructions (all, and how many the cast adds),
the shared-memory instructions (STS/LDS with their widths), BAR, and the bank-conflict
degree of the plan (1: every phase of a warp's access hits distinct banks). Prints a
Markdown table.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from smalti.dialect.attributes import layout_to_text
from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir
from smalti.tiling import (
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_TRANSPOSED_LAYOUT,
    WGStridedLayout,
)
from smalti.tiling.smem_relayout import plan_smem_relayout, side_conflicts

NAMES = {WGMMA_LAYOUT: "wgmma", WGMMA_TRANSPOSED_LAYOUT: "wgmma-transposed",
         WGMMA_LAYOUT_8BIT: "wgmma-8bit",
         **{WGStridedLayout(v): f"strided<{v}>" for v in (1, 4, 8, 16)}}
BITS = {"f32": 32, "bf16": 16, "f8E4M3FN": 8}
CASES = [
    (WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "f32"),
    (WGStridedLayout(1), WGStridedLayout(4), (64, 64), "f32"),
    (WGStridedLayout(4), WGStridedLayout(1), (64, 64), "f32"),
    (WGMMA_LAYOUT, WGStridedLayout(4), (64, 64), "f32"),
    (WGStridedLayout(4), WGMMA_LAYOUT, (64, 64), "f32"),
    (WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, (64, 64), "bf16"),
    (WGMMA_LAYOUT, WGStridedLayout(8), (64, 64), "bf16"),
    (WGStridedLayout(1), WGStridedLayout(8), (64, 64), "bf16"),
    (WGMMA_LAYOUT_8BIT, WGStridedLayout(16), (64, 64), "f8E4M3FN"),
    (WGMMA_LAYOUT, WGStridedLayout(1), (128, 128), "f32"),
]


def kernel(src, dst, shape, element) -> str:
    v = f"vector<{'x'.join(map(str, shape))}x{element}>"
    ref = f"memref<{'x'.join(map(str, shape))}x{element}>"
    cast = (f'  %y = "smalti.layout_cast"(%x) {{new_layout = #smalti.{layout_to_text(dst)}}} '
            f": ({v}) -> {v}\n" if dst is not None else "")
    return f"""
func.func @k(%a: {ref}, %out: {ref}) attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {{out_layouts = [#smalti.{layout_to_text(src)}]}} : ({ref}, index, index) -> {v}
{cast}  "smalti.vector_store"({"%y" if dst is not None else "%x"}, %out, %c0, %c0) : ({v}, {ref}, index, index) -> ()
  return
}}
"""


def measure(text: str) -> tuple[object, str]:
    compiled = compile_mlir(text, "relayout.mlir")
    result = compile_ptx(compiled.ptx)
    return next(iter(result.reports.values())), disassemble(result.cubin)


def shared_instructions(sass: str, opcode: str) -> str:
    """How many `opcode` (STS, LDS) instructions of each width the SASS holds."""
    counts: dict[str, int] = {}
    for name in re.findall(rf"\b({opcode}(?:\.(?:128|64|U8|U16|S16|S8))?)\b", sass):
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "0"


def main() -> None:
    print("| relayout | shape | type | registers | spills | SASS | added by the cast | "
          "stores | loads | BAR | rounds | bank conflicts |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for src, dst, shape, element in CASES:
        report, sass = measure(kernel(src, dst, shape, element))
        _, plain = measure(kernel(src, None, shape, element))
        counts, plain_counts = sass_opcode_counts(sass), sass_opcode_counts(plain)
        plan = plan_smem_relayout(src, dst, shape, BITS[element])
        degree = max(max(side_conflicts(side, plan.element_bytes))
                     for r in plan.rounds for side in (r.store, r.load))
        total, base = sum(counts.values()), sum(plain_counts.values())
        print(f"| {NAMES[src]} -> {NAMES[dst]} | {'x'.join(map(str, shape))} | {element} | "
              f"{report.registers} | {report.spill_stores} | {total} | {total - base} | "
              f"{shared_instructions(sass, 'STS')} | {shared_instructions(sass, 'LDS')} | "
              f"{counts.get('BAR', 0)} | {len(plan.rounds)} | {degree} |")


if __name__ == "__main__":
    main()
