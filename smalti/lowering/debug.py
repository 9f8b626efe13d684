"""debug_print: each thread stores its registers of the value into the hidden debug buffer.

    ld.param.u64 %rd, [k_param_debug];  cvta.to.global.u64 %base, %rd;       (kernel entry)
    mad.lo.u32 %off, %instance, INSTANCE_BYTES, OFFSET;  ...  %head = %base + %off
    @%leader ld.global.u32 %n, [%head];  @%leader add.u32 ..;  @%leader st.global.u32 [%head], ..
    mul.lo.u32 %t, %tid, THREAD_BYTES; ...  st.global.f32 [%data+16+4*i], %f_i    (per register)

The instance is the block's linear index (x fastest) times the warpgroups plus the
warpgroup; `DebugPrintRecord` describes the buffer the host reads.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_debug import HEADER_BYTES, DebugPrintOp, DebugPrintRecord, debug_print_ops
from smalti.lowering.barriers import leader
from smalti.lowering.context import DebugBuffer, LoweringContext, layouts_of
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import ElementType, FragmentedArray, ScalarValue
from smalti.ptx import Address, Guard, Immediate, Register
from smalti.tiling import WARPGROUP_SIZE

DEBUG_PARAM = "debug"
HALF_FLOATS = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
BYTE_TYPES = {"i8": np.int8, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
              "f8E5M2": ml_dtypes.float8_e5m2}


def declare_debug_buffer(ctx: LoweringContext, func: ir.Operation) -> None:
    """Add the hidden `.param .u64 debug` (after the tensor maps) when the kernel prints, and
    compute its address and this thread's instance once, at the kernel's entry."""
    records = ctx.signature.debug_prints
    if not records:
        return
    if ctx.signature.debug_buffer_bytes >= 2**32:
        raise error_at(func, f"debug_print needs a {ctx.signature.debug_buffer_bytes}-byte "
                             "buffer; at most 4 GiB are supported")
    b = ctx.builder
    param = b.param(DEBUG_PARAM, "u64")
    generic = b.compute("ld.param.u64", "u64", Address(param))
    base = b.compute("cvta.to.global.u64", "u64", generic)
    ctx.debug_buffer = DebugBuffer(base, _instance(ctx), tuple(debug_print_ops(func)),
                                   records)


def _instance(ctx: LoweringContext) -> Register | None:
    """(ctaid.x + gx * (ctaid.y + gy * ctaid.z)) * warpgroups + tid.x / 128, as .u32."""
    b = ctx.builder
    gx, gy, gz = ctx.signature.grid
    linear: Register | None = None
    for dim, size, stride in (("z", gz, gx * gy), ("y", gy, gx), ("x", gx, 1)):
        if size == 1:
            continue
        ctaid = b.special(f"%ctaid.{dim}")
        if linear is None:
            linear = ctaid if stride == 1 else b.compute("mul.lo.u32", "u32", ctaid, stride)
        else:
            linear = (b.compute("add.u32", "u32", ctaid, linear) if stride == 1
                      else b.compute("mad.lo.u32", "u32", ctaid, stride, linear))
    warpgroups = ctx.signature.warpgroups
    if warpgroups == 1:
        return linear
    group = b.compute("shr.u32", "u32", b.special("%tid.x"), WARPGROUP_SIZE.bit_length() - 1)
    if linear is None:
        return group
    return b.compute("mad.lo.u32", "u32", linear, warpgroups, group)


def _state(ctx: LoweringContext, op: DebugPrintOp) -> tuple[DebugBuffer, DebugPrintRecord]:
    state = ctx.debug_buffer
    if state is None or op.operation not in state.ops:
        raise error_at(op, "is not inside a kernel function: its debug buffer is unknown")
    return state, state.records[state.ops.index(op.operation)]


def _head(ctx: LoweringContext, state: DebugBuffer, record: DebugPrintRecord
          ) -> tuple[Register, int]:
    """(register, byte offset) addressing this warpgroup's instance of the record."""
    if state.instance is None:
        return state.base, record.offset
    b = ctx.builder
    offset = (b.compute("mad.lo.u32", "u32", state.instance, record.instance_bytes,
                        record.offset) if record.offset
              else b.compute("mul.lo.u32", "u32", state.instance, record.instance_bytes))
    return b.compute("add.s64", "u64", state.base, b.compute("cvt.u64.u32", "u64", offset)), 0


