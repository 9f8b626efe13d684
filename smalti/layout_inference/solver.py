"""Solve an EquationSystem exactly, and explain failures.

Order of work (deterministic):
1. Union the variables of every `Equal`: each class ends with one layout.
2. Split the classes into independent parts (classes linked by expressions or relayouts):
   each part is solved on its own, so that one impossible part neither hides the others'
   answers nor makes the search backtrack through them.
3. Per part, propagate to a fixed point: an `IsLayout` assigns its class; an assigned class
   checks its `AllowedKinds`, shapes, costs (no replicated layout over the register limit,
   `smalti.tiling.cost`) and `Requires`, pushes its layout through `Derived` expressions
   (forward, and backward where the expression is invertible) and checks `RelayoutAllowed`
   pairs.
4. Search what stays open, in a fixed order (the class with the highest-priority hint
   first, then the lowest variable id; but a class that an assigned neighbour makes
   suggestions for goes before), trying for each class its candidates in order: its hints
   (by priority), layouts suggested by assigned neighbours, then the defaults (the widest
   strided layout that fits, every strided width, the canonical wgmma family, splat last)
   cheapest first: fewest relayout steps to assigned neighbours, then fewest registers per
   thread. Each choice propagates; a conflict undoes it (a trail, not copies) and tries
   the next, backtracking if a class runs out. The search is complete over these
   candidates, under a budget of choices per part.
A conflict names the constraints that force it: for each side, the chain of equalities
from the constraint that fixed a class to the variable in question, recursively through
the expressions that carried layouts between classes. `smalti.layout_inference.conflicts`
shrinks a failed part to a minimal set of constraints in conflict.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass

from smalti.layout_inference.equations import (
    SMEM,
    AllowedKinds,
    Constraint,
    Derived,
    Equal,
    EquationSystem,
    Hint,
    IsLayout,
    Origin,
    RelayoutAllowed,
    Requires,
    Variable,
    variables_of,
)
from smalti.tiling import (
    WARPGROUP_SIZE,
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    Layout,
    LayoutError,
    WGSplatLayout,
    WGStridedLayout,
    check_layout_fits,
    lowers_without_smem,
)
from smalti.tiling.cost import registers_per_thread, replication_problem
from smalti.tiling.relayout import relayout_kind, smem_relayout_problem
from smalti.tiling.smem import element_size, physical_shape

SEARCH_BUDGET = 100_000  # candidate layouts tried, per independent part, before giving up

# Tried after a class's own hints and suggestions, so that the search is complete over
# every layout these name (the ones that fit the class's shapes).
FALLBACK_CANDIDATES: tuple[Layout, ...] = (
    *(WGStridedLayout(vec) for vec in (16, 8, 4, 2, 1)),
    WGMMA_LAYOUT, WGMMA_ROW_LAYOUT, WGMMA_COL_LAYOUT, WGMMA_TRANSPOSED_LAYOUT,
    WGMMA_LAYOUT_8BIT, WGSplatLayout(),
)

# Relayouts by cost (smalti.tiling.relayout): none, register moves, shuffles within warps, a
# round trip through shared memory (across warps); then those the lowering refuses.
_RELAYOUT_RANK = {"none": 0, "registers": 1, "shuffles": 2, "smem": 3, "unsupported": 4}


@dataclass(frozen=True)
class Conflict:
    """Why no assignment exists: the constraints in conflict, in a readable order.

    When the search ran out of candidates for a class (rather than propagation meeting a
    contradiction), `variable` is one of its values and `attempts` says, per candidate
    tried, why it failed."""

    message: str
    chain: tuple[Constraint | Hint, ...]
    variable: Variable | None = None
    attempts: tuple[tuple[Layout, str], ...] = ()


@dataclass(frozen=True)
class Failure:
    """One independent part of the system without an assignment: the first conflict the
    solver met there, and the part's constraints and variables (to minimise the conflict).
    `gave_up`: the search ran out of budget, so no assignment was found but none was
    ruled out either."""

    conflict: Conflict
    constraints: tuple[Constraint, ...]
    variables: tuple[Variable, ...]
    gave_up: bool = False


class Unsatisfiable(Exception):
    def __init__(self, conflict: Conflict, failures: tuple[Failure, ...] = ()) -> None:
        self.conflict = conflict
        self.failures = failures
        super().__init__(conflict.message)


@dataclass(frozen=True)
class _Decision:
    """A layout the search chose for a class, and what proposed it: a hint, a neighbour's
    expression or relayout (suggestions), or nothing (a default)."""

    var: Variable
    layout: Layout
    proposer: Hint | Derived | RelayoutAllowed | None


DEFAULT_ORIGIN = Origin("search", None, "nothing else decides it; the default layout")


def widest_strided_layout(shape: tuple[int, ...], bitwidth: int) -> WGStridedLayout | None:
    """The strided layout with the longest vector (at most 128 bits) that fits `shape`."""
    vec = max(1, 128 // max(bitwidth, 1))
    while vec >= 1:
        layout = WGStridedLayout(vec)
        if fits(layout, shape):
            return layout
        vec //= 2
    return None


@functools.cache
def fits(layout: Layout, shape: tuple[int, ...]) -> bool:
    """Whether `layout` applies to `shape` (memoised: tiled layouts build their maps)."""
    try:
        check_layout_fits(layout, shape)
    except LayoutError:
        return False
    return True


@functools.cache
def _transforms_fit(transforms: tuple, shape: tuple[int, ...], element_bytes: int) -> bool:
    try:
        physical_shape(transforms, shape, element_bytes)
    except (LayoutError, TypeError, ValueError):
        return False
    return True


def fits_variable(value: object, var: Variable) -> bool:
    """Whether `value` (a register layout, or SMEM transforms) applies to var's shape."""
    if var.domain == SMEM:
        return _transforms_fit(value, var.shape, element_size(var.bitwidth))
    return fits(value, var.shape)


