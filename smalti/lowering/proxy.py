"""Ordering the threads' shared-memory writes before the async proxy reads them.

wgmma and TMA stores read shared memory through the async proxy; a value the threads stored
with `st.shared` is visible to them only after `fence.proxy.async` in every writing thread
and a barrier that makes the whole warpgroup's writes precede the read. The lowering keeps
one flag, `LoweringContext.unpublished_smem_writes`, set by every generic shared-memory
store (`smem.store_smem`; kept set conservatively across branches and loop iterations),
and publishes before an async-proxy read only when it is set: TMA-fed loops pay nothing.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.checks import is_smem_type
from smalti.dialect.definition import Proxy, SmaltiOp
from smalti.lowering.context import LoweringContext
from smalti.lowering.warpgroup import warpgroup_sync

FENCE = "fence.proxy.async.shared::cta"


def publish_smem_writes(ctx: LoweringContext) -> None:
    """Make pending generic writes visible to the async proxy: fence, then meet."""
    if ctx.unpublished_smem_writes:
        ctx.builder.emit(FENCE)
        warpgroup_sync(ctx)
        ctx.unpublished_smem_writes = False


def writes_smem_generically(op: ir.OpView) -> bool:
    """Whether `op` writes shared memory through the generic proxy (its declared effects,
    on operands that are shared-memory refs)."""
    return isinstance(op, SmaltiOp) and any(
        effect.kind == "write" and effect.proxy == Proxy.GENERIC and is_smem_type(value.type)
        for effect, value in op.memory_effects())


def writes_smem(block: ir.Block) -> bool:
    """Whether any op in `block` (nested regions included) writes shared memory through the
    generic proxy: a loop whose body does must publish at the top of every iteration's
    async reads."""
    for op in block.operations:
        if writes_smem_generically(op.operation.opview):
            return True
        if any(writes_smem(inner) for region in op.operation.regions
               for inner in region.blocks):
            return True
    return False
