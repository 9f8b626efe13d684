"""Why a part of the equation system has no solution: a minimal set of constraints in
conflict, and a layout_cast that would resolve it when one exists (and lowers).

The solver stops at the first contradiction it meets, and the search meets many that its
own guesses caused; the constraints on that path are not the cause. Here the failed part is
shrunk to a minimal unsatisfiable subset with QuickXplain (Junker, "QUICKXPLAIN: Preferred
Explanations and Relaxations for Over-Constrained Problems", AAAI 2004): every constraint
it keeps is needed, so the ops it names are the ones whose constraints conflict. Hints are
not constraints: they order the search and never appear in an explanation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from smalti.layout_inference.equations import (
    REGISTERS,
    Constraint,
    Equal,
    EquationSystem,
    Hint,
    RelayoutAllowed,
    Variable,
    variables_of,
)
from smalti.layout_inference.solver import (
    Conflict,
    Failure,
    Unsatisfiable,
    satisfiable,
    solve_subset,
)
from smalti.tiling import Layout

SUBSET_BUDGET = 20_000  # search budget of each satisfiability test while minimising
CAST_TRIES = 6  # equalities of a conflict tried as places for a layout_cast
LONG_RUN = 8  # equalities in a row of a solver's chain minimised as one unit


@dataclass(frozen=True)
class Explanation:
    """A minimal conflict: its constraints in program order, the contradiction the solver
    meets among them alone (`conflict`), and where a cast would resolve it, if anywhere."""

    constraints: tuple[Constraint, ...]
    conflict: Conflict
    cast: tuple[Equal, Layout] | None = None  # a cast of the Equal's `a` to the layout
    gave_up: bool = False


def explain(system: EquationSystem, failure: Failure,
            core: tuple[Constraint, ...] | None = None) -> Explanation:
    """Shrink a failed part to a minimal set of conflicting constraints (or take `core`,
    a conflict no relayout resolves: then no cast is suggested)."""
    if failure.gave_up:
        return Explanation(_around(failure, radius=1), failure.conflict, gave_up=True)
    if core is not None:
        return Explanation(core, _conflict_of(system, core))
    core = minimal_conflict(system, failure)
    return Explanation(core, _conflict_of(system, core), _cast(system, failure, core))


def minimal_conflict(system: EquationSystem, failure: Failure) -> tuple[Constraint, ...]:
    """A minimal unsatisfiable subset of a failed part's constraints, in program order."""
    conflicting, along_chain = _first_inconsistent(system, failure)
    units = _groups(conflicting) if along_chain else tuple((c,) for c in conflicting)
    core = _quickxplain(system, units)
    order = {id(c): i for i, c in enumerate(failure.constraints)}  # the part's, in order
    return tuple(sorted(core, key=lambda c: order.get(id(c), -1)))


def minimal_unsatisfiable(constraints: tuple[Constraint, ...],
                          consistent: Callable[[tuple[Constraint, ...]], bool]
                          ) -> tuple[Constraint, ...]:
    """A minimal subset of `constraints` (together inconsistent) that `consistent` says
    is inconsistent, in the order given (QuickXplain with another satisfiability test)."""
    return _quickxplain(None, tuple((c,) for c in constraints), consistent)


def _consistent(system: EquationSystem, constraints: tuple[Constraint, ...]) -> bool:
    """False only when the constraints are proven unsatisfiable (a search that runs out of
    budget proves nothing, so it counts as consistent: the result stays a true conflict)."""
    variables = tuple({v.id: v for c in constraints for v in variables_of(c)}.values())
    return satisfiable(system, constraints, variables, SUBSET_BUDGET) is not False


def _first_inconsistent(system: EquationSystem, failure: Failure
                        ) -> tuple[tuple[Constraint, ...], bool]:
    """A small unsatisfiable superset of the conflict to start from: the constraints of the
    solver's own chain (then True: they are in the chain's order), else those around it at
    growing distances, else the whole part."""
    chain = _unique(tuple(c for c in failure.conflict.chain if not _is_hint(c)))
    if chain and not _consistent(system, chain):
        return chain, True
    radius = 1
    while True:
        near = _around(failure, radius)
        if len(near) >= len(failure.constraints):
            return failure.constraints, False
        if not _consistent(system, near):
            return near, False
        radius *= 2


