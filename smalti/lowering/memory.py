"""vector_load / vector_store between global memory and registers.

Each thread's address is base + index offset (uniform) + thread offset (from the layout's
thread terms, computed once per kernel and layout) + a static offset per register. Accesses
are as wide as contiguity and provable alignment allow, up to 16 bytes (ld.global.v4.b32).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops import VectorLoadOp, VectorStoreOp
from smalti.lowering import subbyte
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar, scalar_add, scalar_mul
from smalti.lowering.smem import is_smem_value, load_smem, store_smem
from smalti.lowering.transfer import Loader, Storer
from smalti.lowering.values import (
    BufferValue,
    FragmentedArray,
    ScalarValue,
    elements_per_register,
    vector_element_type,
)
from smalti.ptx import Address, Register
from smalti.tiling import WARPGROUP_SIZE, Distribution, Layout, WGSplatLayout

# Kernel buffers are assumed 16-byte aligned (XLA and the simulator give 256).
BUFFER_ALIGNMENT = 16
MAX_ACCESS_BYTES = 16


@dataclass(frozen=True)
class Access:
    """One ld/st: `count` elements starting at element `first` of a register vector."""

    address: Register
    offset: int  # bytes
    first: int
    count: int


def slice_offset(ctx: LoweringContext, op: ir.OpView, buffer: BufferValue,
                  indices: list[ir.Value]) -> ScalarValue:
    """Byte offset of the slice origin: sum of index * stride * element size (uniform). A
    slice of 4-bit elements starts at a byte: its innermost index a provable multiple of 2."""
    if buffer.element.memory_bits == 4:
        return subbyte.slice_offset(ctx, op, buffer, indices)
    total = constant_scalar(0)
    for index, stride in zip(indices, buffer.strides, strict=True):
        step = constant_scalar(stride * buffer.element.bytes)
        total = scalar_add(ctx, total, scalar_mul(ctx, ctx.scalar(op, index), step))
    return total


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _thread_offset(ctx: LoweringContext, dist: Distribution, buffer: BufferValue
                   ) -> tuple[Register | None, int]:
    """This thread's byte offset for a layout (as .u64) and a divisor of it; memoised."""
    coefficients = [term.scale * buffer.strides[term.dim] * buffer.element.memory_bits // 8
                    for term in dist.thread_terms]
    key = ("thread_offset", dist.thread_terms, tuple(coefficients))
    if key in ctx.cache:
        return ctx.cache[key]
    b = ctx.builder
    tid = ctx.thread_index()
    total: Register | None = None
    for term, coefficient in zip(dist.thread_terms, coefficients, strict=True):
        part = tid
        if term.divisor > 1:
            part = (b.compute("shr.u32", "u32", part, term.divisor.bit_length() - 1)
                    if _pow2(term.divisor) else b.compute("div.u32", "u32", part, term.divisor))
        if term.divisor * term.modulus < WARPGROUP_SIZE:
            part = (b.compute("and.b32", "u32", part, term.modulus - 1)
                    if _pow2(term.modulus) else b.compute("rem.u32", "u32", part, term.modulus))
        if total is None:
            total = b.compute("mul.lo.u32", "u32", part, coefficient)
        else:
            total = b.compute("mad.lo.u32", "u32", part, coefficient, total)
    if total is not None:
        total = b.compute("cvt.u64.u32", "u64", total)
    divisor = math.gcd(*coefficients) if coefficients else 0
    ctx.cache[key] = (total, divisor)
    return total, divisor


def _flat_offset(ctx: LoweringContext, dist: Distribution, buffer: BufferValue, register: int
                 ) -> Register:
    """Byte offset of register vector `register` computed from its flat element position:
    the slow path for strided layouts whose parts would carry between dimensions."""
    b = ctx.builder
    flat = b.compute("mad.lo.u32", "u32", ctx.thread_index(), dist.vector_length,
                     register * WARPGROUP_SIZE * dist.vector_length)
    total: Register | None = None
    row_stride = 1
    for dim in reversed(range(len(dist.shape))):
        index = b.compute("div.u32", "u32", flat, row_stride) if row_stride > 1 else flat
        index = b.compute("rem.u32", "u32", index, dist.shape[dim])
        coefficient = buffer.strides[dim] * buffer.element.bytes
        total = (b.compute("mul.lo.u32", "u32", index, coefficient) if total is None
                 else b.compute("mad.lo.u32", "u32", index, coefficient, total))
        row_stride *= dist.shape[dim]
    assert total is not None
    return b.compute("cvt.u64.u32", "u64", total)


def _add_address(ctx: LoweringContext, base: Register, offset: Register | ScalarValue | None
                 ) -> Register:
    """base + a 64-bit byte offset (a register, a scalar, or nothing)."""
    match offset:
        case None | ScalarValue(constant=0):
            return base
        case ScalarValue(operand=operand):
            return ctx.builder.compute("add.s64", "u64", base, operand)
        case Register():
            return ctx.builder.compute("add.s64", "u64", base, offset)


