"""The numpy reference: an interpreter of programs that mirrors smalti's semantics, every
value carried with an error bound (tests.differential.numerics).

It runs the statements once per block, on copies of the inputs, and returns the outputs
with their bounds: what `tests.differential.compare` holds smalti's results against.
"""

from __future__ import annotations

import math

import numpy as np

from tests.differential.dtypes import DTYPES, DType
from tests.differential.numerics import (
    INF,
    Tracked,
    as_f64,
    round_to,
    settle,
    ulp,
    unit_roundoff,
)
from tests.differential.ops import (
    COMPARISONS,
    ELEMENTWISE,
    REDUCTIONS,
    SHIFTS,
    integer_function,
    undetermined,
    wrap,
)
from tests.differential.program import (
    Affine,
    Apply,
    Barrier,
    BlockSelect,
    Broadcast,
    Cast,
    Compare,
    Const,
    Insert,
    Iota,
    LayoutCast,
    Load,
    Loop,
    Print,
    Program,
    Reduce,
    Reshape,
    Select,
    Slice,
    SmemRoundTrip,
    Statement,
    Store,
    Transpose,
    When,
    results,
)
from tests.differential.typecheck import value_types

Env = dict[str, Tracked]
# Extra levels of a summation tree beyond log2(n): the accumulator, the partials of warps
# combined in order, the packing of 16-bit pairs (smalti/lowering/reductions.py).
SUM_EXTRA_LEVELS = 8
SMALLEST_NORMAL = 2.0 ** -126  # f32's and bf16's


def run_reference(program: Program, inputs: list[np.ndarray], *,
                  flush_subnormals: bool = False,
                  prints: dict[tuple[int, int], Tracked] | None = None) -> list[Tracked]:
    """The outputs (in `program.outputs` order) for `inputs` (in `program.inputs` order).
    `flush_subnormals`: as a machine that flushes subnormal operands and results to zero
    (x86's FTZ and DAZ), a model for known mismatch findings (allowlist.KNOWN_FINDINGS). `prints`
    receives (label, block) -> the value each Print printed last in that block."""
    types = value_types(program)
    buffers = {ref.name: Tracked.exact(array) for ref, array in zip(program.inputs, inputs,
                                                                    strict=True)}
    for ref in program.outputs:  # .mlir runs pass zeros; what a DSL kernel leaves is not known
        zeros = np.zeros(ref.shape, DTYPES[ref.dtype].numpy)
        buffers[ref.name] = Tracked(zeros, np.full(ref.shape, INF if program.kind == "dsl"
                                                   else 0.0))
    for block in range(program.blocks):
        interpreter = _Interpreter(program, types, buffers, block, flush_subnormals,
                                   {} if prints is None else prints)
        interpreter.run(program.body, {})
    return [buffers[ref.name] for ref in program.outputs]


def flushed(value: Tracked) -> Tracked:
    """Subnormal (below 2^-126) floats as zeros of their sign."""
    x = value.val.astype(np.float64)
    tiny = (x != 0) & (np.abs(x) < SMALLEST_NORMAL)
    if not tiny.any():
        return value
    return Tracked(np.where(tiny, np.copysign(0.0, x), x).astype(value.val.dtype), value.err)


def _window(starts: tuple[Affine, ...], shape: tuple[int, ...], block: int,
            counters: dict[str, int], dynamic: int | None) -> tuple[slice, ...]:
    return tuple(slice(s.evaluate(block, counters, dynamic),
                       s.evaluate(block, counters, dynamic) + n)
                 for s, n in zip(starts, shape, strict=True))


