"""Mutation fuzzing of the drivers: lit inputs, mutated, through smalti-opt and
smalti-translate. A finding is an internal error (exit status 2), a process crash, or a
rejection without a located `file:line:col: error:` diagnostic.

    python -m tests.fuzzing --inputs 10000 [--seed 0] [--corpus tests/fuzz_corpus]

Each input runs in-process; a batch runs in a child process that reports after every input,
so a crash inside MLIR's C++ or a hang is pinned on its input and the batch goes on after it.
Every registered pass is among the flags drawn.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import os
import queue as queue_module
import random
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from smalti.passes import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT / "lit_tests").rglob("*.mlir")) + sorted((ROOT / "examples").glob("*.mlir"))
PASS_FLAGS = (*(f"--{name}" for name in REGISTRY), "--canonicalize", "--cse")
LOCATED = re.compile(r"^.+:\d+:\d+: (error|warning|note|remark): ", re.MULTILINE)
TOKENS = re.compile(r"%\w+|\d+|\w+|[^\s\w]")
REPLACEMENTS = ["0", "1", "-1", "128", "65536", "7", "f32", "bf16", "i1", "index", "vector<4xf32>",
                "memref<?xf32>", "#smalti.splat", "#smalti.strided<vec = 3>", "[", "]", "{",
                "}", "(", ")", "<", ">", ",", ":", "%c0", "%arg0", "\"smalti.wgmma\"", "x"]


@dataclass(frozen=True)
class Finding:
    text: str
    argv: tuple[str, ...]
    problem: str


def mutate(text: str, rng: random.Random) -> str:
    """One to three random edits: drop, duplicate or swap lines; replace, drop or duplicate
    a token; splice a line from another seed."""
    for _ in range(rng.randint(1, 3)):
        lines = text.splitlines()
        if not lines:
            return text
        i = rng.randrange(len(lines))
        match rng.randrange(6):
            case 0:
                del lines[i]
            case 1:
                lines.insert(i, lines[rng.randrange(len(lines))])
            case 2:
                j = rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
            case 3 | 4:
                tokens = list(TOKENS.finditer(lines[i]))
                if tokens:
                    t = rng.choice(tokens)
                    new = rng.choice(REPLACEMENTS) if rng.random() < 0.7 else ""
                    lines[i] = lines[i][:t.start()] + new + lines[i][t.end():]
            case 5:
                other = rng.choice(SEEDS).read_text().splitlines()
                if other:
                    lines.insert(i, rng.choice(other))
        text = "\n".join(lines)
    return text


def check_one(text: str, argv: tuple[str, ...]) -> str | None:
    """Run one driver in-process on `text`; a problem description, or None if it behaved."""
    from smalti.tools import opt, translate

    tool = translate if argv[0] == "translate" else opt
    path = Path(tempfile.gettempdir()) / f"fuzz_input_{os.getpid()}.mlir"
    path.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = tool.main([str(path), *argv[1:]])
    output = err.getvalue()
    if status == 2:
        return f"internal error: {output.strip().splitlines()[0] if output.strip() else ''}"
    if status == 1 and not LOCATED.search(output):
        return f"rejection without a located diagnostic: {output.strip()[:200]}"
    if status not in (0, 1):
        return f"exit status {status}"
    return None


def _run_batch(batch: list[tuple[str, tuple[str, ...]]], queue: multiprocessing.Queue) -> None:
    """Check each case; report a Finding or, when it behaved, its index (progress)."""
    for index, (text, argv) in enumerate(batch):
        problem = check_one(text, argv)
        queue.put(Finding(text, argv, problem) if problem is not None else index)


def generate(count: int, seed: int) -> list[tuple[str, tuple[str, ...]]]:
    rng = random.Random(seed)
    seeds = [p.read_text() for p in SEEDS]
    cases = []
    for _ in range(count):
        text = mutate(rng.choice(seeds), rng)
        if rng.random() < 0.3:
            argv = ("translate", "--to=ptx")
        else:
            argv = ("opt", *rng.sample(PASS_FLAGS, rng.randint(1, 3)))
        if "// -----" in text and rng.random() < 0.5:
            argv = (*argv, "--split-input-file")
        cases.append((text, argv))
    return cases


def fuzz(count: int, seed: int = 0, batch_size: int = 200,
         seconds_per_input: float = 30) -> list[Finding]:
    """Run `count` mutated inputs; every finding. A crash or a hang (an input taking longer
    than `seconds_per_input`) is pinned on its input, and the batch goes on after it."""
    cases = generate(count, seed)
    findings: list[Finding] = []
    context = multiprocessing.get_context("spawn")  # fork is unsafe once JAX has threads
    pending = [cases[start:start + batch_size] for start in range(0, len(cases), batch_size)]
    while pending:
        batch = pending.pop(0)
        queue = context.Queue()
        child = context.Process(target=_run_batch, args=(batch, queue))
        child.start()
        done = 0
        while done < len(batch):
            try:
                item = queue.get(timeout=seconds_per_input + 60 * (done == 0))  # + start-up
            except queue_module.Empty:
                problem = ("hang" if child.is_alive()
                           else f"process crashed (exit code {child.exitcode})")
                findings.append(Finding(*batch[done], problem))
                pending.insert(0, batch[done + 1:])
                break
            if isinstance(item, Finding):
                findings.append(item)
            done += 1
        child.terminate()
        child.join()
    return findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "fuzz_corpus")
    args = parser.parse_args()
    findings = fuzz(args.inputs, args.seed)
    args.corpus.mkdir(parents=True, exist_ok=True)
    for i, finding in enumerate(findings):
        name = args.corpus / f"seed{args.seed}_{i}.mlir"
        name.write_text(f"// ARGS: {' '.join(finding.argv)}\n// PROBLEM: {finding.problem}\n"
                        + finding.text)
        print(f"{name}: {finding.problem}")
    print(f"{args.inputs} inputs, {len(findings)} findings")
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
