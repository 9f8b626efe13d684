"""Many programs, in worker processes: a crash inside smalti's C++ (MLIR, the FFI) or a hang
is pinned on its program, and the run goes on with a fresh worker.

Each worker generates a program from (kind, seed), runs it, minimises a new finding and
writes it as a finding file, and reports a `Result`. Workers start with a private
SMALTI_CACHE_DIR (thousands of kernels would otherwise fill the user's cache) and are
replaced every `recycle_after` programs, which bounds the memory of JAX's and smalti's
in-process caches.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import os
import queue as queue_module
import shutil
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from smalti.runtime.cache import cache_directory
from tests.differential.findings import write_finding
from tests.differential.generator import generate
from tests.differential.minimise import minimise as minimise_program
from tests.differential.runner import FINDINGS, Outcome, run_program, source_text

Task = tuple[str, int]  # (kind, seed)


@dataclass(frozen=True)
class Result:
    kind: str
    seed: int
    outcome: str  # Outcome.kind, or "crash"/"timeout" for a worker that died or hung
    detail: str
    known: str = ""
    seconds: float = 0.0
    finding: str | None = None  # the finding file written for it
    minimised: str | None = None  # the minimised program's text
    message: str = ""

    @property
    def is_new_finding(self) -> bool:
        """A finding not filed yet (or a failure of the tester itself)."""
        return self.outcome in (*FINDINGS, "timeout", "tester-error") and not self.known


def run_one(kind: str, seed: int, *, minimise: bool, out: Path | None,
            minimise_budget_s: float = 300) -> Result:
    """Generate, run, and (for a new finding) minimise and write one program."""
    start = time.monotonic()
    try:
        program = generate(kind, seed)
        outcome = run_program(program)
    except Exception:  # the tester's own bug (generator, reference): reported, not blamed
        return Result(kind, seed, "tester-error", traceback.format_exc().strip().splitlines()[-1],
                      seconds=time.monotonic() - start, message=traceback.format_exc())
    seconds = time.monotonic() - start
    finding = minimised = None
    if outcome.is_finding and not outcome.known:
        if minimise:
            reduced = minimise_program(program, outcome, budget_s=minimise_budget_s)
            program, outcome = reduced.program, reduced.outcome
        minimised = source_text(program)
        if out is not None:
            finding = str(write_finding(program, outcome, out))
    return Result(kind, seed, outcome.kind, outcome.detail, outcome.known, seconds, finding,
                  minimised, outcome.message[:4000] if outcome.is_finding else "")


def _worker(tasks, results, minimise: bool, out: Path | None, cache: str) -> None:
    os.environ["SMALTI_CACHE_DIR"] = cache
    while True:
        task = tasks.get()
        if task is None:
            return
        kind, seed = task
        results.put(("start", os.getpid(), task))
        results.put(("done", os.getpid(), run_one(kind, seed, minimise=minimise, out=out)))


@dataclass
class _Slot:
    process: multiprocessing.process.BaseProcess
    inbox: multiprocessing.queues.Queue
    task: Task | None = None
    since: float = 0.0
    done: int = 0


def run_campaign(tasks: list[Task], *, workers: int = 1, minimise: bool = True,
                 out: Path | None = None, timeout_s: float = 900, recycle_after: int = 250,
                 progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Run every task; the results in completion order."""
    context = multiprocessing.get_context("spawn")  # fork is unsafe once JAX has threads
    cache = private_cache()
    pending: list[Task] = list(tasks)
    results: list[Result] = []
    reports = context.Queue()
    slots: list[_Slot] = []

    def start_worker() -> _Slot:
        inbox = context.Queue()
        process = context.Process(target=_worker, args=(inbox, reports, minimise, out, cache),
                                  daemon=True)
        process.start()
        return _Slot(process, inbox)

    def feed(slot: _Slot) -> None:
        if pending and slot.task is None:
            slot.task, slot.since = pending.pop(0), time.monotonic()
            slot.inbox.put(slot.task)

    def record(result: Result) -> None:
        results.append(result)
        if progress is not None:
            progress(result)

    def replace(slot: _Slot, why: str) -> _Slot:
        assert slot.task is not None
        kind, seed = slot.task
        record(_lost(kind, seed, why, time.monotonic() - slot.since, minimise, out))
        slot.process.kill()
        slot.process.join()
        fresh = start_worker()
        feed(fresh)
        return fresh

    try:
        slots = [start_worker() for _ in range(max(1, min(workers, len(tasks))))]
        for slot in slots:
            feed(slot)
        while any(s.task is not None for s in slots):
            try:
                message, pid, payload = reports.get(timeout=2)
            except queue_module.Empty:
                message = None
            if message == "done":
                slot = next(s for s in slots if s.process.pid == pid)
                record(payload)
                slot.task, slot.done = None, slot.done + 1
                if slot.done >= recycle_after and pending:
                    slot.inbox.put(None)
                    slot.process.join()
                    slots[slots.index(slot)] = slot = start_worker()
                feed(slot)
            elif message == "start":
                slot = next(s for s in slots if s.process.pid == pid)
                slot.since = time.monotonic()
            for k, slot in enumerate(slots):
                if slot.task is None:
                    continue
                if not slot.process.is_alive():
                    slots[k] = replace(slot, f"worker died (exit code {slot.process.exitcode})")
                elif time.monotonic() - slot.since > timeout_s:
                    slots[k] = replace(slot, f"no result after {timeout_s:.0f} s")
    finally:
        for slot in slots:
            if slot.process.is_alive():
                slot.inbox.put(None)
                slot.process.join(timeout=10)
                if slot.process.is_alive():
                    slot.process.kill()
        shutil.rmtree(cache, ignore_errors=True)
    return results


