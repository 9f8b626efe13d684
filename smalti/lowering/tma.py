"""TMA: async_load / async_store through tensor maps, and async_store_wait.

A shared-memory ref of TMA-compatible transforms is filled box by box: the box is the ref's
innermost tile (the whole ref when untiled), grown along the first tiled dim while the
tiles it covers are consecutive in shared memory; one `cp.async.bulk.tensor` per box. The
kernel takes one tensor map per distinct (global ref, box, swizzle), in the order the ops
first need them (`declare_tensor_maps`), as `.param .align 64 .b8 NAME[128]` parameters
after its arguments. Thread 0 of the warpgroup issues every copy, elected in a branch only
warp 0 takes (`issued_by_one_thread`: under a per-thread predicate ptxas would wrap each
UTMALDG in a loop electing a thread).

A `collective` async_load is shared by the n CTAs along the named cluster dims: the SMEM
ref's leading dim is cut into n parts, CTA i of them (its linear position along those dims)
copies part i with `.multicast::cluster` into the same offsets of all n CTAs, so every CTA's
barrier receives the whole ref's bytes. The 16-bit ctaMask is the pattern of the n ranks
seen from the CTA whose collective coordinates are 0, shifted by that CTA's rank.

An async_load with `cta_group = 2` completes on the pair leader's barrier: its address
mapped into the even CTA of the pair (`mapa.shared::cluster` to `%cluster_ctarank & ~1`)
and the copy issued with `.cta_group::2`.

4-bit refs (i4, f4E2M1FN) move packed two per byte: boxes and swizzles are measured in bytes
(a 128-byte swizzled box row holds 256 elements), the ops' indices stay in elements, and the
host encodes the map over bytes (smalti.runtime.tensor_maps), so the innermost coordinate is
halved here; shared memory gets the bytes sm_100a's CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B
would put there, on sm_90a too.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import constant_index
from smalti.dialect.diagnostics import error_at
from smalti.dialect.kernel import TensorMapRecord
from smalti.dialect.launch import is_kernel
from smalti.dialect.ops_collective import RemoteRefOp, SliceSymmetricOp
from smalti.dialect.ops_memory import AsyncLoadOp, AsyncStoreOp, AsyncStoreWaitOp
from smalti.lowering.barriers import barrier_address, leader
from smalti.lowering.context import LoweringContext, TensorMapKey
from smalti.lowering.proxy import publish_smem_writes
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import element_address
from smalti.lowering.smem import SmemRef, inferred_transforms, smem_address, smem_ref, static_offset
from smalti.lowering.smem_order import order_async_write
from smalti.lowering.values import ELEMENT_TYPES, ElementType
from smalti.lowering.warpgroup import issued_by_one_thread, warpgroup_sync
from smalti.ptx import Address, Guard, Immediate, KernelBuilder, Register, VectorOperand
from smalti.ptx.module import TensorAddress
from smalti.tiling import (
    SwizzleTransform,
    TileTransform,
    Transform,
    TransposeTransform,
    tma_incompatibility,
)
from smalti.tiling.smem import TMA_MAX_BOX, byte_count

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64
PART_ALIGN = 128  # bytes: a TMA copy's shared-memory destination is 128-byte aligned


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


@dataclass(frozen=True)
class Collective:
    """How the CTAs along `dims` of a kernel's `cluster` share one async_load."""

    dims: tuple[int, ...]
    cluster: tuple[int, int, int]

    @property
    def parts(self) -> int:
        return math.prod(self.cluster[d] for d in self.dims)

    @property
    def strides(self) -> tuple[int, int, int]:
        """Rank distance between neighbours along x, y, z (%cluster_ctarank is x-fastest)."""
        x, y, _ = self.cluster
        return (1, x, x * y)

    @property
    def pattern(self) -> int:
        """The ctaMask of the CTA whose coordinates along `dims` are 0 (and whose rank is 0)."""
        ranges = [range(self.cluster[d]) for d in self.dims]
        return sum(1 << sum(c * self.strides[d] for c, d in zip(coords, self.dims, strict=True))
                   for coords in itertools.product(*ranges))


AsyncCopyOp = AsyncLoadOp | AsyncStoreOp


def _collective(ctx: LoweringContext, op: AsyncCopyOp) -> Collective | None:
    dims = op.collective_dims()
    return Collective(dims, ctx.signature.cluster) if dims else None


