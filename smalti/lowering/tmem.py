"""Tensor memory (sm_100a): tmem_alloc, tmem_dealloc, tmem_relinquish_alloc_permit,
tmem_load, tmem_store (smalti/dialect/ops_tmem.py has their semantics).

tmem_alloc: warp 0 of the warpgroup allocates and writes the region's address to a static
shared slot (one per warpgroup), and every thread reads it back after the warpgroup meets,
the fences around the barrier ordering the allocation before the reads (PTX ISA
9.7.16.6.1 "tcgen05.alloc", 9.7.16.6.4 "tcgen05.fence"):

    @%not_warp0 bra $skip;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%slot], 128;
    $skip:
    tcgen05.fence::before_thread_sync;  bar.sync 1, 128;  tcgen05.fence::after_thread_sync;
    ld.shared.b32 %taddr, [%slot];

tmem_dealloc: the warpgroup meets (fenced the same way: no thread's tcgen05.ld / st of the
region is still in flight) and warp 0 runs `tcgen05.dealloc.cta_group::1.sync.aligned.b32
%taddr, ncols;`. tmem_relinquish_alloc_permit: warp 0 runs
`tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;`. In a kernel that issues
`.cta_group::2` MMAs (CTA pairs) the three take `.cta_group::2` instead (ptxas refuses a
kernel mixing the two), run by warp 0 of the warpgroup in each CTA of the pair.

tmem_stage: the source's address plus the index times the stage's 32-bit columns
(`mad.lo.u32`; a constant index folds to an add).

tmem_load / tmem_store: the value's inferred layout is one a tcgen05 data movement shape
realises register for register (`smalti.tiling.tmem_accesses`: the same thread for
each element, the registers grouped into vectors as the layout likes, e.g. a row per thread
with 8 columns to a vector for .32x32b); the first such access is used, one
`tcgen05.ld.sync.aligned.<shape>.x<num>.b32` (or `.st`) per warp for each block of its
columns (two for the 16-lane shapes: one per 16-lane half of the warp's 32 lanes), each at
the warp's lanes (`taddr + ((32 * warp + 16 * half) << 16)`: lane in the upper 16 bits of a
TMEM address) and its first column; then `tcgen05.wait::ld.sync.aligned` (`::st`), so the
registers may be read (the cells read again) right after the op, and
`tcgen05.fence::before_thread_sync`, which orders the access before any later thread
synchronisation (PTX ISA "tcgen05.fence": the mbarrier arrive by which an epilogue releases
an accumulator to the MMA role, whose wait is followed by `::after_thread_sync`, or a
warpgroup barrier), so another thread's MMA cannot overwrite cells still being read.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import bitwidth, tmem_unpacked
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_tcgen05 import kernel_cta_group
from smalti.dialect.ops_tmem import (
    TmemAllocOp,
    TmemDeallocOp,
    TmemLoadOp,
    TmemRelinquishAllocPermitOp,
    TmemStageOp,
    TmemStoreOp,
)
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import (
    ELEMENT_TYPES,
    ElementType,
    FragmentedArray,
    elements_per_register,
    register_type,
)
from smalti.lowering.warpgroup import warpgroup_index, warpgroup_sync
from smalti.ptx import Address, Guard, Immediate, Register, VectorOperand
from smalti.tiling import WARP_SIZE, Layout, LayoutError, TmemAccess, tmem_accesses
from smalti.tiling.tmem import TMEM_CELL_BITS

SLOT_BYTES = 4  # the shared i32 tcgen05.alloc writes the address to
UNPACKED_SPREAD = 2  # .pack::16b / .unpack::16b: a register spans two 32-bit columns
LANE_SHIFT = 16  # a TMEM address: lane in bits 31-16, column in bits 15-0 (PTX ISA 9.7.16.2)


@dataclass(frozen=True)
class TmemRef:
    """A lowered TMEM ref: its address (a .b32 register: lane 0, first column), its
    shape and element type, the 32-bit columns it spans, and whether its 16-bit elements
    are unpacked (one per column)."""

    address: Register
    shape: tuple[int, ...]
    element: str  # the MLIR element type's name ("f32", "bf16", ...)
    columns: int
    unpacked: bool = False

    @classmethod
    def of(cls, address: Register, ref: ir.MemRefType, columns: int) -> TmemRef:
        """The lowered ref of TMEM memref type `ref` at `address`, spanning `columns`."""
        return cls(address, tuple(ref.shape), type_name(ref.element_type), columns,
                   tmem_unpacked(ref))

    def column_of(self, element: int) -> int:
        """The 32-bit column holding element column `element` (which starts one)."""
        if self.unpacked:
            return element
        return element * ELEMENT_TYPES[self.element].bits // TMEM_CELL_BITS


def tmem_ref(ctx: LoweringContext, op: ir.OpView, value: ir.Value) -> TmemRef:
    lowered = ctx.values.get(value)
    if not isinstance(lowered, TmemRef):
        raise error_at(op, f"expects a TMEM ref from smalti.tmem_alloc, got {value.type}")
    return lowered


def _not_warp0(ctx: LoweringContext) -> Register:
    """A predicate true in the threads outside warp 0 of their warpgroup (memoised)."""
    if "tmem_not_warp0" not in ctx.cache:
        ctx.cache["tmem_not_warp0"] = ctx.builder.compute(
            "setp.ge.u32", "pred", ctx.thread_index(), WARP_SIZE)
    return ctx.cache["tmem_not_warp0"]


def _in_warp0(ctx: LoweringContext, opcode: str, *operands: object) -> None:
    """`opcode` run by warp 0 of the warpgroup only: a warp-uniform branch around it
    (`.sync.aligned` instructions are executed by whole warps)."""
    b = ctx.builder
    skip = b.new_label("tmem_warp0_end")
    b.emit("bra", skip, guard=Guard(_not_warp0(ctx)))
    b.emit(opcode, *operands)
    b.place(skip)


def _cta_group(ctx: LoweringContext, op: ir.OpView) -> int:
    """The kernel's tcgen05 CTA granularity, 1 or 2 (memoised)."""
    if "tmem_cta_group" not in ctx.cache:
        ctx.cache["tmem_cta_group"] = kernel_cta_group(op.operation)
    return ctx.cache["tmem_cta_group"]