def private_cache() -> str:
    """A fresh kernel cache directory holding the user's built launcher libraries (so
    workers need not rebuild them with g++)."""
    cache = tempfile.mkdtemp(prefix="smalti-differential-cache-")
    for library in cache_directory().glob("*.so"):
        shutil.copy2(library, cache)
    return cache


def _lost(kind: str, seed: int, why: str, seconds: float, minimise: bool,
          out: Path | None) -> Result:
    """A program whose worker crashed or hung: a finding, written unminimised (minimising
    would crash or hang the same way)."""
    outcome_kind = "timeout" if why.startswith("no result") else "crash"
    try:
        program = generate(kind, seed)
    except Exception:
        return Result(kind, seed, "tester-error", why, seconds=seconds,
                      message=traceback.format_exc())
    finding = None
    if out is not None:
        finding = str(write_finding(program, Outcome(outcome_kind, why, why), out))
    return Result(kind, seed, outcome_kind, why, "", seconds, finding, source_text(program),
                  why)


def summary(results: list[Result], seconds: float) -> str:
    """Counts per kind and outcome, throughput, and the findings."""
    lines = []
    for kind in sorted({r.kind for r in results}):
        mine = [r for r in results if r.kind == kind]
        counts = Counter(r.outcome + (" (known)" if r.known else "") for r in mine)
        text = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        lines.append(f"{kind}: {len(mine)} programs: {text}")
    lines.append(f"{len(results)} programs in {seconds:.0f} s: "
                 f"{len(results) / max(seconds, 1e-9):.2f} programs/s")
    new = [r for r in results if r.is_new_finding]
    signatures = Counter(f"{r.outcome}: {r.detail}"[:160] for r in new)
    for signature, count in signatures.most_common():
        example = next(r for r in new if f"{r.outcome}: {r.detail}"[:160] == signature)
        lines.append(f"  {count} x {signature}  [e.g. {example.kind} seed {example.seed}"
                     f"{', ' + example.finding if example.finding else ''}]")
    known = Counter(r.known for r in results if r.known)
    for name, count in known.most_common():
        lines.append(f"  {count} x known: {name}")
    limitations = Counter(r.detail.split(":")[0] for r in results if r.outcome == "limitation")
    for name, count in limitations.most_common():
        lines.append(f"  {count} x limitation: {name}")
    return "\n".join(lines)


__all__ = ["Result", "run_campaign", "run_one", "summary"]
