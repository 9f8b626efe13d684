"""The cost model of collective matmuls: predicted time of a (chunk size, peer order) choice,
and the search for the best one.

The model follows the kernels' pipeline on every device, in lockstep (all devices at step s
at once, which is what lets it see link sharing):
- all_gather_matmul: fetch chunk 0 (the fill), then per chunk max(compute this chunk, fetch
  the next) plus a per-step overhead. A fetch from a peer takes the remote latency plus its
  bytes over the peer's outgoing NVLink bandwidth, divided among the devices that read that
  peer in the same step, and capped by what the device's CTAs can copy. The first fetch from
  each peer first waits for the peer's semaphore.
- matmul_reduce_scatter: the same pipeline with local fetches of A; after each step the
  block's owner is signalled, and pulls the partial (f32) over its incoming NVLink while it
  computes; partials that arrive together queue on that link. A device is done when both its
  compute and its pulls are.
Compute of a chunk is in waves of 64 x (at most 256) output tiles over the CTAs at the
tensor cores' dense peak. Not modelled: output stores, the adds of pulled partials, egress
sharing of reduce-scatter pulls, clock throttling. The baseline without overlap runs the
same chunks with every transfer before (all-gather) or after (reduce-scatter) all compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from smalti.schedule.hardware import H100_SXM, Hardware
from smalti.schedule.problem import (
    ALL_GATHER_MATMUL,
    MAX_TILE_N,
    PARTIAL_BYTES,
    ROW_QUANTUM,
    CollectiveMatmulProblem,
    check_offsets,
    chunk_choices,
    named_orders,
    offsets_table,
    order_name,
    order_table,
    table_offsets,
)

# What bounds a step (the largest of its costs).
TENSOR_CORES = "tensor cores"
LINK = "link bandwidth"
LATENCY = "copy latency"
SEMAPHORE = "semaphore wait"
LOCAL = "local memory"


@dataclass(frozen=True)
class Step:
    """One step of the slowest device: which peer, its time, and what bounded it."""

    index: int
    peer: int  # all-gather: the source shard; reduce-scatter: the block computed
    chunks: int
    time_s: float
    bound: str
    readers: int  # devices reading this peer's link in this step (all-gather; 1 otherwise)


@dataclass(frozen=True)
class Breakdown:
    """The slowest device's time by term (sums over its chunks)."""

    compute_s: float  # tensor cores
    link_s: float  # NVLink transfers, latency included
    local_s: float  # local TMA copies, latency included
    semaphore_s: float  # semaphore waits
    overhead_s: float  # per-step overheads
    exposed_s: float  # predicted time not spent computing: communication not hidden


@dataclass(frozen=True)
class Candidate:
    """One schedule (chunk size and peer order) and its predicted times."""

    chunk_rows: int
    order: str  # a named order, or "offsets" for hand-written source_offsets
    source_offsets: tuple[int, ...] | None  # step s visits (me + offsets[s]) % devices
    sources: tuple[tuple[int, ...], ...]  # per device, the peer of each step
    predicted_s: float
    no_overlap_s: float
    slowest_device: int
    breakdown: Breakdown
    steps: tuple[Step, ...]
    tail_s: float  # reduce-scatter: pulls still running after the last compute step

    @property
    def speedup(self) -> float:
        """How many times faster than the same schedule without overlap."""
        return self.no_overlap_s / self.predicted_s

    def label(self) -> str:
        """`chunk_rows=..., order=...` for reports."""
        offsets = "" if self.source_offsets is None else \
            f" (source_offsets {', '.join(map(str, self.source_offsets))})"
        return f"chunk_rows={self.chunk_rows}, order={self.order}{offsets}"


@dataclass(frozen=True)
class CollectiveSchedule:
    """The model's answer: the choice, and every candidate it evaluated, best first."""

    problem: CollectiveMatmulProblem
    hardware: Hardware
    choice: Candidate
    candidates: tuple[Candidate, ...]
    given: bool  # the choice was given (checked), not searched

    @property
    def chunk_rows(self) -> int:
        return self.choice.chunk_rows

    @property
    def source_offsets(self) -> tuple[int, ...] | None:
        return self.choice.source_offsets

    @property
    def order(self) -> str:
        return self.choice.order

    @property
    def predicted_s(self) -> float:
        return self.choice.predicted_s

    @property
    def no_overlap_s(self) -> float:
        return self.choice.no_overlap_s


