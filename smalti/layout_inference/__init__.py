"""Layout inference: an equation system over vector values, solved exactly and explained."""

from smalti.layout_inference import custom_rules  # noqa: F401  (registers its rules)
from smalti.layout_inference.equations import (
    AllowedKinds,
    Derived,
    Equal,
    EquationSystem,
    Hint,
    IsLayout,
    Origin,
    RelayoutAllowed,
    Variable,
)
from smalti.layout_inference.expressions import (
    Broadcast,
    Reduce,
    Reshape,
    Transpose,
    Unbroadcast,
)
from smalti.layout_inference.infer import explain_function, infer_function, infer_layouts
from smalti.layout_inference.rules import RULES
from smalti.layout_inference.solver import Conflict, Unsatisfiable, solve

__all__ = [
    "RULES", "AllowedKinds", "Broadcast", "Conflict", "Derived", "Equal", "EquationSystem",
    "Hint", "IsLayout", "Origin", "Reduce", "RelayoutAllowed", "Reshape", "Transpose",
    "Unbroadcast", "Unsatisfiable", "Variable", "explain_function", "infer_function",
    "infer_layouts", "solve",
]