def too_dear(layout: Layout, var: Variable) -> str | None:
    """Why `layout` costs var's value too many registers (a replicated layout over the
    limit of smalti.tiling.cost), or None. Only for layouts that fit var's shape."""
    if var.domain == SMEM:
        return None
    return replication_problem(layout, var.shape, var.bitwidth)


@functools.cache
def relayout_supported(source: Layout, target: Layout, shape: tuple[int, ...],
                       bitwidth: int) -> bool:
    """Relayouts the lowering performs: none at all, a splat broadcast to any layout, and
    between distributed layouts of 8-, 16- or 32-bit elements: within warps in registers and
    shuffles (smalti.lowering.relayout), across warps through shared memory where
    `smem_relayout_problem` finds none (smalti.lowering.relayout_smem)."""
    if source == target or isinstance(source, WGSplatLayout):
        return True
    if isinstance(target, WGSplatLayout) or bitwidth not in (8, 16, 32):
        return False
    try:
        return (lowers_without_smem(source, target, shape, bitwidth)
                or smem_relayout_problem(source, target, shape, bitwidth) is None)
    except LayoutError:
        return False


@functools.cache
def relayout_rank(source: Layout, target: Layout, shape: tuple[int, ...], bitwidth: int
                  ) -> int:
    """How dear a relayout is: 0 none, 1 register moves, 2 shuffles, 3 through shared
    memory, 4 not supported."""
    if not relayout_supported(source, target, shape, bitwidth):
        return _RELAYOUT_RANK["unsupported"]
    if source == target:
        return 0
    if isinstance(source, WGSplatLayout):
        return _RELAYOUT_RANK["registers"]
    return _RELAYOUT_RANK[relayout_kind(source, target, shape, bitwidth)]


def solve(system: EquationSystem) -> dict[int, Layout]:
    """A layout for every variable (by id); raises Unsatisfiable with an explanation."""
    return _Solver(system).run()


def solve_subset(system: EquationSystem, constraints: tuple[Constraint, ...],
                 variables: tuple[Variable, ...], budget: int | None = None
                 ) -> dict[int, Layout]:
    """A layout for each of `variables` satisfying `constraints` (a subset of system's,
    over those variables; system's hints still order the search): Unsatisfiable if none."""
    return _Solver(system, constraints, variables, budget).run()


def satisfiable(system: EquationSystem, constraints: tuple[Constraint, ...],
                variables: tuple[Variable, ...], budget: int | None = None) -> bool | None:
    """Whether `constraints` (a subset of system's, over `variables`) have an assignment:
    True, False, or None when the search ran out of `budget` first. Hints still order the
    search; they never decide the answer."""
    try:
        solve_subset(system, constraints, variables, budget)
    except Unsatisfiable as failure:
        return None if any(f.gave_up for f in failure.failures) else False
    return True


