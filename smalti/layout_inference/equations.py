"""The equation system: variables for vector values, and the constraints ops put on them.

Values are independent of MLIR so that the solver can be tested (and fuzzed) on its own;
`Origin` carries the op and location a constraint came from, for explanations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from smalti.layout_inference.expressions import Expression
from smalti.tiling import Layout

REGISTERS = "registers"
SMEM = "smem"


@dataclass(frozen=True)
class Variable:
    """The layout of one vector value (domain REGISTERS: a register layout) or the
    transforms of one shared-memory ref (domain SMEM: a tuple of tile/swizzle/transpose)."""

    id: int
    shape: tuple[int, ...]
    bitwidth: int = 32
    value: Any = field(default=None, compare=False, hash=False)  # the ir.Value, for messages
    domain: str = REGISTERS


@dataclass(frozen=True)
class Origin:
    """Which op asked for a constraint, where, and why (for failure explanations)."""

    op_name: str
    location: Any = field(default=None, compare=False, hash=False)  # ir.Location or None
    reason: str = ""
    op: Any = field(default=None, compare=False, hash=False)  # the ir.Operation, or None


@dataclass(frozen=True)
class Equal:
    """Two values share one layout (an elementwise op's operands and result)."""

    a: Variable
    b: Variable
    origin: Origin


@dataclass(frozen=True)
class IsLayout:
    """A value has exactly this layout (a layout_cast, an annotation, a fixed-layout op)."""

    var: Variable
    layout: Layout
    origin: Origin


@dataclass(frozen=True)
class AllowedKinds:
    """A value's layout must be one of these layout classes (e.g. loads cannot make splats)."""

    var: Variable
    kinds: frozenset[type]
    origin: Origin


@dataclass(frozen=True)
class Hint:
    """A preferred layout, tried in order of priority when the equations leave a choice."""

    var: Variable
    layout: Layout
    priority: int
    origin: Origin


@dataclass(frozen=True)
class Derived:
    """target's layout is `expression` applied to source's (a reduction, a broadcast, ...)."""

    target: Variable
    source: Variable
    expression: Expression
    origin: Origin


@dataclass(frozen=True)
class Requires:
    """A check of var's final value: `test` returns None when it holds, else why not
    (e.g. "TMA cannot write a 64-byte swizzle with a 32-byte inner box")."""

    var: Variable
    test: Callable[[Any], str | None]
    origin: Origin


@dataclass(frozen=True)
class RelayoutAllowed:
    """`target` may differ from `source`, as long as the lowering can convert between them;
    with `within`, only by a relayout of that kind or a cheaper one ("none", "registers",
    "shuffles", "smem": smalti.tiling.relayout), as when inference looks for relayouts
    within warps before those through shared memory."""

    source: Variable
    target: Variable
    origin: Origin
    within: str | None = None


Constraint = Equal | IsLayout | AllowedKinds | Derived | RelayoutAllowed | Requires


def variables_of(constraint: Constraint) -> tuple[Variable, ...]:
    """The variables a constraint is about."""
    match constraint:
        case Equal(a=a, b=b):
            return (a, b)
        case Derived(target=target, source=source) | RelayoutAllowed(source=source,
                                                                     target=target):
            return (source, target)
        case IsLayout(var=var) | AllowedKinds(var=var) | Requires(var=var):
            return (var,)
    raise TypeError(f"not a constraint: {constraint!r}")


@dataclass
class EquationSystem:
    variables: list[Variable] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    hints: list[Hint] = field(default_factory=list)
    # hints by variable id, with their positions in `hints`; built on first use, extended as
    # hints are appended (`hints` only grows)
    _hint_index: dict[int, list[tuple[int, Hint]]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _hints_indexed: int = field(default=0, init=False, repr=False, compare=False)

    def hints_of(self, var_ids: Iterable[int]) -> list[tuple[int, Hint]]:
        """The hints about these variables, each with its position in `hints`, in that
        order: what a search over part of the system reads, at the cost of that part (the
        search for relayouts to insert solves thousands of small parts of one system)."""
        for position in range(self._hints_indexed, len(self.hints)):
            hint = self.hints[position]
            self._hint_index.setdefault(hint.var.id, []).append((position, hint))
        self._hints_indexed = len(self.hints)
        found = [item for i in var_ids for item in self._hint_index.get(i, ())]
        found.sort(key=lambda item: item[0])
        return found

    def new_variable(self, shape: tuple[int, ...], bitwidth: int = 32,
                     value: Any = None, domain: str = REGISTERS) -> Variable:
        var = Variable(len(self.variables), tuple(shape), bitwidth, value, domain)
        self.variables.append(var)
        return var

    def add(self, item: Constraint | Hint) -> None:
        if isinstance(item, Hint):
            self.hints.append(item)
        else:
            self.constraints.append(item)
