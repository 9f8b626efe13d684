"""Kernels written with `sd.emit_pipeline` against the same kernels written by hand: static
SASS quality and the scheduling model's stage choices.

    python benchmarks/pipelines.py

For each pair (examples/matmul.py vs matmul_pipelined.py, matmul_ws.py vs
matmul_ws_pipelined.py, flash_attention.py vs flash_attention_pipelined.py): registers and
spills (ptxas -v), SASS instructions in all, the main loop (the innermost SASS loop holding
the first HGMMA, smalti.ptx.sass.main_loop) per K tile of one warpgroup (per K/V step for
attention; loops may be unrolled, so the loop's length is scaled by its HGMMAs), HGMMA and
UTMALDG counts; and the pipeline model's stages for each (recorded by emit_pipeline, or
found in the hand-written ring by `--smalti-explain-schedule`'s check), with the model's
recommendation. Prints a Markdown table (BENCHMARKS.md, "Pipelines: generated against
hand-written").
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp

from smalti.dialect.launch import kernel_functions
from smalti.dialect.schedule_attr import kernel_schedules
from smalti.ptx.sass import main_loop
from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.schedule import PIPELINE, pipeline_from_fields, plan_pipeline
from smalti.tools.hand_written_rings import hand_written_rings

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BF16 = jnp.bfloat16
MATMUL = (jax.ShapeDtypeStruct((512, 512), BF16),) * 2


def attention(head_dim: int) -> tuple[jax.ShapeDtypeStruct, ...]:
    return (jax.ShapeDtypeStruct((2, 512, head_dim), BF16),) * 3


@dataclass(frozen=True)
class Pair:
    """A kernel by hand and with emit_pipeline: (module, function) each, the arguments'
    specs, and the HGMMAs one warpgroup issues per K tile (or K/V step)."""

    name: str
    by_hand: tuple[str, str]
    generated: tuple[str, str]
    specs: tuple[jax.ShapeDtypeStruct, ...]
    hgmma_per_step: int


PAIRS = (
    Pair("matmul 128x128x64, 512^3", ("matmul", "matmul"), ("matmul_pipelined", "matmul"),
         MATMUL, 8),
    Pair("matmul_ws 128x256x64, 512^3", ("matmul_ws", "matmul_ws"),
         ("matmul_ws_pipelined", "matmul_ws"), MATMUL, 4),
    Pair("flash attention d=64, seq 512", ("flash_attention", "attention"),
         ("flash_attention_pipelined", "attention"), attention(64), 8),
    Pair("flash attention d=64, seq 512, causal", ("flash_attention", "causal_attention"),
         ("flash_attention_pipelined", "causal_attention"), attention(64), 8),
    Pair("flash attention d=128, seq 512", ("flash_attention", "attention"),
         ("flash_attention_pipelined", "attention"), attention(128), 12),
)


@dataclass(frozen=True)
class Row:
    registers: int
    spills: int
    sass: int
    per_step: float
    hgmma: int
    utmaldg: int
    stages: str


def measure(module: str, function: str, specs: tuple, hgmma_per_step: int) -> Row:
    kernel = getattr(importlib.import_module(module), function)
    traced, compiled = kernel.compile(*specs)
    report = next(iter(compile_ptx(compiled.ptx).reports.values()))
    sass = disassemble(compiled.cubin)
    counts = sass_opcode_counts(sass)
    loop = main_loop(sass)
    loop_hgmma = sum("HGMMA" in line for line in loop.instructions)
    return Row(report.registers, report.spill_stores + report.spill_loads,
               sum(counts.values()), loop.length * hgmma_per_step / loop_hgmma,
               counts["HGMMA"], counts["UTMALDG"], stages(traced.module))


def stages(module) -> str:
    """The stage count and who chose it, and the model's recommendation."""
    (func,) = kernel_functions(module)
    records = [f for f in kernel_schedules(func) if f.get("kind") == PIPELINE]
    records = records or hand_written_rings(func)
    parts = []
    for fields in records:
        schedule = pipeline_from_fields(fields)
        who = {"hand_written": "by hand"}.get(str(fields["variant"]),
                                              "given" if schedule.given else "model")
        best = plan_pipeline(schedule.problem).stages
        parts.append(f"{schedule.stages} ({who}; model: {best})")
    return ", ".join(parts) or "-"


def main() -> None:
    sys.path.insert(0, str(EXAMPLES))
    print("| kernel | written | registers | spills | SASS | main loop per K tile | HGMMA "
          "| UTMALDG | stages (model's choice) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for pair in PAIRS:
        for how, (module, function) in (("by hand", pair.by_hand),
                                        ("emit_pipeline", pair.generated)):
            row = measure(module, function, pair.specs, pair.hgmma_per_step)
            print(f"| {pair.name} | {how} | {row.registers} | {row.spills} | {row.sass} | "
                  f"{row.per_step:.1f} | {row.hgmma} | {row.utmaldg} | {row.stages} |")


if __name__ == "__main__":
    main()
