"""What generated programs exercise: a set of feature names per program (statement kinds,
ops, predicates, conversions, reductions, layouts, dtypes of loads and stores, grids), so a
run can say which features reached a match (compiled, ran, right numbers) and how often."""

from __future__ import annotations

from collections import Counter

from tests.differential.program import (
    Apply,
    Broadcast,
    Cast,
    Compare,
    LayoutCast,
    Load,
    Loop,
    Program,
    Reduce,
    SmemRoundTrip,
    Store,
    When,
    walk,
)
from tests.differential.typecheck import value_types


def features(program: Program) -> set[str]:
    types = value_types(program)
    found = {f"grid {'x'.join(map(str, program.grid))}"}
    if program.dynamic is not None:
        found.add("dynamic offset")
    if program.batch:
        found.add("jax.vmap")
    for s in walk(program.body):
        found.add(type(s).__name__)
        match s:
            case Apply():
                found.add(f"op {s.op} {types[s.out].dtype}")
            case Compare():
                found.add(f"compare {s.predicate} {types[s.lhs].dtype}")
            case Cast():
                found.add(f"cast {s.how} {types[s.value].dtype}->{s.dtype}")
            case Reduce():
                found.add(f"reduce {s.kind} axis {s.axis} {types[s.value].dtype}"
                          + (" acc" if s.acc else ""))
            case LayoutCast():
                found.add(f"layout_cast {s.layout} {types[s.value].dtype}")
            case Load():
                found.add(f"load {s.type.dtype}")
                if any(a.counters for a in s.starts):
                    found.add("load per loop trip")
                if any(a.const % 8 for a in s.starts):
                    found.add("load at an unaligned offset")
            case Store():
                found.add(f"store {types[s.value].dtype}")
            case Broadcast():
                found.add(f"broadcast dim {s.dim}")
            case SmemRoundTrip():
                found.add(f"smem round trip {types[s.value].dtype}")
            case Loop():
                found.add(f"loop carrying {len(s.outs)}")
            case When():
                found.add("branch with results" if s.outs else "branch storing")
    return found


def tally(programs_and_outcomes: list[tuple[Program, str]]) -> dict[str, tuple[int, int]]:
    """feature -> (programs with it, of which matched)."""
    seen, matched = Counter(), Counter()
    for program, outcome in programs_and_outcomes:
        for feature in features(program):
            seen[feature] += 1
            matched[feature] += outcome == "match"
    return {f: (seen[f], matched[f]) for f in sorted(seen)}


__all__ = ["features", "tally"]
