"""Relayouts that inference inserts: a program without a single layout assignment (a value
added to its own transpose, row sums added to column sums) compiles with a
`smalti.layout_cast` at the cheapest set of value uses that makes it solvable.

A *use* is an operand of an op, and what the op's rule states about that operand's
layout: an elementwise op's equality with its result, a transpose's or a reduction's
derivation, wgmma's fixed A layout, a slice's alignment, a store's restriction. Cutting a
use gives the operand, at that op, a variable of its own, related to the value's by a
relayout (`RelayoutAllowed`): a layout_cast just before the op. A cut only relaxes the
system (an equality becomes a relayout, and "none" is a relayout).

For each independent part of the system without a solution:

1. Cutting every use at once is the most relaxed the part can be: when even that has no
   solution (a shape no layout fits, a slice through every layout's tiles, a splat that a
   distributed value cannot become), no cut resolves the part and it is refused with the
   usual explanation. (With a variable per use, that search can run out of budget: a
   large part is then refused alike, a small one is searched, and refused if nothing is
   found.) When a short probe finds a solution with every relayout within warps
   (register moves, `shfl.sync`), only such relayouts are searched; else those through
   shared memory too (and step 3 still bounds each cut to the cheapest kind that solves).
2. The smallest set of uses is found as MaxSAT solvers find minimum corrections
   (implicit hitting sets): a minimal set of conflicting constraints
   (`conflicts.minimal_conflict`) names the uses whose cut could break it; the smallest
   sets of uses that meet every such core found so far are cut and solved, in program
   order, and a set that still fails gives a new core. A conflict among uses left uncut
   stays one whatever else is cut, so no solution is lost. When that search meets its
   limits (many conflicts along one part), cuts are made one conflict after another (the
   last use of each minimal conflict), and then every cut the others do without is dropped.
3. Among the smallest sets that solve (a few alternatives are tried), the cheapest wins:
   by the kinds of its relayouts (none, registers, shuffles, shared memory; each cut
   bounded to the cheapest kind that still solves), then their sizes
   (`smalti.tiling.relayout_cost`), then the registers a thread holds the value in
   (`smalti.tiling.cost`).

A user's own layout_cast keeps its meaning: its result is in the layout it names, where
it is written. Its operand is cut only when the cast's own relayout is not one the
lowering performs (from a replicated reduction's layout to a strided one, say): a relayout
inserted before it gets the value there in two steps. Uses are not cut at values any
layout can hold for free (constants and the like get a copy per user already), or of
elements no relayout moves (only 8-, 16- and 32-bit ones are moved).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.ops import LayoutCastOp
from smalti.layout_inference.conflicts import minimal_conflict, minimal_unsatisfiable
from smalti.layout_inference.equations import (
    REGISTERS,
    Constraint,
    EquationSystem,
    Hint,
    Origin,
    RelayoutAllowed,
    Variable,
    variables_of,
)
from smalti.layout_inference.materialise import MATERIALISABLE
from smalti.layout_inference.solver import Failure, Unsatisfiable, _Solver, solve_subset
from smalti.tiling import Layout, LayoutError, RelayoutCost, relayout_cost
from smalti.tiling.cost import registers_per_thread

LAYOUT_CAST = LayoutCastOp.OPERATION_NAME
KINDS = ("none", "registers", "shuffles", "smem")  # cheapest first
IN_WARP = "shuffles"  # the dearest relayout that keeps every element in its warp
MOVED_BITWIDTHS = (8, 16, 32)  # elements a relayout moves (smalti.layout_inference.solver)

MAX_CUTS = 8  # relayouts the search for the fewest inserts into one part at most
MAX_SOLVES = 48  # sets of cuts solved per part and kind of relayout, before giving up
MAX_GREEDY_CUTS = 64  # relayouts inserted into one part at most, past the search's limits
ALTERNATIVES = 6  # further sets of the smallest size costed once one solves
MAX_COMBINATIONS = 200_000  # sets of uses looked at for one that meets every core
SEARCH_BUDGET = 20_000  # search budget of each solve
# Budget of the probe whether relayouts within warps alone can resolve a part (every use
# cut): proving that they cannot is an exhaustive search, and a probe that runs out only
# lets relayouts through shared memory into the search, where each cut is still tightened
# to the cheapest kind that solves.
IN_WARP_PROBE_BUDGET = 500
MINIMISED = 400  # constraints of a part whose conflict with every use cut is minimised


@dataclass(frozen=True, eq=False)
class Use:
    """Operand `var` of `op`: where a cast would go (just before `op`)."""

    op: ir.Operation
    var: Variable
    order: int  # program order of the uses of a part


@dataclass(frozen=True)
class Relayout:
    """A relayout inference inserts: `use`'s operand converted from `source` to `target`
    (the layout `use.op` reads it in), of `cost`; `var` is the variable of the cast's
    result."""

    use: Use
    var: Variable
    source: Layout
    target: Layout
    cost: RelayoutCost


@dataclass(frozen=True)
class Cuts:
    """The outcome of `cut`: the system with relayouts at the chosen uses of every failed
    part (`system`, to solve again) and each relayout's variables; or the failures no cut
    resolves (`unresolved`, to explain)."""

    system: EquationSystem
    cuts: tuple[tuple[Use, Variable, str | None], ...] = ()  # use, cast result, bound
    unresolved: tuple[Failure, ...] = ()
    # For unresolved parts (by position) that no relayout resolves: a conflict of the
    # system's constraints that stays one whatever relayouts are inserted between its ops.
    irreparable: dict[int, tuple[Constraint, ...]] = dataclasses.field(default_factory=dict)

    def relayouts(self, layouts: dict[int, Layout]) -> tuple[Relayout, ...]:
        """The relayouts, as a solution of `system` lays them out."""
        return tuple(Relayout(use, var, layouts[use.var.id], layouts[var.id],
                              _cost(layouts[use.var.id], layouts[var.id], var))
                     for use, var, _ in self.cuts)


def cut(system: EquationSystem, failures: tuple[Failure, ...]) -> Cuts:
    """Where to insert relayouts so that every failed part solves: the system with them,
    or the parts no set of relayouts (within the limits above) resolves."""
    chosen: list[tuple[Use, str | None]] = []
    unresolved: list[Failure] = []
    irreparable: dict[int, tuple[Constraint, ...]] = {}
    for failure in failures:
        plan = None if failure.gave_up else _Part(system, failure).plan()
        if isinstance(plan, list):
            chosen.extend(plan)
            continue
        if isinstance(plan, _Irreparable):
            irreparable[len(unresolved)] = plan.core
        unresolved.append(failure)
    if unresolved:
        return Cuts(system, unresolved=tuple(unresolved), irreparable=irreparable)
    cut_system, targets = _with_cuts(system, system.constraints, chosen)
    return Cuts(cut_system, tuple((use, targets[use], within) for use, within in chosen))


def _with_cuts(system: EquationSystem, constraints: tuple[Constraint, ...] | list[Constraint],
               cuts: list[tuple[Use, str | None]], part: tuple[Variable, ...] | None = None
               ) -> tuple[EquationSystem, dict[Use, Variable]]:
    """`system` restricted to `constraints` (and to the variables of `part` and the hints
    about them), each use of `cuts` reading a variable of its own that a relayout (of at
    most the given kind) makes from the value's. The new variables are numbered after
    all of `system`'s, so a solution of the part reads like one of the whole."""
    variables = list(system.variables if part is None else part)
    targets: dict[Use, Variable] = {}
    by_key: dict[tuple[ir.Operation, int], Variable] = {}
    relayouts = []
    for use, within in cuts:
        var = use.var
        target = Variable(len(system.variables) + len(targets), var.shape, var.bitwidth,
                          var.value, REGISTERS)
        variables.append(target)
        targets[use] = target
        by_key[(use.op, var.id)] = target
        relayouts.append(RelayoutAllowed(var, target, Origin(
            LAYOUT_CAST, use.op.location, f"inference inserts a relayout before this use of "
            f"the value by '{use.op.name}'", use.op), within))
    hints = (system.hints if part is None
             else [hint for _, hint in system.hints_of(var.id for var in part)])
    return EquationSystem(
        variables,
        [*(_substituted(c, by_key) for c in constraints), *relayouts],
        [_substituted(h, by_key) for h in hints],
    ), targets