def global_accesses(ctx: LoweringContext, op: ir.OpView, buffer: BufferValue,
              index_offset: ScalarValue, layout: Layout, shape: tuple[int, ...]
              ) -> Iterator[tuple[int, Access]]:
    """(register vector, access) pairs covering every element this thread holds, the slice
    starting `index_offset` bytes into the buffer."""
    if isinstance(layout, WGSplatLayout):
        raise error_at(op, "cannot access memory with a splat layout")
    if buffer.size_bytes >= 2**31:
        raise error_at(op, "buffers of 2 GiB or more are not supported yet")
    dist = layout.distribution(shape)
    if buffer.element.memory_bits == 4:
        subbyte.check_global_access(op, dist, buffer)
    element_bits = buffer.element.memory_bits
    base = _add_address(ctx, buffer.address, index_offset)
    contiguous = (dist.vector_dim == len(shape) - 1 and dist.vector_step == 1
                  and buffer.strides[-1] == 1)
    run = dist.vector_length if contiguous else 1
    if dist.separable:
        thread_offset, thread_divisor = _thread_offset(ctx, dist, buffer)
        thread_base = _add_address(ctx, base, thread_offset)
        static = [sum(o * s for o, s in zip(origin, buffer.strides, strict=True))
                  * element_bits // 8 for origin in dist.register_origins]
        alignment = math.gcd(BUFFER_ALIGNMENT, index_offset.divisor, thread_divisor, *static)
        addresses = [(thread_base, offset) for offset in static]
    else:
        alignment = math.gcd(BUFFER_ALIGNMENT, index_offset.divisor,
                             dist.vector_length * element_bits // 8,
                             *(s * element_bits // 8 for s in buffer.strides))
        addresses = [(_add_address(ctx, base, _flat_offset(ctx, dist, buffer, r)), 0)
                     for r in range(dist.num_registers)]
    width = _access_elements(run, element_bits, alignment)
    if element_bits == 4 and width < elements_per_register(buffer.element, dist.vector_length):
        raise error_at(op, f"accesses of {width} {buffer.element.name} elements would split "
                           "a register: the slice must start 4-byte aligned")
    for register, (address, offset) in enumerate(addresses):
        for first in range(0, dist.vector_length, width):
            step = (first * dist.vector_step * buffer.strides[dist.vector_dim]
                    * element_bits // 8)
            yield register, Access(address, offset + step, first, width)


def _access_elements(run: int, element_bits: int, alignment: int) -> int:
    """Elements per access: the widest power of two the run, alignment and 16 B permit (at
    least a byte's worth of elements)."""
    count = max(1, 8 // element_bits)
    while (run % (count * 2) == 0 and (count * 2 * element_bits) <= MAX_ACCESS_BYTES * 8
           and alignment % (count * 2 * element_bits // 8) == 0):
        count *= 2
    return count


@lowering_rule(VectorLoadOp)
def _vector_load(ctx: LoweringContext, op: VectorLoadOp) -> None:
    if vector_element_type(ir.VectorType(op.result.type).element_type) is None:
        raise error_at(op, f"vectors of {op.result.type} are not supported")
    if is_smem_value(ctx, op.source):
        load_smem(ctx, op)
        return
    result = op.result
    shape = tuple(ir.VectorType(result.type).shape)
    layout = layouts_of(op, "out_layouts", 1)[0]
    buffer = ctx.buffer(op, op.source)
    ctx.set(result, load_global(ctx, op, buffer, slice_offset(ctx, op, buffer, op.indices),
                                layout, shape))


def load_global(ctx: LoweringContext, op: ir.OpView, buffer: BufferValue,
                index_offset: ScalarValue, layout: Layout, shape: tuple[int, ...]
                ) -> FragmentedArray:
    """The slice of `buffer` at `index_offset` bytes, shaped `shape`, in `layout`."""
    if isinstance(layout, WGSplatLayout):
        if math.prod(shape) != 1:
            raise error_at(op, "cannot access memory with a splat layout")
        if buffer.element.memory_bits == 4:
            raise error_at(op, f"a single {buffer.element.name} element is half a byte; load "
                               "a run of 8 or more")
        return _load_one(ctx, buffer, index_offset, shape)
    element = buffer.element
    dist = layout.distribution(shape)
    pack = elements_per_register(element, dist.vector_length)
    loader = Loader(ctx, "global", element, pack, dist.num_registers)
    for register, access in global_accesses(ctx, op, buffer, index_offset, layout, shape):
        loader.load(register, access.count, Address(access.address, access.offset))
    return FragmentedArray(layout, shape, element, loader.result(), dist.vector_length)


def _load_one(ctx: LoweringContext, buffer: BufferValue, index_offset: ScalarValue,
              shape: tuple[int, ...]) -> FragmentedArray:
    """A one-element slice as a splat: every thread loads the element (a broadcast read)."""
    if index_offset.constant is not None:
        address = Address(buffer.address, int(index_offset.constant))
    else:
        address = Address(ctx.builder.compute("add.s64", "u64", buffer.address,
                                              index_offset.operand))
    loader = Loader(ctx, "global", buffer.element, 1, 1)
    loader.load(0, 1, address)
    return FragmentedArray(WGSplatLayout(), shape, buffer.element, loader.result(), 1)


@lowering_rule(VectorStoreOp)
def _vector_store(ctx: LoweringContext, op: VectorStoreOp) -> None:
    if is_smem_value(ctx, op.destination):
        store_smem(ctx, op)
        return
    array = ctx.array(op, op.value)
    layout = layouts_of(op, "in_layouts", 1)[0]
    if array.layout != layout:
        raise error_at(op, f"stored value has layout {array.layout}, but in_layouts says "
                           f"{layout}")
    buffer = ctx.buffer(op, op.destination)
    guard = None if isinstance(layout, WGSplatLayout) else ctx.first_copy(
        layout.distribution(array.shape))
    storer = Storer(ctx, "global", array, guard)
    index_offset = slice_offset(ctx, op, buffer, op.indices)
    for register, access in global_accesses(ctx, op, buffer, index_offset, layout, array.shape):
        storer.store(register, access.first, access.count,
                     Address(access.address, access.offset))
