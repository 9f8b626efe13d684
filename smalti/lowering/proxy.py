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

from smalti.dialect.ops_memory import is_smem_type
from smalti.lowering.barriers import warpgroup_sync
from smalti.lowering.context import LoweringContext

FENCE = "fence.proxy.async.shared::cta"


def publish_smem_writes(ctx: LoweringContext) -> None:
    """Make pending generic writes visible to the async proxy: fence, then meet."""
    if ctx.unpublished_smem_writes:
        ctx.builder.emit(FENCE)
        warpgroup_sync(ctx)
        ctx.unpublished_smem_writes = False


def writes_smem(block: ir.Block) -> bool:
    """Whether any op in `block` (nested regions included) stores a vector to shared memory:
    a loop whose body does must publish at the top of every iteration's async reads."""
    for op in block.operations:
        op = op.operation
        if op.name == "smalti.vector_store" and is_smem_type(op.operands[1].type):
            return True
        if any(writes_smem(inner) for region in op.regions for inner in region.blocks):
            return True
    return False
