"""Software pipelines: `sd.emit_pipeline(body, grid=..., in_specs=[...], out_specs=[...])`.

The user writes one step of a sequential loop over `grid` as `body(indices, *in_blocks,
*out_blocks[, carry])` over shared-memory blocks; the pipeline allocates a ring of
`max_concurrent_steps` buffers per input (scoped shared memory, freed when it returns),
issues each step's TMA loads that many steps ahead, waits on each stage's mbarrier with the
parity of its round, and TMA-stores an output block when its index changes and after the
last step:

    def step(indices, a_block, b_block, acc):
        return sd.wgmma(acc, a_block, b_block)

    acc = sd.emit_pipeline(step, grid=(k_tiles,),
                           in_specs=[sd.BlockSpec((128, 64), lambda k: (m, k)),
                                     sd.BlockSpec((64, 128), lambda k: (k, n))],
                           max_concurrent_steps=2, init_carry=acc)(a_ref, b_ref)

The loop is traced once (an scf.for over rounds of `max_concurrent_steps` steps, each step of
a round with its own static stage), whether the step count is static or traced. Without
`max_concurrent_steps` the scheduling model chooses it (smalti/dsl/pipeline_schedule.py:
the body is traced once more into a throwaway op to measure a step's wgmma work); either
way the choice is recorded in the kernel's `smalti.schedule` attribute.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dialect.ops_memory import MAX_SMEM_BYTES
from smalti.dsl.control import Carry, fori, when
from smalti.dsl.dtypes import memory_bytes
from smalti.dsl.index import Index, IndexLike, Predicate, as_index
from smalti.dsl.locations import SourcePosition, user_error, user_position
from smalti.dsl.ops import maximum, minimum
from smalti.dsl.pipeline_schedule import probe_step_work, record_pipeline
from smalti.dsl.refs import Ref, RefView
from smalti.dsl.smem import SMEM, Barriers, SmemArray, plan_smem
from smalti.dsl.smem_refs import BarrierArray, SharedRef, StagedRef, scoped_smem
from smalti.dsl.specs import BlockSpec
from smalti.dsl.tma import async_copy, async_store, async_store_wait
from smalti.dsl.trace import active, emit_value
from smalti.schedule import PipelineProblem, PipelineSchedule, plan_pipeline

Condition = bool | Predicate


@dataclass(frozen=True)
class Operand:
    """A BlockSpec bound to the global ref it pipelines, and how messages call it."""

    spec: BlockSpec
    ref: Ref
    label: str

    def block_index(self, indices: tuple[Index, ...]) -> tuple[Index, ...]:
        result = self.spec.index_map(*indices)
        result = tuple(result) if isinstance(result, tuple | list) else (result,)
        if len(result) != self.ref.ndim:
            raise user_error(ValueError, f"{self.label}: index_map returns {len(result)} "
                                         f"block indices for the {self.ref.ndim}-D "
                                         f"{self.ref.name}")
        return tuple(as_index(i, f"a block index of {self.label}") for i in result)

    def window(self, indices: tuple[Index, ...], part: tuple[int, int, int] | None = None
               ) -> RefView:
        """The window of the ref that step `indices` reads or writes; with `part` = (dim,
        k, parts), the k-th of `parts` equal pieces of it along dim."""
        block = [1 if s is None else s for s in self.spec.block_shape]
        starts = [i * size for i, size in zip(self.block_index(indices), block, strict=True)]
        if part is not None:
            dim, k, parts = part
            block[dim] //= parts
            starts[dim] = starts[dim] + k * block[dim]
        return self.ref.at[tuple(s if squeezed is None else slice(s, s + size)
                                 for s, size, squeezed in
                                 zip(starts, block, self.spec.block_shape, strict=True))]


@dataclass(frozen=True)
class Pipeline:
    """What `emit_pipeline` returns: call it with the global refs of the in_specs then the
    out_specs to emit the pipeline at that point of the kernel body; it returns the final
    carry (None without `init_carry`)."""

    body: Callable[..., Carry]
    grid: tuple[IndexLike, ...]
    in_specs: tuple[BlockSpec, ...]
    out_specs: tuple[BlockSpec, ...]
    max_concurrent_steps: int | None  # None: the scheduling model chooses
    init_carry: Carry
    where: SourcePosition | None = None  # the emit_pipeline call, for the schedule record
    last_step: Callable[..., Carry] | None = None  # the final step's body, if it differs

    def __call__(self, *refs: Ref) -> Carry:
        ins, outs = bind_operands(refs, self.in_specs, self.out_specs, len(self.grid))
        self._check_body(len(ins) + len(outs))
        if self.max_concurrent_steps is not None:  # an explicit count must fit: say so first
            check_budget("emit_pipeline", _entries(ins, outs, self.max_concurrent_steps),
                         ins + outs, self.max_concurrent_steps)
        if not ins:  # nothing to load: no ring to schedule
            return self._emit(ins, outs, self.max_concurrent_steps or 1)
        return self._emit(ins, outs, self._schedule(ins, outs).stages)

    def _schedule(self, ins: list[Operand], outs: list[Operand]) -> PipelineSchedule:
        """The stage count: the model's choice (shrunk until the ring's actual layout fits),
        or the given one checked; recorded in the kernel's `smalti.schedule`."""
        calls = [0]

        def counting(body: Callable[..., Carry] | None) -> Callable[..., Carry] | None:
            def counted(*args: object) -> Carry:
                calls[0] += 1
                return body(*args)  # type: ignore[misc]
            return None if body is None else counted

        probe = dataclasses.replace(self, body=counting(self.body),
                                    last_step=counting(self.last_step))

        def trace_once() -> int:
            probe._emit(ins, outs, 1)
            return calls[0]

        work = probe_step_work(trace_once)
        out_bytes = sum(block_bytes(o) for o in outs)
        sizes = [as_index(g, "a pipeline grid size").static for g in self.grid]
        steps = None if None in sizes else math.prod(sizes)
        problem = PipelineProblem(
            step_bytes=sum(block_bytes(o) for o in ins), flops_per_step=work.flops,
            dtype=work.dtype, other_smem_bytes=active().smem.top + out_bytes, steps=steps,
            epilogue_bytes=out_bytes)
        schedule = plan_pipeline(problem, stages=self.max_concurrent_steps)
        while not schedule.given and schedule.stages > 1 and not _fits(
                _entries(ins, outs, schedule.stages)):
            schedule = dataclasses.replace(schedule, stages=schedule.stages - 1)
        record_pipeline(schedule, "emit_pipeline", str(self.where))
        return schedule

    def _emit(self, ins: list[Operand], outs: list[Operand], stages: int) -> Carry:
        """The pipeline with `stages` buffers per input, traced at the insertion point."""
        entries = _entries(ins, outs, stages)
        check_budget("emit_pipeline", entries, ins + outs, stages)
        names = [f"{o.label} block" for o in ins + outs] + ["pipeline barriers"] * bool(ins)
        with scoped_smem(*entries, names=names) as smem:
            staged = [_with_transforms(ref, o.spec) for ref, o in zip(smem, ins, strict=False)]
            buffers = [_with_transforms(ref, o.spec)
                       for ref, o in zip(smem[len(ins):], outs, strict=False)]
            bars = smem[-1] if ins else None
            emitter = _Emitter(self, ins, outs, staged, buffers, bars,  # type: ignore[arg-type]
                               stages)
            return emitter.run()

    def _check_body(self, blocks: int) -> None:
        carry = self.init_carry is not None
        for what, body in (("body", self.body), ("last_step", self.last_step)):
            if body is None:
                continue
            try:
                inspect.signature(body).bind(*range(1 + blocks + carry))
            except TypeError:
                wanted = "indices, " + ", ".join(
                    [f"in{k}" for k in range(len(self.in_specs))] +
                    [f"out{k}" for k in range(len(self.out_specs))] + ["carry"] * carry)
                raise user_error(TypeError, f"emit_pipeline's {what} {body.__name__} must "
                                            f"take ({wanted}); its signature is "
                                            f"{inspect.signature(body)}") from None