def _thread_sync(ctx: LoweringContext) -> None:
    """The warpgroup meets, tcgen05 operations before ordered before those after (PTX ISA
    `tcgen05.fence`)."""
    ctx.builder.emit("tcgen05.fence::before_thread_sync")
    warpgroup_sync(ctx)
    ctx.builder.emit("tcgen05.fence::after_thread_sync")


@lowering_rule(TmemAllocOp)
def _tmem_alloc(ctx: LoweringContext, op: TmemAllocOp) -> None:
    b = ctx.builder
    warpgroups = ctx.signature.warpgroups
    slot = b.compute("mov.u32", "u32", ctx.scratch_shared("tmem_slot", SLOT_BYTES * warpgroups,
                                                          align=SLOT_BYTES))
    if warpgroups > 1:
        slot = b.compute("mad.lo.u32", "u32", warpgroup_index(ctx), SLOT_BYTES, slot)
    group = _cta_group(ctx, op)
    _in_warp0(ctx, f"tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32",
              Address(slot), Immediate(op.columns))
    _thread_sync(ctx)
    address = b.compute("ld.shared.b32", "b32", Address(slot))
    ctx.set(op.result, TmemRef.of(address, ir.MemRefType(op.result.type), op.columns))


@lowering_rule(TmemDeallocOp)
def _tmem_dealloc(ctx: LoweringContext, op: TmemDeallocOp) -> None:
    ref = tmem_ref(ctx, op, op.ref)
    _thread_sync(ctx)
    _in_warp0(ctx, f"tcgen05.dealloc.cta_group::{_cta_group(ctx, op)}.sync.aligned.b32",
              ref.address, Immediate(ref.columns))


