"""Collective ops: symmetric buffers, peers' copies, semaphores and multimem.

A collective kernel takes three hidden `.u64` parameters after the debug buffer
(`CollectiveSpec` in smalti/dialect/kernel.py): the address of its device index, of the peer
table (entry p: device p's symmetric heap) and the heap's multicast address. At its entry:

    ld.param.u64 %rd, [k_param_smalti_device];  cvta.to.global.u64 ..;  ld.global.u32 %dev, [..]
    ld.param.u64 %rd, [k_param_smalti_peers];   cvta.to.global.u64 %peers, ..
    mad.wide.u32 %entry, %dev, 8, %peers;  ld.global.u64 ..;  cvta.to.global.u64 %own, ..

A symmetric buffer at offset o is `%own + o`; its copy on device p is that address moved
from the own heap to p's (`- %own + peers[p]`), so remote_ref applies to any symmetric ref.
semaphore_signal: the warpgroup meets (bar.sync orders its threads' earlier writes before
thread 0's release, which is cumulative), then thread 0 adds with `red.release.sys`; in a
kernel whose TMA stores write symmetric buffers, thread 0 (which issues them) first waits
for their writes (`cp.async.bulk.wait_group 0`) and fences the async proxy. A TMA load from
a symmetric buffer fences the async proxy before it (`fence.proxy.async.global`): what it
reads was written through the generic proxy and published by a semaphore.
semaphore_wait: thread 0 polls with `ld.acquire.sys` until the value is reached, takes it
off with `atom.cas` (a lost race with another waiter polls again), and the warpgroup meets,
so every thread's later accesses follow the acquire. multimem ops address the heap's
multicast mapping (`%mc + (address - %own)`) with the same per-thread accesses as
vector_load / vector_store: `.weak` data accesses (ordered by the semaphores), vectors of
32 to 128 bits for floats (.f32, .f16x2, .bf16x2; f16 and bf16 sums accumulate in f32), one
element per instruction for integers, which multimem does not vectorise.
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import constant_index
from smalti.dialect.diagnostics import error_at
from smalti.dialect.kernel import CollectiveSpec
from smalti.dialect.ops_collective import (
    DeviceCountOp,
    DeviceIndexOp,
    MultimemLoadReduceOp,
    MultimemRedOp,
    MultimemStoreOp,
    RemoteRefOp,
    SemaphoreSignalOp,
    SemaphoreWaitOp,
    SliceSymmetricOp,
)
from smalti.lowering.barriers import leader
from smalti.lowering.context import CollectiveParams, LoweringContext, layouts_of
from smalti.lowering.memory import Access, global_accesses, slice_offset
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar, element_address
from smalti.lowering.values import (
    ELEMENT_TYPES,
    BufferValue,
    FragmentedArray,
    ScalarValue,
    elements_per_register,
    register_type,
    vector_element_type,
)
from smalti.lowering.warpgroup import warpgroup_sync
from smalti.ptx import Address, Guard, Immediate, Register, VectorOperand
from smalti.tiling import Layout, WGSplatLayout

MULTIMEM_PTX_VERSION = "8.2"  # multimem is PTX 8.1; its .acc::f32 needs 8.2
POINTER_BYTES = 8
SEMAPHORE_BYTES = 4


def declare_collective_params(ctx: LoweringContext) -> None:
    """Add the hidden parameters of a collective kernel and read them at its entry."""
    spec = ctx.signature.collective
    if spec is None:
        return
    b = ctx.builder
    device_name, peers_name, multicast_name = CollectiveSpec.HIDDEN_PARAMS
    addresses = [b.compute("cvta.to.global.u64", "u64",
                           b.compute("ld.param.u64", "u64", Address(b.param(name, "u64"))))
                 for name in (device_name, peers_name)]
    multicast = b.compute("ld.param.u64", "u64", Address(b.param(multicast_name, "u64")))
    device = b.compute("ld.global.u32", "u32", Address(addresses[0]))
    entry = b.compute("mad.wide.u32", "u64", device, POINTER_BYTES, addresses[1])
    own = b.compute("cvta.to.global.u64", "u64", b.compute("ld.global.u64", "u64",
                                                           Address(entry)))
    if spec.multimem:
        multicast = b.compute("cvta.to.global.u64", "u64", multicast)
    ctx.collective = CollectiveParams(device, addresses[1], own, multicast)


@lowering_rule(SliceSymmetricOp)
def _slice_symmetric(ctx: LoweringContext, op: SliceSymmetricOp) -> None:
    ref = ir.MemRefType(op.result.type)
    element = vector_element_type(ref.element_type)
    if element is None:
        raise error_at(op, f"symmetric buffers of {ref.element_type} are not supported")
    offset = constant_index(op.offset)
    assert offset is not None  # the verifier checked it
    own = ctx.collective_params(op).own_heap
    address = own if offset == 0 else ctx.builder.compute("add.s64", "u64", own, offset)
    strides = tuple(ref.get_strides_and_offset()[0])
    ctx.set(op.result, BufferValue(address, tuple(ref.shape), strides, element, offset))


@lowering_rule(DeviceIndexOp)
def _device_index(ctx: LoweringContext, op: DeviceIndexOp) -> None:
    device = ctx.collective_params(op).device
    wide = ctx.builder.compute("cvt.u64.u32", "u64", device)
    ctx.set(op.result, ScalarValue(wide, ELEMENT_TYPES["index"], 1))


@lowering_rule(DeviceCountOp)
def _device_count(ctx: LoweringContext, op: DeviceCountOp) -> None:
    spec = ctx.signature.collective
    if spec is None:
        raise error_at(op, "is in a kernel without 'smalti.devices'")
    ctx.set(op.result, constant_scalar(spec.devices))


def _peer_heap(ctx: LoweringContext, op: ir.OpView, device: ir.Value) -> Register:
    """The global address of `device`'s symmetric heap (a load from the peer table)."""
    entry = element_address(ctx, op, device, POINTER_BYTES, ctx.collective_params(op).peers)
    b = ctx.builder
    return b.compute("cvta.to.global.u64", "u64", b.compute("ld.global.u64", "u64", entry))