def plan_collective_matmul(problem: CollectiveMatmulProblem, hardware: Hardware = H100_SXM,
                           *, chunk_rows: int | None = None,
                           source_offsets: tuple[int, ...] | None = None,
                           order: str | None = None) -> CollectiveSchedule:
    """Evaluate the given chunk size / order, searching whatever is not given (ties: the
    order listed first, then bigger chunks)."""
    hardware.flops_per_s(problem.dtype)  # an unknown rate fails here, not mid-search
    if chunk_rows is not None and (isinstance(chunk_rows, bool)
                                   or not isinstance(chunk_rows, int)
                                   or chunk_rows not in chunk_choices(problem)):
        raise ValueError(f"chunk_rows {chunk_rows!r} must be a multiple of {ROW_QUANTUM} "
                         f"that divides m = {problem.m}")
    tables = _tables(problem, source_offsets, order)
    chunks = chunk_choices(problem) if chunk_rows is None else (chunk_rows,)
    rank = {name: i for i, (name, _) in enumerate(tables)}
    candidates = sorted(
        (evaluate(problem, hardware, rows, name, table)
         for name, table in tables for rows in chunks),
        key=lambda c: (round(c.predicted_s * 1e12), rank[c.order], -c.chunk_rows))
    given = chunk_rows is not None and (source_offsets is not None or order is not None)
    return CollectiveSchedule(problem, hardware, candidates[0], tuple(candidates), given)


def _tables(problem: CollectiveMatmulProblem, source_offsets: tuple[int, ...] | None,
            order: str | None) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """The (name, per-device sources) orders to evaluate."""
    if source_offsets is not None:
        offsets = tuple(source_offsets)
        check_offsets(problem, offsets)
        table = offsets_table(offsets, problem.devices)
        name = order_name(problem, table)
        if order is not None and order != name:
            raise ValueError(f"order {order!r} does not visit peers in the source_offsets "
                             f"{list(offsets)} (those are order {name!r})")
        return [(name, table)]
    if order is not None:
        table = order_table(order, problem.kind, problem.devices)
        return [(order_name(problem, table), table)]
    return [(name, order_table(name, problem.kind, problem.devices))
            for name in named_orders(problem)]


@dataclass(frozen=True)
class _Chunk:
    """One chunk of one device: what bringing it in costs, and computing it."""

    step: int
    fetch: dict[str, float]  # cost terms of its fetch: LINK and LATENCY, or LOCAL
    compute_s: float
    ready_s: float = 0.0  # when the peer's semaphore signal has landed (0: no wait)

    def fetch_terms(self, issue_s: float) -> dict[str, float]:
        """The fetch's terms when issued at `issue_s`: waiting for the signal first."""
        wait = max(0.0, self.ready_s - issue_s)
        return {SEMAPHORE: wait, **self.fetch} if wait > 0 else self.fetch


def evaluate(problem: CollectiveMatmulProblem, hardware: Hardware, chunk_rows: int,
             order: str, sources: tuple[tuple[int, ...], ...]) -> Candidate:
    """Predict one schedule on every device; the slowest device sets the time."""
    per_device = [_device(problem, hardware, chunk_rows, sources, me)
                  for me in range(problem.devices)]
    if problem.kind != ALL_GATHER_MATMUL:
        per_device = _with_pulls(problem, hardware, chunk_rows, sources, per_device)
    slowest = max(range(problem.devices), key=lambda me: (per_device[me].total_s, -me))
    timeline = per_device[slowest]
    compute = sum(c.compute_s for c in timeline.chunks)
    overhead = hardware.step_overhead_s * len(timeline.chunks)
    fetches = timeline.fetches
    breakdown = Breakdown(
        compute_s=compute,
        link_s=sum(f.get(LINK, 0.0) + f.get(LATENCY, 0.0) for f in fetches) + timeline.pull_s,
        local_s=sum(f.get(LOCAL, 0.0) for f in fetches),
        semaphore_s=sum(f.get(SEMAPHORE, 0.0) for f in fetches)
        + (0.0 if problem.kind == ALL_GATHER_MATMUL
           else hardware.semaphore_s * (problem.devices - 1)),  # before each pull
        overhead_s=overhead,
        exposed_s=max(0.0, timeline.total_s - compute - overhead))
    return Candidate(
        chunk_rows=chunk_rows, order=order, source_offsets=table_offsets(sources),
        sources=sources, predicted_s=timeline.total_s,
        no_overlap_s=max(t.no_overlap_s for t in per_device), slowest_device=slowest,
        breakdown=breakdown, steps=_steps(timeline, sources[slowest], chunk_rows, problem),
        tail_s=timeline.tail_s)


