"""Lowering rules, keyed by op name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from jaxlib.mlir import ir

if TYPE_CHECKING:
    from smalti.lowering.context import LoweringContext

Rule = Callable[["LoweringContext", ir.Operation], None]
RULES: dict[str, Rule] = {}


def lowering_rule(*names: str) -> Callable[[Rule], Rule]:
    """Register `fn` as the lowering of every op named in `names`."""

    def register(fn: Rule) -> Rule:
        for name in names:
            if name in RULES:
                raise ValueError(f"two lowering rules for {name}")
            RULES[name] = fn
        return fn

    return register