class _Interpreter:
    def __init__(self, program: Program, types: dict, buffers: dict[str, Tracked],
                 block: int, flush_subnormals: bool = False,
                 prints: dict[tuple[int, int], Tracked] | None = None) -> None:
        self.program, self.types, self.buffers, self.block = program, types, buffers, block
        self.flush = flush_subnormals
        self.prints = {} if prints is None else prints

    def run(self, body: tuple[Statement, ...], counters: dict[str, int],
            env: Env | None = None) -> Env:
        env = {} if env is None else env
        for statement in body:
            self.step(statement, env, counters)
            if self.flush:
                for name in results(statement):
                    if DTYPES[self.types[name].dtype].is_float:
                        env[name] = flushed(env[name])
        return env

    def step(self, s: Statement, env: Env, counters: dict[str, int]) -> None:
        match s:
            case Load():
                buffer = self.buffers[s.ref]
                window = _window(s.starts, s.type.shape, self.block, counters,
                                 self.program.dynamic)
                env[s.out] = Tracked(buffer.val[window].copy(), buffer.err[window].copy())
            case Store():
                value = env[s.value]
                buffer = self.buffers[s.ref]
                window = _window(s.starts, value.val.shape, self.block, counters,
                                 self.program.dynamic)
                buffer.val[window] = value.val
                buffer.err[window] = value.err
            case Print():
                self.prints[s.label, self.block] = env[s.value]
            case Const():
                dtype = DTYPES[s.type.dtype]
                val = np.full(s.type.shape, s.value, np.float64 if dtype.is_float else
                              dtype.numpy)
                if dtype.is_float:
                    val = round_to(val, dtype)
                env[s.out] = Tracked.exact(val.astype(dtype.numpy))
            case Iota():
                env[s.out] = Tracked.exact(np.indices(s.type.shape, np.int32)[s.dimension])
            case Apply():
                env[s.out] = apply(s.op, [env[a] for a in s.args], self.types[s.out].dtype)
            case Compare():
                env[s.out] = compare(s.predicate, env[s.lhs], env[s.rhs],
                                     self.types[s.lhs].dtype)
            case Select():
                c, a, b = env[s.condition], env[s.true], env[s.false]
                val = np.where(c.val, a.val, b.val)
                err = np.where(c.err > 0, INF, np.where(c.val, a.err, b.err))
                env[s.out] = Tracked(val, err)
            case Cast():
                env[s.out] = cast(env[s.value], DTYPES[self.types[s.value].dtype],
                                  DTYPES[s.dtype], s.how)
            case Reduce():
                acc = env[s.acc] if s.acc is not None else None
                env[s.out] = reduce(s.kind, env[s.value], s.axis, acc,
                                    DTYPES[self.types[s.out].dtype])
            case Broadcast():
                a = env[s.value]
                index = (slice(None), None) if s.dim == 0 else (None, slice(None))
                env[s.out] = Tracked(np.broadcast_to(a.val[index], s.shape).copy(),
                                     np.broadcast_to(a.err[index], s.shape).copy())
            case Transpose():
                a = env[s.value]
                env[s.out] = Tracked(a.val.T.copy(), a.err.T.copy())
            case Reshape():
                a = env[s.value]
                env[s.out] = Tracked(a.val.reshape(s.shape), a.err.reshape(s.shape))
            case Slice():
                a = env[s.value]
                window = tuple(slice(o, o + n) for o, n in zip(s.offsets, s.sizes, strict=True))
                env[s.out] = Tracked(a.val[window].copy(), a.err[window].copy())
            case Insert():
                small, big = env[s.small], env[s.big]
                window = tuple(slice(o, o + n) for o, n in zip(s.offsets, small.val.shape,
                                                               strict=True))
                val, err = big.val.copy(), big.err.copy()
                val[window], err[window] = small.val, small.err
                env[s.out] = Tracked(val, err)
            case LayoutCast() | SmemRoundTrip() | Barrier():
                env[s.out] = env[s.value]
            case BlockSelect():
                env[s.out] = env[s.true] if self.block < s.cutoff else env[s.false]
            case Loop():
                values = [env[v] for v in s.inits]
                for i in s.counter_values(self.block):
                    inner = dict(env)
                    inner.update(zip(s.carried, values, strict=True))
                    self.run(s.body, {**counters, s.counter: i}, inner)
                    values = [inner[v] for v in s.yields]
                env.update(zip(s.outs, values, strict=True))
            case When():
                taken = self.block < s.cutoff
                branch = s.then if taken else s.otherwise
                inner = self.run(branch, counters, dict(env))
                yields = s.then_yields if taken else s.otherwise_yields
                env.update(zip(s.outs, (inner[v] for v in yields), strict=True))
            case _:
                raise TypeError(s)


