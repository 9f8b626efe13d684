"""tcgen05_mma, tcgen05_commit and tcgen05_cp (sm_100a; smalti/dialect/ops_tcgen05.py has
their semantics).

tcgen05_mma: the warpgroup hands off to thread 0 of it (the threads' generic shared-memory
writes fenced for the async proxy, their tcgen05.ld/st ordered before the MMA: PTX ISA
9.7.16.6.4 "tcgen05.fence"), and thread 0 issues one instruction per K step, elected in a
branch only warp 0 takes (warp-uniform, so that ptxas issues each MMA once instead of
wrapping it in a loop that elects a thread):

    fence.proxy.async.shared::cta;               // only after generic SMEM writes
    tcgen05.fence::before_thread_sync;  bar.sync 1, 128;  tcgen05.fence::after_thread_sync;
    @%other_warp bra $issued;            // %other_warp: shfl'd warp index != 0
    elect.sync _|%elected, -1;
    @%elected tcgen05.mma.cta_group::1.kind::f16 [%d], %adesc, %bdesc, %idesc, %accumulate;
    @%elected tcgen05.mma.cta_group::1.kind::f16 [%d], %adesc+2, %bdesc+2, %idesc, %true;
    $issued:

The hand-off is elided when the previous one still stands (`LoweringContext.handoff_done`:
since it, only register arithmetic and thread 0's own tcgen05 issues, which the tcgen05
pipeline orders), so cp, cp, mma or the MMAs of one loop body share one.

The instruction descriptor (`InstructionDescriptor`; PTX ISA "Instruction descriptor", the
simulator's decoder in smalti/sim/ops/tcgen05_descriptors.py) is a constant per kernel
(per K step for block-scaled kinds: the scale factor data IDs pick the byte of each TMEM
column). The shared memory descriptors are wgmma's (smalti.lowering.wgmma: start >> 4,
LBO >> 4, SBO >> 4, swizzle mode on bits 61-63, whose codes for 128/64/32 bytes are 2/4/6 at
bit 61, the same bits wgmma's 1/2/3 set at bit 62) plus the sm_100 version 0b001 in bits
46-48; base offset 0 and relative LBO mode (operands start at their swizzle pattern's
alignment, as slice_smem guarantees). The start advances by the K step's unswizzled byte
offset, as wgmma's does; A in TMEM advances 8 32-bit columns (32 bytes of K) per step.

tcgen05_commit: thread 0 (elected the same way) runs
`tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar]` (with
`collective`: `.cta_group::2 ... .multicast::cluster.b64 [bar], mask`, mask = 0b11 shifted
to the pair's even rank).

tcgen05_cp: the same hand-off, then thread 0 runs `tcgen05.cp.cta_group::1.<shape> [taddr],
sdesc` per copy (`.cta_group::2` from the even CTA in a kernel of collective MMAs), sdesc
describing 16-byte rows, row-major (no swizzle: 8-row core matrices SBO = 128 bytes apart),
taddr 4 columns further per copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_mma import mn_major_problem
from smalti.dialect.ops_tcgen05 import (
    COPY_COLUMNS,
    COPY_ROW_BYTES,
    COPY_SHAPES,
    SCALE_GROUP,
    SCALE_GROUP_COLUMNS,
    MmaKind,
    Tcgen05CommitOp,
    Tcgen05CpOp,
    Tcgen05MmaOp,
    kernel_cta_group,
    scale_columns,
    scale_groups,
)
from smalti.lowering.barriers import barrier_address
from smalti.lowering.context import HANDOFF_KEEPERS, LoweringContext
from smalti.lowering.proxy import FENCE
from smalti.lowering.registry import lowering_rule
from smalti.lowering.smem import SmemRef, smem_ref
from smalti.lowering.tmem import TmemRef, tmem_ref
from smalti.lowering.warpgroup import issued_by_one_thread, warpgroup_sync
from smalti.lowering.wgmma import descriptor_at, descriptor_base, descriptor_fields, operand_offset
from smalti.ptx import Address, Immediate, Register

SM100_DESCRIPTOR_VERSION = 1 << 46  # bits 46-48 of an sm_100 shared memory descriptor: 0b001
A_TMEM_STEP_COLUMNS = 8  # 32 bytes of K of A in TMEM: 8 32-bit columns per instruction
CORE_MATRIX_BYTES = 128  # 8 rows of 16 bytes: SBO of a row-major source of 16-byte rows

# Instruction descriptor type codes (PTX ISA, "Instruction descriptor").
D_TYPE_CODES = {"f16": 0, "f32": 1}
INPUT_CODES = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"f32": 2},
    "f8f6f4": {"f8E4M3FN": 0, "f8E5M2": 1, "f6E2M3FN": 3, "f6E3M2FN": 4, "f4E2M1FN": 5},
    "mxf8f6f4": {"f8E4M3FN": 0, "f8E5M2": 1, "f6E2M3FN": 3, "f6E3M2FN": 4, "f4E2M1FN": 5},
    "mxf4": {"f4E2M1FN": 1},
    "mxf4nvf4": {"f4E2M1FN": 1},
}
SCALE_TYPE_CODES = {"f8E4M3FN": 0, "f8E8M0FNU": 1}  # bit 23: UE4M3, UE8M0


@dataclass(frozen=True)
class InstructionDescriptor:
    """The 32-bit instruction descriptor of one tcgen05.mma. Dense kinds: bits 4-5 D type,
    7-9 A type, 10-12 B type, 15/16 A/B MN-major, 17-22 N >> 3, 24-28 M >> 4. Block-scaled
    kinds: bits 4-5 B's scale factor data ID instead of the D type, 23 scale type, 29-30 A's
    scale factor data ID."""

    kind: str
    a: str  # MLIR element type names
    b: str
    d: str
    m: int
    n: int
    a_mn_major: bool = False
    b_mn_major: bool = False
    scale: str | None = None  # the scale factors' MLIR type (block-scaled kinds)
    a_scale_id: int = 0
    b_scale_id: int = 0

    def encode(self) -> int:
        codes = INPUT_CODES[self.kind]
        value = (codes[self.a] << 7) | (codes[self.b] << 10) | (int(self.a_mn_major) << 15) \
            | (int(self.b_mn_major) << 16) | ((self.n >> 3) << 17) | ((self.m >> 4) << 24)
        if self.scale is None:
            return value | (D_TYPE_CODES[self.d] << 4)
        return value | (self.b_scale_id << 4) | (SCALE_TYPE_CODES[self.scale] << 23) \
            | (self.a_scale_id << 29)


def _handoff(ctx: LoweringContext) -> None:
    """The warpgroup's earlier generic shared-memory writes (fenced for the async proxy)
    and tcgen05.ld/st come before what thread 0 issues next: tcgen05 fences around one
    warpgroup barrier (PTX ISA "tcgen05.fence", "Memory consistency model" async proxy).
    Elided when the last hand-off still stands (`LoweringContext.handoff_done`: since it,
    only register arithmetic and thread 0's own tcgen05 issues, which the tcgen05 pipeline
    orders, as in cp, cp, mma or the MMAs of one K loop body)."""
    b = ctx.builder
    if ctx.handoff_done and not ctx.unpublished_smem_writes:
        return
    if ctx.unpublished_smem_writes:
        b.emit(FENCE)
        ctx.unpublished_smem_writes = False
    b.emit("tcgen05.fence::before_thread_sync")
    warpgroup_sync(ctx)
    b.emit("tcgen05.fence::after_thread_sync")
    ctx.handoff_done = True


def _predicate(ctx: LoweringContext, value: bool) -> Register:
    """A predicate register holding `value` in every thread (memoised)."""
    key = ("tcgen05_constant_predicate", value)
    if key not in ctx.cache:
        tid = ctx.thread_index()
        ctx.cache[key] = ctx.builder.compute("setp.eq.u32" if value else "setp.ne.u32", "pred",
                                             tid, tid)
    return ctx.cache[key]


def _column_address(ctx: LoweringContext, ref: TmemRef, columns: int) -> Register:
    """The TMEM address `columns` 32-bit columns into `ref` (lane 0)."""
    if columns == 0:
        return ref.address
    return ctx.builder.compute("add.u32", "u32", ref.address, columns)


def _smem_operand(ctx: LoweringContext, op: Tcgen05MmaOp, value: ir.Value, is_b: bool,
                  rows: int) -> tuple[SmemRef, bool, Register]:
    """The ref, whether it is MN-major, and its sm_100 descriptor's first value."""
    ref = smem_ref(ctx, op, value)
    mn_major, bits = descriptor_fields(op, ref, is_b, a_rows=rows)
    element = type_name(ir.MemRefType(value.type).element_type)
    if (problem := mn_major_problem("B" if is_b else "A", element, mn_major)) is not None:
        raise error_at(op, problem)
    return ref, mn_major, descriptor_base(ctx, ref, bits | SM100_DESCRIPTOR_VERSION)


