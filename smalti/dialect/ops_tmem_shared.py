"""Tensor memory shared by a block's warp-specialised roles (sm_100a): one warpgroup
allocates, every warpgroup of the block gets the address.

    %acc = "smalti.tmem_alloc_shared"() {columns = 256 : i64, warpgroup = 2 : i64}
        : () -> memref<128x256xf32, "tmem">
    ...  // the MMA role writes %acc, the epilogue role (warpgroup 2) reads it
    "smalti.tmem_dealloc"(%acc) : (memref<128x256xf32, "tmem">) -> ()  // in warpgroup 2

`smalti.tmem_alloc` is warpgroup-collective: each warpgroup that runs it allocates a region
of its own, so an MMA role cannot write an accumulator that an epilogue role reads. This op
stands at the top level of the kernel, before the roles branch off: warp 0 of `warpgroup`
allocates `columns` columns (`tcgen05.alloc`, `.cta_group::2` in a kernel of collective
MMAs: warp 0 of that warpgroup in each CTA of the pair), and the block meets (tcgen05 fences
around `bar.sync 0`) before every thread reads the address. The region is freed by
`smalti.tmem_dealloc` run by that warpgroup alone (in its warpgroup_region, after the last
access of every role to the region: e.g. once the epilogue has waited for the last MMA and
loaded its result), so no other role's register budget is involved.
"""

from __future__ import annotations

from jaxlib.mlir.dialects import func

from smalti.dialect.definition import INTEGER, Attr, Trait
from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import kernel_warpgroups
from smalti.dialect.ops_tmem import TmemAllocOp


class TmemAllocSharedOp(TmemAllocOp):
    """Allocates `columns` TMEM columns once for the whole block (warp 0 of `warpgroup` runs
    `tcgen05.alloc`); every thread of the block gets the address. A `smalti.tmem_dealloc`
    frees it, as it frees a `smalti.tmem_alloc`'s region."""

    OPERATION_NAME = "smalti.tmem_alloc_shared"
    TRAITS = Trait.BLOCK_COLLECTIVE

    warpgroup = Attr(INTEGER, "the warpgroup whose warp 0 allocates (and later frees)",
                     minimum=0)

    def verify_op(self) -> None:
        super().verify_op()
        op = self.operation
        parent = op.parent
        if parent is None or not isinstance(parent.opview, func.FuncOp):
            raise error_at(op, "must stand at the top level of the kernel body (every thread "
                               "of the block meets in it), not inside another op")
        warpgroups = kernel_warpgroups(parent)
        if self.warpgroup >= warpgroups:
            raise error_at(op, f"'warpgroup' {self.warpgroup} is not a warpgroup of the "
                               f"kernel, which has {warpgroups}")
