"""vector.multi_reduction: within a thread's registers, across lanes, across warps.

Which threads to combine is read off the source layout's distribution: every `ThreadTerm`
of a reduced dim names a run of thread-index bits (divisor and modulus powers of two).
Lane bits are combined with `shfl.sync.bfly`, one butterfly step per bit, so every lane of
a group ends with the same value (the replicated lanes of the reduced layout); warp bits
go through a scratch SMEM buffer between two `bar.sync`, each thread reading the partials
of all combined warps in the same order, so replicas hold bit-identical values. The
registers of the result are then matched to the partials through the result layout's
element map, which is how any tiled layout (not only the WGMMA row/col layouts) works.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import vector as vector_ops

from smalti.dialect.attributes import layout_to_text
from smalti.dialect.bindings import combining_kind
from smalti.dialect.diagnostics import error_at
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.elementwise import unpack
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import (
    ElementType,
    FragmentedArray,
    ScalarValue,
    elements_per_register,
    fragment_geometry,
)
from smalti.lowering.warpgroup import known_warpgroup, warpgroup_index, warpgroup_sync
from smalti.ptx import Address, Guard, Immediate, Register, VectorOperand
from smalti.ptx.module import Operand
from smalti.tiling import WARP_SIZE, WARPGROUP_SIZE, Distribution, WGSplatLayout

FLOAT_KINDS = {"add": "add.rn", "mul": "mul.rn", "maximumf": "max.NaN",
               "minimumf": "min.NaN", "maxnumf": "max", "minnumf": "min"}
INTEGER_KINDS = {"add": "add.s{bits}", "mul": "mul.lo.s{bits}", "maxsi": "max.s{bits}",
                 "minsi": "min.s{bits}", "maxui": "max.u{bits}", "minui": "min.u{bits}",
                 "and": "and.b{bits}", "or": "or.b{bits}", "xor": "xor.b{bits}"}
LANE_BITS = WARP_SIZE.bit_length() - 1
THREAD_BITS = WARPGROUP_SIZE.bit_length() - 1

Key = tuple[int, ...]  # coordinates of a result element in the kept dims


@dataclass(frozen=True)
class Combiner:
    """How two registers of one element type combine under a reduction kind."""

    kind: str
    element: ElementType

    def opcode(self, packed: bool) -> str:
        if self.element.is_float:
            return f"{FLOAT_KINDS[self.kind]}.{self.register_type(packed)}"
        return INTEGER_KINDS[self.kind].format(bits=self.element.bits)

    def register_type(self, packed: bool) -> str:
        return self.element.packed if packed and self.element.packed else self.element.scalar

    def apply(self, ctx: LoweringContext, a: Operand, b: Operand, packed: bool) -> Register:
        return ctx.builder.compute(self.opcode(packed), self.register_type(packed), a, b)

    def fold(self, ctx: LoweringContext, registers: list[Register], packed: bool) -> Register:
        """Combine registers pairwise, as a balanced tree (short dependency chains)."""
        while len(registers) > 1:
            pairs = [self.apply(ctx, a, b, packed)
                     for a, b in zip(registers[::2], registers[1::2], strict=False)]
            registers = pairs + ([registers[-1]] if len(registers) % 2 else [])
        return registers[0]


@dataclass(frozen=True)
class Partial:
    """A register holding the partial reduction of one (or, packed, two) result elements."""

    register: Register
    keys: tuple[Key, ...]

    @property
    def packed(self) -> bool:
        return len(self.keys) == 2


def reduction_kind(op: vector_ops.MultiDimReductionOp) -> str:
    try:
        return combining_kind(op.kind)
    except ValueError:
        raise error_at(op, "requires a #vector.kind 'kind' attribute") from None


@lowering_rule(vector_ops.MultiDimReductionOp)
def _multi_reduction(ctx: LoweringContext, op: vector_ops.MultiDimReductionOp) -> None:
    source = ctx.array(op, op.source)
    kind = reduction_kind(op)
    element = source.element
    table = FLOAT_KINDS if element.is_float else INTEGER_KINDS
    if kind not in table or element.bits in (1, 8, 64):  # no fp8 arithmetic in PTX
        raise error_at(op, f"has no lowering of <{kind}> over {element.name}")
    combiner = Combiner(kind, element)
    axes = tuple(sorted(int(a) for a in ir.DenseI64ArrayAttr(op.reduction_dims)))
    if isinstance(source.layout, WGSplatLayout):
        count = math.prod(source.shape[a] for a in axes)
        (value,), = source.vectors
        elements = {(): (_reduce_splat(ctx, combiner, value, count), None)}
    else:
        dist = source.layout.distribution(source.shape)
        if not dist.separable:
            raise error_at(op, "cannot reduce a strided layout whose rows carry; use a "
                               "vector length that divides the rows")
        partials = _in_thread(ctx, combiner, source, dist, axes)
        lane_bits, warp_bits = _reduced_bits(op, dist, axes)
        partials = [_across_lanes(ctx, combiner, p, lane_bits) for p in partials]
        if warp_bits:
            partials = _across_warps(ctx, op, combiner, partials, lane_bits, warp_bits)
        elements = {key: (p.register, half if p.packed else None)
                    for p in partials for half, key in enumerate(p.keys)}
    result = op.dest
    if not isinstance(result.type, ir.VectorType):
        value = _half(ctx, elements, ())
        accumulator = ctx.scalar(op, op.acc)
        ctx.set(result, ScalarValue(combiner.apply(ctx, value, accumulator.operand, False),
                                    element))
        return
    layout = layouts_of(op, "out_layouts", 1)[0]
    shape = tuple(ir.VectorType(result.type).shape)
    if isinstance(source.layout, WGSplatLayout):  # the reduced layout of a splat is a splat
        reduced = FragmentedArray(source.layout, shape, element, ((elements[()][0],),), 1)
    else:
        picks = _result_keys(op, source, axes, layout, shape)
        reduced = _assemble(ctx, elements, picks, element, layout, shape)
    accumulator = ctx.array(op, op.acc)
    if accumulator.layout != layout:
        raise error_at(op, f"accumulator has layout #smalti.{layout_to_text(accumulator.layout)}"
                           f" but the result has #smalti.{layout_to_text(layout)}")
    vectors = tuple(tuple(combiner.apply(ctx, r, a, reduced.pack == 2)
                          for r, a in zip(rv, av, strict=True))
                    for rv, av in zip(reduced.vectors, accumulator.vectors, strict=True))
    ctx.set(result, FragmentedArray(layout, shape, element, vectors, reduced.vector_length))


def _reduce_splat(ctx: LoweringContext, combiner: Combiner, value: Register, count: int
                  ) -> Register:
    """The reduction of `count` copies of one value, without adding them one by one."""
    b = ctx.builder
    element = combiner.element
    match combiner.kind:
        case "add" if element.is_float and element.bits == 32:
            return b.compute("mul.rn.f32", "f32", value, Immediate(float(count), "f32"))
        case "add" if element.is_float:
            wide = b.compute(f"cvt.f32.{element.scalar}", "f32", value)
            product = b.compute("mul.rn.f32", "f32", wide, Immediate(float(count), "f32"))
            return b.compute(f"cvt.rn.{element.scalar}.f32", "b16", product)
        case "add":
            return b.compute(f"mul.lo.s{element.bits}", element.scalar, value, count)
        case "mul":  # value ** count by squaring
            result, power = None, value
            while count:
                if count & 1:
                    result = power if result is None else combiner.apply(ctx, result, power,
                                                                         False)
                count >>= 1
                if count:
                    power = combiner.apply(ctx, power, power, False)
            assert result is not None
            return result
        case "xor":
            return value if count % 2 else b.compute(f"mov.b{element.bits}", element.scalar, 0)
    return value  # max, min, and, or: idempotent


def _in_thread(ctx: LoweringContext, combiner: Combiner, source: FragmentedArray,
               dist: Distribution, axes: tuple[int, ...]) -> list[Partial]:
    """Combine the registers of one thread that hold elements of the same result element."""
    kept = [d for d in range(len(source.shape)) if d not in axes]
    pack = source.pack
    groups: dict[tuple[Key, ...], list[Register]] = {}
    for origin, vector in zip(dist.register_origins, source.vectors, strict=True):
        for k, register in enumerate(vector):
            keys = []
            for slot in range(k * pack, (k + 1) * pack):
                index = list(origin)
                index[dist.vector_dim] += slot * dist.vector_step
                keys.append(tuple(index[d] for d in kept))
            groups.setdefault(tuple(keys), []).append(register)
    partials = []
    for keys, registers in groups.items():
        register = combiner.fold(ctx, registers, pack == 2)
        if pack == 2 and keys[0] == keys[1]:  # both halves belong to one result element
            lo, hi = unpack(ctx, source, register)
            partials.append(Partial(combiner.apply(ctx, lo, hi, False), keys[:1]))
        else:
            partials.append(Partial(register, keys))
    return partials


def _reduced_bits(op: ir.OpView, dist: Distribution, axes: tuple[int, ...]
                  ) -> tuple[list[int], list[int]]:
    """The thread-index bits that hold different parts of the reduced dims: (lane, warp)."""
    bits = []
    for term in dist.thread_terms:
        if term.dim not in axes:
            continue
        if term.divisor & (term.divisor - 1) or term.modulus & (term.modulus - 1):
            raise error_at(op, f"cannot reduce across threads of a layout whose thread term "
                               f"{term} is not a power-of-two bit field")
        low = term.divisor.bit_length() - 1
        bits.extend(range(low, min(low + term.modulus.bit_length() - 1, THREAD_BITS)))
    bits.sort()
    return [b for b in bits if b < LANE_BITS], [b for b in bits if b >= LANE_BITS]


def _across_lanes(ctx: LoweringContext, combiner: Combiner, partial: Partial,
                  lane_bits: list[int]) -> Partial:
    """Butterfly over `lane_bits`: afterwards every lane of a group holds the group's value."""
    b = ctx.builder
    register = partial.register
    for bit in lane_bits:
        if partial.packed or combiner.element.bits == 32:
            other = b.compute("shfl.sync.bfly.b32", register.type, register, 1 << bit, 0x1F, -1)
        else:  # a lone 16-bit value travels in both halves of a .b32
            word = b.reg("b32")
            b.emit("mov.b32", word, VectorOperand((register, register)))
            moved = b.compute("shfl.sync.bfly.b32", "b32", word, 1 << bit, 0x1F, -1)
            other, high = b.reg("b16"), b.reg("b16")
            b.emit("mov.b32", VectorOperand((other, high)), moved)
        register = combiner.apply(ctx, register, other, partial.packed)
    return Partial(register, partial.keys)


