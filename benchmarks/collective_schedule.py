"""The schedule cost model's predictions for the collective matmuls (smalti/schedule): per
kind, dtype and device count, its choice, predicted time, the same schedule without overlap,
and the naive order, as markdown.

    python benchmarks/collective_schedule.py [--constants]

Sizes: the examples' (per device m = 128, n = k = 256, two CTAs) and a realistic one (per device
m = 1024 rows, n = k = 4096, a persistent kernel on all 132 SMs). These are predictions on
an H100 SXM (smalti/schedule/hardware.py), not measurements: no GPU was lent to measure them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from smalti.schedule import H100_SXM, KINDS, CollectiveMatmulProblem, plan_collective_matmul
from smalti.schedule.hardware import SOURCES

DTYPES = ("bf16", "f8E4M3FN")
DEVICES = (2, 4, 8)
SIZES = (("examples", dict(m=128, n=256, k=256, ctas=2)),
         ("realistic", dict(m=1024, n=4096, k=4096, ctas=132)))


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def rows() -> list[str]:
    """The markdown table of predictions."""
    lines = ["| kind | dtype | size | devices | choice (chunk_rows, order) | bound | "
             "predicted (us) | no overlap (us) | ratio | naive order (us) |",
             "|---|---|---|---:|---|---|---:|---:|---:|---:|"]
    for kind in KINDS:
        for dtype in DTYPES:
            for size, dims in SIZES:
                for devices in DEVICES:
                    problem = CollectiveMatmulProblem(kind, devices=devices, dtype=dtype,
                                                      **dims)
                    schedule = plan_collective_matmul(problem)
                    choice = schedule.choice
                    naive = next(c for c in schedule.candidates if c.order == "naive")
                    bound = max({s.bound for s in choice.steps},
                                key=[s.bound for s in choice.steps].count)
                    if choice.tail_s > 0.1 * choice.predicted_s:
                        bound += " + link tail"
                    lines.append(
                        f"| {kind} | {dtype} | {size} | {devices} | {choice.chunk_rows}, "
                        f"{choice.order} | {bound} | {_us(choice.predicted_s)} | "
                        f"{_us(choice.no_overlap_s)} | "
                        f"{choice.predicted_s / choice.no_overlap_s:.2f} | "
                        f"{_us(naive.predicted_s)} |")
    return lines


def constants() -> list[str]:
    """The model's constants and their sources, as a markdown table and a source list."""
    lines = ["| constant | value | source |", "|---|---|---|"]
    lines += [f"| `{name}` | {value} | {source} |" for name, value, source in
              H100_SXM.constants()]
    lines += ["", *(f"- {key}: {text}" for key, text in SOURCES.items())]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--constants", action="store_true",
                        help="also print the constants and their sources")
    args = parser.parse_args(argv)
    print("\n".join(rows()))
    if args.constants:
        print()
        print("\n".join(constants()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