def _moved(ctx: LoweringContext, op: ir.OpView, buffer: BufferValue, base: Register
           ) -> BufferValue:
    """`buffer` (in the own heap) at the same offset from `base`: a peer's heap or the
    multicast address (a constant offset when the buffer's is known)."""
    b = ctx.builder
    if buffer.heap_offset is None:
        offset = b.compute("sub.s64", "u64", buffer.address, ctx.collective_params(op).own_heap)
        address = b.compute("add.s64", "u64", base, offset)
    elif buffer.heap_offset:
        address = b.compute("add.s64", "u64", base, buffer.heap_offset)
    else:
        address = base
    return dataclasses.replace(buffer, address=address)


@lowering_rule(RemoteRefOp)
def _remote_ref(ctx: LoweringContext, op: RemoteRefOp) -> None:
    ctx.set(op.result, _moved(ctx, op, ctx.buffer(op, op.source),
                              _peer_heap(ctx, op, op.device)))


def _semaphore(ctx: LoweringContext, op: ir.OpView, semaphores: BufferValue,
               index: ir.Value) -> Address:
    """The address of semaphore `index` of the array."""
    return element_address(ctx, op, index, SEMAPHORE_BYTES, semaphores.address)


@lowering_rule(SemaphoreSignalOp)
def _semaphore_signal(ctx: LoweringContext, op: SemaphoreSignalOp) -> None:
    semaphores = ctx.buffer(op, op.semaphores)
    local = _semaphore(ctx, op, semaphores, op.index)
    if local.base is not semaphores.address:  # a traced index: its offset in the heap too
        semaphores = dataclasses.replace(semaphores, address=local.base, heap_offset=None)
    remote = _moved(ctx, op, semaphores, _peer_heap(ctx, op, op.device))
    warpgroup_sync(ctx)
    guard = Guard(leader(ctx))
    if ctx.symmetric_stores:  # thread 0's TMA stores to symmetric buffers complete first
        ctx.builder.emit("cp.async.bulk.wait_group", Immediate(0), guard=guard)
        ctx.builder.emit("fence.proxy.async.global", guard=guard)
    ctx.builder.emit("red.release.sys.global.add.u32", Address(remote.address, local.offset),
                     Immediate(op.increment), guard=guard)