@dataclass(frozen=True)
class _Timeline:
    """One device's pipeline: its chunks, when each step ends, and its totals."""

    chunks: tuple[_Chunk, ...]
    fetches: tuple[dict[str, float], ...]  # each chunk's fetch terms as issued
    step_times: tuple[float, ...]  # time spent in each chunk-step (the fill counts in step 0)
    bounds: tuple[str, ...]  # what bounded each chunk-step
    readers: tuple[int, ...]  # per step: devices reading the step's peer at once
    compute_end_s: float
    step_ends: tuple[float, ...]  # per step (not chunk): when its last chunk is done
    total_s: float
    no_overlap_s: float
    pull_s: float = 0.0
    tail_s: float = 0.0


def _device(problem: CollectiveMatmulProblem, hardware: Hardware, chunk_rows: int,
            sources: tuple[tuple[int, ...], ...], me: int) -> _Timeline:
    """The compute pipeline of device `me` (all-gather fetches included)."""
    per_source = problem.m // chunk_rows
    compute_s = _compute_s(problem, hardware, chunk_rows)
    chunk_bytes = chunk_rows * problem.a_row_bytes()
    readers = tuple(_readers(problem, sources, me, s) for s in range(problem.devices))
    chunks = []
    for s, peer in enumerate(sources[me]):
        for c in range(per_source):
            remote = problem.kind == ALL_GATHER_MATMUL and peer != me
            if remote:  # the peer signalled at its start; the signal lands semaphore_s later
                chunks.append(_Chunk(s, _remote_fetch(problem, hardware, chunk_bytes,
                                                      readers[s]), compute_s,
                                     hardware.semaphore_s if c == 0 else 0.0))
            else:
                chunks.append(_Chunk(s, _local_fetch(problem, hardware, chunk_bytes),
                                     compute_s))
    return _pipeline(problem, hardware, tuple(chunks), readers)


def _pipeline(problem: CollectiveMatmulProblem, hardware: Hardware,
              chunks: tuple[_Chunk, ...], readers: tuple[int, ...]) -> _Timeline:
    """Double buffering: fill, then per chunk max(compute it, fetch the next) + overhead."""
    fetches = [chunks[0].fetch_terms(0.0)]
    times, bounds = [], []
    now = sum(fetches[0].values())
    ends = [0.0] * problem.devices
    for i, chunk in enumerate(chunks):
        fetch = 0.0
        if i + 1 < len(chunks):
            fetches.append(chunks[i + 1].fetch_terms(now))
            fetch = sum(fetches[-1].values())
        step = max(chunk.compute_s, fetch) + hardware.step_overhead_s
        times.append(step + (sum(fetches[0].values()) if i == 0 else 0.0))
        bounds.append(TENSOR_CORES if chunk.compute_s >= fetch
                      else max(fetches[-1], key=fetches[-1].__getitem__))
        now += step
        ends[chunk.step] = now
    serial = 0.0  # without overlap: every fetch first, then every chunk's compute
    for chunk in chunks:
        serial += sum(chunk.fetch_terms(serial).values())
    serial += sum(c.compute_s + hardware.step_overhead_s for c in chunks)
    return _Timeline(chunks, tuple(fetches), tuple(times), tuple(bounds), readers, now,
                     tuple(ends), now, serial)