_FIELDS = ("a", "b", "var", "target", "source")


def _substituted(item: Constraint | Hint, by_key: dict[tuple[ir.Operation, int], Variable]
                 ) -> Constraint | Hint:
    """`item` with each variable that a cut use of its op replaces, replaced."""
    op = item.origin.op
    if op is None:
        return item
    changes = {}
    for name in _FIELDS:
        var = getattr(item, name, None)
        if isinstance(var, Variable) and (op, var.id) in by_key:
            changes[name] = by_key[(op, var.id)]
    return dataclasses.replace(item, **changes) if changes else item


class _Part:
    """The search for the cheapest relayouts resolving one failed part."""

    def __init__(self, system: EquationSystem, failure: Failure) -> None:
        self.system = system
        self.failure = failure
        self.uses: list[Use] = []
        self.index: dict[tuple[ir.Operation, int], Use] = {}
        for constraint in failure.constraints:
            op = constraint.origin.op
            if op is None:
                continue
            for var in variables_of(constraint):
                key = (op, var.id)
                if key not in self.index and _cuttable(op, var):
                    self.index[key] = Use(op, var, len(self.uses))
                    self.uses.append(self.index[key])
        self.solves = 0

    def plan(self) -> list[tuple[Use, str | None]] | _Irreparable | None:
        """The cheapest cuts that make the part solvable, each with its bound; or a
        conflict no cut resolves; or None when the search met its limits first."""
        if self._only_transforms():
            return None
        if not self.uses:
            return _Irreparable(minimal_conflict(self.system, self.failure))
        everything = frozenset(self.uses)
        relaxed = self._relaxed(everything)  # the most relaxed the part can be
        if relaxed is False or (relaxed is None
                                and len(self.failure.constraints) > MINIMISED):
            return self._irreparable(everything)
        probe = self._solve(everything, IN_WARP, budget=IN_WARP_PROBE_BUDGET)
        within = IN_WARP if probe is not None else None
        core = self._core_uses(minimal_conflict(self.system, self.failure), frozenset())
        found = (self._search([core], within) or self._greedy(within)) if core else None
        if found is None and relaxed is None:  # likely none: the searches found nothing
            return self._irreparable(everything)
        return found

    def _only_transforms(self) -> bool:
        return all(var.domain != REGISTERS for var in self.failure.variables)

    def _irreparable(self, everything: frozenset[Use]) -> _Irreparable:
        """A conflict that stays one with every use cut: the part's minimal conflict when
        it does, else a minimal one of the part with every use cut (parts of at most
        MINIMISED constraints), named by the constraints it relaxes."""
        core = minimal_conflict(self.system, self.failure)
        if self._relaxed_consistent(core, self._uses_in(core)) is not True:
            return _Irreparable(core)
        if len(self.failure.constraints) > MINIMISED:
            return _Irreparable(core)
        system, _ = self._cut_system(everything, dict.fromkeys(everything))
        relaxed = minimal_unsatisfiable(
            tuple(system.constraints), lambda cs: _consistent(system, cs))
        original = {id(c): o for c, o in zip(system.constraints, self.failure.constraints,
                                                  strict=False)}
        return _Irreparable(tuple(original[id(c)] for c in relaxed if id(c) in original))

    def _uses_in(self, constraints: tuple[Constraint, ...]) -> frozenset[Use]:
        return self._core_uses(constraints, frozenset())

    def _relaxed_consistent(self, constraints: tuple[Constraint, ...],
                            cuts: frozenset[Use]) -> bool:
        system, _ = _with_cuts(self.system, constraints,
                               [(u, None) for u in sorted(cuts, key=lambda u: u.order)],
                               self.failure.variables)
        return _consistent(system, tuple(system.constraints))

    # Solving with cuts.
    def _cut_system(self, cuts: frozenset[Use], bounds: dict[Use, str | None]
                    ) -> tuple[EquationSystem, tuple[Variable, ...]]:
        ordered = sorted(cuts, key=lambda u: u.order)
        system, targets = _with_cuts(self.system, self.failure.constraints,
                                     [(use, bounds[use]) for use in ordered],
                                     self.failure.variables)
        return system, (*self.failure.variables, *targets.values())

    def _solve(self, cuts: frozenset[Use], within: str | None,
               bounds: dict[Use, str | None] | None = None, budget: int = SEARCH_BUDGET
               ) -> dict[int, Layout] | None:
        """The part's layouts with `cuts` (each bounded by `bounds`, else `within`), or
        None; solved without explanations (a cut at every use makes long chains of
        relayouts, along which explaining each failed try would cost as much again)."""
        self.solves += 1
        system, variables = self._cut_system(
            cuts, {u: (bounds or {}).get(u, within) for u in cuts})
        try:
            return _Unexplained(system, tuple(system.constraints), variables, budget).run()
        except Unsatisfiable:
            return None

    def _relaxed(self, cuts: frozenset[Use]) -> bool | None:
        """Whether the part has a solution with `cuts`: None when the search ran out of
        budget first (with every use cut, the system has a variable per use and the
        search can run out where a few cuts solve, or where none does)."""
        self.solves += 1
        system, variables = self._cut_system(cuts, dict.fromkeys(cuts))
        try:
            _Unexplained(system, tuple(system.constraints), variables, SEARCH_BUDGET).run()
        except Unsatisfiable as failure:
            return None if any(f.gave_up for f in failure.failures) else False
        return True

    def _attempt(self, cuts: frozenset[Use], bounds: dict[Use, str | None]
                 ) -> tuple[dict[int, Layout] | None, list[Failure], EquationSystem]:
        self.solves += 1
        system, variables = self._cut_system(cuts, bounds)
        try:
            return solve_subset(system, tuple(system.constraints), variables,
                                SEARCH_BUDGET), [], system
        except Unsatisfiable as failure:
            return None, list(failure.failures), system

    def _core_uses(self, core: tuple[Constraint, ...], cut: frozenset[Use]) -> frozenset[Use]:
        """The uses not yet cut whose constraints are in `core`: one of them must be."""
        found = set()
        for constraint in core:
            op = constraint.origin.op
            if op is None or _inserted(constraint):
                continue
            for var in variables_of(constraint):
                use = self.index.get((op, var.id))
                if use is not None and use not in cut:
                    found.add(use)
        return frozenset(found)

    # The implicit hitting-set search.
    def _search(self, cores: list[frozenset[Use]], within: str | None
                ) -> list[tuple[Use, str | None]] | None:
        failed: set[frozenset[Use]] = set()
        while self.solves < MAX_SOLVES:
            hitting = next(self._hitting_sets(cores, failed), None)
            if hitting is None:
                return None
            layouts, failures, system = self._attempt(hitting, dict.fromkeys(hitting, within))
            if layouts is not None:
                return self._cheapest(hitting, cores, failed, within)
            failed.add(hitting)
            for failure in failures:
                if failure.gave_up:
                    continue
                core = self._core_uses(minimal_conflict(system, failure), hitting)
                if not core:  # a conflict no further cut breaks, with these cut
                    continue
                cores.append(core)
        return None

    def _greedy(self, within: str | None) -> list[tuple[Use, str | None]] | None:
        """When the search for the fewest cuts meets its limits (many conflicts along one
        part, as in y + y.T done six times over): cut, one conflict after another, the
        last use of each minimal conflict, then drop every cut the others do without.
        Not the fewest cuts in general, but no cut that is not needed."""
        cuts: frozenset[Use] = frozenset()
        while True:
            layouts, failures, system = self._attempt(cuts, dict.fromkeys(cuts, within))
            if layouts is not None:
                break
            failure = next((f for f in failures if not f.gave_up), None)
            if failure is None or len(cuts) >= MAX_GREEDY_CUTS:
                return None
            core = self._core_uses(minimal_conflict(system, failure), cuts)
            if not core:
                return None
            cuts |= {max(core, key=lambda use: use.order)}
        for use in sorted(cuts, key=lambda u: u.order, reverse=True):
            if self._solve(cuts - {use}, within) is not None:
                cuts -= {use}
        layouts = self._solve(cuts, within)
        if layouts is None:
            return None
        _, bounds = self._tightened(cuts, dict.fromkeys(cuts, within), layouts)
        return [(use, bounds[use]) for use in sorted(cuts, key=lambda u: u.order)]

    def _hitting_sets(self, cores: list[frozenset[Use]], failed: set[frozenset[Use]]
                      ) -> Iterator[frozenset[Use]]:
        """Sets of uses meeting every core, smallest first (iterative deepening), in
        program order within a size. Each set grows by a use of the first core (fewest
        uses first) it does not meet yet, so only sets meeting every core are made: one
        use from each of six disjoint cores of three is 3^6 sets, not the C(18, 6) subsets
        of their uses."""
        ordered = [sorted(core, key=lambda u: u.order) for core in cores]
        ordered.sort(key=len)
        looked = 0

        def grow(chosen: frozenset[Use], size: int, seen: set[frozenset[Use]]
                 ) -> Iterator[frozenset[Use]]:
            nonlocal looked
            looked += 1
            missed = next((core for core in ordered if not chosen.intersection(core)), None)
            if missed is None:
                if len(chosen) == size and chosen not in seen:
                    seen.add(chosen)
                    yield chosen
                return
            if len(chosen) == size or looked > MAX_COMBINATIONS:
                return
            for use in missed:
                yield from grow(chosen | {use}, size, seen)

        for size in range(1, MAX_CUTS + 1):
            if looked > MAX_COMBINATIONS:
                return
            yield from (chosen for chosen in grow(frozenset(), size, set())
                        if chosen not in failed)

    def _cheapest(self, first: frozenset[Use], cores: list[frozenset[Use]],
                  failed: set[frozenset[Use]], within: str | None
                  ) -> list[tuple[Use, str | None]]:
        """The cheapest of `first` and a few more sets of its size that solve, each cut
        bounded to the cheapest kind of relayout that still solves."""
        options = []
        for hitting in itertools.islice(
                (h for h in self._hitting_sets(cores, failed) if len(h) == len(first)),
                ALTERNATIVES + 1):
            if hitting != first and self.solves >= MAX_SOLVES + ALTERNATIVES:
                break
            bounds: dict[Use, str | None] = dict.fromkeys(hitting, within)
            layouts = self._solve(hitting, within)
            if layouts is None:
                continue
            layouts, bounds = self._tightened(hitting, bounds, layouts)
            options.append((self._price(hitting, layouts), hitting, bounds))
        _, hitting, bounds = min(options, key=lambda option: option[0])
        return [(use, bounds[use]) for use in sorted(hitting, key=lambda u: u.order)]

    def _tightened(self, cuts: frozenset[Use], bounds: dict[Use, str | None],
                   layouts: dict[int, Layout]
                   ) -> tuple[dict[int, Layout], dict[Use, str | None]]:
        """Each cut bounded, in program order, by the cheapest kind that still solves
        (given the bounds before it), starting from the kinds of `layouts`."""
        targets = self._targets(cuts)
        for use in sorted(cuts, key=lambda u: u.order):
            kind = _kind(layouts, use, targets[use])
            bounds = {**bounds, use: kind}
            for cheaper in KINDS[1:KINDS.index(kind)] if kind in KINDS else ():
                tighter = {**bounds, use: cheaper}
                found = self._solve(cuts, None, tighter)
                if found is not None:
                    layouts, bounds = found, tighter
                    break
        return layouts, bounds

    def _targets(self, cuts: frozenset[Use]) -> dict[Use, Variable]:
        """The cast results' variables (as `_cut_system` numbers them)."""
        first = len(self.system.variables)
        return {use: Variable(first + i, use.var.shape, use.var.bitwidth, use.var.value)
                for i, use in enumerate(sorted(cuts, key=lambda u: u.order))}

    def _price(self, cuts: frozenset[Use], layouts: dict[int, Layout]) -> tuple:
        """How dear a set of relayouts is: by kind (shared memory, then shuffles, then
        register moves), then shuffles, registers moved, bytes through shared memory, then
        the registers the part's values take (elementwise work: a splat kept a splat
        longer is cheaper), then program order."""
        targets = self._targets(cuts)
        costs = [_cost(layouts[use.var.id], layouts[targets[use].id], use.var)
                 for use in cuts]
        counts = [sum(c.kind == kind for c in costs) for kind in reversed(KINDS[1:])]
        size = [sum(c.shuffles for c in costs), sum(c.registers_moved for c in costs),
                sum(c.smem_bytes for c in costs)]
        held = sum(_registers(layouts[var.id], var) for var in self.failure.variables
                   if var.domain == REGISTERS)
        return (*counts, *size, held, sorted(use.order for use in cuts))