@lowering_rule(SemaphoreWaitOp)
def _semaphore_wait(ctx: LoweringContext, op: SemaphoreWaitOp) -> None:
    address = _semaphore(ctx, op, ctx.buffer(op, op.semaphores), op.index)
    b = ctx.builder
    done, poll = b.new_label("semaphore_taken"), b.new_label("semaphore_poll")
    b.emit("bra", done, guard=Guard(leader(ctx), negated=True))
    b.place(poll)
    seen = b.compute("ld.acquire.sys.global.u32", "u32", address)
    short = b.compute("setp.lt.u32", "pred", seen, op.value)
    b.emit("bra", poll, guard=Guard(short))
    left = b.compute("sub.u32", "u32", seen, op.value)
    old = b.compute("atom.relaxed.sys.global.cas.b32", "b32", address, seen, left)
    lost = b.compute("setp.ne.b32", "pred", old, seen)
    b.emit("bra", poll, guard=Guard(lost))
    b.place(done)
    warpgroup_sync(ctx)


# ---- multimem ------------------------------------------------------------------------

def _multicast_buffer(ctx: LoweringContext, op: ir.OpView, ref: ir.Value) -> BufferValue:
    """The symmetric ref at the heap's multicast address."""
    return _moved(ctx, op, ctx.buffer(op, ref), ctx.collective_params(op).multicast)


def _unit(op: ir.OpView, element_name: str, pack: int, count: int) -> tuple[str, int]:
    """(the PTX type of one multimem unit, units per access of `count` elements)."""
    if element_name in ("i32", "i64"):
        return ("u32" if element_name == "i32" else "u64"), 1
    bits = ELEMENT_TYPES[element_name].bits
    if count * bits < 32 or pack * bits < 32:
        raise error_at(op, f"multimem moves {element_name} in pairs: each thread's elements "
                           "must come in runs of an even length (a layout with an even "
                           "vector length)")
    unit = {"f32": "f32", "f16": "f16x2", "bf16": "bf16x2"}[element_name]
    return unit, count * bits // 32


def _integer_type(element_name: str, reduction: str | None) -> str:
    """.s32/.s64 for signed min and max, .b32/.b64 for the bitwise and, or, xor (ptxas
    takes no other type for them), .u32/.u64 otherwise (the same bits)."""
    bits = ELEMENT_TYPES[element_name].bits
    kind = {"min": "s", "max": "s", "and": "b", "or": "b", "xor": "b"}.get(reduction, "u")
    return f"{kind}{bits}"


def _opcode(base: str, element_name: str, reduction: str | None, units: int, unit: str
            ) -> str:
    """`multimem.st.weak.global.v4.f32`, `multimem.ld_reduce.weak.global.add.acc::f32.v4.
    f16x2`, `multimem.red.relaxed.sys.global.add.u32`, ... (.red has no weak form)."""
    if element_name in ("i32", "i64"):
        unit = _integer_type(element_name, reduction)
    parts = [base, "relaxed.sys" if base == "multimem.red" else "weak", "global"]
    if reduction is not None:
        parts.append(reduction)
    if base == "multimem.ld_reduce" and element_name in ("f16", "bf16") and reduction == "add":
        parts.append("acc::f32")
    if units > 1:
        parts.append(f"v{units}")
    parts.append(unit)
    return ".".join(parts)


