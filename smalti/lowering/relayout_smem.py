"""Relayouts across warps: the plan of smalti.tiling.smem_relayout as PTX.

Per round: every thread stores its source elements to the relayout scratch, the warpgroup
meets (`bar.sync`, its named barrier), every thread loads the elements of the target layout.
Each access is `[base + immediate]` with the thread's bases computed once per relayout
(from thread-index bits, memoised per region). Words are assembled from (and split into)
the value's registers as the register relayout does (`smalti.lowering.relayout`): whole
registers where the memory order is the register order, else one `prmt` per word.

The scratch is one static `.shared` buffer per kernel, as large as the largest relayout
of the kernel needs (every layout_cast of the kernel is planned when the first is lowered),
one copy per warpgroup that may run a relayout: a warpgroup's relayouts run one after
another, and warpgroups run at once. The warpgroup's shared-memory ordering
(`smalti.lowering.smem_order`) keeps a round's stores after every thread's loads of the
round (or relayout, or loop iteration) before: its loads stay pending, and the stores that
follow meet first if no barrier came between.
"""

from __future__ import annotations

import itertools

import numpy as np
from jaxlib.mlir import ir

from smalti.dialect.attributes import attr_to_layouts
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops import LayoutCastOp
from smalti.dialect.ops_warpgroup import WarpgroupRegionOp
from smalti.lowering.context import LoweringContext, ScratchBuffer
from smalti.lowering.relayout import Gatherer, pack_words, source_words, split_words
from smalti.lowering.smem_order import RELAYOUT_SCRATCH, order_generic_access
from smalti.lowering.values import (
    ElementType,
    FragmentedArray,
    elements_per_register,
    fragment_geometry,
    register_bits,
    register_type,
    vector_element_type,
)
from smalti.lowering.warpgroup import known_warpgroup, warpgroup_index, warpgroup_sync
from smalti.ptx import Address, Register, VectorOperand
from smalti.tiling import Layout, LayoutError, TiledLayout
from smalti.tiling.relayout import relayout_kind
from smalti.tiling.smem_relayout import (
    ROUND_BYTES,
    STATIC_SMEM_BYTES,
    THREAD_BITS,
    Access,
    SmemRelayoutPlan,
    ThreadFunction,
    plan_smem_relayout,
    round_bytes_for,
)

WORD_BYTES = 4
SCRATCH_ALIGN = 128  # the scratch's alignment (and its copies' stride's): a bank row
BLOCK_SMEM_BYTES = 232448
"""Shared memory one block may have on sm_90, static and dynamic together (227 KiB: CUDA C
Programming Guide, "Compute Capabilities", technical specifications)."""


def relayout_through_smem(ctx: LoweringContext, op: ir.OpView, source: FragmentedArray,
                          target: Layout) -> FragmentedArray:
    """`source` in the `target` layout, through shared memory; raises LayoutError when the
    relayout has no plan."""
    element, shape = source.element, source.shape
    scratch_buffer = ctx.relayout_scratch or _allocate(ctx, op)
    ctx.relayout_scratch = scratch_buffer
    copies = len(scratch_buffer.warpgroups)
    try:
        plan = plan_smem_relayout(source.layout, target, shape, element.bits,
                                  round_bytes_for(copies))
    except LayoutError as error:
        if round_bytes_for(copies) == ROUND_BYTES:
            raise
        raise LayoutError(f"{error}; {copies} warpgroups run relayouts, and their copies of "
                          f"the scratch must fit {STATIC_SMEM_BYTES} bytes") from None
    word_type = "f32" if element.name == "f32" else "b32"
    words, _ = source_words(ctx, source, word_type)
    held = _local_words(element, source.vector_length * len(source.vectors), source.pack)
    gather = Gatherer(ctx, element.bytes, word_type)
    scratch = _scratch_base(ctx, op, scratch_buffer, plan)
    guard = (ctx.first_copy(source.layout.distribution(shape))
             if isinstance(source.layout, TiledLayout) else None)
    per_word = _per_word(element)
    loaded: list[Register] = []
    where: dict[int, tuple[int, int]] = {}  # target local index -> (loaded word, position)
    count, length = fragment_geometry(target, shape)
    pack = elements_per_register(element, length)
    direct: dict[int, Register] = {}  # target registers loaded whole by a narrow load
    registers = [r for vector in source.vectors for r in vector]
    b = ctx.builder
    for round_ in plan.rounds:
        order_generic_access(ctx, *RELAYOUT_SCRATCH, True, None)
        bases = [_thread_base(ctx, scratch, f) for f in round_.store.bases]
        for access in round_.store.accesses:
            whole = _one_register(access.elements, source.pack)
            units = ([registers[whole]] if whole is not None and
                     len(access.elements) * element.bytes < WORD_BYTES else
                     _store_units(ctx, gather, words, held, access, element, per_word))
            width = len(access.elements) * element.bytes
            b.emit(f"st.shared{_suffix(width, len(units))}",
                   Address(bases[access.base], access.offset), _operand(units), guard=guard)
        warpgroup_sync(ctx)
        order_generic_access(ctx, *RELAYOUT_SCRATCH, False, None)
        bases = [_thread_base(ctx, scratch, f) for f in round_.load.bases]
        for access in round_.load.accesses:
            _load(ctx, bases[access.base], access, element, per_word, word_type, pack,
                  loaded, where, direct)
    flat = _target_registers(ctx, gather, element, count * length, pack, loaded, where,
                             direct)
    per_vector = length // pack
    vectors = tuple(tuple(flat[r * per_vector:(r + 1) * per_vector]) for r in range(count))
    return FragmentedArray(target, shape, element, vectors, length)