def _compute_s(problem: CollectiveMatmulProblem, hardware: Hardware, rows: int) -> float:
    """Tensor-core time of one chunk: waves of 64 x (<= 256) tiles over the CTAs."""
    col_tiles = -(-problem.n // MAX_TILE_N)
    tiles = (rows // ROW_QUANTUM) * col_tiles
    waves = -(-tiles // min(problem.ctas, hardware.sms))
    per_sm = hardware.flops_per_s(problem.dtype) / hardware.sms
    return waves * 2 * ROW_QUANTUM * (problem.n / col_tiles) * problem.k / per_sm


def _copy_rate(problem: CollectiveMatmulProblem, hardware: Hardware) -> float:
    """What the device's CTAs can copy into shared memory per second."""
    return min(problem.ctas, hardware.sms) * hardware.sm_copy_bytes_per_s


def _local_fetch(problem: CollectiveMatmulProblem, hardware: Hardware,
                 size: float) -> dict[str, float]:
    rate = min(hardware.hbm_bytes_per_s, _copy_rate(problem, hardware))
    return {LOCAL: hardware.local_latency_s + size / rate}


def _remote_fetch(problem: CollectiveMatmulProblem, hardware: Hardware, size: float,
                  readers: int) -> dict[str, float]:
    rate = min(hardware.nvlink_bytes_per_s / readers, _copy_rate(problem, hardware))
    return {LATENCY: hardware.remote_latency_s, LINK: size / rate}


def _readers(problem: CollectiveMatmulProblem, sources: tuple[tuple[int, ...], ...],
             me: int, step: int) -> int:
    """Devices that read step `step`'s peer of `me` over its link in that step."""
    peer = sources[me][step]
    if problem.kind != ALL_GATHER_MATMUL or peer == me:
        return 1
    return sum(1 for other in range(problem.devices)
               if other != peer and sources[other][step] == peer)


def _with_pulls(problem: CollectiveMatmulProblem, hardware: Hardware, chunk_rows: int,
                sources: tuple[tuple[int, ...], ...], timelines: list[_Timeline]
                ) -> list[_Timeline]:
    """Reduce-scatter: each device pulls its block's partials from the peers once they are
    signalled; pulls queue on its incoming link."""
    chunk_bytes = chunk_rows * problem.n * PARTIAL_BYTES
    rate = min(hardware.nvlink_bytes_per_s, _copy_rate(problem, hardware))
    pull_s = (problem.m // chunk_rows) * (hardware.remote_latency_s + chunk_bytes / rate)
    result = []
    for me, timeline in enumerate(timelines):
        ready = sorted((timelines[p].step_ends[sources[p].index(me)] + hardware.semaphore_s, p)
                       for p in range(problem.devices) if p != me)
        link_free = 0.0
        for at, _ in ready:
            link_free = max(link_free, at) + pull_s
        total = max(timeline.compute_end_s, link_free)
        pulls = pull_s * len(ready)
        no_overlap = timeline.no_overlap_s + (hardware.semaphore_s + pulls if ready else 0.0)
        result.append(_Timeline(
            timeline.chunks, timeline.fetches, timeline.step_times, timeline.bounds,
            timeline.readers, timeline.compute_end_s, timeline.step_ends, total, no_overlap,
            pulls, total - timeline.compute_end_s))
    return result


def _steps(timeline: _Timeline, peers: tuple[int, ...], chunk_rows: int,
           problem: CollectiveMatmulProblem) -> tuple[Step, ...]:
    """Per step of the slowest device: its time and its most frequent bound."""
    per_source = problem.m // chunk_rows
    steps = []
    for s, peer in enumerate(peers):
        window = slice(s * per_source, (s + 1) * per_source)
        spans = timeline.step_times[window]
        bounds = timeline.bounds[window]
        weight: dict[str, float] = {}
        for span, bound in zip(spans, bounds, strict=True):
            weight[bound] = weight.get(bound, 0.0) + span
        steps.append(Step(s, peer, per_source, math.fsum(spans),
                          max(weight, key=weight.__getitem__), timeline.readers[s]))
    return tuple(steps)
