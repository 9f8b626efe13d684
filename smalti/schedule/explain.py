"""`explain`: a schedule's choice and why, as text for people (`--smalti-explain-schedule`)."""

from __future__ import annotations

from smalti.schedule.collective import (
    LINK,
    TENSOR_CORES,
    Candidate,
    CollectiveSchedule,
)
from smalti.schedule.problem import ALL_GATHER_MATMUL, NAIVE

RUNNERS_UP = 5  # candidates listed after the choice


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} us"


def explain(schedule: CollectiveSchedule) -> str:
    """The problem, the choice, predicted vs no-overlap time, why, runners-up, constants."""
    problem, choice = schedule.problem, schedule.choice
    how = "given (checked, not rewritten)" if schedule.given else \
        f"chosen by the model from {len(schedule.candidates)} candidates"
    lines = [
        f"problem: {problem.describe()}",
        f"choice: {choice.label()} [{how}]",
        f"predicted: {_us(choice.predicted_s)}; without overlap: {_us(choice.no_overlap_s)} "
        f"({choice.speedup:.2f}x faster with overlap)",
        "why:",
        *(f"  {line}" for line in _why(schedule)),
        f"steps of device {choice.slowest_device} (the slowest; a step's time is its chunks' "
        "compute, or the next chunk's fetch when that is longer):",
        *(f"  {line}" for line in _steps(schedule)),
        "candidates (best first):",
        *(f"  {line}" for line in _table(schedule)),
        f"constants ({schedule.hardware.name}):",
        *(f"  {name} = {value}  [{source}]"
          for name, value, source in schedule.hardware.constants()
          if not name.startswith("dense_flops[") or name == f"dense_flops[{problem.dtype}]"),
    ]
    return "\n".join(lines)


def _why(schedule: CollectiveSchedule) -> list[str]:
    """The bottleneck, what overlap hides, and why the other orders lose."""
    choice = schedule.choice
    b = choice.breakdown
    counts: dict[str, int] = {}
    for step in choice.steps:
        counts[step.bound] = counts.get(step.bound, 0) + 1
    bounds = ", ".join(f"{bound} in {n} of {len(choice.steps)} steps"
                       for bound, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    lines = [
        f"bottleneck: {bounds}",
        f"terms: tensor cores {_us(b.compute_s)}, NVLink {_us(b.link_s)}, local copies "
        f"{_us(b.local_s)}, semaphore waits {_us(b.semaphore_s)}, step overheads "
        f"{_us(b.overhead_s)}; not hidden behind compute: {_us(b.exposed_s)}",
    ]
    if counts.get(TENSOR_CORES, 0) == len(choice.steps) and choice.tail_s <= 0:
        lines.append("communication is hidden behind the tensor cores except the fill")
    if choice.tail_s > 0:
        lines.append(f"pulls of the block's partials outlast the last compute step by "
                     f"{_us(choice.tail_s)}")
    lines.extend(_order_notes(schedule))
    lines.extend(_chunk_notes(schedule))
    return lines


def _best_per_order(schedule: CollectiveSchedule) -> dict[str, Candidate]:
    best: dict[str, Candidate] = {}
    for candidate in schedule.candidates:
        best.setdefault(candidate.order, candidate)
    return best


def _order_notes(schedule: CollectiveSchedule) -> list[str]:
    choice = schedule.choice
    notes = []
    for order, best in _best_per_order(schedule).items():
        if order == choice.order:
            continue
        slower = best.predicted_s / choice.predicted_s
        if order == NAIVE and slower > 1.0 + 1e-9:
            notes.append(f"naive order (everyone visits device 0, then 1, ...) is "
                         f"{slower:.2f}x slower: {_naive_reason(schedule, best)}")
        elif abs(slower - 1.0) <= 1e-9:
            notes.append(f"{order} ties (every peer's link serves one reader per step too); "
                         "the earlier-listed order wins ties")
        else:
            notes.append(f"{order} is {slower:.2f}x slower")
    return notes


def _naive_reason(schedule: CollectiveSchedule, naive: Candidate) -> str:
    devices = schedule.problem.devices
    if schedule.problem.kind == ALL_GATHER_MATMUL:
        most = max(step.readers for step in naive.steps)
        shared = "" if any(step.bound == LINK and step.readers > 1 for step in naive.steps) \
            else " (here the CTAs' own copy rate is lower still, so the sharing is hidden)"
        return (f"in each step {devices - 1} devices read one peer, so its outgoing NVLink "
                f"is shared {most} ways{shared}")
    return (f"in each step every device computes the same block, so its owner's incoming "
            f"NVLink receives {devices - 1} partials at once and the last owner pulls all "
            f"of them after its compute ({_us(naive.tail_s)} exposed)")


def _chunk_notes(schedule: CollectiveSchedule) -> list[str]:
    choice = schedule.choice
    same = [c for c in schedule.candidates if c.order == choice.order
            and c.chunk_rows != choice.chunk_rows]
    if not same:
        return []
    smallest = min(same, key=lambda c: c.chunk_rows)
    biggest = max(same, key=lambda c: c.chunk_rows)
    notes = []
    if smallest.chunk_rows < choice.chunk_rows:
        notes.append(f"smaller chunks lose: chunk_rows={smallest.chunk_rows} takes "
                     f"{_us(smallest.predicted_s)} (per-chunk latency and step overhead "
                     f"{_us(smallest.breakdown.overhead_s)}, and fewer tiles per wave)")
    if biggest.chunk_rows > choice.chunk_rows:
        notes.append(f"bigger chunks lose: chunk_rows={biggest.chunk_rows} takes "
                     f"{_us(biggest.predicted_s)} (a longer fill and drain)")
    return notes


def _steps(schedule: CollectiveSchedule) -> list[str]:
    choice = schedule.choice
    me = choice.slowest_device
    gather = schedule.problem.kind == ALL_GATHER_MATMUL
    lines = []
    for step in choice.steps:
        what = ("source" if gather else "block") + f" {step.peer}" + \
            (" (own)" if step.peer == me else "")
        shared = f", link shared {step.readers} ways" if step.readers > 1 else ""
        lines.append(f"step {step.index}: {what}, {step.chunks} chunk(s), {_us(step.time_s)}, "
                     f"bound by {step.bound}{shared}")
    if choice.tail_s > 0:
        lines.append(f"after the last step: pulls of partials, {_us(choice.tail_s)}")
    return lines


def _table(schedule: CollectiveSchedule) -> list[str]:
    rows = ["chunk_rows  order          predicted     no overlap    speedup"]
    for candidate in schedule.candidates[:RUNNERS_UP + 1]:
        rows.append(f"{candidate.chunk_rows:>10}  {candidate.order:<13}  "
                    f"{_us(candidate.predicted_s):>12}  {_us(candidate.no_overlap_s):>12}  "
                    f"{candidate.speedup:>6.2f}x")
    left = len(schedule.candidates) - RUNNERS_UP - 1
    if left > 0:
        rows.append(f"... and {left} more")
    return rows