def _entries(ins: list[Operand], outs: list[Operand], stages: int) -> list:
    """The pipeline's scoped shared memory: a ring per input, a buffer per output, and a
    barrier per stage."""
    entries = [SMEM((stages, *o.spec.buffer_shape), o.ref.dtype) for o in ins]
    entries += [SMEM(o.spec.buffer_shape, o.ref.dtype) for o in outs]
    return entries + ([Barriers(stages)] if ins else [])


def block_bytes(operand: Operand) -> int:
    """Bytes of one block in memory (4-bit elements two per byte)."""
    return int(math.prod(operand.spec.buffer_shape) * memory_bytes(operand.ref.dtype))


def _fits(entries: list) -> bool:
    """Whether `entries` fit above the shared memory in use."""
    info = active()
    try:
        plan_smem(entries, info.name, info.smem.top)
    except ValueError:
        return False
    return True


def bind_operands(refs: Sequence[object], in_specs: Sequence[BlockSpec],
                  out_specs: Sequence[BlockSpec], grid_rank: int
                  ) -> tuple[list[Operand], list[Operand]]:
    """Pair the refs with their specs: global refs of the blocks' rank (edge blocks may hang
    over an array's end: TMA loads fill the outside with zeros and stores clip it), and
    index maps that take one index per grid dim."""
    specs = [*in_specs, *out_specs]
    if len(refs) != len(specs):
        raise user_error(TypeError, f"the pipeline has {len(in_specs)} in_specs and "
                                    f"{len(out_specs)} out_specs, so it takes "
                                    f"{len(specs)} global refs; got {len(refs)}")
    operands = []
    for k, (spec, ref) in enumerate(zip(specs, refs, strict=True)):
        kind, index = ("in_specs", k) if k < len(in_specs) else (
            "out_specs", k - len(in_specs))
        if not isinstance(ref, Ref) or ref.is_smem:
            raise user_error(TypeError, f"{kind}[{index}] pipelines a global ref (a "
                                        f"kernel argument), got {ref!r}")
        label = f"{kind}[{index}] ({ref.name}, {spec!r})"
        shape, block = ref.shape, spec.block_shape
        if len(shape) != len(block):
            raise user_error(ValueError, f"{label}: block shape {block} has {len(block)} dims, "
                                         f"{ref.name}'s shape {shape} has {len(shape)}")
        try:
            inspect.signature(spec.index_map).bind(*range(grid_rank))
        except TypeError:
            raise user_error(TypeError, f"{label}: index_map must take {grid_rank} "
                                        f"step indices (one per grid dim), its signature "
                                        f"is {inspect.signature(spec.index_map)}"
                             ) from None
        operands.append(Operand(spec, ref, label))
    return operands[:len(in_specs)], operands[len(in_specs):]