def _check_part(op: AsyncCopyOp, shape: tuple[int, ...], part: tuple[int, ...],
                transforms: tuple[Transform, ...], element: ElementType) -> None:
    """A collective part is a contiguous, TMA-aligned piece of the SMEM ref."""
    if part == shape:
        return
    what = f"a collective part ({list(part)} of {list(shape)})"
    ref = SmemRef(0, shape, element, transforms)
    if (problem := tma_incompatibility(transforms, ref.element_bytes, part)) is not None:
        raise error_at(op, f"TMA cannot copy {what}: {problem}")
    size = byte_count(math.prod(part), ref.element_bytes)
    start = static_offset(ref, (part[0], *([0] * (len(shape) - 1))), swizzled=False)
    swizzles = [t.swizzle_bytes for t in transforms if isinstance(t, SwizzleTransform)]
    align = max(PART_ALIGN, 8 * swizzles[0] if swizzles else 0)
    if start != size or size % align:
        raise error_at(op, f"TMA cannot copy {what}: each part must be a contiguous run of "
                           f"shared memory whose size ({size} bytes) is a multiple of {align}")


def _lengths(op: AsyncCopyOp, smem_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The box's lengths in the global ref (-1: a squeezed dim)."""
    return op.slice_lengths if op.slice_lengths is not None else smem_shape


@dataclass(frozen=True)
class GlobalOrigin:
    """Where an async op's global ref lives: kernel argument `arg`, or (arg -1) the
    symmetric buffer at `symmetric_offset` of the heap, the copy of device `device` (an
    index value; None: this device's own)."""

    arg: int
    symmetric_offset: int | None = None
    device: ir.Value | None = None


def global_origin(op: AsyncCopyOp) -> GlobalOrigin:
    """The kernel argument or symmetric buffer an async op's global ref is (a located error
    for any other ref: TMA needs a tensor map made before the launch)."""
    value, device = op.global_ref, None
    while not isinstance(value.owner, ir.Block):
        match value.owner.operation.opview:
            case RemoteRefOp() as remote:  # the outermost names the device
                device = remote.device if device is None else device
                value = remote.source
            case SliceSymmetricOp() as slice_op:
                return GlobalOrigin(-1, constant_index(slice_op.offset), device)
            case _:
                break
    else:
        if is_kernel(value.owner.owner.operation):
            return GlobalOrigin(ir.BlockArgument(value).arg_number)
    raise error_at(op, "TMA copies need a kernel argument or a symmetric buffer "
                       "(smalti.slice_symmetric, or smalti.remote_ref of one) as the global ref")


def _record(op: AsyncCopyOp, origin: GlobalOrigin, param: str = "") -> TensorMapRecord:
    """The tensor map one async op (its global ref `origin`) needs, named `param`."""
    smem = op.shared_ref
    transforms = inferred_transforms(op, "in_transforms", 0)
    smem_type = ir.MemRefType(smem.type)
    shape = tuple(smem_type.shape)
    element = ELEMENT_TYPES.get(type_name(smem_type.element_type))
    if element is None:
        raise error_at(op, f"TMA of {smem_type.element_type} is not supported yet")
    if any(isinstance(t, TransposeTransform) for t in transforms):
        raise error_at(op, "TMA cannot write transposed shared memory")
    size = SmemRef(0, shape, element).element_bytes
    if (problem := tma_incompatibility(transforms, size, shape)) is not None:
        raise error_at(op, f"TMA cannot use this shared-memory ref: {problem}")
    part = op.part_shape()
    _check_part(op, shape, part, transforms, element)
    gmem_type = ir.MemRefType(op.global_ref.type)
    lengths = _lengths(op, shape)
    box = iter(plan_copies(part, transforms).box)
    global_box = tuple(1 if n == -1 else next(box) for n in lengths)
    swizzles = [t.swizzle_bytes for t in transforms if isinstance(t, SwizzleTransform)]
    return TensorMapRecord(param, origin.arg, type_name(gmem_type.element_type),
                           tuple(gmem_type.shape), global_box, swizzles[0] if swizzles else None,
                           origin.symmetric_offset)


def _key(record: TensorMapRecord) -> TensorMapKey:
    return (record.arg, record.symmetric_offset, record.box, record.swizzle)


def _async_copies(func: ir.Operation) -> list[AsyncCopyOp]:
    """The kernel's async_load and async_store ops, in program order."""
    ops: list[AsyncCopyOp] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        view = op.operation.opview
        if isinstance(view, AsyncLoadOp | AsyncStoreOp):
            ops.append(view)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops


def declare_tensor_maps(ctx: LoweringContext, func: ir.Operation) -> None:
    """Add the kernel's tensor-map parameters (after its arguments), one per distinct map its
    async ops need in first-use order, take their generic addresses (TMA reads the map
    through one), and record them for the launch ABI. A map of a symmetric buffer is an
    array of one map per device."""
    records: dict[TensorMapKey, TensorMapRecord] = {}
    for op in _async_copies(func):
        origin = global_origin(op)
        record = _record(op, origin)
        records.setdefault(_key(record), dataclasses.replace(record, param=f"tmap{len(records)}"))
        if isinstance(op, AsyncStoreOp) and origin.symmetric_offset is not None:
            ctx.symmetric_stores = True
    ctx.tensor_map_records = tuple(records.values())
    devices = ctx.signature.collective.devices if ctx.signature.collective else 1
    for record in ctx.tensor_map_records:
        copies = devices if record.symmetric_offset is not None else 1
        symbol = ctx.builder.param(record.param, "b8", align=TENSOR_MAP_ALIGN,
                                   array=TENSOR_MAP_BYTES * copies)
        param = ctx.builder.compute("mov.u64", "u64", symbol)
        ctx.tensor_maps[_key(record)] = ctx.builder.compute("cvta.param.u64", "u64", param)


def _tensor_map(ctx: LoweringContext, op: AsyncCopyOp, origin: GlobalOrigin) -> Register:
    """The generic address of the op's tensor map; for a symmetric buffer, the entry of
    the device whose copy it is (its own by default)."""
    base = ctx.tensor_maps[_key(_record(op, origin))]
    if origin.symmetric_offset is None:
        return base
    if origin.device is None:
        key = ("own tensor map", base.name)
        if key not in ctx.cache:
            ctx.cache[key] = ctx.builder.compute("mad.wide.u32", "u64",
                                                 ctx.collective_params(op).device,
                                                 TENSOR_MAP_BYTES, base)
        return ctx.cache[key]
    entry = element_address(ctx, op, origin.device, TENSOR_MAP_BYTES, base)
    if not entry.offset:
        return entry.base
    return ctx.builder.compute("add.s64", "u64", entry.base, entry.offset)


def _copies(ctx: LoweringContext, op: AsyncCopyOp, ref: SmemRef, part: Register | None = None):
    """(SMEM address, coordinates innermost first) per box of an async op; with `part` (a
    collective part index), those of that part of the ref."""
    lengths = _lengths(op, ref.shape)
    shape = op.part_shape()
    plan = plan_copies(shape, ref.transforms)
    b = ctx.builder
    starts: list[int | Register] = []
    for value in op.indices:
        scalar = ctx.scalar(op, value)
        starts.append(int(scalar.constant) if scalar.constant is not None
                      else b.compute("cvt.u32.u64", "u32", scalar.operand))
    packed = ref.element.bits == 4  # the map is over bytes: the innermost coordinate halves
    if packed:
        starts[-1] = _byte_coordinate(op, starts[-1], b)
    base: Register | None = None
    if part is not None:  # part i: rows [i * rows, (i + 1) * rows) of the leading SMEM dim
        leading = next(d for d, n in enumerate(lengths) if n != -1)
        last = packed and leading == len(starts) - 1  # a 1-D 4-bit ref: rows are bytes
        row = b.compute("mul.lo.u32", "u32", part, shape[0] // 2 if last else shape[0])
        start = starts[leading]
        starts[leading] = row if start == 0 else b.compute("add.s32", "b32", row, start)
        size = byte_count(math.prod(shape), ref.element_bytes)
        base = b.compute("mad.lo.u32", "u32", part, size, smem_address(ctx, ref))
    for origin in plan.origins:
        offsets = iter(origin)
        coords = []
        for dim, (start, n) in enumerate(zip(starts, lengths, strict=True)):
            shift = 0 if n == -1 else next(offsets)
            if packed and dim == len(starts) - 1:
                shift //= 2
            if isinstance(start, int):
                coords.append(b.compute("mov.b32", "b32", Immediate(start + shift)))
            else:
                coords.append(start if shift == 0 else b.compute("add.s32", "b32", start, shift))
        byte = static_offset(ref, origin, swizzled=False)
        address = (Address(smem_address(ctx, ref, byte)) if base is None
                   else Address(base, byte))
        yield address, VectorOperand(tuple(reversed(coords)))


def _byte_coordinate(op: AsyncCopyOp, start: int | Register, b: KernelBuilder
                     ) -> int | Register:
    """The innermost coordinate of a 4-bit copy in the bytes its map counts: an even element
    index halved (a constant must be even; a run-time one is assumed so, as TMA starts on
    a byte)."""
    if isinstance(start, int):
        if start % 2:
            raise error_at(op, f"a TMA copy of 4-bit elements starts on a byte: the innermost "
                               f"index must be even, got {start}")
        return start // 2
    return b.compute("shr.s32", "b32", start, 1)


@lowering_rule(AsyncLoadOp)
def _async_load(ctx: LoweringContext, op: AsyncLoadOp) -> None:
    ref = smem_ref(ctx, op, op.destination)
    order_async_write(ctx, ref.start, ref.stop)
    bars = smem_ref(ctx, op, op.barriers)
    barrier = barrier_address(ctx, op, bars, op.barrier_index)
    origin = global_origin(op)
    tmap = _tensor_map(ctx, op, origin)
    rank = ir.MemRefType(op.source.type).rank
    opcode = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile."
              "mbarrier::complete_tx::bytes")
    if op.cta_group == 2:
        opcode, barrier = f"{opcode}.cta_group::2", _pair_leader_barrier(ctx, barrier)
    collective = _collective(ctx, op)
    extra: tuple[Register, ...] = ()
    if collective is None:
        copies = list(_copies(ctx, op, ref))
    else:
        part, mask = _part_and_mask(ctx, collective)
        copies = list(_copies(ctx, op, ref, part))
        opcode, extra = f"{opcode}.multicast::cluster", (mask,)
    with issued_by_one_thread(ctx, pair=False) as guard:
        if origin.symmetric_offset is not None:  # written through the generic proxy
            ctx.builder.emit("fence.proxy.async.global", guard=guard)
        for address, coords in copies:
            ctx.builder.emit(opcode, address, TensorAddress(tmap, coords), barrier, *extra,
                             guard=guard)


def _pair_leader_barrier(ctx: LoweringContext, barrier: Address) -> Address:
    """`cta_group = 2`: the barrier at the same offset in the CTA pair's leader (the even
    rank), as a `.shared::cluster` address (`mapa`), which `.cta_group::2` lets a load
    complete on."""
    b = ctx.builder
    if "pair_leader_rank" not in ctx.cache:
        ctx.cache["pair_leader_rank"] = b.compute("and.b32", "b32", b.special("%cluster_ctarank"),
                                                  Immediate(~1 & 0xFFFFFFFF))
    local = barrier.base if barrier.offset == 0 else b.compute("add.u32", "u32", barrier.base,
                                                               barrier.offset)
    return Address(b.compute("mapa.shared::cluster.u32", "u32", local,
                             ctx.cache["pair_leader_rank"]))


def _part_and_mask(ctx: LoweringContext, collective: Collective) -> tuple[Register, Register]:
    """This CTA's part index along the collective dims (x-fastest among them) and the
    16-bit ctaMask of the CTAs sharing the load (memoised per dims)."""
    key = ("collective", tuple(sorted(collective.dims)))
    if key not in ctx.cache:
        b = ctx.builder
        rank = b.special("%cluster_ctarank")
        part: Register | None = None
        scale = 1
        first = rank  # the rank of the CTA with the same coordinates but 0 along the dims
        for d in sorted(collective.dims):
            coord = b.special(f"%cluster_ctaid.{'xyz'[d]}")
            part = coord if part is None else b.compute("mad.lo.u32", "u32", coord, scale,
                                                         part)
            scale *= collective.cluster[d]
            stride = collective.strides[d]
            step = coord if stride == 1 else b.compute("mul.lo.u32", "u32", coord, stride)
            first = b.compute("sub.u32", "u32", first, step)
        mask = b.compute("shl.b32", "b32", Immediate(collective.pattern), first)
        assert part is not None
        ctx.cache[key] = (part, b.compute("cvt.u16.u32", "u16", mask))
    return ctx.cache[key]


@lowering_rule(AsyncStoreOp)
def _async_store(ctx: LoweringContext, op: AsyncStoreOp) -> None:
    """Publish the warpgroup's SMEM writes to the async proxy (when any), then thread 0
    stores."""
    ref = smem_ref(ctx, op, op.source)
    tmap = _tensor_map(ctx, op, global_origin(op))
    rank = ir.MemRefType(op.destination.type).rank
    b = ctx.builder
    publish_smem_writes(ctx)
    copies = list(_copies(ctx, op, ref))
    with issued_by_one_thread(ctx, pair=False) as guard:
        for address, coords in copies:
            b.emit(f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group",
                   TensorAddress(tmap, coords), address, guard=guard)
        b.emit("cp.async.bulk.commit_group", guard=guard)


@lowering_rule(AsyncStoreWaitOp)
def _async_store_wait(ctx: LoweringContext, op: AsyncStoreWaitOp) -> None:
    """Thread 0 waits for its stores to have read SMEM; then the warpgroup meets."""
    ctx.builder.emit("cp.async.bulk.wait_group.read", Immediate(op.pending),
                     guard=Guard(leader(ctx)))
    warpgroup_sync(ctx)


def box_bytes(record: TensorMapRecord) -> int:
    """Bytes one copy through this tensor map moves (4-bit elements two per byte)."""
    return math.prod(record.box) * ELEMENT_TYPES[record.dtype].memory_bits // 8
