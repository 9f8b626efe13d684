"""smalti.wgmma: matrix descriptors and wgmma.mma_async over the accumulator's registers.

Per operand in shared memory, one descriptor (start >> 4 | LBO >> 4 << 16 | SBO >> 4 << 32 |
swizzle mode << 62, NOTES.md) whose start moves per 64-row block and per 32-byte K step.
The offsets come from the ref's transforms: K-major (K contiguous): SBO is the distance
between 8-row groups, LBO unused; MN-major: LBO is the distance between swizzle-span chunks
of MN, SBO between 8-row groups of K. A is MN-major when its transforms start with a
transpose; B (K x N) is MN-major unless they do. Each instruction takes 32 bytes of K (k16
for bf16/f16, k8 for tf32, k32 for f8); only bf16/f16 take the imm-trans-a/b operands (the
verifier keeps f32 and f8 operands K-major). A in registers is four .b32 registers per
instruction, in the A fragment layout of its bit width (WGMMA_A_LAYOUTS).

    wgmma.fence; per K step, per 64-row block: wgmma.mma_async; commit_group; wait_group 0
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_mma import (
    PTX_INPUT_TYPES,
    TRANSPOSABLE_TYPES,
    WgmmaOp,
    is_transposed,
    mn_major_problem,
)
from smalti.lowering.context import LoweringContext
from smalti.lowering.proxy import publish_smem_writes
from smalti.lowering.registry import lowering_rule
from smalti.lowering.smem import SmemRef, smem_address, smem_ref, static_offset
from smalti.lowering.values import FragmentedArray
from smalti.ptx import Immediate, Register, VectorOperand
from smalti.tiling import WGMMA_A_LAYOUTS, WGMMA_LAYOUT
from smalti.tiling.smem import wgmma_stride_problem

M_BLOCK = 64
K_BYTES = 32
SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def operand_offset(ref: SmemRef, mn: int, k: int, is_b: bool) -> int:
    """Unswizzled byte offset of operand element (mn, k); B is stored as K x N."""
    return static_offset(ref, (k, mn) if is_b else (mn, k), swizzled=False)


def descriptor_fields(op: ir.OpView, ref: SmemRef, is_b: bool, a_rows: int = M_BLOCK
                      ) -> tuple[bool, int]:
    """(MN-major, the descriptor's constant bits: LBO, SBO, swizzle mode), for an
    instruction reading `a_rows` rows of A (tcgen05.mma's sm_100 descriptor adds its version
    bits to these: the swizzle codes of both families land on the same bits)."""
    if ref.swizzle is None:
        raise error_at(op, "matrix operands in shared memory must be swizzled; give the ref "
                           "swizzled transforms")
    problem = wgmma_stride_problem(ref.transforms, ref.shape, ref.element_bytes,
                                   "B" if is_b else "A", a_rows)
    if problem is not None:
        raise error_at(op, problem)
    mn_major = is_transposed(ref.transforms) != is_b
    origin = operand_offset(ref, 0, 0, is_b)
    if mn_major:
        chunk = ref.swizzle // ref.element_bytes
        extent = ref.shape[1] if is_b else ref.shape[0]
        lbo = operand_offset(ref, chunk, 0, is_b) - origin if extent > chunk else 16
        sbo = operand_offset(ref, 0, 8, is_b) - origin
    else:
        lbo, sbo = 16, operand_offset(ref, 8, 0, is_b) - origin
    for name, value in (("leading", lbo), ("stride", sbo)):
        if value <= 0 or value % 16 or value >> 4 >= 1 << 14:
            raise error_at(op, f"the {name} byte offset {value} of this operand does not fit a "
                               "matrix descriptor")
    bits = ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (SWIZZLE_MODE[ref.swizzle] << 62)
    return mn_major, bits


def descriptor_base(ctx: LoweringContext, ref: SmemRef, bits: int) -> Register:
    """The 64-bit descriptor of the ref's first byte (memoised per block, like its address)."""
    key = ("wgmma_desc", ref.offset, ref.dynamic, bits)
    if key not in ctx.block_cache:
        b = ctx.builder
        address = b.compute("shr.u32", "u32", smem_address(ctx, ref), 4)
        address = b.compute("and.b32", "u32", address, 0x3FFF)
        wide = b.compute("cvt.u64.u32", "u64", address)
        ctx.block_cache[key] = b.compute("or.b64", "u64", wide, Immediate(bits))
    return ctx.block_cache[key]


def descriptor_at(ctx: LoweringContext, base: Register, offset: int) -> Register:
    """The descriptor `offset` bytes (16-byte aligned) after the one `base` holds."""
    if offset % 16:
        raise ValueError(f"descriptor start offset {offset} is not 16-byte aligned")
    if offset == 0:
        return base
    return ctx.builder.compute("add.s64", "u64", base, offset >> 4)


def _true(ctx: LoweringContext) -> Register:
    """A predicate that holds in every thread (scale-d: accumulate)."""
    if "wgmma_true" not in ctx.cache:
        tid = ctx.thread_index()
        ctx.cache["wgmma_true"] = ctx.builder.compute("setp.eq.u32", "pred", tid, tid)
    return ctx.cache["wgmma_true"]


def _vector_index(array: FragmentedArray) -> dict[tuple[int, ...], int]:
    dist = array.layout.distribution(array.shape)
    return {origin: i for i, origin in enumerate(dist.register_origins)}


def _accumulator(ctx: LoweringContext, acc: FragmentedArray, block: int,
                 where: dict[tuple[int, ...], int]) -> list[Register]:
    """The registers of 64-row block `block` in wgmma's order (NOTES.md: register i at row
    8*((i>>1)&1), column 2*(t%4) + (i&1) + 8*(i>>2) from the thread's origin)."""
    registers = []
    for i in range(acc.shape[1] // 2):
        vector = where[(M_BLOCK * block + 8 * ((i >> 1) & 1), 8 * (i >> 2))]
        registers.append(acc.vectors[vector][i & 1])
    return registers


def _a_registers(ctx: LoweringContext, a: FragmentedArray, block: int, step: int,
                 where: dict[tuple[int, ...], int]) -> VectorOperand:
    """The four .b32 registers of A for one block and K step: register j holds rows 8*(j&1)
    on from the block's (of each thread's), and the 32-bit K chunk (two 16-bit, four 8-bit
    or one tf32 element) half an instruction's K further for j >= 2 (WGMMA_A_LAYOUTS).
    f32 registers are copied to .b32 ones: ptxas takes tf32 A fragments only as .b32."""
    k_step = K_BYTES // a.element.bytes
    registers = [a.vectors[where[(M_BLOCK * block + 8 * (j & 1),
                                  k_step * step + k_step // 2 * (j >> 1))]][0]
                 for j in range(4)]
    if a.element.name == "f32":
        registers = [ctx.builder.compute("mov.b32", "b32", r) for r in registers]
    return VectorOperand(tuple(registers))


@lowering_rule(WgmmaOp)
def _wgmma(ctx: LoweringContext, op: WgmmaOp) -> None:
    acc = ctx.array(op, op.accumulator)
    if acc.layout != WGMMA_LAYOUT:
        raise error_at(op, "the accumulator must be in the WGMMA layout")
    m, n = acc.shape
    b = ctx.builder
    fresh = tuple(tuple(b.compute("mov.f32", "f32", r) for r in vector)
                  for vector in acc.vectors)
    result = FragmentedArray(acc.layout, acc.shape, acc.element, fresh, acc.vector_length)
    where = _vector_index(result)
    b_ref = smem_ref(ctx, op, op.b)
    b_mn_major, b_bits = descriptor_fields(op, b_ref, is_b=True)
    b_base = descriptor_base(ctx, b_ref, b_bits)
    element = b_ref.element
    k = b_ref.shape[0]
    steps = k * element.bytes // K_BYTES
    k_step = K_BYTES // element.bytes
    a_value = ctx.values.get(op.a)
    if isinstance(a_value, FragmentedArray):
        a_layout = WGMMA_A_LAYOUTS.get(a_value.element.bits)
        if a_value.layout != a_layout or a_value.pack * a_value.element.bits != 32:
            raise error_at(op, f"A in registers must be in the {a_value.element.bits}-bit A "
                               "fragment layout (WGMMA_A_LAYOUTS); run smalti-infer-layouts")
        a_where = _vector_index(a_value)
        a_ref, a_mn_major, a_element = None, False, a_value.element
        # before the fence: registers written after it may not feed this wgmma (PTX ISA)
        fragments = {(step, block): _a_registers(ctx, a_value, block, step, a_where)
                     for step in range(steps) for block in range(m // M_BLOCK)}
    else:
        a_ref = smem_ref(ctx, op, op.a)
        a_mn_major, a_bits = descriptor_fields(op, a_ref, is_b=False)
        a_base = descriptor_base(ctx, a_ref, a_bits)
        a_element = a_ref.element
    for what, operand, mn_major in (("A", a_element, a_mn_major), ("B", element, b_mn_major)):
        if (problem := mn_major_problem(what, operand.name, mn_major)) is not None:
            raise error_at(op, problem)
    transposable = element.name in TRANSPOSABLE_TYPES
    scale_d = _true(ctx)
    opcode = (f"wgmma.mma_async.sync.aligned.m{M_BLOCK}n{n}k{k_step}.f32."
              f"{PTX_INPUT_TYPES[a_element.name]}.{PTX_INPUT_TYPES[element.name]}")
    publish_smem_writes(ctx)  # operands the threads stored are visible to wgmma
    b.emit("wgmma.fence.sync.aligned")
    for step in range(steps):
        b_desc = descriptor_at(ctx, b_base, operand_offset(b_ref, 0, k_step * step, True)
                               - operand_offset(b_ref, 0, 0, True))
        for block in range(m // M_BLOCK):
            d = VectorOperand(tuple(_accumulator(ctx, result, block, where)))
            tail = [scale_d, Immediate(1), Immediate(1)]
            if a_ref is None:
                a_operand = fragments[(step, block)]
            else:
                a_operand = descriptor_at(ctx, a_base,
                                          operand_offset(a_ref, M_BLOCK * block,
                                                         k_step * step, False)
                                          - operand_offset(a_ref, 0, 0, False))
                if transposable:
                    tail.append(Immediate(int(a_mn_major)))
            if transposable:
                tail.append(Immediate(int(b_mn_major)))
            b.emit(opcode, d, a_operand, b_desc, *tail)
    b.emit("wgmma.commit_group.sync.aligned")
    b.emit("wgmma.wait_group.sync.aligned", Immediate(0))
    ctx.set(op.result, result)