def _split(access: Access, units: int, unit_bytes: int, pack: int) -> list[Access]:
    """One access per unit when multimem cannot vectorise the element type (integers)."""
    if units > 1 or access.count == pack:
        return [access]
    return [Access(access.address, access.offset + i * unit_bytes, access.first + i * pack,
                   pack) for i in range(access.count // pack)]


def _vector_accesses(ctx: LoweringContext, op: ir.OpView, buffer: BufferValue,
                     indices: list[ir.Value], layout: Layout, shape: tuple[int, ...]
                     ) -> list[tuple[int, Access]]:
    if isinstance(layout, WGSplatLayout):
        raise error_at(op, "cannot access memory with a splat layout")
    offset = slice_offset(ctx, op, buffer, indices)
    return list(global_accesses(ctx, op, buffer, offset, layout, shape))


def _emit_from_registers(ctx: LoweringContext, op: ir.OpView, base: str, array: FragmentedArray,
                         ref: ir.Value, indices: list[ir.Value], reduction: str | None) -> None:
    """multimem.st / multimem.red of every register of `array` into the slice."""
    layout = layouts_of(op, "in_layouts", 1)[0]
    if array.layout != layout:
        raise error_at(op, f"the value has layout {array.layout}, but in_layouts says {layout}")
    buffer = _multicast_buffer(ctx, op, ref)
    guard = None if isinstance(layout, WGSplatLayout) else ctx.first_copy(
        layout.distribution(array.shape))
    name = array.element.name
    for register, access in _vector_accesses(ctx, op, buffer, indices, layout, array.shape):
        unit, units = _unit(op, name, array.pack, access.count)
        for part in _split(access, units, array.element.bytes * array.pack, array.pack):
            start = part.first // array.pack
            registers = array.vectors[register][start:start + max(units, 1)]
            source = VectorOperand(tuple(registers)) if units > 1 else registers[0]
            ctx.builder.emit(_opcode(base, name, reduction, units, unit),
                             Address(part.address, part.offset), source, guard=guard)


@lowering_rule(MultimemStoreOp)
def _multimem_store(ctx: LoweringContext, op: MultimemStoreOp) -> None:
    _emit_from_registers(ctx, op, "multimem.st", ctx.array(op, op.value), op.destination,
                         op.indices, None)


@lowering_rule(MultimemRedOp)
def _multimem_red(ctx: LoweringContext, op: MultimemRedOp) -> None:
    _emit_from_registers(ctx, op, "multimem.red", ctx.array(op, op.value), op.destination,
                         op.indices, op.reduction)


@lowering_rule(MultimemLoadReduceOp)
def _multimem_load_reduce(ctx: LoweringContext, op: MultimemLoadReduceOp) -> None:
    vector = ir.VectorType(op.result.type)
    shape, name = tuple(vector.shape), type_name(vector.element_type)
    layout = layouts_of(op, "out_layouts", 1)[0]
    element = ELEMENT_TYPES[name]
    dist = layout.distribution(shape)
    pack = elements_per_register(element, dist.vector_length)
    vectors: list[list[Register]] = [[] for _ in range(dist.num_registers)]
    buffer = _multicast_buffer(ctx, op, op.source)
    b = ctx.builder
    for register, access in _vector_accesses(ctx, op, buffer, op.indices, layout, shape):
        unit, units = _unit(op, name, pack, access.count)
        for part in _split(access, units, element.bytes * pack, pack):
            registers = [b.reg(register_type(element, pack)) for _ in range(max(units, 1))]
            target = VectorOperand(tuple(registers)) if units > 1 else registers[0]
            b.emit(_opcode("multimem.ld_reduce", name, op.reduction, units, unit), target,
                   Address(part.address, part.offset))
            vectors[register].extend(registers)
    ctx.set(op.result, FragmentedArray(layout, shape, element, tuple(map(tuple, vectors)),
                                       dist.vector_length))
