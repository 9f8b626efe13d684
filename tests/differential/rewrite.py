"""Rewrites of programs that keep them well formed (when `value_types` accepts the result):
renaming operands, dead-code removal, and refitting refs to the windows that use them. The
minimiser's moves are built from these."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tests.differential.program import (
    Affine,
    Apply,
    Barrier,
    BlockSelect,
    Broadcast,
    Cast,
    Compare,
    Insert,
    LayoutCast,
    Load,
    Loop,
    Print,
    Program,
    Reduce,
    Ref,
    Reshape,
    Select,
    Slice,
    SmemRoundTrip,
    Statement,
    Store,
    Transpose,
    When,
    operands,
    results,
    walk,
)
from tests.differential.typecheck import InvalidProgram, value_types

Body = tuple[Statement, ...]


def rename(body: Body, mapping: dict[str, str]) -> Body:
    """`body` with every operand named in `mapping` replaced (definitions unchanged)."""
    if not mapping:
        return body

    def r(name: str | None) -> str | None:
        return mapping.get(name, name) if name is not None else None

    out = []
    for s in body:
        match s:
            case Store() | Print() | Cast() | Broadcast() | Transpose() | Reshape() | Slice() \
                    | LayoutCast() | SmemRoundTrip() | Barrier():
                s = dataclasses.replace(s, value=r(s.value))
            case Reduce():
                s = dataclasses.replace(s, value=r(s.value), acc=r(s.acc))
            case Apply():
                s = dataclasses.replace(s, args=tuple(r(a) for a in s.args))
            case Compare():
                s = dataclasses.replace(s, lhs=r(s.lhs), rhs=r(s.rhs))
            case Select():
                s = dataclasses.replace(s, condition=r(s.condition), true=r(s.true),
                                        false=r(s.false))
            case Insert():
                s = dataclasses.replace(s, small=r(s.small), big=r(s.big))
            case BlockSelect():
                s = dataclasses.replace(s, true=r(s.true), false=r(s.false))
            case Loop():
                s = dataclasses.replace(s, inits=tuple(r(v) for v in s.inits),
                                        body=rename(s.body, mapping),
                                        yields=tuple(r(v) for v in s.yields))
            case When():
                s = dataclasses.replace(s, then=rename(s.then, mapping),
                                        otherwise=rename(s.otherwise, mapping),
                                        then_yields=tuple(r(v) for v in s.then_yields),
                                        otherwise_yields=tuple(r(v) for v in s.otherwise_yields))
        out.append(s)
    return tuple(out)


def map_statements(body: Body, fn: Callable[[Statement], Statement | Body | None]) -> Body:
    """Apply `fn` to every statement (nested ones first): it returns a statement, a tuple of
    statements to splice in, or None to drop it."""
    out: list[Statement] = []
    for s in body:
        if isinstance(s, Loop):
            s = dataclasses.replace(s, body=map_statements(s.body, fn))
        elif isinstance(s, When):
            s = dataclasses.replace(s, then=map_statements(s.then, fn),
                                    otherwise=map_statements(s.otherwise, fn))
        replaced = fn(s)
        if replaced is None:
            continue
        if isinstance(replaced, tuple):
            out.extend(replaced)
        else:
            out.append(replaced)
    return tuple(out)


def _used(body: Body) -> set[str]:
    used: set[str] = set()
    for s in walk(body):
        used |= set(operands(s))
        if isinstance(s, Loop):
            used |= set(s.yields)
        if isinstance(s, When):
            used |= set(s.then_yields) | set(s.otherwise_yields)
    return used


def dead_code_removed(program: Program) -> Program:
    """Without statements whose results nobody uses (stores and branches stay), without
    unused input refs, and with refs refitted."""
    body = program.body
    while True:
        used = _used(body)

        def keep(s: Statement, used: set[str] = used) -> Statement | None:
            if isinstance(s, Store | Print) or (isinstance(s, When) and _stores(s)):
                return s
            return s if any(v in used for v in results(s)) else None

        new = map_statements(body, keep)
        if new == body:
            break
        body = new
    loaded = {s.ref for s in walk(body) if isinstance(s, Load | Store)}
    refs = tuple(r for r in program.refs if r.name in loaded)
    return refit(dataclasses.replace(program, refs=refs, body=body))


def _stores(statement: Statement) -> bool:
    """Whether it stores or prints (effects that keep it alive)."""
    return any(isinstance(s, Store | Print) for s in walk((statement,)))


def refit(program: Program) -> Program:
    """Each ref's shape: the smallest that holds every window of it (over blocks and loop
    trips), so shrinking a program shrinks its buffers. A program that is ill-typed for
    other reasons than its ref shapes comes back as it is."""
    unbounded = dataclasses.replace(program, refs=tuple(
        Ref(r.name, (1 << 30,) * len(r.shape), r.dtype, r.output) for r in program.refs))
    try:
        types = value_types(unbounded)
    except InvalidProgram:
        return program
    extents: dict[str, list[int]] = {}
    blocks = program.blocks

    def visit(body: Body, counters: dict[str, int]) -> None:
        for s in body:
            if isinstance(s, Load | Store):
                shape = s.type.shape if isinstance(s, Load) else types[s.value].shape
                ext = extents.setdefault(s.ref, [1] * len(shape))
                for d, (start, size) in enumerate(zip(s.starts, shape, strict=True)):
                    ext[d] = max(ext[d], _largest(start, blocks, counters, program.dynamic)
                                 + size)
            elif isinstance(s, Loop):
                visit(s.body, {**counters, s.counter: s.largest_counter(blocks)})
            elif isinstance(s, When):
                visit(s.then, counters)
                visit(s.otherwise, counters)

    visit(program.body, {})
    refs = tuple(Ref(r.name, tuple(extents[r.name]), r.dtype, r.output)
                 if r.name in extents else r for r in program.refs)
    return dataclasses.replace(program, refs=refs)


def _largest(start: Affine, blocks: int, counters: dict[str, int], dynamic: int | None
             ) -> int:
    return (start.const + max(0, start.block * (blocks - 1)) + start.dynamic * (dynamic or 0)
            + sum(max(0, c * counters.get(n, 0)) for n, c in start.counters))


__all__ = ["dead_code_removed", "map_statements", "refit", "rename"]
