"""Shared-memory and TMA ops: slice_smem, with_transforms, select_stage, async_load,
async_store(_wait).

    %r = "smalti.slice_smem"(%offset) : (index) -> memref<128x64xbf16, #smem>
    %t = "smalti.with_transforms"(%r) {transforms = [#smalti.tile<[8, 64]>,
                                                     #smalti.swizzle<128>]}
    %s = "smalti.select_stage"(%k, %stage0, %stage1) : (index, memref<..>, memref<..>) -> ..
    "smalti.async_load"(%gmem, %smem, %barriers, %i, %x, %y) {slice_lengths = array<i64: ...>}
    "smalti.async_load"(...) {collective = array<i64: 0>}  // shared along cluster dim x
    "smalti.async_load"(...) {cta_group = 2 : i64}  // completes on the pair leader's barrier
    "smalti.async_store"(%smem, %gmem, %x, %y)
    "smalti.async_store_wait"() {pending = 0 : i64}

(#smem stands for #gpu.address_space<workgroup>.)

Every slice carves the kernel's one dynamic shared-memory buffer at a constant byte offset;
slices may overlap (aliasing is the author's business, as in CUDA).
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from smalti.dialect.checks import (
    check_constant_slice,
    check_index,
    check_smem_ref,
    collective_dims,
    constant_index,
    element_bytes,
    is_gmem_type,
    is_symmetric_type,
    slice_end_bytes,
    smem_size_bytes,
)
from smalti.dialect.definition import (
    I64_ARRAY,
    INTEGER,
    TRANSFORMS,
    Attr,
    Effect,
    Operand,
    Proxy,
    Result,
    SmaltiOp,
    Trait,
)
from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import enclosing_kernel, kernel_cluster, unpaired_cluster
from smalti.dialect.ops_sync import check_barriers
from smalti.tiling import LayoutError, physical_shape

SMEM_ALIGNMENT = 16  # bytes every slice starts on (16-byte vector accesses, TMA, wgmma)
MAX_SMEM_BYTES = 227 * 1024  # dynamic shared memory one sm_90 block may use
TMA_CTA_GROUPS = (1, 2)  # async_load's cta_group: its own barrier, or the pair leader's
PAIR_TMA_ARCHES = ("sm_100a",)  # cp.async.bulk.tensor .cta_group::2 (PTX ISA: sm_100a)


class SliceSmemOp(SmaltiOp):
    """A typed view of the dynamic shared-memory buffer at a constant byte offset."""

    OPERATION_NAME = "smalti.slice_smem"
    USER_FACING = False  # the DSL carves its declared buffers with it

    offset = Operand("the byte offset, an arith.constant index")
    result = Result("the shared-memory ref")

    @property
    def offset_bytes(self) -> int:
        value = constant_index(self.offset)
        assert value is not None
        return value

    def end_bytes(self) -> int | None:
        """The byte after the slice, when its offset and type are well formed."""
        return slice_end_bytes(self.offset, self.result)

    def verify_op(self) -> None:
        op = self.operation
        offset, ref = check_constant_slice(
            op, self.offset, self.result,
            lambda: check_smem_ref(op, self.result, "the result"), SMEM_ALIGNMENT)
        end = offset + smem_size_bytes(ref)
        if end > MAX_SMEM_BYTES:
            raise error_at(op, f"slice ends at byte {end}, beyond the {MAX_SMEM_BYTES} bytes of "
                               "shared memory a block may use")


class WithTransformsOp(SmaltiOp):
    """The same SMEM ref, with its tile/swizzle/transpose transforms fixed."""

    OPERATION_NAME = "smalti.with_transforms"

    source = Operand("the shared-memory ref")
    transforms = Attr(TRANSFORMS, "its tile, swizzle and transpose transforms")
    result = Result("the same ref", same_type_as="source")

    def verify_op(self) -> None:
        op = self.operation
        ref = check_smem_ref(op, self.source, "the operand")
        if self.result.type != self.source.type:
            raise error_at(op, f"result type {self.result.type} differs from operand type "
                               f"{self.source.type}")
        try:
            physical_shape(self.transforms, tuple(ref.shape), element_bytes(ref))
        except LayoutError as error:
            raise error_at(op, f"'transforms' {error}") from None


class SelectStageOp(SmaltiOp):
    """One of `stages`, chosen at run time by `index`: a stage of a staged shared-memory
    array at a traced position (`a_smem[k % stages]` in the DSL). The stages are refs of one
    type at evenly spaced offsets; they share their transforms, so the chosen ref has them."""

    OPERATION_NAME = "smalti.select_stage"

    index = Operand("the stage, an index in [0, number of stages)")
    stages = Operand("the stages, shared-memory refs of one type", variadic=True)
    result = Result("the chosen stage")

    def verify_op(self) -> None:
        op = self.operation
        check_index(op, self.index, "the stage index")
        stages = list(self.stages)
        if not stages:
            raise error_at(op, "expects at least one stage")
        for n, stage in enumerate(stages):
            check_smem_ref(op, stage, f"stage #{n}")
            if stage.type != stages[0].type:
                raise error_at(op, f"stage #{n} has type {stage.type}, stage #0 has "
                                   f"{stages[0].type}: the stages must have one type")
        if self.result.type != stages[0].type:
            raise error_at(op, f"result type {self.result.type} differs from the stages' "
                               f"type {stages[0].type}")
        index = constant_index(self.index)
        if index is not None and not 0 <= index < len(stages):
            raise error_at(op, f"stage {index} is out of range for {len(stages)} stages")


def _check_slice_lengths(op: ir.Operation, lengths: tuple[int, ...] | None,
                         gmem: ir.MemRefType, smem: ir.MemRefType) -> None:
    """The box read from GMEM per dim (-1: a squeezed dim of length 1), checked against
    both refs. Without the attribute, the SMEM shape (ranks must then agree). A box may be
    longer than its global dim: TMA fills what lies outside with zeros and clips stores."""
    lengths = tuple(smem.shape) if lengths is None else lengths
    if len(lengths) != gmem.rank:
        raise error_at(op, f"'slice_lengths' has {len(lengths)} entries for a rank-"
                           f"{gmem.rank} global ref")
    kept = tuple(n for n in lengths if n != -1)
    if any(n < 1 for n in kept):
        raise error_at(op, f"'slice_lengths' {list(lengths)} must be positive or -1 (squeezed)")
    if kept != tuple(smem.shape):
        raise error_at(op, f"'slice_lengths' {list(lengths)} do not match the shared-memory "
                           f"shape {list(smem.shape)}")


def _check_transfer(op: ir.Operation, gmem_value: ir.Value, smem_value: ir.Value,
                    indices: list[ir.Value], lengths: tuple[int, ...] | None) -> None:
    """Shared checks of async_load and async_store."""
    if not (is_gmem_type(gmem_value.type) or is_symmetric_type(gmem_value.type)):
        raise error_at(op, f"expects a global or symmetric memref, got {gmem_value.type}")
    gmem = ir.MemRefType(gmem_value.type)
    smem = check_smem_ref(op, smem_value, "the shared-memory ref")
    if gmem.element_type != smem.element_type:
        raise error_at(op, f"element types differ: {gmem.element_type} in global memory, "
                           f"{smem.element_type} in shared memory")
    if len(indices) != gmem.rank:
        raise error_at(op, f"expects {gmem.rank} indices for {gmem}, got {len(indices)}")
    for i, index in enumerate(indices):
        check_index(op, index, f"index #{i}")
    _check_slice_lengths(op, lengths, gmem, smem)


class AsyncLoadOp(SmaltiOp):
    """TMA: copy a box of a global ref into an SMEM ref; completes tx bytes on barrier i.

    With `collective = array<i64: dims>` (cluster dims), the n CTAs along those dims share
    the copy: each loads 1/n of the SMEM ref's leading dim and multicasts it to all n.

    With `cta_group = 2` (sm_100a, a cluster of CTA pairs: ranks 2i and 2i + 1) the copy
    lands in this CTA but completes its bytes on barrier i of the pair's leader, the even
    CTA (PTX ISA `cp.async.bulk.tensor` `.cta_group::2`, whose mbarrier may lie in the
    peer CTA): the leader's barrier expects both CTAs' bytes, as a 2-CTA MMA reads both."""

    OPERATION_NAME = "smalti.async_load"
    EFFECTS = (Effect.read("source", Proxy.ASYNC), Effect.write("destination", Proxy.ASYNC))

    source = Operand("the global ref")
    destination = Operand("the shared-memory ref")
    barriers = Operand("the mbarrier array")
    barrier_index = Operand("the barrier completing the copy")
    indices = Operand("the box's start in the global ref", variadic=True)
    slice_lengths = Attr(I64_ARRAY, "the box's lengths in the global ref (-1: squeezed)",
                         optional=True)
    collective = Attr(I64_ARRAY, "the cluster dims whose CTAs share the copy",
                      optional=True, default=())
    cta_group = Attr(INTEGER, "2: the barrier is the CTA pair leader's (.cta_group::2)",
                     optional=True, default=1, minimum=1)

    def verify_op(self) -> None:
        op = self.operation
        check_barriers(op, self.barriers)
        check_index(op, self.barrier_index, "the barrier index")
        _check_transfer(op, self.source, self.destination, self.indices, self.slice_lengths)
        self.collective_dims()
        self._check_cta_group()

    def _check_cta_group(self) -> None:
        """`cta_group` is 1 or 2; 2 needs a cluster of CTA pairs and no multicast."""
        op = self.operation
        if self.cta_group not in TMA_CTA_GROUPS:
            raise error_at(op, f"'cta_group' must be 1 or 2, got {self.cta_group}")
        if self.cta_group == 1:
            return
        if collective_dims(op):
            raise error_at(op, "'cta_group' 2 (the pair leader's barrier) does not combine "
                               "with 'collective' (multicast)")
        cluster = unpaired_cluster(op)
        if cluster is not None:
            raise error_at(op, "'cta_group' 2 needs a cluster of an even number of CTAs "
                               f"(smalti.cluster: pairs of ranks 2i, 2i + 1), got {cluster}")

    def arch_requirement(self) -> tuple[tuple[str, ...] | None, str]:
        """The arches this op needs (kernel.check_ops_for_arch): `.cta_group::2` is
        sm_100a's."""
        if self.cta_group == 2:
            return PAIR_TMA_ARCHES, "TMA loads completing on the pair leader's barrier " \
                "(cp.async.bulk.tensor .cta_group::2)"
        return None, ""

    @property
    def global_ref(self) -> ir.Value:
        return self.source

    @property
    def shared_ref(self) -> ir.Value:
        return self.destination

    def collective_dims(self) -> tuple[int, ...]:
        """The cluster dims sharing the copy (checked against the kernel's cluster and the
        SMEM ref's leading dim, which they split)."""
        op = self.operation
        dims = collective_dims(op)
        if not dims:
            return ()
        parts = self.collective_parts()
        smem = ir.MemRefType(self.destination.type)
        if smem.rank == 0 or smem.shape[0] % parts:
            raise error_at(op, f"the shared-memory ref {smem} cannot be split into {parts} "
                               "collective parts along its leading dim")
        return dims

    def collective_parts(self) -> int:
        """How many CTAs share the copy (each copies that fraction of the SMEM ref's leading
        dim); 1 when it is not collective."""
        dims = collective_dims(self.operation)
        func = enclosing_kernel(self.operation)
        cluster = kernel_cluster(func) if func is not None and dims else None
        return 1 if cluster is None else math.prod(cluster[d] for d in dims)

    def part_shape(self) -> tuple[int, ...]:
        """The shape of what one CTA copies: all of the SMEM ref, or its collective part."""
        shape = tuple(ir.MemRefType(self.destination.type).shape)
        parts = self.collective_parts()
        return (shape[0] // parts, *shape[1:]) if parts > 1 else shape


class AsyncStoreOp(SmaltiOp):
    """TMA: copy an SMEM ref into a box of a global ref (a bulk async-group)."""

    OPERATION_NAME = "smalti.async_store"
    TRAITS = Trait.WARPGROUP_COLLECTIVE
    EFFECTS = (Effect.read("source", Proxy.ASYNC), Effect.write("destination", Proxy.ASYNC))

    source = Operand("the shared-memory ref")
    destination = Operand("the global ref")
    indices = Operand("the box's start in the global ref", variadic=True)
    slice_lengths = Attr(I64_ARRAY, "the box's lengths in the global ref (-1: squeezed)",
                         optional=True)

    def verify_op(self) -> None:
        _check_transfer(self.operation, self.destination, self.source, self.indices,
                        self.slice_lengths)

    @property
    def global_ref(self) -> ir.Value:
        return self.destination

    @property
    def shared_ref(self) -> ir.Value:
        return self.source

    def collective_dims(self) -> tuple[int, ...]:
        """A store is never shared: none."""
        return ()

    def part_shape(self) -> tuple[int, ...]:
        """The shape of what the copy reads: the whole SMEM ref."""
        return tuple(ir.MemRefType(self.source.type).shape)


class AsyncStoreWaitOp(SmaltiOp):
    """Wait until at most `pending` async_store groups still read shared memory."""

    OPERATION_NAME = "smalti.async_store_wait"
    TRAITS = Trait.WARPGROUP_COLLECTIVE

    pending = Attr(INTEGER, "how many bulk async-groups may still be reading", minimum=0)
