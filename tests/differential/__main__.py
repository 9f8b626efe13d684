"""python -m tests.differential --seed S --count N [--kind mlir|dsl] [--out DIR]

Runs N programs of each kind (or of `--kind`), seeds S .. S+N-1, prints one line per
finding as it comes and a summary (counts per outcome, programs/s, the findings by class),
and writes each new finding, minimised, to DIR. Exit status 1 if there was a new finding.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tests.differential.campaign import Result, run_campaign, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--count", type=int, default=100, help="programs of each kind")
    parser.add_argument("--kind", choices=("mlir", "dsl"), help="only this kind")
    parser.add_argument("--out", type=Path, default=Path("differential_findings"),
                        help="where minimised findings go (default: ./differential_findings)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--no-minimise", action="store_true", help="write findings as found")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds a program (with its minimising) may take")
    parser.add_argument("--verbose", action="store_true", help="a line per program")
    args = parser.parse_args(argv)
    kinds = [args.kind] if args.kind else ["mlir", "dsl"]
    tasks = [(kind, seed) for seed in range(args.seed, args.seed + args.count) for kind in kinds]

    def progress(result: Result) -> None:
        if args.verbose or result.is_new_finding:
            where = f" -> {result.finding}" if result.finding else ""
            print(f"{result.kind} seed {result.seed}: {result.outcome}"
                  f"{' (known: ' + result.known + ')' if result.known else ''} "
                  f"{result.detail[:200]}{where}", flush=True)

    start = time.monotonic()
    results = run_campaign(tasks, workers=args.workers, minimise=not args.no_minimise,
                           out=args.out, timeout_s=args.timeout, progress=progress)
    print(summary(results, time.monotonic() - start), flush=True)
    return 1 if any(r.is_new_finding for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
