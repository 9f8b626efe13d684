"""TMA: async_load / async_store through tensor maps, and async_store_wait.

A shared-memory ref of TMA-compatible transforms is filled box by box: the box is the ref's
innermost tile (the whole ref when untiled), grown along the first tiled dim while the
tiles it covers are consecutive in shared memory; one `cp.async.bulk.tensor` per box. The
kernel takes one tensor map per distinct (global ref, box, swizzle), in the order the ops
first need them (`tensor_map_records`), as `.param .align 64 .b8 NAME[128]` parameters
after its arguments. Thread 0 of the warpgroup issues every copy.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.attributes import attr_to_transforms
from smalti.dialect.diagnostics import error_at
from smalti.dialect.kernel import TensorMapRecord
from smalti.lowering.barriers import barrier_address, leader, warpgroup_sync
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.lowering.smem import SmemRef, smem_address, smem_ref, static_offset
from smalti.lowering.values import ELEMENT_TYPES
from smalti.ptx import Address, Guard, Immediate, Register, VectorOperand
from smalti.ptx.module import TensorAddress
from smalti.tiling import (
    SwizzleTransform,
    TileTransform,
    Transform,
    TransposeTransform,
    tma_incompatibility,
)
from smalti.tiling.smem import TMA_MAX_BOX

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64


@dataclass(frozen=True)
class Copies:
    """How one async op moves its SMEM ref: the box (in SMEM dims) and every box's SMEM
    origin (logical element index)."""

    box: tuple[int, ...]
    origins: tuple[tuple[int, ...], ...]


def plan_copies(shape: tuple[int, ...], transforms: tuple[Transform, ...]) -> Copies:
    """Boxes covering an SMEM ref of `shape` laid out by TMA-compatible `transforms`."""
    tiles = [t for t in transforms if isinstance(t, TileTransform)]
    tile = tiles[0].tiling if tiles else shape
    k = len(tile)
    head = shape[:-k] if k < len(shape) else ()
    tiled = shape[len(head):]
    grid = [s // t for s, t in zip(tiled, tile, strict=True)]
    box_tiled = list(tile)
    if all(g == 1 for g in grid[1:]):  # tiles along the first tiled dim are consecutive
        rows = tile[0]
        while tiled[0] % (rows * 2) == 0 and rows * 2 <= TMA_MAX_BOX:
            rows *= 2
        box_tiled[0] = rows if tiled[0] % rows == 0 else tile[0]
    box = (1,) * len(head) + tuple(box_tiled)
    counts = [*head, *(s // b for s, b in zip(tiled, box_tiled, strict=True))]
    origins = tuple(tuple(i * b for i, b in zip(position, box, strict=True))
                    for position in itertools.product(*(range(c) for c in counts)))
    return Copies(box, origins)


def _smem_operand(op: ir.Operation) -> tuple[ir.Value, ir.Value]:
    """(global ref, SMEM ref) of an async_load or async_store."""
    if op.name == "smalti.async_load":
        return op.operands[0], op.operands[1]
    return op.operands[1], op.operands[0]


def _op_transforms(op: ir.Operation) -> tuple[Transform, ...]:
    if "in_transforms" not in op.attributes:
        raise error_at(op, "has no 'in_transforms': run smalti-infer-layouts before lowering")
    return tuple(attr_to_transforms(op.attributes["in_transforms"][0]))


def _lengths(op: ir.Operation, smem_shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    if "slice_lengths" in op.attributes:
        return tuple(ir.DenseI64ArrayAttr(op.attributes["slice_lengths"]))
    assert rank == len(smem_shape)
    return smem_shape


def _record(op: ir.Operation, param: str) -> TensorMapRecord:
    """The tensor map one async op needs (named `param`)."""
    gmem, smem = _smem_operand(op)
    if not (isinstance(gmem.owner, ir.Block) and gmem.owner.owner.operation.name == "func.func"):
        raise error_at(op, "TMA copies need a kernel argument as the global ref")
    gmem = ir.BlockArgument(gmem)
    transforms = _op_transforms(op)
    smem_type = ir.MemRefType(smem.type)
    shape = tuple(smem_type.shape)
    element = ELEMENT_TYPES.get(str(smem_type.element_type))
    if element is None:
        raise error_at(op, f"TMA of {smem_type.element_type} is not supported")
    if any(isinstance(t, TransposeTransform) for t in transforms):
        raise error_at(op, "TMA cannot write transposed shared memory")
    if (problem := tma_incompatibility(transforms, element.bytes, shape)) is not None:
        raise error_at(op, f"TMA cannot use this shared-memory ref: {problem}")
    gmem_type = ir.MemRefType(gmem.type)
    lengths = _lengths(op, shape, gmem_type.rank)
    box = iter(plan_copies(shape, transforms).box)
    global_box = tuple(1 if n == -1 else next(box) for n in lengths)
    swizzles = [t.swizzle_bytes for t in transforms if isinstance(t, SwizzleTransform)]
    return TensorMapRecord(param, gmem.arg_number, str(gmem_type.element_type),
                           tuple(gmem_type.shape), global_box, swizzles[0] if swizzles else None)


def tensor_map_records(func: ir.Operation) -> tuple[TensorMapRecord, ...]:
    """Every tensor map the kernel's async ops need, deduplicated, in first-use order."""
    records: dict[tuple, TensorMapRecord] = {}
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.operation.name in ("smalti.async_load", "smalti.async_store"):
            ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    for op in ops:
        record = _record(op, "")
        key = (record.arg, record.box, record.swizzle)
        if key not in records:
            records[key] = _record(op, f"tmap{len(records)}")
    return tuple(records.values())


