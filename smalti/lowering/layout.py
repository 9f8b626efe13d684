"""layout_cast: the same array in another register layout, in registers and with shuffles
within warps (smalti.lowering.relayout), through shared memory across warps
(smalti.lowering.relayout_smem), or a splat broadcast."""

from __future__ import annotations

from smalti.dialect.attributes import layout_to_text
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops import LayoutCastOp
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.packing import replicate
from smalti.lowering.registry import lowering_rule
from smalti.lowering.relayout import relayout_in_registers
from smalti.lowering.relayout_smem import relayout_through_smem
from smalti.lowering.values import FragmentedArray, elements_per_register, fragment_geometry
from smalti.tiling import LayoutError, WGSplatLayout
from smalti.tiling.relayout import relayout_kind


@lowering_rule(LayoutCastOp)
def _layout_cast(ctx: LoweringContext, op: LayoutCastOp) -> None:
    source = ctx.array(op, op.source)
    target = layouts_of(op, "out_layouts", 1)[0]
    if source.layout == target:
        ctx.set(op.result, source)
        return
    if isinstance(source.layout, WGSplatLayout):
        ctx.set(op.result, broadcast_splat(ctx, source, target))
        return
    where = (f"relayout from #smalti.{layout_to_text(source.layout)} to "
             f"#smalti.{layout_to_text(target)}")
    if isinstance(target, WGSplatLayout) or source.element.bits not in (8, 16, 32):
        raise error_at(op, f"{where} of {source.element.name} elements is not supported")
    try:
        kind = relayout_kind(source.layout, target, source.shape, source.element.bits)
        if kind != "smem":
            ctx.set(op.result, relayout_in_registers(ctx, source, target))
            return
        ctx.set(op.result, relayout_through_smem(ctx, op, source, target))
    except LayoutError as e:
        raise error_at(op, f"{where} cannot be done through shared memory: {e}") from None


def broadcast_splat(ctx: LoweringContext, source: FragmentedArray, target) -> FragmentedArray:
    """Every element of the target layout takes the splat's one value."""
    (value,), = source.vectors
    count, length = fragment_geometry(target, source.shape)
    pack = elements_per_register(source.element, length)
    value = replicate(ctx, source.element, value, pack)
    return FragmentedArray(target, source.shape, source.element,
                           tuple((value,) * (length // pack) for _ in range(count)), length)
