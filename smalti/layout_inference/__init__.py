"""Layout inference: an equation system over vector values, solved exactly and explained."""

from smalti.layout_inference.equations import (
    AllowedKinds,
    Equal,
    EquationSystem,
    Hint,
    IsLayout,
    Origin,
    Variable,
)
from smalti.layout_inference.infer import infer_function, infer_layouts
from smalti.layout_inference.rules import RULES
from smalti.layout_inference.solver import Conflict, Unsatisfiable, solve

__all__ = [
    "RULES", "AllowedKinds", "Conflict", "Equal", "EquationSystem", "Hint", "IsLayout",
    "Origin", "Unsatisfiable", "Variable", "infer_function", "infer_layouts", "solve",
]
