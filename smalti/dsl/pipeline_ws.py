"""Warp-specialised pipelines: `sd.emit_pipeline_warp_specialized(body, grid=..., in_specs=...)`.

In a kernel of 1 + C warpgroups, warpgroup 0 (the producer, with few registers) issues every
step's TMA loads into a ring of `max_concurrent_steps` stages, and warpgroups 1..C (the
consumers, with many) run `body` on each step's blocks. Stage s has a "full" mbarrier (the
producer announces its bytes, TMA completes them) and an "empty" one (every consumer thread
arrives once its body is done with the stage). Round r = step // stages uses phase r of
every barrier: consumers wait on full[s] with parity r, the producer on empty[s] with parity
r + 1 (which a fresh barrier passes at once). `split` gives each consumer its own part of
a block (its rows of A); an unsplit block is read by all of them. With `tiles=T` the
pipeline is persistent: it runs its grid once per tile t < T (index maps and body get
(t, *step)), the carry restarting at init_carry() and ending in `epilogue(consumer, carry,
t)` for each tile, while the ring and its barrier phases run on across tiles (the producer
loads the next tile's first blocks while the consumers finish this one).

    sd.emit_pipeline_warp_specialized(
        lambda indices, a, b, acc: sd.wgmma(acc, a, b), grid=(k_tiles,),
        in_specs=[sd.BlockSpec((128, 64), lambda k: (m, k)),
                  sd.BlockSpec((64, 256), lambda k: (k, n))],
        split=(0, None), init_carry=lambda: sd.zeros((64, 256), jnp.float32),
        epilogue=store_my_rows)(a_ref, b_ref)
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dsl.control import Carry, fori
from smalti.dsl.index import Index, IndexLike, as_index
from smalti.dsl.locations import SourcePosition, user_error, user_position
from smalti.dsl.pipeline import (
    Operand,
    StepFn,
    bind_operands,
    block_bytes,
    check_arguments,
    check_budget,
    for_each_step,
    unravel,
)
from smalti.dsl.pipeline_schedule import StepWork, record_pipeline, work_after
from smalti.dsl.refs import Ref
from smalti.dsl.regions import warpgroup_region
from smalti.dsl.smem import SMEM, Barriers
from smalti.dsl.smem_refs import BarrierArray, StagedRef, scoped_smem
from smalti.dsl.specs import BlockSpec
from smalti.dsl.tma import async_copy
from smalti.dsl.trace import active
from smalti.schedule import PipelineProblem, plan_pipeline

WARPGROUP_THREADS = 128


@dataclass(frozen=True)
class _Ring:
    """One input's stage rings: one per consumer when its block is split along `dim`, else
    one that every consumer reads."""

    operand: Operand
    rings: tuple[StagedRef, ...]
    dim: int | None

    def ring_of(self, consumer: int) -> StagedRef:
        return self.rings[consumer if self.dim is not None else 0]

    def copy(self, indices: tuple[Index, ...], stage: IndexLike, barrier: object) -> None:
        """The TMA loads of this input's block (or of each consumer's part of it)."""
        for k, ring in enumerate(self.rings):
            part = None if self.dim is None else (self.dim, k, len(self.rings))
            async_copy(self.operand.window(indices, part), ring[stage], barrier)


@dataclass(frozen=True)
class WarpSpecializedPipeline:
    """What `emit_pipeline_warp_specialized` returns: call it, at the top level of the kernel
    body, with the global refs of the in_specs; it traces the producer's and the consumers'
    warpgroup_regions (so the body may hold only more regions after it)."""

    body: Callable[..., Carry]
    grid: tuple[IndexLike, ...]
    in_specs: tuple[BlockSpec, ...]
    split: tuple[int | None, ...]
    max_concurrent_steps: int
    memory_registers: int
    compute_registers: int
    init_carry: Callable[[], Carry] | None
    epilogue: Callable[..., None] | None
    tiles: IndexLike | None = None  # persistent: the grid runs once per tile
    where: SourcePosition | None = None  # the call that made it, for the schedule record

    @property
    def step_dims(self) -> int:
        """How many indices index maps and the body get: the grid's, and the tile's."""
        return len(self.grid) + (self.tiles is not None)

    def __call__(self, *refs: Ref) -> None:
        consumers = active().warpgroups - 1
        if consumers < 1:
            raise user_error(ValueError, "emit_pipeline_warp_specialized needs a kernel of a "
                                         "producer and one or more consumer warpgroups "
                                         "(@sd.kernel(..., warpgroups=3))")
        ins, _ = bind_operands(refs, self.in_specs, (), self.step_dims)
        for operand in ins:
            if operand.spec.squeezes:
                raise user_error(ValueError, f"{operand.label}: squeezed dims (None in "
                                             "block_shape) are for emit_pipeline; give "
                                             "emit_pipeline_warp_specialized whole blocks")
        entries, owners = [], []
        for operand, dim in zip(ins, self.split, strict=True):
            shape = _part_shape(operand, dim, consumers)
            count = consumers if dim is not None else 1
            entries += [SMEM((self.max_concurrent_steps, *shape), operand.ref.dtype)] * count
            owners += [operand] * count
        stages = self.max_concurrent_steps
        entries += [Barriers(stages), Barriers(stages, consumers * WARPGROUP_THREADS)]
        check_budget("emit_pipeline_warp_specialized", entries, owners, stages)
        names = [f"{o.label} block" for o in owners] + ["full barriers", "empty barriers"]
        other_smem = active().smem.top
        block = ir.InsertionPoint.current.block
        with scoped_smem(*entries, names=names) as smem:
            *staged, full, empty = smem
            rings, k = [], 0
            for operand, dim in zip(ins, self.split, strict=True):
                count = consumers if dim is not None else 1
                rings.append(_Ring(operand, tuple(staged[k:k + count]), dim))
                k += count
            before, calls = len(block.operations), [0]

            def counted(*args: object) -> Carry:
                calls[0] += 1
                return self.body(*args)

            dataclasses.replace(self, body=counted)._trace(rings, full, empty, consumers)
            work = work_after(block, before, calls[0], consumers)
        self._record(ins, work, other_smem)

    def _record(self, ins: list, work: StepWork, other_smem: int) -> None:
        """The given stage count, checked by the pipeline model, in `smalti.schedule`."""
        sizes = [as_index(g, "a pipeline grid size").static for g in self.grid]
        problem = PipelineProblem(
            step_bytes=sum(block_bytes(o) for o in ins),
            flops_per_step=work.flops, dtype=work.dtype, other_smem_bytes=other_smem,
            steps=None if None in sizes else math.prod(sizes), warp_specialized=True)
        record_pipeline(plan_pipeline(problem, stages=self.max_concurrent_steps),
                        "emit_pipeline_warp_specialized", str(self.where))

    def _trace(self, rings: list[_Ring], full: BarrierArray, empty: BarrierArray,
               consumers: int) -> None:
        grid = tuple(as_index(g, "a pipeline grid size") for g in self.grid)
        steps = math.prod(grid, start=Index((), 1))
        stages = self.max_concurrent_steps
        stage_bytes = sum(r.stages[0].nbytes for ring in rings for r in ring.rings)
        # The producer walks every tile's steps as one grid: (tile, *grid) when persistent.
        walk = grid if self.tiles is None else (as_index(self.tiles, "a tile count"), *grid)

        def produce(i: Index, stage: IndexLike, round_: IndexLike, _: Carry) -> None:
            empty[stage].wait(round_ + 1)  # the consumers are done with the stage
            full[stage].arrive_expect_tx(stage_bytes)
            indices = unravel(i, walk)
            for ring in rings:
                ring.copy(indices, stage, full[stage])

        @warpgroup_region(warpgroups=0, registers=self.memory_registers)
        def _producer() -> None:
            for_each_step(math.prod(walk, start=Index((), 1)), stages, produce, None)

        for consumer in range(consumers):
            self._consumer(consumer, rings, full, empty, steps, grid)

    def _consumer(self, consumer: int, rings: list[_Ring], full: BarrierArray,
                  empty: BarrierArray, steps: Index, grid: tuple[Index, ...]) -> None:
        stages = self.max_concurrent_steps

        def consuming(tile: Index | None) -> StepFn:
            def consume(i: Index, stage: IndexLike, round_: IndexLike, carry: Carry) -> Carry:
                full[stage].wait(round_)
                blocks = [ring.ring_of(consumer)[stage] for ring in rings]
                indices = unravel(i if tile is None else i - tile * steps, grid)
                indices = indices if tile is None else (tile, *indices)
                args = [indices, *blocks] + ([carry] if self.init_carry else [])
                result = self.body(*args)
                empty[stage].arrive()  # the body is done with the stage: the producer refills
                return result if self.init_carry else None
            return consume

        def one_tile(tile: Index, _: Carry = None) -> None:
            carry = _steps_from(tile, steps, stages, consuming(tile),
                                self.init_carry() if self.init_carry else None)
            if self.epilogue is not None:
                self.epilogue(consumer, carry, tile)

        @warpgroup_region(warpgroups=1 + consumer, registers=self.compute_registers)
        def _compute() -> None:
            if self.tiles is not None:
                fori(0, self.tiles, one_tile)
                return
            carry = for_each_step(steps, stages, consuming(None),
                                  self.init_carry() if self.init_carry else None)
            if self.epilogue is not None:
                self.epilogue(consumer, carry)


def _steps_from(tile: Index, steps: Index, stages: int, step: StepFn, carry: Carry) -> Carry:
    """for_each_step over tile `tile`'s steps, tile * steps .. (tile + 1) * steps - 1, with
    the stage and round of each global step (static stages when `steps` fills whole rounds,
    as every tile then starts at stage 0)."""
    if steps.static is not None and steps.static % stages == 0:
        base, rounds = tile * steps.static, tile * (steps.static // stages)
        return for_each_step(steps, stages,
                             lambda i, s, r, c: step(base + i, s, rounds + r, c), carry)
    first = tile * steps
    return fori(first, first + steps, lambda i, c: step(i, i % stages, i // stages, c), carry)


def _part_shape(operand: Operand, dim: int | None, consumers: int) -> tuple[int, ...]:
    """The block shape each consumer reads (its part along `dim`, or all of it)."""
    shape = list(operand.spec.block_shape)
    if dim is None:
        return tuple(shape)
    if not 0 <= dim < len(shape) or shape[dim] % consumers:
        raise user_error(ValueError, f"{operand.label}: split along dim {dim} does not divide "
                                     f"block shape {tuple(shape)} among {consumers} consumer "
                                     "warpgroups")
    shape[dim] //= consumers
    return tuple(shape)


def emit_pipeline_warp_specialized(
        body: Callable[..., Carry], *, grid: IndexLike | Sequence[IndexLike],
        in_specs: Sequence[BlockSpec], split: Sequence[int | None] | None = None,
        max_concurrent_steps: int = 2, memory_registers: int = 40,
        compute_registers: int = 232, init_carry: Callable[[], Carry] | None = None,
        epilogue: Callable[..., None] | None = None, tiles: IndexLike | None = None
        ) -> WarpSpecializedPipeline:
    """A pipeline over `grid` whose loads a producer warpgroup (0, `memory_registers`)
    issues and whose `body(indices, *in_blocks[, carry])` every consumer warpgroup (1..C,
    `compute_registers`) runs on each step. `split[k]` (a dim, or None) splits in_specs[k]'s
    block evenly among the consumers; `init_carry()` is traced in each consumer's region,
    and `epilogue(consumer, carry)` after its last step (consumer = 0..C-1). `tiles` (a
    count, static or traced) makes it persistent: the grid once per tile t, index maps and
    body getting (t, *step), `epilogue(consumer, carry, t)` after each tile."""
    if max_concurrent_steps is None:
        raise user_error(ValueError, "emit_pipeline_warp_specialized needs max_concurrent_steps "
                                     "(the scheduling model chooses it for emit_pipeline only)")
    grid = check_arguments("emit_pipeline_warp_specialized", body, grid,
                           (("in_specs", in_specs),), max_concurrent_steps)
    split = tuple(split) if split is not None else (None,) * len(in_specs)
    if len(split) != len(in_specs) or not all(
            d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in split):
        raise user_error(TypeError, "emit_pipeline_warp_specialized's split must give a dim "
                                    f"(or None) per in_spec, got {split!r}")
    for name, value in (("init_carry", init_carry), ("epilogue", epilogue)):
        if value is not None and not callable(value):
            raise user_error(TypeError, f"emit_pipeline_warp_specialized's {name} must be "
                                        f"callable (traced in each consumer), got {value!r}")
    try:
        inspect.signature(body).bind(*range(1 + len(in_specs) + (init_carry is not None)))
    except TypeError:
        carry = ", carry" if init_carry is not None else ""
        raise user_error(TypeError, f"emit_pipeline_warp_specialized's body must take "
                                    f"(indices, {len(in_specs)} blocks{carry}); its signature "
                                    f"is {inspect.signature(body)}") from None
    if tiles is not None:
        as_index(tiles, "emit_pipeline_warp_specialized's tiles (a tile count)")
    return WarpSpecializedPipeline(body, grid, tuple(in_specs), split, max_concurrent_steps,
                                   memory_registers, compute_registers, init_carry, epilogue,
                                   tiles, user_position())