def _across_warps(ctx: LoweringContext, op: ir.OpView, combiner: Combiner,
                  partials: list[Partial], lane_bits: list[int], warp_bits: list[int]
                  ) -> list[Partial]:
    """Combine partials across warps through scratch SMEM: one writer per lane group stores,
    `bar.sync`, every thread loads all combined warps' values in warp order, `bar.sync`."""
    b = ctx.builder
    slot_bits = [i for i in range(THREAD_BITS) if i not in lane_bits]
    slots = 1 << len(slot_bits)
    entry = 4  # bytes per slot: a .b32 (packed or f32/i32) or a .b16 in its low half
    size = len(partials) * slots * entry
    warpgroups = ctx.signature.warpgroups
    scratch = ctx.scratch_shared("reduce", size * warpgroups)
    base = b.compute("mov.u32", "u32", scratch)
    if warpgroups > 1:  # each warpgroup its own scratch, as several may reduce at once
        known = known_warpgroup(ctx)
        base = (b.compute("mad.lo.u32", "u32", warpgroup_index(ctx), size, base)
                if known is None else b.compute("add.u32", "u32", base, known * size))
    tid = ctx.thread_index()
    write = _slot_address(ctx, _compress(ctx, tid, slot_bits, slot_bits), entry, base)
    guard = None
    if lane_bits:
        mask = sum(1 << bit for bit in lane_bits)
        lanes = b.compute("and.b32", "u32", tid, mask)
        guard = Guard(b.compute("setp.eq.u32", "pred", lanes, 0))
    for p, partial in enumerate(partials):
        b.emit(f"st.shared.b{_bits(partial)}", Address(write, p * slots * entry),
               partial.register, guard=guard)
    _sync(ctx)
    kept = [bit for bit in slot_bits if bit not in warp_bits]
    read = _slot_address(ctx, _compress(ctx, tid, slot_bits, kept), entry, base)
    combined = []
    for p, partial in enumerate(partials):
        values = []
        for combo in range(1 << len(warp_bits)):
            slot = sum(((combo >> j) & 1) << slot_bits.index(bit)
                       for j, bit in enumerate(warp_bits))
            value = b.reg(partial.register.type)
            b.emit(f"ld.shared.b{_bits(partial)}", value,
                   Address(read, (p * slots + slot) * entry))
            values.append(value)
        register = values[0]
        for value in values[1:]:  # in warp order, the same in every thread
            register = combiner.apply(ctx, register, value, partial.packed)
        combined.append(Partial(register, partial.keys))
    _sync(ctx)
    return combined