def _with_transforms(ref: SharedRef | StagedRef, spec: BlockSpec) -> SharedRef | StagedRef:
    """The buffer viewed with the spec's transforms (each stage of a ring alike)."""
    if not spec.transforms:
        return ref
    if isinstance(ref, StagedRef):
        return StagedRef(tuple(s.with_transforms(*spec.transforms) for s in ref.stages),
                         ref.name)
    return ref.with_transforms(*spec.transforms)


def check_budget(what: str, entries: list, operands: list[Operand], stages: int) -> None:
    """A ValueError naming each spec's bytes when `what`'s rings (`entries`, the first ones
    those of `operands`) do not fit in the shared memory left."""
    info = active()
    try:
        plan_smem(entries, info.name, info.smem.top)
    except ValueError:
        parts = [f"{o.label}: {e.shape[0] if len(e.shape) > len(o.spec.buffer_shape) else 1}"
                 f" x {e.stage_stride} B" for o, e in zip(operands, entries, strict=False)
                 if isinstance(e, SmemArray)]
        raise user_error(ValueError, f"{what} with max_concurrent_steps={stages} needs "
                                     f"more shared memory than is left ({info.smem.top} B are "
                                     f"in use of {MAX_SMEM_BYTES} B): {'; '.join(parts)}. "
                                     "Lower max_concurrent_steps or the block shapes"
                                     ) from None