def _opcode(kind: MmaKind, pair: bool) -> str:
    group = 2 if pair else 1
    opcode = f"tcgen05.mma.cta_group::{group}.kind::{kind.name}"
    if kind.block_scaled:
        opcode += f".block_scale.scale_vec::{kind.scale_vectors}X"
    return opcode


HANDOFF_KEEPERS.update({Tcgen05MmaOp, Tcgen05CpOp, Tcgen05CommitOp})  # thread 0's issues


@lowering_rule(Tcgen05MmaOp)
def _tcgen05_mma(ctx: LoweringContext, op: Tcgen05MmaOp) -> None:
    kind, pair = op.kind(), op.collective
    b = ctx.builder
    d = tmem_ref(ctx, op, op.accumulator)
    m = ir.ShapedType(op.a.type).shape[0]
    b_ref, b_mn_major, b_desc = _smem_operand(ctx, op, op.b, True, m)
    k = b_ref.shape[0]
    n = b_ref.shape[1] * (2 if pair else 1)
    a_element = type_name(ir.ShapedType(op.a.type).element_type)
    a_tmem: TmemRef | None = None
    a_mn_major = False
    if op.a_in_tmem:
        a_tmem = tmem_ref(ctx, op, op.a)
    else:
        a_ref, a_mn_major, a_desc = _smem_operand(ctx, op, op.a, False, m)
    scales = None
    if kind.block_scaled:
        scales = (tmem_ref(ctx, op, op.a_scale), tmem_ref(ctx, op, op.b_scale))
    accumulate = ctx.scalar(op, op.accumulate)
    enable = (accumulate.operand if isinstance(accumulate.operand, Register)
              else _predicate(ctx, bool(accumulate.constant)))
    scale_type = type_name(ir.ShapedType(op.a_scale.type).element_type) if scales else None
    steps = k // kind.k
    d_address = _column_address(ctx, d, d.column_of(op.column))
    _handoff(ctx)
    opcode = _opcode(kind, pair)
    issues: list[list[Address | Register]] = []
    for step in range(steps):
        factor = step * kind.scale_vectors  # the step's first scale factor of each row
        group, byte = divmod(factor, SCALE_GROUP)
        idesc = InstructionDescriptor(
            kind.name, a_element, type_name(ir.MemRefType(op.b.type).element_type),
            d.element, 2 * m if pair else m, n, a_mn_major, b_mn_major, scale_type,
            byte, byte).encode()
        key = ("tcgen05_idesc", idesc)  # shared by the MMAs of a block
        if key not in ctx.block_cache:
            ctx.block_cache[key] = b.compute("mov.b32", "b32", Immediate(idesc))
        if a_tmem is not None:
            a_operand: Address | Register = Address(
                _column_address(ctx, a_tmem, A_TMEM_STEP_COLUMNS * step))
        else:
            a_operand = descriptor_at(ctx, a_desc, operand_offset(a_ref, 0, kind.k * step, False)
                                      - operand_offset(a_ref, 0, 0, False))
        b_operand = descriptor_at(ctx, b_desc, operand_offset(b_ref, 0, kind.k * step, True)
                                  - operand_offset(b_ref, 0, 0, True))
        operands = [Address(d_address), a_operand, b_operand, ctx.block_cache[key]]
        if scales is not None:
            a_scale, b_scale = scales
            b_group_columns = scale_columns(kind, k, n) // scale_groups(kind, k)
            operands += [Address(_column_address(ctx, a_scale, SCALE_GROUP_COLUMNS * group)),
                         Address(_column_address(ctx, b_scale, b_group_columns * group))]
        operands.append(enable if step == 0 else _predicate(ctx, True))
        issues.append(operands)
    with issued_by_one_thread(ctx, pair) as guard:
        for operands in issues:
            b.emit(opcode, *operands, guard=guard)