def _count(ctx: LoweringContext, head: Address) -> None:
    """Thread 0 of the warpgroup adds one to the instance's execution count."""
    b = ctx.builder
    guard = Guard(leader(ctx))
    count = b.compute("ld.global.u32", "u32", head, guard=guard)
    count = b.compute("add.u32", "u32", count, 1, guard=guard)
    b.emit("st.global.u32", head, count, guard=guard)


def _store(ctx: LoweringContext, address: Address, source: Register | Immediate,
           element: ElementType, pack: int, guard: Guard | None = None) -> None:
    """st.global of one register (`pack` elements) at `address`."""
    b = ctx.builder
    if element.bits == 1:  # a predicate: one byte, 0 or 1
        if isinstance(source, Immediate):
            byte = b.compute("mov.u16", "u16", Immediate(int(bool(source.value))))
        else:
            byte = b.compute("selp.u16", "u16", 1, 0, source)
        b.emit("st.global.u8", address, byte, guard=guard)
        return
    if element.bits == 8:  # bytes packed in a .b32 (4), a .b16 (2) or its low byte (1)
        unit = {4: "b32", 2: "b16", 1: "b8"}[pack]
        if isinstance(source, Immediate):
            byte = int(np.array(source.value, BYTE_TYPES[element.name]).view(np.uint8))
            kind = "b32" if pack == 4 else "b16"
            copies = sum(byte << (8 * i) for i in range(pack))  # pack copies of the byte
            source = b.compute(f"mov.{kind}", kind, Immediate(copies))
        b.emit(f"st.global.{unit}", address, source, guard=guard)
        return
    if isinstance(source, Immediate) and element.name in HALF_FLOATS:  # mov takes bits
        bits = np.array(source.value, HALF_FLOATS[element.name]).view(np.uint16)
        source = b.compute("mov.b16", element.scalar, Immediate(int(bits)))
    elif isinstance(source, Immediate):
        source = b.compute(f"mov.{element.scalar}", element.scalar, source)
    if pack == 2:
        unit = "b32"
    elif element.name == "f32":
        unit = "f32"
    else:
        unit = f"b{element.bits}"
    b.emit(f"st.global.{unit}", address, source, guard=guard)


@lowering_rule(DebugPrintOp)
def _debug_print(ctx: LoweringContext, op: DebugPrintOp) -> None:
    state, record = _state(ctx, op)
    head, offset = _head(ctx, state, record)
    _count(ctx, Address(head, offset))
    value = op.value
    if not isinstance(value.type, ir.VectorType):
        scalar: ScalarValue = ctx.scalar(op, value)
        _store(ctx, Address(head, offset + HEADER_BYTES), scalar.operand, scalar.type, 1,
               guard=Guard(leader(ctx)))
        return
    _store_array(ctx, op, head, offset, record)


def _store_array(ctx: LoweringContext, op: DebugPrintOp, head: Register, offset: int,
                 record: DebugPrintRecord) -> None:
    """Every thread stores its registers, in register order, at its slots of the instance."""
    array: FragmentedArray = ctx.array(op, op.value)
    layout = layouts_of(op, "in_layouts", 1)[0]
    if array.layout != layout or record.layout != layout:
        raise error_at(op, f"printed value has layout {array.layout}, but in_layouts says "
                           f"{layout}")
    b = ctx.builder
    thread_bytes = record.values_per_thread * record.element_bytes
    thread = b.compute("mul.lo.u32", "u32", ctx.thread_index(), thread_bytes)
    data = b.compute("add.s64", "u64", head, b.compute("cvt.u64.u32", "u64", thread))
    for register, vector in enumerate(array.vectors):
        for position, source in enumerate(vector):
            slot = register * array.vector_length + position * array.pack
            _store(ctx, Address(data, offset + HEADER_BYTES + slot * record.element_bytes),
                   source, array.element, array.pack)