def apply(name: str, args: list[Tracked], dtype_name: str) -> Tracked:
    """An elementwise op of the table on tracked operands."""
    op = ELEMENTWISE[name]
    dtype = DTYPES[dtype_name]
    if dtype.is_float:
        assert op.reference is not None
        return op.reference(args, dtype)
    ints = [a.val.astype(np.int64) for a in args]
    err = undetermined(args)
    if dtype.is_bool:
        assert op.integer is not None
        return Tracked(op.integer(*[a.val for a in args]).astype(bool), err)
    fn = integer_function(op, dtype.bits)
    if name in SHIFTS:
        amount = ints[1]
        err = np.where((amount < 0) | (amount >= dtype.bits), INF, err)  # poison in MLIR
        ints = [ints[0], np.clip(amount, 0, dtype.bits - 1)]
    if op.undefined is not None:
        err = np.where(op.undefined(*ints), INF, err)
    with np.errstate(all="ignore"):
        val = wrap(fn(*ints), dtype.bits).astype(dtype.numpy)
    return Tracked(val, err)


def compare(name: str, a: Tracked, b: Tracked, dtype_name: str) -> Tracked:
    predicate = COMPARISONS[name]
    dtype = DTYPES[dtype_name]
    if dtype.is_float:
        x, y = as_f64(a), as_f64(b)
        with np.errstate(invalid="ignore"):
            val = predicate.numpy(x, y)
            apart = np.abs(x - y) > a.err + b.err  # False on NaN: then undetermined
        inexact = (a.err > 0) | (b.err > 0)
        err = np.where(inexact & ~apart, INF, 0.0)
        return Tracked(val, err)
    x, y = a.val.astype(np.int64), b.val.astype(np.int64)
    if dtype.is_bool and not predicate.unsigned:
        x, y = -x, -y  # a signed i1 that is set is -1
    if predicate.unsigned:
        x, y = x % (1 << dtype.bits), y % (1 << dtype.bits)
    return Tracked(predicate.numpy(x, y), undetermined([a, b]))


def cast(a: Tracked, source: DType, target: DType, how: str = "astype") -> Tracked:
    """`astype` (numpy's meaning; int -> float rounds once, as arith.sitofp), or the .mlir
    conversions of `Cast.how`."""
    if how == "bitcast":
        val = a.val.view(target.numpy)
        unknown = a.err > 0  # inexact values have unknown bits
        if source.is_float:  # and so do NaNs (their payload is not specified)
            unknown |= np.isnan(as_f64(a))
        return Tracked(val, np.where(unknown, INF, 0.0))
    if how == "bits":
        return _cast_bits(a, source, target)
    if how == "unsigned" and source.is_int:
        unsigned = a.val.astype(np.int64) % (1 << source.bits)
        if target.is_float:
            exact = unsigned.astype(np.float64)
            return Tracked(round_to(exact, target), np.where(a.err > 0, INF, 0.0))
        return Tracked(wrap(unsigned, target.bits).astype(target.numpy), a.err)
    if how == "unsigned":  # fptoui: toward zero, poison outside [0, 2^bits)
        x = as_f64(a)
        with np.errstate(invalid="ignore"):
            low, high = np.trunc(x - a.err), np.trunc(x + a.err)
            bad = ~np.isfinite(x) | (low < 0) | (high >= 2.0 ** target.bits) | (low != high)
            val = np.where(bad, 0, np.trunc(np.where(np.isfinite(x), x, 0))).astype(np.int64)
        return Tracked(wrap(val, target.bits).astype(target.numpy), np.where(bad, INF, 0.0))
    if target.is_bool:
        if source.is_float:
            x = as_f64(a)
            val = x != 0
            return Tracked(val, np.where((a.err > 0) & (np.abs(x) <= a.err), INF, 0.0))
        return Tracked(a.val != 0, a.err)
    if source.is_bool:
        return Tracked(a.val.astype(target.numpy), a.err)
    if target.is_float:
        exact = a.val.astype(np.float64)
        if not target.computes:  # to fp8: saturating (.satfinite), NaN stays NaN
            exact = np.where(np.isnan(exact), exact, np.clip(exact, -target.max_finite,
                                                             target.max_finite))
        val = round_to(exact, target)
        err = np.where(a.err > 0, a.err + ulp(np.abs(exact) + a.err, target), 0.0)
        return settle(val, err, exact, target)
    if source.is_float:  # fptosi: toward zero; NaN and out of range are poison in MLIR
        x = as_f64(a)
        with np.errstate(invalid="ignore"):
            low, high = np.trunc(x - a.err), np.trunc(x + a.err)
            limit = float(1 << (target.bits - 1))
            bad = ~np.isfinite(x) | (low < -limit) | (high > limit - 1) | (low != high)
            val = np.where(bad, 0, np.trunc(np.where(np.isfinite(x), x, 0))).astype(np.int64)
        return Tracked(val.astype(target.numpy), np.where(bad, INF, 0.0))
    return Tracked(wrap(a.val.astype(np.int64), target.bits).astype(target.numpy), a.err)


