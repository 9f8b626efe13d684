"""tmem_alloc_shared (smalti/dialect/ops_tmem_shared.py has the semantics): warp 0 of the
owning warpgroup allocates into a static shared slot, and the whole block meets before
every thread reads the address back (PTX ISA "tcgen05.alloc", "tcgen05.fence"):

    shr.u32 %warp, %tid.x, 5;  setp.ne.u32 %p, %warp, 4 * warpgroup;  @%p bra $skip;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%slot], 256;
    $skip:
    tcgen05.fence::before_thread_sync;  bar.sync 0;  tcgen05.fence::after_thread_sync;
    ld.shared.b32 %taddr, [%slot];

`.cta_group::2` in a kernel of collective MMAs (warp 0 of that warpgroup in each CTA of the
pair). The region is freed by smalti.tmem_dealloc in the owning warpgroup.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.ops_tcgen05 import kernel_cta_group
from smalti.dialect.ops_tmem_shared import TmemAllocSharedOp
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.lowering.tmem import SLOT_BYTES, TmemRef
from smalti.ptx import Address, Guard, Immediate
from smalti.tiling import WARP_SIZE, WARPGROUP_SIZE

WARPS_PER_WARPGROUP = WARPGROUP_SIZE // WARP_SIZE


@lowering_rule(TmemAllocSharedOp)
def _tmem_alloc_shared(ctx: LoweringContext, op: TmemAllocSharedOp) -> None:
    b = ctx.builder
    slot = b.compute("mov.u32", "u32", ctx.scratch_shared("tmem_shared_slot", SLOT_BYTES,
                                                          align=SLOT_BYTES))
    warp = b.compute("shr.u32", "u32", b.special("%tid.x"), WARP_SIZE.bit_length() - 1)
    others = b.compute("setp.ne.u32", "pred", warp, WARPS_PER_WARPGROUP * op.warpgroup)
    skip = b.new_label("tmem_shared_allocated")
    b.emit("bra", skip, guard=Guard(others))
    b.emit(f"tcgen05.alloc.cta_group::{kernel_cta_group(op.operation)}.sync.aligned"
           ".shared::cta.b32", Address(slot), Immediate(op.columns))
    b.place(skip)
    b.emit("tcgen05.fence::before_thread_sync")
    b.emit("bar.sync", Immediate(0))
    b.emit("tcgen05.fence::after_thread_sync")
    ctx.smem_pending = ()  # the block met
    address = b.compute("ld.shared.b32", "b32", Address(slot))
    ctx.set(op.result, TmemRef.of(address, ir.MemRefType(op.result.type), op.columns))
