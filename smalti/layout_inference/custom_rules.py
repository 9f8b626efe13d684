"""Inference rules of custom_primitive: its declared layouts and transforms are fixed, so the
rest of the kernel adapts to them (with relayouts where a value is also wanted otherwise)."""

from __future__ import annotations

from smalti.dialect.ops_custom import CustomPrimitiveOp, CustomYieldOp
from smalti.layout_inference.rules import RuleContext, rule


@rule(CustomPrimitiveOp)
def _custom_primitive(ctx: RuleContext, op: CustomPrimitiveOp) -> None:
    """Each vector operand and result has its declared layout, each ref its transforms."""
    for value, layout in zip(op.vectors, op.in_layouts, strict=True):
        ctx.fix(value, layout, "custom_primitive declares its operands' layouts")
    for value, layout in zip(op.outputs, op.out_layouts, strict=True):
        ctx.fix(value, layout, "custom_primitive declares its results' layouts")
    for ref, transforms in zip(op.refs, op.in_transforms, strict=True):
        ctx.fix(ref, transforms, "custom_primitive declares its shared-memory transforms")


@rule(CustomYieldOp)
def _custom_yield(ctx: RuleContext, op: CustomYieldOp) -> None:
    """Per-thread scalars: nothing to infer (the parent's rule fixes the results)."""
    del ctx, op