@lowering_rule(Tcgen05CommitOp)
def _tcgen05_commit(ctx: LoweringContext, op: Tcgen05CommitOp) -> None:
    bars = smem_ref(ctx, op, op.barriers)
    barrier = barrier_address(ctx, op, bars, op.barrier_index)
    b = ctx.builder
    if not op.collective:
        with issued_by_one_thread(ctx, False) as guard:
            b.emit("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
                   barrier, guard=guard)
        return
    if "tcgen05_pair_mask" not in ctx.cache:  # 0b11 at the pair's even rank
        even = b.compute("and.b32", "b32", b.special("%cluster_ctarank"), ~1 & 0xFFFFFFFF)
        mask = b.compute("shl.b32", "b32", Immediate(3), even)
        ctx.cache["tcgen05_pair_mask"] = b.compute("cvt.u16.u32", "u16", mask)
    with issued_by_one_thread(ctx, True) as guard:
        b.emit("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster"
               ".multicast::cluster.b64", barrier, ctx.cache["tcgen05_pair_mask"],
               guard=guard)


@lowering_rule(Tcgen05CpOp)
def _tcgen05_cp(ctx: LoweringContext, op: Tcgen05CpOp) -> None:
    source = smem_ref(ctx, op, op.source)
    destination = tmem_ref(ctx, op, op.destination)
    if source.transforms:
        raise error_at(op, "reads its source row-major: the source ref takes no transforms, "
                           f"got {list(source.transforms)}")
    rows = COPY_SHAPES[op.shape].rows
    # 16-byte rows row-major: 8-row core matrices 128 bytes apart (SBO), LBO unused (16)
    bits = ((COPY_ROW_BYTES >> 4) << 16) | ((CORE_MATRIX_BYTES >> 4) << 32) \
        | SM100_DESCRIPTOR_VERSION
    first = destination.column_of(op.column)
    b = ctx.builder
    _handoff(ctx)
    base = descriptor_base(ctx, source, bits)
    group = kernel_cta_group(op.operation)
    copies = [(Address(_column_address(ctx, destination, first + COPY_COLUMNS * copy)),
               descriptor_at(ctx, base, copy * rows * COPY_ROW_BYTES))
              for copy in range(op.copies())]
    with issued_by_one_thread(ctx, group == 2) as guard:
        for address, desc in copies:
            b.emit(f"tcgen05.cp.cta_group::{group}.{op.shape}", address, desc, guard=guard)
