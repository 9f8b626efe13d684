"""Lowering rules, keyed by op class: `@lowering_rule(WgmmaOp)` over
`fn(ctx, op)`, where `op` is the typed op (its OpView), read by field name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from smalti.dialect.registry import OpRegistry

if TYPE_CHECKING:
    from smalti.lowering.context import LoweringContext

Rule = Callable[["LoweringContext", Any], None]
RULES: OpRegistry[Rule] = OpRegistry("lowering rules")
lowering_rule = RULES.register
