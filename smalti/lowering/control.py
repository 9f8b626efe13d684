"""Structured control flow with uniform conditions: scf.for, scf.if, and the scalar ops that
feed them (arith.cmpi, arith.select, arith.index_cast), plus optimization_barrier.

A value carried by a loop (or produced by an `scf.if`) lives in fixed registers, its
"home": `mov`s fill it before the loop and at the end of each iteration (or at the end of
each branch), like the phi nodes of SSA form. Conditions and bounds are uniform scalars,
so branches are `bra.uni` and the whole warpgroup takes them together.
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, scf

from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops_compute import OptimizationBarrierOp
from smalti.lowering.compare import lower_vector_compare, lower_vector_select
from smalti.lowering.context import LoweringContext, layouts_of
from smalti.lowering.proxy import writes_smem
from smalti.lowering.registry import lowering_rule
from smalti.lowering.scalar import constant_scalar
from smalti.lowering.smem_order import loop_carried
from smalti.lowering.values import (
    ELEMENT_TYPES,
    FragmentedArray,
    LoweredValue,
    ScalarValue,
    element_type,
    elements_per_register,
    fragment_geometry,
    register_type,
    vector_element_type,
)
from smalti.ptx import Guard, Immediate, Register
from smalti.ptx.module import Operand

I1 = ELEMENT_TYPES["i1"]
INDEX = ELEMENT_TYPES["index"]
# arith.cmpi predicates, by their enum value: (PTX comparison, signed?).
CMPI = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")
SWAPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le",
           "lo": "hi", "ls": "hs", "hi": "lo", "hs": "ls"}
_FOLD = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
         "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _mov(register: Register) -> str:
    return f"mov.{register.type}"


def home_like(ctx: LoweringContext, op: ir.OpView, value: LoweredValue) -> LoweredValue:
    """Fresh registers shaped like `value`: where a loop-carried value lives."""
    b = ctx.builder
    match value:
        case FragmentedArray():
            vectors = tuple(tuple(b.reg(value.register_type) for _ in vector)
                            for vector in value.vectors)
            return FragmentedArray(value.layout, value.shape, value.element, vectors,
                                   value.vector_length)
        case ScalarValue():
            return ScalarValue(b.reg(value.type.scalar), value.type, 1)
    raise error_at(op, "cannot carry a buffer through a loop or a branch")


def home_for(ctx: LoweringContext, op: ir.OpView, result: ir.Value, layout) -> LoweredValue:
    """Fresh registers for a result of `op` of its type (and inferred layout)."""
    b = ctx.builder
    if isinstance(result.type, ir.VectorType):
        vector_type = ir.VectorType(result.type)
        element = vector_element_type(vector_type.element_type)
        if element is None:
            raise error_at(op, f"cannot yield vectors of {vector_type.element_type}")
        shape = tuple(vector_type.shape)
        count, length = fragment_geometry(layout, shape)
        pack = elements_per_register(element, length)
        vectors = tuple(tuple(b.reg(register_type(element, pack)) for _ in range(length // pack))
                        for _ in range(count))
        return FragmentedArray(layout, shape, element, vectors, length)
    element = element_type(result.type)
    if element is None:
        raise error_at(op, f"cannot yield values of type {result.type}")
    return ScalarValue(b.reg(element.scalar), element, 1)


def _registers(op: ir.OpView, value: LoweredValue) -> list[Operand]:
    match value:
        case FragmentedArray():
            return [r for vector in value.vectors for r in vector]
        case ScalarValue():
            return [value.operand]
    raise error_at(op, "cannot carry a buffer through a loop or a branch")


def assign(ctx: LoweringContext, op: ir.OpView, homes: list[LoweredValue],
           values: list[LoweredValue]) -> None:
    """Move `values` into `homes` as one parallel move (a home read as a source is copied
    first, so swapping loop-carried values works)."""
    pairs: list[tuple[Register, Operand]] = []
    for home, value in zip(homes, values, strict=True):
        if isinstance(home, FragmentedArray) and (
                not isinstance(value, FragmentedArray) or value.layout != home.layout):
            raise error_at(op, "yields a vector whose layout differs from the carried value's")
        targets, sources = _registers(op, home), _registers(op, value)
        if len(targets) != len(sources):
            raise error_at(op, "yields a value whose registers do not match the carried value")
        pairs.extend(zip(targets, sources, strict=True))  # type: ignore[arg-type]
    b = ctx.builder
    targets = {t for t, _ in pairs}
    copies: dict[Operand, Register] = {}
    for target, source in pairs:
        if source in targets and source != target and source not in copies:
            copy = b.reg(target.type)
            b.emit(_mov(copy), copy, source)
            copies[source] = copy
    for target, source in pairs:
        if source == target:
            continue
        source = copies.get(source, source)
        if target.type == "pred" and isinstance(source, Immediate):
            b.emit("setp.ne.u32", target, Immediate(1 if source.value else 0), 0)
        else:
            b.emit(_mov(target), target, source)


@lowering_rule(scf.ForOp)
def _for(ctx: LoweringContext, op: scf.ForOp) -> None:
    """counter = lower; [skip if counter >= upper]; body; counter += step; loop if < upper."""
    lower, upper, step = (ctx.scalar(op, v) for v in (op.lowerBound, op.upperBound, op.step))
    if step.constant is not None and step.constant <= 0:
        raise error_at(op, f"has a non-positive step {step.constant}")
    inits = [ctx.get(v) for v in op.initArgs]
    body = op.body
    if lower.constant is not None and upper.constant is not None and step.constant is not None \
            and lower.constant >= upper.constant:
        for result, init in zip(op.results, inits, strict=True):
            ctx.set(result, init)
        return
    b = ctx.builder
    ctx.thread_index()  # read once before the loop, not in every iteration
    with ctx.region():
        homes = [home_like(ctx, op, v) for v in inits]
        assign(ctx, op, homes, inits)
        counter = b.reg("s64")
        b.emit("mov.b64", counter, lower.operand)
        start, done = b.new_label("loop"), b.new_label("loop_end")
        statically_entered = lower.constant is not None and upper.constant is not None
        if not statically_entered:
            skip = b.compute("setp.ge.s64", "pred", counter, upper.operand)
            b.emit("bra.uni", done, guard=Guard(skip))
        b.place(start)
        divisor = math.gcd(lower.divisor, step.divisor)
        ctx.set(op.induction_variable, ScalarValue(counter, INDEX, divisor))
        for argument, home in zip(op.inner_iter_args, homes, strict=True):
            ctx.set(argument, home)
        if writes_smem(body):  # the previous iteration's stores precede this one's reads
            ctx.unpublished_smem_writes = True
        ctx.smem_pending = tuple(dict.fromkeys((*ctx.smem_pending,
                                                *loop_carried(ctx, body))))
        yielded = ctx.lower_block(body)
        assign(ctx, op, homes, list(yielded))
        b.emit("add.s64", counter, counter, step.operand)
        again = b.compute("setp.lt.s64", "pred", counter, upper.operand)
        b.emit("bra.uni", start, guard=Guard(again))
        b.place(done)
    for result, home in zip(op.results, homes, strict=True):
        ctx.set(result, home)


@lowering_rule(scf.IfOp)
def _if(ctx: LoweringContext, op: scf.IfOp) -> None:
    """@!cond bra else; then; bra end; else: else; end: (results in shared homes)."""
    condition = ctx.scalar(op, op.condition)
    regions = [region.blocks[0] if len(region.blocks) else None
               for region in (op.thenRegion, op.elseRegion)]
    if condition.constant is not None:  # only the taken branch exists
        block = regions[0] if condition.constant else regions[1]
        yielded = ctx.lower_block(block) if block is not None else ()
        for result, value in zip(op.results, yielded, strict=True):
            ctx.set(result, value)
        return
    b = ctx.builder
    vector_results = [r for r in op.results if isinstance(r.type, ir.VectorType)]
    layouts = iter(layouts_of(op, "out_layouts", len(vector_results)) if vector_results else ())
    homes = [home_for(ctx, op, r, next(layouts) if isinstance(r.type, ir.VectorType) else None)
             for r in op.results]
    end = b.new_label("if_end")
    otherwise = b.new_label("if_else") if regions[1] is not None else end
    b.emit("bra.uni", otherwise, guard=Guard(condition.operand, negated=True))  # type: ignore[arg-type]
    with ctx.region():
        assign(ctx, op, homes, list(ctx.lower_block(regions[0])))
    if regions[1] is not None:
        b.emit("bra.uni", end)
        b.place(otherwise)
        with ctx.region():
            assign(ctx, op, homes, list(ctx.lower_block(regions[1])))
    b.place(end)
    for result, home in zip(op.results, homes, strict=True):
        ctx.set(result, home)


@lowering_rule(arith.CmpIOp)
def _cmpi(ctx: LoweringContext, op: arith.CmpIOp) -> None:
    """A uniform comparison of index or integer scalars: setp into a predicate."""
    if isinstance(op.result.type, ir.VectorType):
        lower_vector_compare(ctx, op)
        return
    a, c = ctx.scalar(op, op.lhs), ctx.scalar(op, op.rhs)
    if a.type.bits == 1:
        raise error_at(op, "comparisons of i1 values are not supported")
    predicate = CMPI[ir.IntegerAttr(op.predicate).value]
    if a.constant is not None and c.constant is not None:
        x, y = int(a.constant), int(c.constant)
        if predicate in ("lo", "ls", "hi", "hs"):
            mask = (1 << a.type.bits) - 1
            x, y = x & mask, y & mask
        compare = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}.get(predicate, predicate)
        ctx.set(op.result, constant_scalar(int(_FOLD[compare](x, y)), I1))
        return
    if a.constant is not None:  # setp wants its first source in a register
        a, c, predicate = c, a, SWAPPED[predicate]
    signed = predicate in ("lt", "le", "gt", "ge")
    ptx_type = f"{'s' if signed else 'u' if predicate not in ('eq', 'ne') else 'b'}{a.type.bits}"
    result = ctx.builder.compute(f"setp.{predicate}.{ptx_type}", "pred", a.operand, c.operand)
    ctx.set(op.result, ScalarValue(result, I1))


@lowering_rule(arith.SelectOp)
def _select(ctx: LoweringContext, op: arith.SelectOp) -> None:
    """A uniform choice between two scalars: selp (folded when the condition is known)."""
    if isinstance(op.result.type, ir.VectorType):
        lower_vector_select(ctx, op)
        return
    condition, a, c = (ctx.scalar(op, v) for v in (op.condition, op.true_value,
                                                  op.false_value))
    if condition.constant is not None:
        ctx.set(op.result, a if condition.constant else c)
        return
    if a.type.bits == 1:
        raise error_at(op, "selecting between i1 values is not supported")
    ptx_type = a.type.scalar if a.type.bits != 16 else "b16"
    result = ctx.builder.compute(f"selp.{ptx_type}", a.type.scalar, a.operand, c.operand,
                                 condition.operand)
    ctx.set(op.result, ScalarValue(result, a.type, math.gcd(a.divisor, c.divisor)))


@lowering_rule(arith.IndexCastOp)
def _index_cast(ctx: LoweringContext, op: arith.IndexCastOp) -> None:
    """index <-> i32 (sign-extending into index, truncating out of it)."""
    source = ctx.scalar(op, op.in_)
    target = element_type(op.out.type)
    if target is None or target.bits not in (32, 64) or source.type.bits not in (32, 64):
        raise error_at(op, f"casts only between index and i32/i64, not {op.out.type}")
    if source.constant is not None:
        value = int(source.constant)
        if target.bits == 32:
            value = (value + 2**31) % 2**32 - 2**31
        ctx.set(op.out, constant_scalar(value, target))
        return
    if source.type.bits == target.bits:
        ctx.set(op.out, ScalarValue(source.operand, target, source.divisor))
        return
    opcode = "cvt.s64.s32" if target.bits == 64 else "cvt.u32.u64"
    register = ctx.builder.compute(opcode, target.scalar, source.operand)
    divisor = source.divisor if target.bits == 64 else math.gcd(source.divisor, 2**32)
    ctx.set(op.out, ScalarValue(register, target, divisor))


@lowering_rule(OptimizationBarrierOp)
def _optimization_barrier(ctx: LoweringContext, op: OptimizationBarrierOp) -> None:
    """Values pass through unchanged: the barrier only stops MLIR rewrites across it."""
    for operand, result in zip(op.values, op.outputs, strict=True):
        ctx.set(result, ctx.get(operand))