def declare_tensor_maps(ctx: LoweringContext, func: ir.Operation) -> None:
    """Add the kernel's tensor-map parameters (after its arguments) and take their generic
    addresses (TMA reads the map through one)."""
    symbols = {}
    for record in tensor_map_records(func):
        symbol = ctx.builder.param(record.param, "b8", align=TENSOR_MAP_ALIGN,
                                   array=TENSOR_MAP_BYTES)
        param = ctx.builder.compute("mov.u64", "u64", symbol)
        symbols[(record.arg, record.box, record.swizzle)] = ctx.builder.compute(
            "cvta.param.u64", "u64", param)
    ctx.kernel_state["tensor_maps"] = symbols


def _tensor_map(ctx: LoweringContext, op: ir.Operation) -> Register:
    record = _record(op, "")
    return ctx.kernel_state["tensor_maps"][(record.arg, record.box, record.swizzle)]


def _copies(ctx: LoweringContext, op: ir.Operation, ref: SmemRef, indices: list[ir.Value]):
    """(SMEM address, coordinates innermost first) per box of an async op."""
    gmem, _ = _smem_operand(op)
    rank = ir.MemRefType(gmem.type).rank
    lengths = _lengths(op, ref.shape, rank)
    plan = plan_copies(ref.shape, ref.transforms)
    b = ctx.builder
    starts = []
    for value in indices:
        scalar = ctx.scalar(op, value)
        starts.append(int(scalar.constant) if scalar.constant is not None
                      else b.compute("cvt.u32.u64", "u32", scalar.operand))
    for origin in plan.origins:
        offsets = iter(origin)
        coords = []
        for start, n in zip(starts, lengths, strict=True):
            shift = 0 if n == -1 else next(offsets)
            if isinstance(start, int):
                coords.append(b.compute("mov.b32", "b32", Immediate(start + shift)))
            else:
                coords.append(start if shift == 0 else b.compute("add.s32", "b32", start, shift))
        byte = static_offset(ref, origin, swizzled=False)
        yield Address(smem_address(ctx, ref, byte)), VectorOperand(tuple(reversed(coords)))


@lowering_rule("smalti.async_load")
def _async_load(ctx: LoweringContext, op: ir.Operation) -> None:
    ref = smem_ref(ctx, op, op.operands[1])
    bars = smem_ref(ctx, op, op.operands[2])
    barrier = barrier_address(ctx, op, bars, op.operands[3])
    tmap = _tensor_map(ctx, op)
    rank = ir.MemRefType(op.operands[0].type).rank
    guard = Guard(leader(ctx))
    for address, coords in _copies(ctx, op, ref, list(op.operands)[4:]):
        ctx.builder.emit(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile."
                         "mbarrier::complete_tx::bytes", address, TensorAddress(tmap, coords),
                         barrier, guard=guard)


@lowering_rule("smalti.async_store")
def _async_store(ctx: LoweringContext, op: ir.Operation) -> None:
    """Make the warpgroup's SMEM writes visible to TMA, meet, then thread 0 stores."""
    ref = smem_ref(ctx, op, op.operands[0])
    tmap = _tensor_map(ctx, op)
    rank = ir.MemRefType(op.operands[1].type).rank
    b = ctx.builder
    b.emit("fence.proxy.async.shared::cta")
    warpgroup_sync(ctx)
    guard = Guard(leader(ctx))
    for address, coords in _copies(ctx, op, ref, list(op.operands)[2:]):
        b.emit(f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group",
               TensorAddress(tmap, coords), address, guard=guard)
    b.emit("cp.async.bulk.commit_group", guard=guard)


@lowering_rule("smalti.async_store_wait")
def _async_store_wait(ctx: LoweringContext, op: ir.Operation) -> None:
    """Thread 0 waits for its stores to have read SMEM; then the warpgroup meets."""
    pending = ir.IntegerAttr(op.attributes["pending"]).value
    ctx.builder.emit("cp.async.bulk.wait_group.read", Immediate(pending),
                     guard=Guard(leader(ctx)))
    warpgroup_sync(ctx)


def box_bytes(record: TensorMapRecord) -> int:
    """Bytes one copy through this tensor map moves."""
    return math.prod(record.box) * ELEMENT_TYPES[record.dtype].bytes
