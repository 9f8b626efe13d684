"""Delta debugging of a finding: smaller programs, kept while the same finding class
(`Outcome.signature`) reproduces.

Moves, coarse first, each tried at every place it applies, and the whole list again until
none helps: drop an output (its store and what only it used); take one branch of a When;
replace a loop by zero trips or by its body run once; bypass an op (its result replaced by
an operand of the same type: layout casts, round trips, elementwise ops, selects); replace
a value by a load of a fresh input, or by a constant; drop a reduction's accumulator; shrink
one dimension size everywhere; run one block; put a window at the origin; plain forms
(no Python literals, no inline broadcasts). Every candidate is type-checked first.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator

from tests.differential.dtypes import ARGUMENT_DTYPES, DTYPES
from tests.differential.program import (
    Affine,
    Apply,
    Barrier,
    BlockSelect,
    Broadcast,
    Const,
    Iota,
    LayoutCast,
    Load,
    Loop,
    Program,
    Reduce,
    Ref,
    Select,
    SmemRoundTrip,
    Statement,
    Store,
    VType,
    When,
    operands,
    results,
    walk,
)
from tests.differential.rewrite import dead_code_removed, map_statements, rename
from tests.differential.runner import Outcome, run_program
from tests.differential.typecheck import InvalidProgram, value_types

Runner = Callable[[Program], Outcome]


@dataclasses.dataclass(frozen=True)
class Minimised:
    program: Program
    outcome: Outcome
    tries: int
    seconds: float


def minimise(program: Program, outcome: Outcome, *, runner: Runner = run_program,
             budget_s: float = 300, max_tries: int = 600) -> Minimised:
    """The smallest program found that still gives `outcome.signature`."""
    start, tries = time.monotonic(), 0
    target = outcome.signature
    best, best_outcome = program, outcome
    improved = True
    while improved:
        improved = False
        for candidate in candidates(best):
            if time.monotonic() - start > budget_s or tries >= max_tries:
                return Minimised(best, best_outcome, tries, time.monotonic() - start)
            if size(candidate) >= size(best):
                continue
            tries += 1
            result = runner(candidate)
            if result.signature == target:
                best, best_outcome, improved = candidate, result, True
                break
    return Minimised(best, best_outcome, tries, time.monotonic() - start)


def size(program: Program) -> tuple[int, int, int, int]:
    """What minimising shrinks: statements, then array elements, then blocks, then the
    frills (Python literals, inline broadcasts, window offsets)."""
    statements = sum(1 for _ in walk(program.body))
    elements = sum(_elements(r.shape) for r in program.refs)
    frills = 0
    for s in walk(program.body):
        frills += bool(getattr(s, "literal", False)) + bool(getattr(s, "style", 0))
        for a in getattr(s, "starts", ()):
            frills += bool(a.const) + bool(a.block) + len(a.counters) + bool(a.dynamic)
    return (statements, elements, program.blocks, frills + bool(program.batch))


def _elements(shape: tuple[int, ...]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def candidates(program: Program) -> Iterator[Program]:
    """Well-formed smaller programs, coarse moves first; none whose loads or stores move
    fewer than 128 elements (one per thread: docs/dsl.md, "Sizes") unless `program` has such
    already."""
    floor = min(128, smallest_access(program))
    for move in MOVES:
        for candidate in move(program):
            candidate = dead_code_removed(candidate)
            try:
                types = value_types(candidate)
            except InvalidProgram:
                continue
            if smallest_access(candidate, types) >= floor:
                yield candidate


def smallest_access(program: Program, types: dict[str, VType] | None = None) -> int:
    """The fewest elements a load or store of the program moves."""
    types = value_types(program) if types is None else types
    sizes = [_elements(s.type.shape) if isinstance(s, Load) else _elements(types[s.value].shape)
             for s in walk(program.body) if isinstance(s, Load | Store)]
    return min(sizes, default=0)


def _with_body(program: Program, body: tuple[Statement, ...]) -> Program:
    return dataclasses.replace(program, body=body)


def drop_outputs(program: Program) -> Iterator[Program]:
    if len(program.outputs) < 2:
        return
    for ref in program.outputs:
        def drop(s: Statement, ref: Ref = ref) -> Statement | None:
            if isinstance(s, Store) and s.ref == ref.name:
                return None
            if isinstance(s, When) and not s.outs and not any(isinstance(t, Store)
                                                              for t in walk((s,))):
                return None
            return s

        body = map_statements(program.body, drop)
        yield dataclasses.replace(program, body=body,
                                  refs=tuple(r for r in program.refs if r is not ref))


def take_branches(program: Program) -> Iterator[Program]:
    whens = [s for s in walk(program.body) if isinstance(s, When)]
    for when in whens:
        for branch, yields in ((when.then, when.then_yields),
                               (when.otherwise, when.otherwise_yields)):
            body = map_statements(program.body, lambda s, w=when, b=branch: b if s == w else s)
            yield _with_body(program, rename(body, dict(zip(when.outs, yields, strict=True))))


def unloop(program: Program) -> Iterator[Program]:
    loops = [s for s in walk(program.body) if isinstance(s, Loop)]
    for loop in loops:
        # zero trips: the results are the initial values
        zero = dict(zip(loop.outs, loop.inits, strict=True))
        body = map_statements(program.body, lambda s, lp=loop: None if s == lp else s)
        yield _with_body(program, rename(body, zero))
        # the body once, at counter 0
        def inline(s: Statement, lp: Loop = loop) -> Statement | tuple[Statement, ...]:
            if s != lp:
                return s
            inner = rename(lp.body, dict(zip(lp.carried, lp.inits, strict=True)))
            inner = map_statements(inner, lambda t, c=lp.counter: _without_counter(t, c))
            return inner

        once = map_statements(program.body, inline)
        yields = {out: (dict(zip(loop.carried, loop.inits, strict=True)).get(y, y))
                  for out, y in zip(loop.outs, loop.yields, strict=True)}
        yield _with_body(program, rename(once, yields))
        if loop.upper.block or loop.upper.const > 1:
            yield _with_body(program, map_statements(program.body, lambda s, lp=loop: (
                dataclasses.replace(s, upper=Affine(1)) if s == lp else s)))


def _without_counter(s: Statement, counter: str) -> Statement:
    if isinstance(s, Load):
        starts = tuple(dataclasses.replace(a, counters=tuple(
            (n, c) for n, c in a.counters if n != counter)) for a in s.starts)
        return dataclasses.replace(s, starts=starts)
    return s


def _definitions(program: Program) -> list[Statement]:
    return [s for s in walk(program.body)
            if not isinstance(s, Store | When | Loop) and results(s)]


def bypass(program: Program) -> Iterator[Program]:
    """A result replaced by one of its operands of the same type."""
    types = value_types(program)
    for s in _definitions(program):
        if isinstance(s, LayoutCast | SmemRoundTrip | Barrier):
            choices = [s.value]
        elif isinstance(s, Apply):
            choices = list(dict.fromkeys(s.args))
        elif isinstance(s, Select | BlockSelect):
            choices = [s.true, s.false]
        elif isinstance(s, Reduce) and s.acc is not None:
            choices = [s.acc]
        else:
            continue
        (out,) = results(s)
        for choice in choices:
            if types.get(choice) == types[out]:
                body = map_statements(program.body, lambda t, d=s: None if t == d else t)
                yield _with_body(program, rename(body, {out: choice}))


def replace_values(program: Program) -> Iterator[Program]:
    """A computed value replaced by a load of a fresh input (or a constant)."""
    types = value_types(program)
    taken = {r.name for r in program.refs}
    for s in _definitions(program):
        if isinstance(s, Load | Const | Iota):
            continue
        (out,) = results(s)
        vtype = types[out]
        if vtype.dtype in ARGUMENT_DTYPES[program.kind]:
            name = next(f"in{k}" for k in range(1000) if f"in{k}" not in taken)
            load = Load(out, name, tuple(Affine() for _ in vtype.shape), vtype)
            ref = Ref(name, vtype.shape, vtype.dtype)
            body = map_statements(program.body, lambda t, d=s, n=load: n if t == d else t)
            yield dataclasses.replace(program, body=body, refs=(ref, *program.refs))
        yield _with_body(program, map_statements(
            program.body, lambda t, d=s, o=out, v=vtype: _constant(o, v) if t == d else t))


def _constant(out: str, vtype: VType) -> Const:
    dtype = DTYPES[vtype.dtype]
    return Const(out, vtype, True if dtype.is_bool else (1.0 if dtype.is_float else 1))


def store_operands(program: Program) -> Iterator[Program]:
    """An output takes an operand of the value it stored (retyped to hold it), so the ops
    between them go."""
    types = value_types(program)
    defining = {out: s for s in _definitions(program) for out in results(s)}
    for store in (s for s in walk(program.body) if isinstance(s, Store)):
        source = defining.get(store.value)
        if source is None:
            continue
        for operand in dict.fromkeys(operands(source)):
            vtype = types.get(operand)
            if vtype is None or vtype.dtype not in ARGUMENT_DTYPES[program.kind]:
                continue
            starts = tuple(Affine(0, d if i == 0 and program.blocks > 1 else 0)
                           for i, d in enumerate(vtype.shape))
            new_store = Store(operand, store.ref, starts)
            ref = next(r for r in program.refs if r.name == store.ref)
            refs = tuple(Ref(r.name, vtype.shape, vtype.dtype, True) if r == ref else r
                         for r in program.refs)
            body = map_statements(program.body, lambda t, old=store, n=new_store: (
                n if t == old else t))
            yield dataclasses.replace(program, body=body, refs=refs)


def drop_accumulators(program: Program) -> Iterator[Program]:
    for s in walk(program.body):
        if isinstance(s, Reduce) and s.acc is not None:
            yield _with_body(program, map_statements(program.body, lambda t, d=s: (
                dataclasses.replace(t, acc=None) if t == d else t)))


def shrink_sizes(program: Program) -> Iterator[Program]:
    """One dimension size halved everywhere it appears (shapes, slices, block strides)."""
    sizes = sorted({d for s in walk(program.body) for d in _shapes_of(s)}, reverse=True)
    for old in sizes:
        if old < 16:
            continue
        new = old // 2
        yield _with_body(program, map_statements(program.body,
                                                 lambda s, o=old, n=new: _resized(s, o, n)))


def _shapes_of(s: Statement) -> tuple[int, ...]:
    for name in ("type", "shape", "sizes"):
        value = getattr(s, name, None)
        if isinstance(value, VType):
            return value.shape
        if isinstance(value, tuple):
            return value
    return ()


def _resized(s: Statement, old: int, new: int) -> Statement:
    def shape(dims: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(new if d == old else d for d in dims)

    def affine(a: Affine) -> Affine:
        return dataclasses.replace(a, block=new if a.block == old else a.block,
                                   const=new if a.const == old else a.const,
                                   counters=tuple((n, new if c == old else c)
                                                  for n, c in a.counters))

    changes: dict = {}
    for name in ("type",):
        value = getattr(s, name, None)
        if isinstance(value, VType):
            changes[name] = VType(shape(value.shape), value.dtype)
    for name in ("shape", "sizes"):
        value = getattr(s, name, None)
        if isinstance(value, tuple):
            changes[name] = shape(value)
    if hasattr(s, "offsets"):
        changes["offsets"] = tuple(o if o < new else 0 for o in s.offsets)
    if isinstance(s, Load | Store):
        changes["starts"] = tuple(affine(a) for a in s.starts)
    return dataclasses.replace(s, **changes) if changes else s


def one_block(program: Program) -> Iterator[Program]:
    if program.batch:
        yield dataclasses.replace(program, batch=0)
    if program.dynamic:
        yield dataclasses.replace(program, dynamic=0)
    if program.blocks > 1:
        yield dataclasses.replace(program, grid=(1,))
        if len(program.grid) == 2:
            yield dataclasses.replace(program, grid=(program.blocks,))


def plain_windows(program: Program) -> Iterator[Program]:
    """A load's or store's window moved to the origin, one index at a time."""
    for s in walk(program.body):
        if not isinstance(s, Load | Store):
            continue
        for d, a in enumerate(s.starts):
            for simpler in (Affine(0, a.block, a.counters, a.dynamic),
                            Affine(a.const, 0, a.counters, a.dynamic),
                            Affine(a.const, a.block, (), a.dynamic),
                            Affine(a.const, a.block, a.counters)):
                if simpler != a:
                    starts = (*s.starts[:d], simpler, *s.starts[d + 1:])
                    yield _with_body(program, map_statements(
                        program.body, lambda t, old=s, st=starts: (
                            dataclasses.replace(t, starts=st) if t == old else t)))


def plain_forms(program: Program) -> Iterator[Program]:
    for s in walk(program.body):
        if isinstance(s, Const) and s.literal:
            yield _with_body(program, map_statements(program.body, lambda t, d=s: (
                dataclasses.replace(t, literal=False) if t == d else t)))
        if isinstance(s, Broadcast | Reduce) and s.style:
            yield _with_body(program, map_statements(program.body, lambda t, d=s: (
                dataclasses.replace(t, style=0) if t == d else t)))


MOVES: list[Callable[[Program], Iterator[Program]]] = [
    drop_outputs, take_branches, unloop, bypass, replace_values, store_operands,
    drop_accumulators,
    shrink_sizes, one_block, plain_windows, plain_forms,
]

__all__ = ["MOVES", "Minimised", "candidates", "minimise", "size"]