def _sync(ctx: LoweringContext) -> None:
    """The warpgroup meets: the whole block when it is the only warpgroup, else its own
    named barrier (1 + warpgroup index, 128 threads)."""
    if ctx.signature.warpgroups == 1:
        ctx.builder.emit("bar.sync", 0)
    else:
        warpgroup_sync(ctx)


def _slot_address(ctx: LoweringContext, slot: Register | int, entry: int, base: Register
                  ) -> Register:
    return base if slot == 0 else ctx.builder.compute("mad.lo.u32", "u32", slot, entry, base)


def _bits(partial: Partial) -> int:
    return 16 if partial.register.type == "b16" else 32


def _compress(ctx: LoweringContext, tid: Register, positions: list[int], included: list[int]
              ) -> Register | int:
    """The bits of `tid` at `positions` packed together, low first; bits not `included` as 0."""
    b = ctx.builder
    total: Register | int = 0
    runs: list[tuple[int, int, int]] = []  # (tid bit, packed bit, length)
    for packed, bit in enumerate(positions):
        if bit not in included:
            continue
        if runs and runs[-1][0] + runs[-1][2] == bit and runs[-1][1] + runs[-1][2] == packed:
            runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((bit, packed, 1))
    for bit, packed, length in runs:
        part = b.compute("shr.u32", "u32", tid, bit) if bit else tid
        if bit + length < THREAD_BITS:
            part = b.compute("and.b32", "u32", part, (1 << length) - 1)
        if packed:
            part = b.compute("shl.b32", "u32", part, packed)
        total = part if total == 0 else b.compute("or.b32", "u32", total, part)
    return total