def _one_register(elements: tuple[int, ...], pack: int) -> int | None:
    """The register whose elements `elements` are, in order (None: not one register)."""
    if len(elements) == pack and elements[0] % pack == 0 and all(
            e == elements[0] + i for i, e in enumerate(elements)):
        return elements[0] // pack
    return None


def _target_registers(ctx: LoweringContext, gather: Gatherer, element: ElementType,
                      elements: int, pack: int, loaded: list[Register],
                      where: dict[int, tuple[int, int]], direct: dict[int, Register]
                      ) -> list[Register]:
    """The target's registers, in order: those a narrow load gave whole, the others split
    from .b32 words gathered from the loaded words."""
    wanted = _local_words(element, elements, pack)
    reg_bits = register_bits(element, pack)
    per_word_registers = 1 if reg_bits == 32 else 2
    total = elements // pack
    result: list[Register | None] = [direct.get(r) for r in range(total)]
    for j, row in enumerate(wanted):
        covered = range(j * per_word_registers, min((j + 1) * per_word_registers, total))
        if all(result[r] is not None for r in covered):
            continue
        spec = np.full((1, len(row), 2), -1, dtype=np.int64)
        for position, local in enumerate(row):
            if local >= 0 and local // pack in covered and result[local // pack] is None:
                spec[0, position] = where[int(local)]
        word = gather.word(loaded, spec)
        parts = split_words(ctx, [word], per_word_registers, register_type(element, pack),
                            reg_bits)
        for r, part in zip(covered, parts, strict=False):
            if result[r] is None:
                result[r] = part
    return [r for r in result if r is not None]