@lowering_rule(TmemRelinquishAllocPermitOp)
def _tmem_relinquish(ctx: LoweringContext, op: TmemRelinquishAllocPermitOp) -> None:
    _in_warp0(ctx, f"tcgen05.relinquish_alloc_permit.cta_group::{_cta_group(ctx, op)}"
              ".sync.aligned")


@lowering_rule(TmemStageOp)
def _tmem_stage(ctx: LoweringContext, op: TmemStageOp) -> None:
    """The stage's address: the source's plus the index times the stage's 32-bit columns
    (the column is the address's low 16 bits; the verifier keeps stages in bounds)."""
    source = tmem_ref(ctx, op, op.source)
    ref = ir.MemRefType(op.result.type)
    columns = source.columns // op.stages
    index = ctx.scalar(op, op.index)
    b = ctx.builder
    if index.constant is not None:
        offset = int(index.constant) * columns
        address = source.address if offset == 0 else b.compute("add.u32", "u32",
                                                                  source.address, offset)
    else:
        low = b.compute("cvt.u32.u64", "u32", index.operand)
        address = b.compute("mad.lo.u32", "u32", low, columns, source.address)
    ctx.set(op.result, TmemRef.of(address, ref, columns))


def _access(op: ir.OpView, layout: Layout, shape: tuple[int, ...], bits: int) -> TmemAccess:
    """The tcgen05.ld/st form that moves a value in `layout` (a located error if none)."""
    try:
        accesses = tmem_accesses(layout, shape, bits)
    except LayoutError as error:
        raise error_at(op, f"cannot move a value in layout {layout}: {error}") from None
    if not accesses:
        raise error_at(op, f"no tcgen05.ld/st data movement shape moves a {list(shape)} value "
                           f"in layout {layout}: run smalti-infer-layouts (or cast it to a "
                           "TMEM layout)")
    return accesses[0]


