"""Shared memory: slices of the one dynamic buffer, transforms, and vector_load/vector_store.

A kernel's slices all carve `.extern .shared .align 1024 .b8 smalti_smem[]` at constant byte
offsets. A logical index reaches its byte through the ref's transforms, computed in PTX:
tile (quotient and remainder per tiled dim), transpose (a permutation), row-major offset
of the physical shape, then the swizzle XOR of the 16-byte chunk bits with the row bits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from jaxlib.mlir import ir

from smalti.dialect.attributes import attr_to_transforms
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops import VectorLoadOp, VectorStoreOp
from smalti.dialect.ops_memory import SelectStageOp, SliceSmemOp, WithTransformsOp
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.smem_order import order_generic_access, owner
from smalti.lowering.transfer import Loader, Storer
from smalti.lowering.values import (
    ElementType,
    FragmentedArray,
    ScalarValue,
    elements_per_register,
    memory_element_type,
)
from smalti.ptx import Address, Immediate, Register, Symbol, VectorOperand
from smalti.tiling import (
    WARPGROUP_SIZE,
    WGMMA_LAYOUT,
    Distribution,
    Layout,
    LayoutError,
    SwizzleTransform,
    TileTransform,
    Transform,
    TransposeTransform,
    WGSplatLayout,
    WGStridedLayout,
    physical_shape,
)
from smalti.tiling.smem import ElementSize, byte_count

SMEM_SYMBOL = "smalti_smem"
SMEM_ALIGN = 1024  # the 128-byte swizzle pattern repeats every 1024 bytes
MAX_ACCESS_BYTES = 16


@dataclass(frozen=True)
class SmemRef:
    """A shared-memory ref: a byte offset into the dynamic buffer, shape and transforms."""

    offset: int
    shape: tuple[int, ...]
    element: ElementType
    transforms: tuple[Transform, ...] = ()
    # A stage chosen at run time (select_stage): `dynamic` bytes (a .u32 register) are added
    # to `offset`, and the ref may lie anywhere in the `reach` bytes from `offset`.
    dynamic: Register | None = None
    reach: int | None = None

    @property
    def element_bytes(self) -> ElementSize:
        """Bytes of one element: Fraction(1, 2) for 4-bit types, packed two per byte."""
        return Fraction(self.element.memory_bits, 8) if self.element.bits == 4 \
            else self.element.bytes

    @property
    def size_bytes(self) -> int:
        return byte_count(math.prod(self.shape), self.element_bytes)

    @property
    def start(self) -> int:
        """The first byte of the dynamic buffer the ref may view."""
        return self.offset

    @property
    def stop(self) -> int:
        """The byte after the last one the ref may view (all stages, for a chosen one)."""
        return self.offset + (self.size_bytes if self.reach is None else self.reach)

    @property
    def swizzle(self) -> int | None:
        last = self.transforms[-1] if self.transforms else None
        return last.swizzle_bytes if isinstance(last, SwizzleTransform) else None


def smem_ref(ctx: LoweringContext, op: ir.OpView, value: ir.Value) -> SmemRef:
    lowered = ctx.values.get(value)
    if not isinstance(lowered, SmemRef):
        raise error_at(op, f"expects a shared-memory ref from smalti.slice_smem, got {value.type}")
    return lowered


def smem_base(ctx: LoweringContext) -> Register:
    """The shared-window address of the dynamic buffer (declared on first use), as .u32."""
    if not ctx.smem_declared:
        ctx.builder.shared(SMEM_SYMBOL, None, align=SMEM_ALIGN)
        ctx.smem_declared = True
    if "smem_base" not in ctx.block_cache:
        ctx.block_cache["smem_base"] = ctx.builder.compute("mov.u32", "u32",
                                                           Symbol(SMEM_SYMBOL))
    return ctx.block_cache["smem_base"]


def smem_address(ctx: LoweringContext, ref: SmemRef, extra: int = 0) -> Register:
    """The .u32 shared address of byte `extra` of `ref` (memoised per block: recomputing
    it from the symbol is cheaper than keeping it live through a loop)."""
    key = ("smem_address", ref.offset + extra, ref.dynamic)
    if key not in ctx.block_cache:
        address = smem_base(ctx)
        if ref.offset + extra:
            address = ctx.builder.compute("add.u32", "u32", address, ref.offset + extra)
        if ref.dynamic is not None:
            address = ctx.builder.compute("add.u32", "u32", address, ref.dynamic)
        ctx.block_cache[key] = address
    return ctx.block_cache[key]


def _element(op: ir.OpView, value: ir.Value) -> ElementType:
    element = memory_element_type(ir.MemRefType(value.type).element_type)
    if element is None:
        raise error_at(op, f"shared-memory refs of {value.type} are not supported")
    return element


def inferred_transforms(op: ir.OpView, attr: str, index: int) -> tuple[Transform, ...]:
    """Entry `index` of the op's inferred `in_transforms` or `out_transforms`; a located
    error if inference has not run."""
    attributes = op.operation.attributes
    if attr not in attributes:
        raise error_at(op, f"has no '{attr}': run smalti-infer-layouts before lowering")
    return tuple(attr_to_transforms(attributes[attr][index]))


def _check_alignment(op: ir.OpView, ref: SmemRef) -> None:
    try:
        physical_shape(ref.transforms, ref.shape, ref.element_bytes)
    except LayoutError as error:
        raise error_at(op, f"transforms do not apply: {error}") from None
    if ref.swizzle is not None and ref.offset % (8 * ref.swizzle):
        raise error_at(op, f"a {ref.swizzle}-byte swizzled ref must start on a multiple of "
                           f"{8 * ref.swizzle} bytes, this one starts at {ref.offset}")


@lowering_rule(SliceSmemOp)
def _slice_smem(ctx: LoweringContext, op: SliceSmemOp) -> None:
    offset = ctx.scalar(op, op.offset).constant
    if not isinstance(offset, int):
        raise error_at(op, "expects a constant offset")
    result = op.result
    ref = SmemRef(offset, tuple(ir.MemRefType(result.type).shape), _element(op, result),
                  inferred_transforms(op, "out_transforms", 0))
    _check_alignment(op, ref)
    smem_base(ctx)
    ctx.set(result, ref)


@lowering_rule(WithTransformsOp)
def _with_transforms(ctx: LoweringContext, op: WithTransformsOp) -> None:
    source = smem_ref(ctx, op, op.source)
    ref = dataclasses.replace(source, transforms=op.transforms)
    _check_alignment(op, ref)
    ctx.set(op.result, ref)


@lowering_rule(SelectStageOp)
def _select_stage(ctx: LoweringContext, op: SelectStageOp) -> None:
    """The chosen stage: the first stage's ref plus index * the stages' spacing."""
    stages = [smem_ref(ctx, op, stage) for stage in op.stages]
    first = stages[0]
    spacing = stages[1].offset - first.offset if len(stages) > 1 else 0
    for n, stage in enumerate(stages):
        if (stage.dynamic is not None or stage.offset != first.offset + n * spacing
                or (stage.shape, stage.element) != (first.shape, first.element)):
            raise error_at(op, f"expects stages at evenly spaced offsets, stage #{n} is at "
                               f"byte {stage.offset}" + (" plus a run-time offset"
                                                         if stage.dynamic is not None else ""))
    transforms = inferred_transforms(op, "out_transforms", 0)
    index = ctx.scalar(op, op.index)
    if index.constant is not None:
        ctx.set(op.result, dataclasses.replace(stages[int(index.constant)],
                                               transforms=transforms))
        return
    b = ctx.builder
    low = index.operand if index.type.bits == 32 else b.compute("cvt.u32.u64", "u32",
                                                                 index.operand)
    dynamic = b.compute("mul.lo.u32", "u32", low, spacing)
    ref = SmemRef(first.offset, first.shape, first.element, transforms, dynamic,
                  (len(stages) - 1) * spacing + first.size_bytes)
    if ref.swizzle is not None and spacing % (8 * ref.swizzle):
        raise error_at(op, f"{ref.swizzle}-byte swizzled stages must be {8 * ref.swizzle} "
                           f"bytes apart, these are {spacing}")
    ctx.set(op.result, ref)


def static_offset(ref: SmemRef, index: Sequence[int], swizzled: bool = True) -> int:
    """The byte offset (from the ref's start) of a logical element known at compile time (of
    a 4-bit element: the byte holding it)."""
    idx = list(index)
    shape = list(ref.shape)
    for transform in ref.transforms:
        match transform:
            case TileTransform(tiling=tile):
                k = len(tile)
                head, tail, tshape = idx[:-k], idx[-k:], shape[-k:]
                idx = [*head, *(i // t for i, t in zip(tail, tile, strict=True)),
                       *(i % t for i, t in zip(tail, tile, strict=True))]
                shape = [*shape[:-k], *(s // t for s, t in zip(tshape, tile, strict=True)),
                         *tile]
            case TransposeTransform(permutation=perm):
                idx, shape = [idx[p] for p in perm], [shape[p] for p in perm]
    offset = math.floor(sum(i * math.prod(shape[j + 1:]) for j, i in enumerate(idx))
                        * ref.element_bytes)
    if swizzled and ref.swizzle is not None:
        offset ^= ((offset >> 7) & (ref.swizzle // 16 - 1)) << 4
    return offset


# vector_load / vector_store on shared memory.

def _u32(ctx: LoweringContext, scalar: ScalarValue) -> Register | Immediate:
    if scalar.constant is not None:
        return Immediate(int(scalar.constant))
    return ctx.builder.compute("cvt.u32.u64", "u32", scalar.operand)


def _thread_parts(ctx: LoweringContext, dist: Distribution) -> list[Register | None]:
    """Per dim, this thread's index part (sum of the layout's thread terms), as .u32."""
    b = ctx.builder
    parts: list[Register | None] = [None] * len(dist.shape)
    for term in dist.thread_terms:
        key = ("smem_thread_term", term)
        if key not in ctx.cache:
            part = ctx.thread_index()
            if term.divisor > 1:
                part = b.compute("div.u32", "u32", part, term.divisor)
            if term.divisor * term.modulus < 128:
                part = b.compute("rem.u32", "u32", part, term.modulus)
            if term.scale != 1:
                part = b.compute("mul.lo.u32", "u32", part, term.scale)
            ctx.cache[key] = part
        part = ctx.cache[key]
        previous = parts[term.dim]
        parts[term.dim] = part if previous is None else b.compute("add.u32", "u32", previous,
                                                                   part)
    return parts


Index = Register | int  # a register (.u32) or a value known when lowering


def _div_mod(ctx: LoweringContext, value: Index, divisor: int) -> tuple[Index, Index]:
    b = ctx.builder
    if isinstance(value, int):
        return value // divisor, value % divisor
    if divisor & (divisor - 1) == 0:
        return (b.compute("shr.u32", "u32", value, divisor.bit_length() - 1),
                b.compute("and.b32", "u32", value, divisor - 1))
    return b.compute("div.u32", "u32", value, divisor), b.compute("rem.u32", "u32", value,
                                                                   divisor)


def physical_offset(ctx: LoweringContext, ref: SmemRef, index: Sequence[Index]) -> Index:
    """The byte offset of logical `index` through the transforms, swizzle included: PTX
    for what depends on registers, folded for what does not."""
    b = ctx.builder
    idx: list[Index] = list(index)
    shape = list(ref.shape)
    for transform in ref.transforms:
        match transform:
            case TileTransform(tiling=tile):
                k = len(tile)
                pairs = [_div_mod(ctx, i, t) for i, t in zip(idx[-k:], tile, strict=True)]
                idx = [*idx[:-k], *(q for q, _ in pairs), *(r for _, r in pairs)]
                shape = [*shape[:-k], *(s // t for s, t in zip(shape[-k:], tile, strict=True)),
                         *tile]
            case TransposeTransform(permutation=perm):
                idx, shape = [idx[p] for p in perm], [shape[p] for p in perm]
    static, offset = 0, None
    for j, i in enumerate(idx):
        stride = math.prod(shape[j + 1:]) * ref.element.bytes
        if isinstance(i, int):
            static += i * stride
        elif offset is None:
            offset = b.compute("mul.lo.u32", "u32", i, stride)
        else:
            offset = b.compute("mad.lo.u32", "u32", i, stride, offset)
    mask = ref.swizzle // 16 - 1 if ref.swizzle is not None else 0
    if offset is None:
        return static ^ (((static >> 7) & mask) << 4)
    if static:
        offset = b.compute("add.u32", "u32", offset, static)
    if mask:
        row = b.compute("shr.u32", "u32", offset, 7)
        row = b.compute("and.b32", "u32", row, mask)
        row = b.compute("shl.b32", "u32", row, 4)
        offset = b.compute("xor.b32", "u32", offset, row)
    return offset


def _rows_contiguous(ref: SmemRef) -> int:
    """How many elements along the last logical dim lie at consecutive bytes (from any
    index that is a multiple of the result)."""
    run = ref.shape[-1]
    for transform in ref.transforms:
        match transform:
            case TransposeTransform(permutation=perm) if perm[-1] != len(perm) - 1:
                return 1
            case TileTransform(tiling=tile):
                run = math.gcd(run, tile[-1])
    if ref.swizzle is not None:
        run = math.gcd(run, 16 // ref.element.bytes)
    return run


def _contiguous_run(ref: SmemRef, dist: Distribution) -> int:
    """Elements of a register vector that lie at consecutive physical bytes."""
    if dist.vector_dim != len(ref.shape) - 1 or dist.vector_step != 1:
        return 1
    return math.gcd(dist.vector_length, _rows_contiguous(ref))


def _accesses(ctx: LoweringContext, op: ir.OpView, ref: SmemRef, indices: list[ir.Value],
              layout: Layout, shape: tuple[int, ...]):
    """(register vector, first element, count, address register) per ld/st.shared."""
    if isinstance(layout, WGSplatLayout):
        raise error_at(op, "cannot access memory with a splat layout")
    dist = layout.distribution(shape)
    flat = None if dist.separable else _flat_thread_index(ctx, op, layout, shape)
    bases = [ctx.scalar(op, v) for v in indices]
    last = len(shape) - 1
    alignment = math.gcd(*(o[last] for o in dist.register_origins),
                         *(t.scale for t in dist.thread_terms if t.dim == last),
                         *(s.divisor if s.constant is None else int(s.constant)
                           for s in bases[last:]))
    alignment = alignment or dist.vector_length
    run = _contiguous_run(ref, dist)
    width = 1
    while (run % (width * 2) == 0 and alignment % (width * 2) == 0
           and width * 2 * ref.element.bytes <= MAX_ACCESS_BYTES):
        width *= 2
    threads = _thread_parts(ctx, dist) if flat is None else [None] * len(shape)
    b = ctx.builder
    uniform = [_u32(ctx, s) for s in bases]
    base = smem_address(ctx, ref)
    for register, origin in enumerate(dist.register_origins):
        for first in range(0, dist.vector_length, width):
            if flat is not None:
                threads = _unravel(ctx, flat, register * WARPGROUP_SIZE * dist.vector_length
                                   + first, shape)
                origin = (0,) * len(shape)
            index: list[Index] = []
            for d in range(len(shape)):
                static = origin[d] + (first * dist.vector_step
                                      if d == dist.vector_dim and flat is None else 0)
                known = uniform[d]
                value: Index = static
                if isinstance(known, Immediate):
                    value = static + int(known.value)
                else:
                    value = known if static == 0 else b.compute("add.u32", "u32", known, static)
                part = threads[d]
                if part is not None:
                    value = part if value == 0 else b.compute("add.u32", "u32", part, value)
                index.append(value)
            offset = physical_offset(ctx, ref, index)
            address = (Address(base, offset) if isinstance(offset, int)
                       else Address(b.compute("add.u32", "u32", base, offset)))
            yield register, first, width, address


def _flat_thread_index(ctx: LoweringContext, op: ir.OpView, layout: Layout,
                       shape: tuple[int, ...]) -> Register:
    """This thread's first flat (row-major) element of a strided layout whose thread part does
    not split per dim (a dim that is no power of two): accesses then unravel flat indices."""
    if not isinstance(layout, WGStridedLayout):
        raise error_at(op, "this layout does not split into thread and register parts over "
                           f"{list(shape)}; shared-memory accesses need it to")
    return ctx.builder.compute("mul.lo.u32", "u32", ctx.thread_index(), layout.vec)


def _unravel(ctx: LoweringContext, flat: Register, offset: int, shape: tuple[int, ...]
             ) -> list[Register | None]:
    """Per dim, the index of flat element `flat + offset` of a row-major array of `shape`
    (div/rem by constants, which ptxas turns into multiply-shifts)."""
    b = ctx.builder
    position = flat if offset == 0 else b.compute("add.u32", "u32", flat, offset)
    parts: list[Register | None] = []
    for d in range(len(shape)):
        stride = math.prod(shape[d + 1:])
        part = position if stride == 1 else b.compute("div.u32", "u32", position, stride)
        if d > 0:
            part = b.compute("rem.u32", "u32", part, shape[d])
        parts.append(part)
    return parts


def _check_whole_bytes(op: ir.OpView, ref: SmemRef) -> None:
    """Thread accesses address whole bytes: 4-bit SMEM refs are for TMA and MMA operands."""
    if ref.element.bits == 4:
        raise error_at(op, f"threads do not access shared memory of {ref.element.name} yet "
                           "(4-bit refs are TMA destinations and tcgen05_mma operands)")


def load_smem(ctx: LoweringContext, op: VectorLoadOp) -> None:
    """vector_load from a shared-memory ref."""
    result = op.result
    shape = tuple(ir.VectorType(result.type).shape)
    layout = layouts_of(op, "out_layouts", 1)[0]
    ref = smem_ref(ctx, op, op.source)
    _check_whole_bytes(op, ref)
    order_generic_access(ctx, ref.start, ref.stop, False,
                         owner(ref, op.indices, layout, shape))
    dist = layout.distribution(shape)
    pack = elements_per_register(ref.element, dist.vector_length)
    loader = Loader(ctx, "shared", ref.element, pack, dist.num_registers)
    for register, _, count, address in _accesses(ctx, op, ref, op.indices, layout, shape):
        loader.load(register, count, address)
    ctx.set(result, FragmentedArray(layout, shape, ref.element, loader.result(),
                                    dist.vector_length))


MATRIX_ROWS = 8  # stmatrix stores 8x8 matrices of 16-bit elements, a 16-byte row per lane


def _store_matrices(ctx: LoweringContext, op: VectorStoreOp, array: FragmentedArray,
                    ref: SmemRef) -> bool:
    """Store a 16-bit WGMMA-layout array with stmatrix .x4, when its rows are 16-byte
    contiguous in shared memory: per warp and 16x16 block, one instruction where lanes hold
    exactly the four 8x8 fragments stmatrix takes (4x fewer stores, one address per block).
    False when it does not apply (the caller stores element-wise)."""
    bases = [ctx.scalar(op, v) for v in op.indices]
    rows, cols = array.shape if len(array.shape) == 2 else (0, 0)
    column_base = bases[-1].constant if bases else None
    aligned = (int(column_base) if column_base is not None else bases[-1].divisor) \
        if bases else 0
    if (array.layout != WGMMA_LAYOUT or array.element.bits != 16 or array.pack != 2
            or len(ref.shape) != 2
            or rows % 64 or cols % 16 or _rows_contiguous(ref) % MATRIX_ROWS
            or aligned % MATRIX_ROWS):
        return False
    b = ctx.builder
    tid = ctx.thread_index()
    lane = b.compute("and.b32", "u32", tid, 31)
    # Lane l addresses row l % 8 of matrix l / 8; matrices 1 and 3 are 8 rows lower, 2 and 3
    # 8 columns to the right; warp w holds rows 16 w of each 64-row block.
    warp = b.compute("shr.u32", "u32", tid, 5)
    row = b.compute("mad.lo.u32", "u32", warp, 16, b.compute("and.b32", "u32", lane, 15))
    column = b.compute("shr.u32", "u32", b.compute("and.b32", "u32", lane, 16), 1)
    uniform = [_u32(ctx, s) for s in bases]
    if isinstance(uniform[0], Register):
        row = b.compute("add.u32", "u32", row, uniform[0])
    if isinstance(uniform[1], Register):
        column = b.compute("add.u32", "u32", column, uniform[1])
    static_row = int(uniform[0].value) if isinstance(uniform[0], Immediate) else 0
    static_column = int(uniform[1].value) if isinstance(uniform[1], Immediate) else 0
    where = {origin: i for i, origin in
             enumerate(array.layout.distribution(array.shape).register_origins)}
    base = smem_address(ctx, ref)
    for block in range(0, rows, 64):
        for left in range(0, cols, 16):
            fragments = [array.vectors[where[(block + 8 * (m % 2), left + 8 * (m // 2))]][0]
                         for m in range(4)]
            index: list[Index] = [
                b.compute("add.u32", "u32", row, static_row + block) if static_row + block
                else row,
                b.compute("add.u32", "u32", column, static_column + left)
                if static_column + left else column]
            offset = physical_offset(ctx, ref, index)
            address = (Address(base, offset) if isinstance(offset, int)
                       else Address(b.compute("add.u32", "u32", base, offset)))
            b.emit("stmatrix.sync.aligned.m8n8.x4.shared.b16", address,
                   VectorOperand(tuple(fragments)))
    return True


def store_smem(ctx: LoweringContext, op: VectorStoreOp) -> None:
    """vector_store to a shared-memory ref."""
    array = ctx.array(op, op.value)
    layout = layouts_of(op, "in_layouts", 1)[0]
    if array.layout != layout:
        raise error_at(op, f"stored value has layout {array.layout}, but in_layouts says "
                           f"{layout}")
    ref = smem_ref(ctx, op, op.destination)
    _check_whole_bytes(op, ref)
    order_generic_access(ctx, ref.start, ref.stop, True,
                         owner(ref, op.indices, layout, array.shape))
    if _store_matrices(ctx, op, array, ref):
        ctx.unpublished_smem_writes = True
        return
    guard = None if isinstance(layout, WGSplatLayout) else ctx.first_copy(
        layout.distribution(array.shape))
    storer = Storer(ctx, "shared", array, guard)
    for register, first, count, address in _accesses(ctx, op, ref, op.indices, layout,
                                                     array.shape):
        storer.store(register, first, count, address)
    ctx.unpublished_smem_writes = True  # for wgmma / TMA stores: smalti.lowering.proxy


def is_smem_value(ctx: LoweringContext, value: ir.Value) -> bool:
    return isinstance(ctx.values.get(value), SmemRef)