def _per_word(element: ElementType) -> int:
    return max(1, 32 // element.bits)


def _local_words(element: ElementType, elements: int, pack: int) -> np.ndarray:
    """[word, position] -> local index of the element there, in the .b32 words that a
    value's registers (`pack` elements each) form (-1: none)."""
    local = np.arange(elements, dtype=np.int64).reshape(1, -1, pack)
    return pack_words(local, element.bits, register_bits(element, pack))[0]


def _suffix(width: int, units: int) -> str:
    """The opcode suffix of a `width`-byte access of `units` registers."""
    if width < WORD_BYTES:
        return f".b{8 * width}"
    return (f".v{units}" if units > 1 else "") + ".b32"


def _operand(units: list[Register]) -> Register | VectorOperand:
    return units[0] if len(units) == 1 else VectorOperand(tuple(units))


def _store_units(ctx: LoweringContext, gather: Gatherer, words: list[Register],
                 held: np.ndarray, access: Access, element: ElementType, per_word: int
                 ) -> list[Register]:
    """The registers a store writes: .b32 words of the access's elements in address order
    (or, narrower than a word, the low half of one)."""
    position_of = {int(local): (w, p) for w, row in enumerate(held)
                   for p, local in enumerate(row) if local >= 0}
    units = []
    for first in range(0, len(access.elements), per_word):
        part = access.elements[first:first + per_word]
        spec = np.full((1, per_word, 2), -1, dtype=np.int64)
        for position, local in enumerate(part):
            spec[0, position] = position_of[local]
        units.append(gather.word(words, spec))
    if len(access.elements) * element.bytes >= WORD_BYTES:
        return units
    b = ctx.builder
    low, high = b.reg("b16"), b.reg("b16")
    b.emit("mov.b32", VectorOperand((low, high)), units[0])
    return [low]


def _load(ctx: LoweringContext, base: Register, access: Access, element: ElementType,
          per_word: int, word_type: str, pack: int, loaded: list[Register],
          where: dict[int, tuple[int, int]], direct: dict[int, Register]) -> None:
    """Load one access; note where each of its elements is among the loaded words (or,
    narrower than a word and one target register exactly, the register)."""
    b = ctx.builder
    width = len(access.elements) * element.bytes
    address = Address(base, access.offset)
    if width < WORD_BYTES:
        narrow = b.reg("b16")
        b.emit(f"ld.shared.b{8 * width}", narrow, address)
        whole = _one_register(access.elements, pack)
        if whole is not None and register_bits(element, pack) == 16:
            direct[whole] = narrow
            return
        units = [b.reg(word_type)]
        b.emit("mov.b32", units[0], VectorOperand((narrow, narrow)))
    else:
        units = [b.reg(word_type) for _ in range(width // WORD_BYTES)]
        b.emit(f"ld.shared{_suffix(width, len(units))}", _operand(units), address)
    for i, local in enumerate(access.elements):
        where[local] = (len(loaded) + i // per_word, i % per_word)
    loaded.extend(units)


def _thread_base(ctx: LoweringContext, scratch: Register, function: ThreadFunction
                 ) -> Register:
    """scratch + function(thread index). The scratch is aligned to SCRATCH_ALIGN bytes, so
    a function that XORs a constant below it into another is one `xor` of that one's
    base."""
    if function.combine == "xor" and 0 < function.constant < SCRATCH_ALIGN:
        plain = _thread_base(ctx, scratch, ThreadFunction(function.coefficients, "xor"))
        return _memo(ctx, ("relayout_base", scratch, function), lambda: ctx.builder.compute(
            "xor.b32", "u32", plain, function.constant))
    offset = thread_function(ctx, function)
    if isinstance(offset, int) and offset == 0:
        return scratch
    return _memo(ctx, ("relayout_base", scratch, function), lambda: ctx.builder.compute(
        "add.u32", "u32", scratch, offset))


def _memo(ctx: LoweringContext, key: tuple, make) -> Register:
    if key not in ctx.cache:
        ctx.cache[key] = make()
    return ctx.cache[key]  # type: ignore[return-value]


def thread_function(ctx: LoweringContext, function: ThreadFunction) -> Register | int:
    """The value of `function` in this thread: fields of adjacent thread-index bits whose
    coefficients double from bit to bit are extracted at once (`bfe`) and scaled (`shl`, or
    `mul` where the coefficient is no power of two), then added or XORed together, and the
    constant last. Memoised per region; a function of another's constant is one
    instruction more."""
    key = ("thread_function", function)
    if key in ctx.cache:
        return ctx.cache[key]  # type: ignore[return-value]
    b = ctx.builder
    combine = "add.u32" if function.combine == "add" else "xor.b32"
    if function.constant:
        plain = thread_function(ctx, ThreadFunction(function.coefficients, function.combine))
        total: Register | int = (b.compute(combine, "u32", plain, function.constant)
                                 if isinstance(plain, Register) else function.constant)
        ctx.cache[key] = total
        return total
    tid = ctx.thread_index()
    total = 0
    for low, length, coefficient in _fields(function.coefficients, function.combine):
        if low == 0 and length == THREAD_BITS:
            field = tid
        elif low + length == THREAD_BITS:
            field = b.compute("shr.u32", "u32", tid, low)
        elif low == 0:
            field = b.compute("and.b32", "u32", tid, (1 << length) - 1)
        else:
            field = b.compute("bfe.u32", "u32", tid, low, length)
        if coefficient & (coefficient - 1) == 0:
            shift = coefficient.bit_length() - 1
            scaled = b.compute("shl.b32", "u32", field, shift) if shift else field
        else:
            scaled = b.compute("mul.lo.u32", "u32", field, coefficient)
        total = scaled if isinstance(total, int) else b.compute(combine, "u32", total, scaled)
    ctx.cache[key] = total
    return total


def _fields(coefficients: tuple[int, ...], combine: str) -> list[tuple[int, int, int]]:
    """(lowest bit, length, coefficient of the lowest bit) of runs of thread-index bits
    whose coefficients double from one bit to the next (zero coefficients skipped). For
    XOR, a run's field times its coefficient must be the XOR of shifted copies of the
    field: the coefficient's set bits at least the run's length apart."""
    fields: list[tuple[int, int, int]] = []
    for bit, c in enumerate(coefficients):
        if c == 0:
            continue
        if fields:
            low, length, first = fields[-1]
            if low + length == bit and first << length == c and (
                    combine == "add" or _spread(first) > length):
                fields[-1] = (low, length + 1, first)
                continue
        fields.append((bit, 1, c))
    return fields


def _spread(value: int) -> int:
    """The least distance between two set bits of `value` (large if it has one)."""
    bits = [i for i in range(value.bit_length()) if value >> i & 1]
    return min((b - a for a, b in itertools.pairwise(bits)), default=64)


def _scratch_base(ctx: LoweringContext, op: ir.OpView, scratch: ScratchBuffer,
                  plan: SmemRelayoutPlan) -> Register:
    """The shared address of this warpgroup's copy of the relayout scratch."""
    if plan.scratch_bytes > scratch.stride:
        raise error_at(op, "was not planned when the relayout scratch was sized (it has no "
                           "in_layouts): run smalti-infer-layouts before lowering")
    b = ctx.builder
    base = b.compute("mov.u32", "u32", scratch.symbol)
    if len(scratch.warpgroups) == 1:
        return base
    known = known_warpgroup(ctx)
    if known is not None:
        copy = scratch.warpgroups.index(known)
        return b.compute("add.u32", "u32", base, copy * scratch.stride) if copy else base
    first = scratch.warpgroups[0]
    if first:
        base = b.compute("sub.u32", "u32", base, first * scratch.stride)
    return b.compute("mad.lo.u32", "u32", warpgroup_index(ctx), scratch.stride, base)


def _allocate(ctx: LoweringContext, op: ir.OpView) -> ScratchBuffer:
    """The kernel's relayout scratch: a copy per warpgroup that runs a relayout through
    shared memory, each as large as the largest round of one (rounds smaller when many
    warpgroups need copies: `round_bytes_for`). A located error when it does not fit the
    static shared memory, or with the kernel's dynamic shared memory the block's."""
    function = op.operation
    while function.name != "func.func":
        function = function.parent
    everyone = tuple(range(ctx.signature.warpgroups))
    casts: list[tuple[Layout, Layout, tuple[int, ...], int]] = []
    users: set[int] = set(_running(op.operation, everyone))

    def visit(node: ir.Operation) -> ir.WalkResult:
        if isinstance(node.opview, LayoutCastOp):
            cast = _laid_out_cast(node)
            if cast is not None:
                casts.append(cast)
                users.update(_running(node, everyone))
        return ir.WalkResult.ADVANCE

    function.walk(visit, ir.WalkOrder.PRE_ORDER)
    warpgroups = tuple(range(min(users), max(users) + 1))
    round_bytes = round_bytes_for(len(warpgroups))
    stride = 0
    for src, dst, shape, bits in casts:
        try:
            stride = max(stride, plan_smem_relayout(src, dst, shape, bits,
                                                    round_bytes).scratch_bytes)
        except LayoutError:
            continue  # reported where that cast is lowered
    stride = max(SCRATCH_ALIGN, -(-stride // SCRATCH_ALIGN) * SCRATCH_ALIGN)
    total = stride * len(warpgroups)
    if total > STATIC_SMEM_BYTES:
        raise error_at(op, f"relayouts through shared memory need {total} bytes of static "
                           f"shared memory ({len(warpgroups)} warpgroups' copies of {stride} "
                           f"bytes), more than the {STATIC_SMEM_BYTES} a kernel may declare")
    if ctx.signature.smem_bytes + total > BLOCK_SMEM_BYTES:
        raise error_at(op, f"relayouts through shared memory need {total} bytes of shared "
                           f"memory besides the kernel's {ctx.signature.smem_bytes}: more "
                           f"than the {BLOCK_SMEM_BYTES} a block has")
    symbol = ctx.scratch_shared("relayout", total, align=SCRATCH_ALIGN)
    return ScratchBuffer(symbol, stride, warpgroups)


def _laid_out_cast(node: ir.Operation) -> tuple[Layout, Layout, tuple[int, ...], int] | None:
    """(source layout, target layout, shape, element bits) of a laid-out layout_cast that
    crosses warps; None for any other."""
    attributes = node.attributes
    if "in_layouts" not in attributes or "out_layouts" not in attributes:
        return None
    (src,), (dst,) = (attr_to_layouts(attributes[a]) for a in ("in_layouts", "out_layouts"))
    vector = ir.VectorType(node.operands[0].type)
    element = vector_element_type(vector.element_type)
    shape = tuple(vector.shape)
    if element is None or src == dst:
        return None
    try:
        if relayout_kind(src, dst, shape, element.bits) != "smem":
            return None
    except LayoutError:
        return None
    return src, dst, shape, element.bits


def _running(node: ir.Operation, everyone: tuple[int, ...]) -> tuple[int, ...]:
    """The warpgroups that run `node`: its warp-specialised region's, else all."""
    parent = node.parent
    while parent is not None and parent.name != "func.func":
        view = parent.opview
        if isinstance(view, WarpgroupRegionOp):
            return tuple(view.warpgroups)
        parent = parent.parent
    return everyone