def _around(failure: Failure, radius: int) -> tuple[Constraint, ...]:
    """The part's constraints over variables within `radius` links of the conflict's."""
    touching: dict[int, list[Constraint]] = defaultdict(list)
    for c in failure.constraints:
        for v in variables_of(c):
            touching[v.id].append(c)
    seeds = {v.id for c in failure.conflict.chain for v in _variables(c)}
    if failure.conflict.variable is not None:
        seeds.add(failure.conflict.variable.id)
    reached, frontier = set(seeds), set(seeds)
    for _ in range(radius):
        frontier = {v.id for var in frontier for c in touching[var] for v in variables_of(c)
                    } - reached
        reached |= frontier
    return tuple(c for c in failure.constraints
                 if all(v.id in reached for v in variables_of(c)))


def _groups(constraints: tuple[Constraint, ...]) -> tuple[tuple[Constraint, ...], ...]:
    """The units to minimise a solver's chain over: each constraint alone, but a run of
    more than LONG_RUN equalities in a row (the chain's path through a long line of
    elementwise ops, every one of them needed) as one unit, so that a conflict carried
    along thousands of ops costs one test, not thousands."""
    units: list[tuple[Constraint, ...]] = []
    run: list[Constraint] = []
    for constraint in (*constraints, None):
        if isinstance(constraint, Equal):
            run.append(constraint)
            continue
        units.extend([tuple(run)] if len(run) > LONG_RUN else [(c,) for c in run])
        run = []
        if constraint is not None:
            units.append((constraint,))
    return tuple(units)


def _quickxplain(system: EquationSystem | None, units: tuple[tuple[Constraint, ...], ...],
                 consistent: Callable[[tuple[Constraint, ...]], bool] | None = None
                 ) -> tuple[Constraint, ...]:
    """A minimal subset of the `units` of constraints (together unsatisfiable) that is
    unsatisfiable, flattened (by `consistent`, else by solving in `system`)."""
    if consistent is None:
        def consistent(constraints: tuple[Constraint, ...]) -> bool:
            return _consistent(system, constraints)

    def qx(background: tuple[Constraint, ...], changed: bool,
           candidates: tuple[tuple[Constraint, ...], ...]) -> tuple[Constraint, ...]:
        if changed and not consistent(background):
            return ()
        if len(candidates) == 1:
            return candidates[0]
        half = len(candidates) // 2
        first, second = candidates[:half], candidates[half:]
        kept_second = qx(background + _flat(first), True, second)
        kept_first = qx(background + kept_second, bool(kept_second), first)
        return kept_first + kept_second

    return qx((), False, units) if units else ()


def _flat(units: tuple[tuple[Constraint, ...], ...]) -> tuple[Constraint, ...]:
    return tuple(c for unit in units for c in unit)


def _conflict_of(system: EquationSystem, core: tuple[Constraint, ...]) -> Conflict:
    """The contradiction the solver meets in the core alone (its chain then holds only the
    core's constraints and the search's own choices)."""
    variables = tuple({v.id: v for c in core for v in variables_of(c)}.values())
    try:
        solve_subset(system, core, variables, SUBSET_BUDGET)
    except Unsatisfiable as failure:
        return failure.conflict
    return Conflict("these constraints cannot all hold", core)


def _cast(system: EquationSystem, failure: Failure, core: tuple[Constraint, ...]
          ) -> tuple[Equal, Layout] | None:
    """An equality of the core that a layout_cast can replace: the part solves with the
    equality relaxed to a relayout the lowering performs (register moves and shuffles
    within warps, smalti.tiling.relayout), from the operand's layout to the op's. Only
    equalities whose `a` is an operand of the op that states them (a cast goes before a
    use)."""
    equalities = [c for c in core if isinstance(c, Equal) and c.a.domain == REGISTERS
                  and _is_operand_of(c)]  # shared-memory transforms have no cast
    for equality in reversed(equalities[-CAST_TRIES:]):
        relaxed = tuple(RelayoutAllowed(c.a, c.b, c.origin) if c is equality else c
                        for c in failure.constraints)
        try:
            layouts = solve_subset(system, relaxed, failure.variables, SUBSET_BUDGET)
        except Unsatisfiable:
            continue
        return equality, layouts[equality.b.id]  # RelayoutAllowed held: it lowers
    return None


def _is_operand_of(equality: Equal) -> bool:
    op, value = equality.origin.op, equality.a.value
    return op is not None and value is not None and any(o == value for o in op.operands)


def _is_hint(item: Constraint | Hint) -> bool:
    return isinstance(item, Hint)


def _variables(item: Constraint | Hint) -> tuple[Variable, ...]:
    return () if isinstance(item, Hint) else variables_of(item)


def _unique(constraints: tuple[Constraint, ...]) -> tuple[Constraint, ...]:
    return tuple({id(c): c for c in constraints}.values())