@dataclass(frozen=True)
class Solution:
    """A solved system that can also say why each variable got its layout."""

    layouts: dict[int, Layout]
    _solver: _Solver

    def reasons(self, var: Variable) -> tuple[Constraint | Hint, ...]:
        """The constraints (and search choices, as hints) that decided var's layout."""
        return self._solver._why(var)


def solve_explained(system: EquationSystem) -> Solution:
    solver = _Solver(system)
    return Solution(solver.run(), solver)


class _Conflicted(Exception):
    def __init__(self, conflict: Conflict) -> None:
        self.conflict = conflict


class _GaveUp(Exception):
    """The search ran out of budget in one part: nothing proven either way."""

    def __init__(self, conflict: Conflict) -> None:
        self.conflict = conflict


class _Solver:
    def __init__(self, system: EquationSystem, constraints: tuple[Constraint, ...] | None = None,
                 variables: tuple[Variable, ...] | None = None,
                 budget: int | None = None) -> None:
        self.system = system
        self.variables = tuple(system.variables if variables is None else variables)
        self.constraints = tuple(system.constraints if constraints is None else constraints)
        self.budget = SEARCH_BUDGET if budget is None else budget
        self.parent = {v.id: v.id for v in self.variables}
        self.edges: dict[int, list[tuple[int, Equal]]] = defaultdict(list)
        self.fixed: list[IsLayout] = []
        self.allowed: dict[int, list[AllowedKinds]] = defaultdict(list)
        self.derived_from: dict[int, list[Derived]] = defaultdict(list)  # by source var
        self.derived_into: dict[int, list[Derived]] = defaultdict(list)  # by target var
        self.relayouts: dict[int, list[RelayoutAllowed]] = defaultdict(list)
        self.requires: dict[int, list[Requires]] = defaultdict(list)
        for constraint in self.constraints:
            match constraint:
                case Equal(a=a, b=b):
                    self._union(a.id, b.id)
                    self.edges[a.id].append((b.id, constraint))
                    self.edges[b.id].append((a.id, constraint))
                case IsLayout():
                    self.fixed.append(constraint)
                case AllowedKinds(var=var):
                    self.allowed[var.id].append(constraint)
                case Derived(source=source, target=target):
                    self.derived_from[source.id].append(constraint)
                    self.derived_into[target.id].append(constraint)
                case RelayoutAllowed(source=source, target=target):
                    self.relayouts[source.id].append(constraint)
                    self.relayouts[target.id].append(constraint)
                case Requires(var=var):
                    self.requires[var.id].append(constraint)
        self.members: dict[int, list[Variable]] = defaultdict(list)
        for var in self.variables:
            self.members[self._find(var.id)].append(var)
        self.hints: dict[int, list[tuple[int, int, int, Hint]]] = defaultdict(list)
        for order, hint in system.hints_of(self.parent):
            self.hints[self._find(hint.var.id)].append(
                (-hint.priority, hint.var.id, order, hint))
        for ranked in self.hints.values():
            ranked.sort(key=lambda item: item[:3])
        self.layout: dict[int, Layout] = {}
        self.reason: dict[int, tuple[Variable, IsLayout | Derived | _Decision]] = {}
        self.trail: list[int] = []

    # Union-find over variable ids.
    def _find(self, x: int) -> int:
        parent = self.parent
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def _union(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    # Independent parts: classes linked by expressions or relayouts.
    def _parts(self) -> list[list[int]]:
        """The classes (roots), grouped into parts no constraint links, in program order."""
        link = {root: root for root in self.members}

        def find(x: int) -> int:
            while link[x] != x:
                link[x] = link[link[x]]
                x = link[x]
            return x

        for pairs in (self.derived_from, self.relayouts):
            for constraints in pairs.values():
                for c in constraints:
                    a, b = (c.source, c.target)
                    ra, rb = find(self._find(a.id)), find(self._find(b.id))
                    if ra != rb:
                        link[max(ra, rb)] = min(ra, rb)
        parts: dict[int, list[int]] = defaultdict(list)
        for root in sorted(self.members):
            parts[find(root)].append(root)
        return list(parts.values())

    # Entry point.
    def run(self) -> dict[int, Layout]:
        parts = self._parts()
        part_of = {root: i for i, part in enumerate(parts) for root in part}
        fixed: list[list[IsLayout]] = [[] for _ in parts]
        for constraint in self.fixed:  # in program order within each part
            fixed[part_of[self._find(constraint.var.id)]].append(constraint)
        failed: list[tuple[list[int], Conflict, bool]] = []
        for part, part_fixed in zip(parts, fixed, strict=True):
            start = len(self.trail)
            try:
                for constraint in part_fixed:
                    self._assign(constraint.var, constraint.layout, constraint)
                self._search(part, start)
            except _Conflicted as failure:
                failed.append((part, failure.conflict, False))
            except _GaveUp as failure:
                failed.append((part, failure.conflict, True))
        if failed:
            by_root = self._constraints_by_root()
            failures = tuple(self._failure(part, conflict, by_root, gave_up)
                             for part, conflict, gave_up in failed)
            raise Unsatisfiable(failures[0].conflict, failures)
        return {v.id: self.layout[self._find(v.id)] for v in self.variables}

    def _constraints_by_root(self) -> dict[int, list[tuple[int, Constraint]]]:
        """Each constraint, with its position, under the root of its first variable: read
        once however many parts fail (a program with a thousand failing parts is searched
        for relayouts part by part)."""
        by_root: dict[int, list[tuple[int, Constraint]]] = defaultdict(list)
        for position, constraint in enumerate(self.constraints):
            by_root[self._find(variables_of(constraint)[0].id)].append((position, constraint))
        return by_root

    def _failure(self, part: list[int], conflict: Conflict,
                 by_root: dict[int, list[tuple[int, Constraint]]], gave_up: bool) -> Failure:
        variables = tuple(sorted((v for root in part for v in self.members[root]),
                                 key=lambda v: v.id))
        constraints = tuple(c for _, c in sorted(
            (item for root in part for item in by_root.get(root, ())), key=lambda i: i[0]))
        return Failure(conflict, constraints, variables, gave_up)

    # Assignment and propagation.
    def _assign(self, var: Variable, layout: Layout, why: IsLayout | Derived | _Decision
                ) -> None:
        """Give var's class `layout` and propagate; _Conflicted on any contradiction."""
        queue = deque([(var, layout, why)])
        while queue:
            var, layout, why = queue.popleft()
            root = self._find(var.id)
            if root in self.layout:
                if self.layout[root] != layout:
                    raise _Conflicted(self._clash(var, layout, why))
                continue
            self.layout[root] = layout
            self.reason[root] = (var, why)
            self.trail.append(root)
            for member in self.members[root]:
                self._check_member(member, layout)
                for d in self.derived_from[member.id]:
                    queue.extend(self._push_forward(d, layout))
                for d in self.derived_into[member.id]:
                    queue.extend(self._push_backward(d, layout))
                for r in self.relayouts[member.id]:
                    self._check_relayout(r)

    def _check_member(self, member: Variable, layout: Layout) -> None:
        for restriction in self.allowed[member.id]:
            if not isinstance(layout, tuple(restriction.kinds)):
                raise _Conflicted(Conflict(
                    f"a {_kind_name(layout)} layout is not allowed here",
                    (*self._why(member), restriction)))
        if not fits_variable(layout, member):
            what = "transforms do" if member.domain == SMEM else "layout does"
            raise _Conflicted(Conflict(
                f"the {what} not fit shape {list(member.shape)}", self._why(member)))
        if (problem := too_dear(layout, member)) is not None:
            raise _Conflicted(Conflict(f"this layout is too dear: {problem}",
                                       self._why(member)))
        for requirement in self.requires[member.id]:
            if (problem := requirement.test(layout)) is not None:
                raise _Conflicted(Conflict(problem, (*self._why(member), requirement)))

    def _push_forward(self, d: Derived, source_layout: Layout
                      ) -> Iterator[tuple[Variable, Layout, Derived]]:
        target_layout = d.expression.forward(source_layout)
        if target_layout is None:
            raise _Conflicted(Conflict(
                f"no layout exists for the {d.expression.describe()} of this layout",
                (*self._why(d.source), d)))
        yield d.target, target_layout, d

    def _push_backward(self, d: Derived, target_layout: Layout
                       ) -> Iterator[tuple[Variable, Layout, Derived]]:
        source_root = self._find(d.source.id)
        if source_root in self.layout:
            if d.expression.forward(self.layout[source_root]) != target_layout:
                raise _Conflicted(Conflict(
                    f"the {d.expression.describe()} cannot have the required layout",
                    (*self._why(d.source), d, *reversed(self._why(d.target)))))
            return
        if not d.expression.invertible:
            return
        source_layout = d.expression.backward(target_layout)
        if source_layout is None:
            raise _Conflicted(Conflict(
                f"no source layout makes the {d.expression.describe()} have this layout",
                (*self._why(d.target), d)))
        yield d.source, source_layout, d

    def _check_relayout(self, r: RelayoutAllowed) -> None:
        source, target = self._find(r.source.id), self._find(r.target.id)
        if source not in self.layout or target not in self.layout:
            return
        pair = (self.layout[source], self.layout[target], r.source.shape, r.source.bitwidth)
        if r.within is not None and relayout_supported(*pair) and (
                relayout_rank(*pair) > _RELAYOUT_RANK[r.within]):
            raise _Conflicted(Conflict(
                f"this relayout costs more than {r.within}",
                (*self._why(r.source), r, *reversed(self._why(r.target)))))
        if not relayout_supported(*pair):
            raise _Conflicted(Conflict(
                "this relayout is not supported (only splat broadcasts, no-op casts and "
                "relayouts of 8-, 16- and 32-bit elements between distributed layouts are)",
                (*self._why(r.source), r, *reversed(self._why(r.target)))))

    # Explanations.
    def _why(self, var: Variable) -> tuple[Constraint | Hint, ...]:
        """The constraints that gave var's class its layout, ending at var."""
        root = self._find(var.id)
        if root not in self.reason:
            return ()
        source, why = self.reason[root]
        path = self._path(source.id, var.id)
        match why:
            case IsLayout():
                return (why, *path)
            case Derived(source=upstream) if self._find(upstream.id) != root:
                return (*self._why(upstream), why, *path)
            case Derived(target=downstream):
                return (*self._why(downstream), why, *path)
            case _Decision():
                return (*self._proposal(why), *path)
        return path

    def _proposal(self, decision: _Decision) -> tuple[Constraint | Hint, ...]:
        """Why the search tried a layout, ending at the decision's variable."""
        match decision.proposer:
            case Hint(var=hinted) as hint:
                return (hint, *self._path(hinted.id, decision.var.id))
            case Derived(target=known, source=suggested) as d:
                return (*self._why(known), d, *self._path(suggested.id, decision.var.id))
            case RelayoutAllowed(target=known, source=suggested) as r:
                return (*self._why(known), r, *self._path(suggested.id, decision.var.id))
        return (Hint(decision.var, decision.layout, 0, DEFAULT_ORIGIN),)

    def _clash(self, var: Variable, layout: Layout, why: IsLayout | Derived | _Decision
               ) -> Conflict:
        """Two reasons give var's class two layouts: both chains, meeting at var."""
        existing = self._why(var)
        incoming: tuple[Constraint | Hint, ...]
        match why:
            case IsLayout():
                incoming = (why,)
            case Derived(source=upstream) if self._find(upstream.id) != self._find(var.id):
                incoming = (*self._why(upstream), why)
            case Derived(target=downstream):
                incoming = (*self._why(downstream), why)
            case _Decision():
                incoming = self._proposal(why)
        return Conflict("conflicting layouts required for one value",
                        (*existing, *reversed(incoming)))

    def _path(self, source: int, target: int) -> tuple[Equal, ...]:
        """The fewest Equal constraints linking two variables of one class (BFS)."""
        if source == target:
            return ()
        previous: dict[int, tuple[int, Equal]] = {}
        queue = deque([source])
        seen = {source}
        while queue:
            node = queue.popleft()
            for neighbour, equation in self.edges[node]:
                if neighbour in seen:
                    continue
                seen.add(neighbour)
                previous[neighbour] = (node, equation)
                if neighbour == target:
                    path = []
                    while neighbour != source:
                        neighbour, equation = previous[neighbour]
                        path.append(equation)
                    return tuple(reversed(path))
                queue.append(neighbour)
        return ()

    # Search.
    def _undo(self, mark: int) -> None:
        while len(self.trail) > mark:
            root = self.trail.pop()
            del self.layout[root]
            del self.reason[root]

    def _open_roots(self, part: list[int]) -> list[int]:
        """Unassigned classes in search order: best hint priority first, then lowest id."""
        roots = [r for r in part if r not in self.layout]
        return sorted(roots, key=lambda r: (self.hints[r][0][:1] if self.hints[r] else (1,), r))

    def _neighbours(self, root: int) -> Iterator[int]:
        """Classes linked to `root` by expressions or relayouts (whose candidates it shapes)."""
        for var in self.members[root]:
            for d in self.derived_from[var.id]:
                yield self._find(d.target.id)
            for d in self.derived_into[var.id]:
                yield self._find(d.source.id)
            for r in self.relayouts[var.id]:
                yield self._find(r.source.id)
                yield self._find(r.target.id)

    def _suggestions(self, root: int) -> list[tuple[Layout, Derived | RelayoutAllowed]]:
        """Layouts that assigned neighbours suggest for `root`, with what links them."""
        suggested: list[tuple[Layout, Derived | RelayoutAllowed]] = []
        for var in self.members[root]:
            for d in self.derived_from[var.id]:
                target = self.layout.get(self._find(d.target.id))
                if target is not None:
                    suggested.extend((c, d) for c in d.expression.source_candidates(target))
            for r in self.relayouts[var.id]:
                other = self.layout.get(self._find(r.target.id))
                if other is not None:
                    suggested.append((other, r))
        return suggested

    def _candidates(self, root: int
                    ) -> Iterator[tuple[Layout, Hint | Derived | RelayoutAllowed | None]]:
        """What to try for a class, in order, each with what proposed it: hints, then
        suggestions, then the defaults cheapest first. Lazy: the defaults are costed only
        if the hints and suggestions all fail (the search undoes each failed try, so the
        state they are costed in is the one the class was opened in)."""
        vars_ = self.members[root]
        kinds = [tuple(r.kinds) for v in vars_ for r in self.allowed.get(v.id, ())]
        shapes = list({(v.shape, v.bitwidth): v for v in vars_}.values())  # one per shape
        tried: set[Layout] = set()

        def fresh(layout: Layout) -> bool:
            if layout in tried:
                return False
            tried.add(layout)
            return (all(isinstance(layout, k) for k in kinds)
                    and all(fits_variable(layout, v) for v in shapes))

        # Hints and suggestions that need a relayout across warps (through shared memory) to
        # an assigned neighbour wait until the defaults are costed, among which they rank
        # after every layout that needs none.
        deferred: dict[Layout, Hint | Derived | RelayoutAllowed] = {}
        proposed = [(hint.layout, hint) for *_, hint in self.hints[root]]
        for layout, proposer in [*proposed, *self._suggestions(root)]:
            if vars_[0].domain != SMEM and self._crosses_warps(root, layout):
                deferred.setdefault(layout, proposer)
            elif fresh(layout):
                yield layout, proposer
        if vars_[0].domain == SMEM:  # no transforms at all is the fallback
            if fresh(()):
                yield (), None
            return
        bitwidth = max(v.bitwidth for v in vars_)
        defaults: list[Layout] = list(deferred)
        for shape in dict.fromkeys(v.shape for v in vars_):
            if (strided := widest_strided_layout(shape, bitwidth)) is not None:
                defaults.append(strided)
        defaults.extend(FALLBACK_CANDIDATES)
        for layout in self._by_cost(root, [d for d in defaults if d not in tried]):
            if fresh(layout):
                yield layout, deferred.get(layout)

    def _crosses_warps(self, root: int, layout: Layout) -> bool:
        """Whether giving the class `layout` needs a relayout through shared memory (or one
        not supported) to an assigned neighbour of a layout_cast."""
        for var in self.members[root]:
            for r in self.relayouts.get(var.id, ()):
                mine = self._find(r.source.id) == root
                other = self.layout.get(self._find((r.target if mine else r.source).id))
                if other is None:
                    continue
                source, target = (layout, other) if mine else (other, layout)
                if relayout_rank(source, target, r.source.shape, r.source.bitwidth
                                 ) >= _RELAYOUT_RANK["smem"]:
                    return True
        return False

    def _by_cost(self, root: int, layouts: list[Layout]) -> list[Layout]:
        """`layouts` that fit the class, cheapest first (stable): those within the register
        limit of replicated layouts, then fewest relayout steps to assigned relayout
        neighbours, then fewest registers per thread; splat last (it holds one value, so it
        is the answer only when nothing distributed is)."""
        vars_ = self.members[root]
        shapes = list({(v.shape, v.bitwidth): v for v in vars_}.values())  # one per shape
        largest = max(shapes, key=lambda v: (math.prod(v.shape) * v.bitwidth, v.id))
        neighbours = [(r, self.layout.get(self._find(
                          (r.target if self._find(r.source.id) == root else r.source).id)))
                      for v in vars_ for r in self.relayouts.get(v.id, ())]
        assigned = [(r, layout) for r, layout in neighbours if layout is not None]
        fitting = [layout for layout in dict.fromkeys(layouts)
                   if all(fits(layout, v.shape) for v in shapes)]

        def cost(layout: Layout) -> tuple[bool, bool, int, int]:
            dear = any(too_dear(layout, v) is not None for v in shapes)
            steps = 0
            for r, other in () if dear else assigned:  # too dear: last, whatever it costs
                source, target = ((layout, other) if self._find(r.source.id) == root
                                  else (other, layout))
                steps += relayout_rank(source, target, r.source.shape, r.source.bitwidth)
            registers = registers_per_thread(layout, largest.shape, largest.bitwidth)
            return (isinstance(layout, WGSplatLayout), dear, steps, registers)

        return sorted(fitting, key=cost)

    def _next_open(self, order: list[int]) -> int | None:
        """The next class to decide: one an assigned neighbour makes suggestions for (so
        known layouts spread before guesses), else the first open class in `order`."""
        for root in sorted({n for r in self.trail[self._scanned:] for n in self._neighbours(r)}):
            if root not in self.layout and self._suggestions(root):
                self._pending.append(root)
        self._scanned = len(self.trail)
        while self._pending:
            root = self._pending.pop()
            if root not in self.layout:
                return root
        while self._cursor < len(order) and order[self._cursor] in self.layout:
            self._cursor += 1
        return order[self._cursor] if self._cursor < len(order) else None

    def _search(self, part: list[int], start: int) -> None:
        """Decide the open classes of `part` (whose propagation began at trail mark
        `start`); _Conflicted when no assignment exists, _GaveUp past the budget."""
        order = self._open_roots(part)
        self._cursor, self._scanned, self._pending = 0, start, []
        budget = self.budget
        # One frame per decided class: (its remaining candidates, the trail mark before it,
        # why each candidate tried so far failed).
        frames: list[tuple[int, Iterator[tuple[Layout, object]], int,
                           list[tuple[Layout, str]]]] = []
        first_failure: Conflict | None = None
        while (root := self._next_open(order)) is not None:
            candidates = self._candidates(root)
            mark = len(self.trail)
            attempts: list[tuple[Layout, str]] = []
            while True:
                layout, proposer = next(candidates, (None, None))
                if layout is None:
                    if first_failure is None:
                        first_failure = self._no_candidate(root)
                    if not frames:
                        raise _Conflicted(self._exhausted(root, first_failure, attempts))
                    root, candidates, mark, attempts = frames.pop()
                    attempts.append((self.layout[root], "then no layout is left for the "
                                                        "values it constrains"))
                    self._undo(mark)
                    self._cursor, self._scanned, self._pending = 0, len(self.trail), []
                    continue
                budget -= 1
                if budget < 0:
                    raise _GaveUp(Conflict(
                        f"the layout search gave up after {self.budget} tries",
                        first_failure.chain if first_failure else (), self.members[root][0]))
                var = self.members[root][0]
                try:
                    self._assign(var, layout, _Decision(var, layout, proposer))
                except _Conflicted as failure:
                    self._undo(mark)
                    attempts.append((layout, failure.conflict.message))
                    if first_failure is None:
                        first_failure = failure.conflict
                    continue
                frames.append((root, candidates, mark, attempts))
                break

    def _exhausted(self, root: int, first_failure: Conflict,
                   attempts: list[tuple[Layout, str]]) -> Conflict:
        """The search tried every candidate of the class it decides first: the first
        contradiction it met, with each candidate and why it failed."""
        return Conflict(first_failure.message, first_failure.chain, self.members[root][0],
                        tuple(attempts))

    def _no_candidate(self, root: int) -> Conflict:
        vars_ = self.members[root]
        shapes = sorted({v.shape for v in vars_})
        restrictions = tuple(r for v in vars_ for r in self.allowed[v.id])
        return Conflict(
            f"no layout fits a vector of shape {' and '.join(map(str, map(list, shapes)))} "
            f"over the {WARPGROUP_SIZE} threads of a warpgroup", restrictions)


def _kind_name(layout: Layout) -> str:
    return {WGSplatLayout: "splat", WGStridedLayout: "strided"}.get(type(layout), "tiled")