class _Emitter:
    """Traces one pipeline: prologue loads, the loop of steps, the last stores."""

    def __init__(self, pipeline: Pipeline, ins: list[Operand], outs: list[Operand],
                 staged: list[StagedRef], buffers: list[SharedRef],
                 bars: BarrierArray | None, stages: int) -> None:
        self.p = pipeline
        self.ins, self.outs, self.staged, self.buffers, self.bars = (ins, outs, staged,
                                                                     buffers, bars)
        self.stages = stages
        self.grid = tuple(as_index(g, "a pipeline grid size") for g in pipeline.grid)
        self.steps = math.prod(self.grid, start=Index((), 1))
        self.stage_bytes = sum(s.stages[0].nbytes for s in staged)

    def run(self) -> Carry:
        steps, stages = self.steps, self.stages
        for j in range(stages - 1):  # the prologue: the first steps' loads
            self._guarded(less(Index((), j), steps), lambda j=j: self._fetch(Index((), j), j))
        if self.p.last_step is None:
            carry = for_each_step(steps, stages, self._step, self.p.init_carry)
        else:  # every step but the last in the loop, then the last with its own body
            carry = for_each_step(steps - 1, stages, self._step, self.p.init_carry)
            last = steps - 1
            stage = last.static % stages if last.static is not None else last % stages
            carry = self._step(last, stage, last // stages, carry, self.p.last_step)
        if self.outs:
            async_store_wait()  # the last stores have read their buffers
        return carry

    def _step(self, i: Index, stage: IndexLike, parity: IndexLike, carry: Carry,
              body: Callable[..., Carry] | None = None) -> Carry:
        """Step i in `stage`: refill the stage step i - 1 freed with step i + stages - 1, wait
        for step i's blocks, run the body, store the output blocks it completed."""
        stages = self.stages
        if self.ins:
            ahead = i + (stages - 1)
            self._guarded(less(ahead, self.steps),
                          lambda: self._fetch(ahead, (stage + stages - 1) % stages))
            self.bars[stage].wait(parity)
        if any(self._changed(o, i - 1) is not False for o in self.outs):
            async_store_wait()  # the previous block's store has read the buffer
        indices = unravel(i, self.grid)
        blocks = [s[stage] for s in self.staged] + list(self.buffers)
        args = [indices, *blocks] + ([carry] if carry is not None else [])
        result = (body or self.p.body)(*args)
        if carry is None and result is not None:
            raise user_error(TypeError, "emit_pipeline's body must return None without "
                                        "init_carry (give init_carry=... to carry values)")
        last = _equal(i, self.steps - 1) if self.outs else False
        for operand, buffer in zip(self.outs, self.buffers, strict=True):
            self._guarded(_or(last, self._changed(operand, i)),
                          lambda o=operand, b=buffer: async_store(b, o.window(indices)))
        return result if carry is not None else None

    def _fetch(self, step: Index, stage: IndexLike) -> None:
        """Start the TMA loads of `step`'s input blocks into `stage`."""
        barrier = self.bars[stage]
        barrier.arrive_expect_tx(self.stage_bytes)
        indices = unravel(step, self.grid)
        for operand, staged in zip(self.ins, self.staged, strict=True):
            async_copy(operand.window(indices), staged[stage], barrier)

    def _changed(self, operand: Operand, i: Index) -> Condition:
        """Whether the operand's block index differs between steps i and i + 1, both clamped
        to the steps (False past either end): an index map may read a table, which must not
        be read at step -1 or `steps`."""
        now, following = (operand.block_index(unravel(self._clamped(s), self.grid))
                          for s in (i, i + 1))
        result: Condition = False
        for a, b in zip(now, following, strict=True):
            result = _or(result, a != b)
        return result

    def _clamped(self, step: Index) -> Index:
        """`step` within [0, steps - 1] (no op where its bounds already say so)."""
        return minimum(maximum(step, 0), self.steps - 1)

    @staticmethod
    def _guarded(condition: Condition, emit: Callable[[], None]) -> None:
        when(condition)(emit)


StepFn = Callable[[Index, IndexLike, IndexLike, Carry], Carry]


def for_each_step(steps: Index, stages: int, step: StepFn, carry: Carry) -> Carry:
    """Trace `carry = step(i, stage, round, carry)` for i in range(steps), stage = i % stages,
    round = i // stages: an scf.for over whole rounds, each step of a round with its static
    stage; then the steps left over, unrolled with static stages when `steps` is static,
    else a second scf.for choosing the stage at run time."""
    rounds = steps // stages

    def whole_round(r: Index, carry: Carry) -> Carry:
        for s in range(stages):
            carry = step(r * stages + s, s, r, carry)
        return carry

    if rounds.static != 0:
        carry = fori(0, rounds, whole_round, carry)
    if steps.static is not None:
        for t in range(steps.static % stages):
            carry = step(Index((), rounds.static * stages + t), t, rounds, carry)
        return carry
    return fori(rounds * stages, steps, lambda i, c: step(i, i % stages, i // stages, c),
                carry)


def unravel(step: Index, grid: tuple[Index, ...]) -> tuple[Index, ...]:
    """The grid indices of a step (row-major: the last grid dim varies fastest)."""
    indices = []
    for d in reversed(range(len(grid))):
        indices.append(step if d == 0 else step % grid[d])
        step = step // grid[d] if d else step
    return tuple(reversed(indices))


def less(a: Index, b: Index) -> Condition:
    """a < b, decided while tracing when the indices' ranges decide it."""
    known, difference = (a - b).bounds(), (a - b).static
    if difference is not None:
        return difference < 0
    if known is not None:
        if known[1] < 0:
            return True
        if known[0] >= 0:
            return False
    return a < b


def _equal(a: Index, b: Index) -> Condition:
    """a == b, decided while tracing when the indices' ranges decide it."""
    known = (a - b).bounds()
    if known is not None and (known[0] > 0 or known[1] < 0):
        return False
    return a == b


def _or(a: Condition, b: Condition) -> Condition:
    if a is True or b is True:
        return True
    if a is False or b is False:
        return b if a is False else a
    i1 = ir.IntegerType.get_signless(1)
    return Predicate(emit_value(arith.OrIOp, [a.value, b.value], i1))  # type: ignore[union-attr]


def check_arguments(what: str, body: object, grid: object,
                    specs: Sequence[tuple[str, Sequence[object]]], stages: object
                    ) -> tuple[IndexLike, ...]:
    """The grid as a tuple, after checking `what`'s body, grid, specs and stage count."""
    if not callable(body):
        raise user_error(TypeError, f"{what}'s body must be callable, got {body!r}")
    grid = tuple(grid) if isinstance(grid, tuple | list) else (grid,)
    if not grid:
        raise user_error(ValueError, f"{what} needs a grid of one or more dims")
    for g in grid:
        size = as_index(g, "a pipeline grid size").static
        if size is not None and size < 1:
            raise user_error(ValueError, f"{what}'s grid sizes must be positive, got "
                                         f"{list(grid)}")
    for kind, given in specs:
        if not all(isinstance(s, BlockSpec) for s in given):
            raise user_error(TypeError, f"{what}'s {kind} must be sd.BlockSpecs, got "
                                        f"{list(given)!r}")
    if stages is not None and (isinstance(stages, bool) or not isinstance(stages, int)
                               or stages < 1):
        raise user_error(ValueError, f"{what}'s max_concurrent_steps must be a positive int "
                                     f"(or None: the scheduling model chooses), got "
                                     f"{stages!r}")
    return grid


def emit_pipeline(body: Callable[..., Carry], *, grid: IndexLike | Sequence[IndexLike],
                  in_specs: Sequence[BlockSpec] = (), out_specs: Sequence[BlockSpec] = (),
                  max_concurrent_steps: int | None = None, init_carry: Carry = None,
                  last_step: Callable[..., Carry] | None = None) -> Pipeline:
    """A pipeline over `grid` (ints or traced indices; its steps run in order, the last grid
    dim fastest): call the result with the global refs of `in_specs` then `out_specs`.
    `body(indices, *in_blocks, *out_blocks)` is one step over shared-memory blocks (the
    refs' blocks the specs' index maps name for `indices`), with `carry` last and returning
    the next one when `init_carry` is given. `max_concurrent_steps` (>= 1) buffers per input
    are filled ahead by TMA; None lets the scheduling model choose them (the fewest that
    hide the TMA latency behind a step's wgmmas, within the shared memory left); either way
    the choice and its reasons are recorded in the kernel's `smalti.schedule` attribute
    (`smalti-opt --smalti-explain-schedule`). An output block is stored by TMA after the
    last step that writes it (when its block index changes, and at the end). `last_step`,
    with the body's signature, replaces it on the final step (e.g. attention's masked
    diagonal tile): the loop holds only the body, and the final step's blocks are loaded
    ahead like any other's. It runs whatever the step count, so a grid known only at run
    time must then have at least one step (the carry cannot skip it)."""
    grid = check_arguments("emit_pipeline", body, grid, (("in_specs", in_specs),
                                                         ("out_specs", out_specs)),
                           max_concurrent_steps)
    if last_step is not None and not callable(last_step):
        raise user_error(TypeError, f"emit_pipeline's last_step must be callable, got "
                                    f"{last_step!r}")
    return Pipeline(body, grid, tuple(in_specs), tuple(out_specs), max_concurrent_steps,
                    init_carry, user_position(), last_step)