def _kind(layouts: dict[int, Layout], use: Use, target: Variable) -> str:
    return _cost(layouts[use.var.id], layouts[target.id], use.var).kind


def _cost(source: Layout, target: Layout, var: Variable) -> RelayoutCost:
    try:
        return relayout_cost(source, target, var.shape, var.bitwidth)
    except LayoutError:  # a splat source is a register broadcast; else the solver refused it
        return RelayoutCost("registers" if source != target else "none")


def _registers(layout: Layout, var: Variable) -> int:
    try:
        return registers_per_thread(layout, var.shape, var.bitwidth)
    except LayoutError:
        return 0


def _inserted(constraint: Constraint) -> bool:
    """Whether `constraint` is a relayout this search inserted (named after a layout_cast,
    stated at the op whose operand it converts)."""
    origin = constraint.origin
    return origin.op_name == LAYOUT_CAST and origin.op is not None \
        and origin.op.name != LAYOUT_CAST


def _cuttable(op: ir.Operation, var: Variable) -> bool:
    """Whether a cast of var's value can go just before `op` (see the module docstring)."""
    value = var.value
    if var.domain != REGISTERS or value is None or var.bitwidth not in MOVED_BITWIDTHS:
        return False
    if not any(operand == value for operand in op.operands):
        return False
    owner = value.owner
    if not isinstance(owner, ir.Block):
        test = MATERIALISABLE.get(owner.operation)
        if test is not None and test(owner.operation.opview):
            return False
    if len(op.regions):  # a loop's initial value: not if the loop's body uses it too
        for use in value.uses:
            parent = use.owner.operation.parent
            while parent is not None:
                if parent.operation == op:
                    return False
                parent = parent.operation.parent
    return True


@dataclass(frozen=True)
class _Irreparable:
    """No set of cuts resolves the part: `core` is a conflict that stays one."""

    core: tuple[Constraint, ...]


def _consistent(system: EquationSystem, constraints: tuple[Constraint, ...]) -> bool:
    """Whether `constraints` (of `system`) have a solution; a search out of budget counts
    as one (nothing proven)."""
    variables = tuple({v.id: v for c in constraints for v in variables_of(c)}.values())
    try:
        _Unexplained(system, constraints, variables, SEARCH_BUDGET).run()
    except Unsatisfiable as failure:
        return any(f.gave_up for f in failure.failures)
    return True


class _Unexplained(_Solver):
    """The solver, keeping no account of why: it only answers whether a solution exists."""

    def _why(self, var: Variable) -> tuple:
        del var
        return ()

    def _proposal(self, decision: object) -> tuple:
        del decision
        return ()
