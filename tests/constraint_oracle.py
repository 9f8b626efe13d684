"""Whether one layout-inference constraint holds under an assignment, stated directly from
the constraint (no solver): what the tests' independent searches over assignments check
(tests/test_inference_programs.py, tests/test_inferred_relayouts.py,
tests/differential/refusals.py)."""

from __future__ import annotations

from collections.abc import Callable

from smalti.layout_inference.equations import (
    AllowedKinds,
    Derived,
    Equal,
    IsLayout,
    RelayoutAllowed,
    Requires,
    Variable,
)
from smalti.layout_inference.solver import relayout_supported
from smalti.tiling import Layout


class UnknownConstraint(TypeError):
    """A constraint kind this oracle does not evaluate."""


def constraint_holds(constraint: object, layout_of: Callable[[Variable], Layout]) -> bool:
    match constraint:
        case Equal(a=a, b=b):
            return layout_of(a) == layout_of(b)
        case IsLayout(var=var, layout=layout):
            return layout_of(var) == layout
        case AllowedKinds(var=var, kinds=kinds):
            return isinstance(layout_of(var), tuple(kinds))
        case Derived(target=target, source=source, expression=expression):
            return expression.forward(layout_of(source)) == layout_of(target)
        case RelayoutAllowed(source=source, target=target):
            return relayout_supported(layout_of(source), layout_of(target), source.shape,
                                      source.bitwidth)
        case Requires(var=var, test=test):
            return test(layout_of(var)) is None
    raise UnknownConstraint(type(constraint).__name__)