def _result_keys(op: ir.OpView, source: FragmentedArray, axes: tuple[int, ...], layout,
                 shape: tuple[int, ...]) -> np.ndarray:
    """[register, slot] -> kept-dim key of each result element, the same in every thread
    (checked against the result layout's element map)."""
    if isinstance(layout, WGSplatLayout):
        raise error_at(op, "cannot give a reduced vector a splat layout")
    kept = [d for d in range(len(source.shape)) if d not in axes]
    threads = np.arange(WARPGROUP_SIZE)
    thread_part = np.zeros((WARPGROUP_SIZE, len(kept)), dtype=np.int64)
    if not isinstance(source.layout, WGSplatLayout):
        for term in source.layout.distribution(source.shape).thread_terms:
            if term.dim in kept:
                thread_part[:, kept.index(term.dim)] += term.evaluate(threads)
    static = layout.element_index(shape) - thread_part[:, None, None, :]
    if not np.all(static == static[:1]):
        raise error_at(op, f"result layout #smalti.{layout_to_text(layout)} does not keep the "
                           f"kept elements where #smalti.{layout_to_text(source.layout)} holds "
                           "them; this reduction needs a relayout")
    return static[0]


def _assemble(ctx: LoweringContext, elements: dict[Key, tuple[Register, int | None]],
              picks: np.ndarray, element: ElementType, layout, shape: tuple[int, ...]
              ) -> FragmentedArray:
    """The result's register vectors, taking each element's register from `elements`."""
    count, length = fragment_geometry(layout, shape)
    pack = elements_per_register(element, length)
    vectors = []
    for r in range(count):
        vector = []
        for i in range(0, length, pack):
            keys = [tuple(int(c) for c in picks[r, s]) for s in range(i, i + pack)]
            if any(k not in elements for k in keys):
                raise AssertionError(f"no partial for result element {keys}")
            if pack == 2:
                (lo, lo_half), (hi, hi_half) = (elements[k] for k in keys)
                if lo is hi and (lo_half, hi_half) == (0, 1):
                    vector.append(lo)
                    continue
                halves = [_half(ctx, elements, k) for k in keys]
                packed = ctx.builder.reg("b32")
                ctx.builder.emit("mov.b32", packed, VectorOperand(tuple(halves)))
                vector.append(packed)
            else:
                vector.append(_half(ctx, elements, keys[0]))
        vectors.append(tuple(vector))
    return FragmentedArray(layout, shape, element, tuple(vectors), length)


def _half(ctx: LoweringContext, elements: dict[Key, tuple[Register, int | None]], key: Key
          ) -> Register:
    """One element as a scalar register (a 16-bit half split out of its pair)."""
    register, half = elements[key]
    if half is None:
        return register
    lo, hi = ctx.builder.reg("b16"), ctx.builder.reg("b16")
    ctx.builder.emit("mov.b32", VectorOperand((lo, hi)), register)
    return (lo, hi)[half]

