"""Solve an EquationSystem: union-find over equalities, then checks, then an ordered choice.

Order of work (deterministic):
1. Union the variables of every `Equal`; each class must end with one layout.
2. A class with `IsLayout` constraints takes that layout; two different ones conflict.
3. A fixed layout must be of every `AllowedKinds` of the class and fit every member's shape.
4. A class left open takes the first candidate that passes step 3, candidates being its
   hints by descending priority (ties: lower variable id first, then insertion order),
   then the widest strided layout that fits, then splat.
A failure names the shortest chain of constraints that forces it (see `Conflict`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from smalti.layout_inference.equations import (
    AllowedKinds,
    Constraint,
    Equal,
    EquationSystem,
    IsLayout,
    Variable,
)
from smalti.tiling import (
    WARPGROUP_SIZE,
    Layout,
    LayoutError,
    WGSplatLayout,
    WGStridedLayout,
    check_layout_fits,
)


@dataclass(frozen=True)
class Conflict:
    """Why no assignment exists: the smallest chain of constraints found, in order."""

    message: str
    chain: tuple[Constraint, ...]
    cast_variable: Variable | None = None  # a layout_cast of this value breaks the chain,
    cast_layout: Layout | None = None  # converting it to this layout


class Unsatisfiable(Exception):
    def __init__(self, conflict: Conflict) -> None:
        self.conflict = conflict
        super().__init__(conflict.message)


def widest_strided_layout(shape: tuple[int, ...], bitwidth: int) -> WGStridedLayout | None:
    """The strided layout with the longest vector (at most 128 bits) that fits `shape`."""
    vec = max(1, 128 // max(bitwidth, 1))
    while vec >= 1:
        layout = WGStridedLayout(vec)
        if fits(layout, shape):
            return layout
        vec //= 2
    return None


def fits(layout: Layout, shape: tuple[int, ...]) -> bool:
    try:
        check_layout_fits(layout, shape)
    except LayoutError:
        return False
    return True


class _UnionFind:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, x: int) -> int:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def solve(system: EquationSystem) -> dict[int, Layout]:
    """A layout for every variable (by id); raises Unsatisfiable with an explanation."""
    n = len(system.variables)
    uf = _UnionFind(n)
    edges: dict[int, list[tuple[int, Equal]]] = defaultdict(list)
    fixed: dict[int, list[IsLayout]] = defaultdict(list)
    allowed: dict[int, list[AllowedKinds]] = defaultdict(list)
    for constraint in system.constraints:
        match constraint:
            case Equal(a=a, b=b):
                uf.union(a.id, b.id)
                edges[a.id].append((b.id, constraint))
                edges[b.id].append((a.id, constraint))
            case IsLayout(var=var):
                fixed[var.id].append(constraint)
            case AllowedKinds(var=var):
                allowed[var.id].append(constraint)

    members: dict[int, list[Variable]] = defaultdict(list)
    for var in system.variables:
        members[uf.find(var.id)].append(var)
    hints: dict[int, list] = defaultdict(list)
    for order, hint in enumerate(system.hints):
        hints[uf.find(hint.var.id)].append((-hint.priority, hint.var.id, order, hint.layout))

    def chain(source: int, target: int) -> tuple[Equal, ...]:
        return _shortest_chain(edges, source, target)

    solution: dict[int, Layout] = {}
    for root, vars_ in sorted(members.items()):
        class_fixed = [c for v in vars_ for c in fixed[v.id]]
        class_allowed = [c for v in vars_ for c in allowed[v.id]]
        if class_fixed:
            first = class_fixed[0]
            for other in class_fixed[1:]:
                if other.layout != first.layout:
                    path = chain(first.var.id, other.var.id)
                    raise Unsatisfiable(Conflict(
                        "conflicting layouts required for one value", (first, *path, other),
                        *_cast_point(first, path, other)))
            _check_choice(first.layout, first, vars_, class_allowed, chain)
            layout = first.layout
        else:
            layout = _choose(vars_, sorted(hints[root]), class_allowed)
        for var in vars_:
            solution[var.id] = layout
    return solution


def _check_choice(layout: Layout, source: IsLayout, vars_: list[Variable],
                  class_allowed: list[AllowedKinds], chain) -> None:
    for restriction in class_allowed:
        if not isinstance(layout, tuple(restriction.kinds)):
            path = chain(source.var.id, restriction.var.id)
            raise Unsatisfiable(Conflict(
                f"a {_kind_name(type(layout))} layout is not allowed here",
                (source, *path, restriction)))
    for var in vars_:
        if not fits(layout, var.shape):
            path = chain(source.var.id, var.id)
            raise Unsatisfiable(Conflict(
                f"the layout does not fit shape {list(var.shape)}", (source, *path)))


def _choose(vars_: list[Variable], ranked_hints: list, class_allowed: list[AllowedKinds]
            ) -> Layout:
    """The first candidate (hints, widest strided, splat) that every constraint accepts."""
    bitwidth = max(v.bitwidth for v in vars_)
    candidates = [layout for *_, layout in ranked_hints]
    for shape in dict.fromkeys(v.shape for v in vars_):
        if (strided := widest_strided_layout(shape, bitwidth)) is not None:
            candidates.append(strided)
    candidates.append(WGSplatLayout())
    for layout in candidates:
        if all(isinstance(layout, tuple(r.kinds)) for r in class_allowed) and all(
                fits(layout, v.shape) for v in vars_):
            return layout
    shapes = sorted({v.shape for v in vars_})
    raise Unsatisfiable(Conflict(
        f"no layout fits a vector of shape {' and '.join(map(str, map(list, shapes)))} "
        f"over the {WARPGROUP_SIZE} threads of a warpgroup",
        tuple(class_allowed)))


def _shortest_chain(edges: dict[int, list[tuple[int, Equal]]], source: int, target: int
                    ) -> tuple[Equal, ...]:
    """The fewest Equal constraints linking two variables of one class (BFS)."""
    if source == target:
        return ()
    previous: dict[int, tuple[int, Equal]] = {}
    queue = deque([source])
    seen = {source}
    while queue:
        node = queue.popleft()
        for neighbour, equation in edges[node]:
            if neighbour not in seen:
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


def _cast_point(start: IsLayout, path: tuple[Equal, ...], end: Constraint
                ) -> tuple[Variable | None, Layout | None]:
    """Where a layout_cast breaks the chain: the operand of the op of its last equation.

    Rules write Equal(a=operand, b=result), so casting `a` before that op splits the class.
    The cast goes to the layout of whichever side the operand is not on.
    """
    if not path:
        return None, None
    last = path[-1]
    end_var = getattr(end, "var", None)
    end_layout = getattr(end, "layout", None)
    if end_var is not None and last.a.id == end_var.id:
        return last.a, start.layout
    return last.a, end_layout


def _kind_name(kind: type) -> str:
    return {WGSplatLayout: "splat", WGStridedLayout: "strided"}.get(kind, "tiled")