def _cast_bits(a: Tracked, source: DType, target: DType) -> Tracked:
    """i1 as a one-bit integer: to i1 keeps the lowest bit (fptosi to i1: poison unless the
    value is 0 or -1); from i1, a set bit is -1 (extsi, sitofp)."""
    if source.is_bool:
        val = np.where(a.val, -1, 0)
        return Tracked(val.astype(target.numpy), a.err)
    if source.is_int:
        return Tracked((a.val.astype(np.int64) & 1).astype(bool), a.err)
    x = as_f64(a)
    with np.errstate(invalid="ignore"):
        whole = np.trunc(x)
        bad = ~np.isin(whole, (0.0, -1.0)) | (np.trunc(x - a.err) != np.trunc(x + a.err))
    return Tracked(whole == -1.0, np.where(bad, INF, 0.0))


def reduce(kind: str, a: Tracked, axis: int, acc: Tracked | None, dtype: DType) -> Tracked:
    reduction = REDUCTIONS[kind]
    if not dtype.is_float:  # exact, wrapping (int64 products wrap modulo 2^64 too)
        ints = a.val.astype(np.int64)
        if reduction.unsigned:
            ints = ints % (1 << dtype.bits)
        with np.errstate(over="ignore"):
            val = reduction.combine.reduce(ints, axis=axis)
            err = np.where(a.err.max(axis=axis) > 0, INF, 0.0)
            if acc is not None:
                other = acc.val.astype(np.int64)
                if reduction.unsigned:
                    other = other % (1 << dtype.bits)
                val = reduction.combine(val, other)
                err = np.where(acc.err > 0, INF, err)
        return Tracked(wrap(val, dtype.bits).astype(dtype.numpy), err)
    x = as_f64(a)
    if kind != "sum":  # max, min (NaN propagates), nanmax, nanmin (NaN ignored): exact
        val, err = reduction.combine.reduce(x, axis=axis), a.err.max(axis=axis)
        if acc is None:  # .mlir always combines an accumulator: the identity (an all-NaN
            val = reduction.combine(val, reduction.float_identity)  # nanmax row gives -inf)
        if acc is not None:
            val, err = reduction.combine(val, as_f64(acc)), np.maximum(err, acc.err)
        err = np.where(np.isnan(val) & (err > 0), INF, err)
        return Tracked(round_to(val, dtype), err)
    errs = a.err.sum(axis=axis)
    finite = np.isfinite(x)
    magnitude = np.abs(np.where(finite, x, 0.0)).sum(axis=axis)  # of the finite terms
    n = x.shape[axis]
    with np.errstate(invalid="ignore"):
        exact = x.sum(axis=axis)
        if acc is not None:
            y = as_f64(acc)
            exact = exact + y
            errs = errs + acc.err
            magnitude = magnitude + np.abs(np.where(np.isfinite(y), y, 0.0))
            n += 1
    levels = math.ceil(math.log2(n)) + SUM_EXTRA_LEVELS
    bound = errs + levels * unit_roundoff(dtype) * magnitude * 1.01
    val = round_to(exact, dtype)
    bound = bound + ulp(np.abs(exact) + bound, dtype)
    # partial sums may overflow where the total does not (and meet an infinite term)
    overflow = magnitude * (1 + levels * unit_roundoff(dtype)) >= dtype.max_finite
    bound = np.where(overflow, INF, bound)
    # inf and NaN terms make the result order-independent, unless partial sums overflow
    bound = np.where(~np.isfinite(exact) & (errs == 0) & ~overflow, 0.0, bound)
    return settle(val, bound, exact, dtype)


__all__ = ["apply", "cast", "compare", "flushed", "reduce", "run_reference"]