def _plan(op: ir.OpView, access: TmemAccess, layout: Layout, shape: tuple[int, ...],
          pack: int) -> list[list[tuple[int, int]]]:
    """Per instruction (column block, lane half), per ISA register: (layout register,
    packed register within its vector). Every thread's ISA register r must be the same
    PTX register: the layout's registers line up with the instruction's (however the
    layout groups them into vectors)."""
    table = access.instruction_registers(shape, layout)
    plan = []
    for per_instruction in table:
        first = per_instruction[0]
        if not (per_instruction == first).all():
            raise error_at(op, f"the threads' registers do not line up with .{access.shape}")
        registers = []
        for elements in first:
            register, slot = (int(x) for x in elements[0])
            if slot % pack or any(int(e[0]) != register or int(e[1]) != slot + i
                                  for i, e in enumerate(elements)):
                raise error_at(op, f"a .b32 register of .{access.shape} is not one packed "
                                   "register of the value")
            registers.append((register, slot // pack))
        plan.append(registers)
    return plan


def _instructions(ctx: LoweringContext, op: ir.OpView, ref: TmemRef, column: int,
                  access: TmemAccess, shape: tuple[int, ...]
                  ) -> list[tuple[Register, list[Immediate]]]:
    """Per instruction: its TMEM address register and the immediates after the address
    (`.16x32bx2`'s immHalfSplitoff)."""
    b = ctx.builder
    if "tmem_warp_lanes" not in ctx.cache:  # the warp's first lane, as an address offset
        lanes = b.compute("and.b32", "b32", ctx.thread_index(), 3 * WARP_SIZE)  # 32 * warp
        ctx.cache["tmem_warp_lanes"] = b.compute("shl.b32", "b32", lanes, LANE_SHIFT)
    base = b.compute("add.u32", "u32", ref.address, ctx.cache["tmem_warp_lanes"])
    first = ref.column_of(column)
    spread = UNPACKED_SPREAD if ref.unpacked else 1  # .pack::16b spans twice the columns
    halves = access.instructions_per_warp
    blocks = shape[1] // access.tile_shape[1]
    extra = []
    if access.shape == "16x32bx2":
        if ref.unpacked:  # whether immHalfSplitoff counts packed registers or columns
            raise error_at(op, "moves an unpacked 16-bit TMEM ref with .16x32bx2, whose "
                               "immHalfSplitoff under .pack::16b smalti does not model: cast "
                               "the value to another tcgen05 layout")
        extra = [Immediate(access.split if access.split is not None else access.num)]
    result = []
    for block in range(blocks):
        for half in range(halves):
            offset = ((half * access.lanes_per_warp) << LANE_SHIFT) + first \
                + block * access.columns * spread
            address = base if offset == 0 else b.compute("add.u32", "u32", base, offset)
            result.append((address, extra))
    return result


def _suffix(access: TmemAccess, ref: TmemRef, packing: str) -> str:
    """`sync.aligned.<shape>.x<num>.b32`, with `.pack::16b` / `.unpack::16b` (`packing`)
    for an unpacked ref: each register then holds the low halves of two adjacent
    columns."""
    pack = f".{packing}" if ref.unpacked else ""
    return f"sync.aligned.{access.shape}.x{access.num}{pack}.b32"


@lowering_rule(TmemLoadOp)
def _tmem_load(ctx: LoweringContext, op: TmemLoadOp) -> None:
    ref = tmem_ref(ctx, op, op.source)
    vector = ir.VectorType(op.result.type)
    shape = tuple(vector.shape)
    element: ElementType = ELEMENT_TYPES[type_name(vector.element_type)]
    layout = layouts_of(op, "out_layouts", 1)[0]
    access = _access(op, layout, shape, bitwidth(vector.element_type))
    dist = layout.distribution(shape)
    pack = elements_per_register(element, dist.vector_length)
    b = ctx.builder
    vectors = [[b.reg(register_type(element, pack)) for _ in range(dist.vector_length // pack)]
               for _ in range(dist.num_registers)]
    plan = _plan(op, access, layout, shape, pack)
    for (address, extra), registers in zip(
            _instructions(ctx, op, ref, op.column, access, shape), plan, strict=True):
        target = VectorOperand(tuple(vectors[r][p] for r, p in registers))
        b.emit(f"tcgen05.ld.{_suffix(access, ref, 'pack::16b')}", target, Address(address),
               *extra)
    b.emit("tcgen05.wait::ld.sync.aligned")
    b.emit("tcgen05.fence::before_thread_sync")
    ctx.set(op.result, FragmentedArray(layout, shape, element, tuple(map(tuple, vectors)),
                                       dist.vector_length))


@lowering_rule(TmemStoreOp)
def _tmem_store(ctx: LoweringContext, op: TmemStoreOp) -> None:
    ref = tmem_ref(ctx, op, op.destination)
    array = ctx.array(op, op.value)
    layout = layouts_of(op, "in_layouts", 1)[0]
    if array.layout != layout:
        raise error_at(op, f"the value has layout {array.layout}, but in_layouts says {layout}")
    shape = tuple(array.shape)
    access = _access(op, layout, shape, array.element.bits)
    plan = _plan(op, access, layout, shape, array.pack)
    b = ctx.builder
    for (address, extra), registers in zip(
            _instructions(ctx, op, ref, op.column, access, shape), plan, strict=True):
        source = VectorOperand(tuple(array.vectors[r][p] for r, p in registers))
        b.emit(f"tcgen05.st.{_suffix(access, ref, 'unpack::16b')}", Address(address), *extra,
               source)
    b.emit("tcgen05.wait::st.sync.aligned")
    b.emit("tcgen05.fence::before_thread_sync")
