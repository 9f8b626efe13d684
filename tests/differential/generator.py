"""Seeded random programs: `generate(kind, seed)` is deterministic in (kind, seed).

A program is built action by action, each adding statements that use values already in
scope: loads of windows (at offsets, per block, per loop trip), elementwise ops of the op
table, comparisons and selects, casts, reductions and the broadcast-back pattern
(`x - x.max(axis=1)[:, None]`), softmax rows, broadcasts, transposes, shape casts, static
slices and inserts, iotas, layout casts, loops with carried values, and shared-memory round
trips. Every value no other statement uses is stored into an output of its own, some
behind a `When` on the block id. .mlir programs draw from every op; DSL programs only from
what the DSL can write.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from tests.differential.dtypes import ARGUMENT_DTYPES, DTYPES, FLOATS, FP8, INTS
from tests.differential.ops import COMPARISONS, ELEMENTWISE, LAYOUTS, REDUCTIONS, Elementwise
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
    Ref,
    Reshape,
    Select,
    Slice,
    SmemRoundTrip,
    Statement,
    Store,
    Transpose,
    VType,
    When,
    operands,
    results,
)
from tests.differential.typecheck import _castable, value_types

SHAPES_2D = [((64, 16), 2), ((64, 128), 3), ((128, 128), 2), ((256, 64), 1), ((128, 64), 2),
             ((64, 64), 2), ((64, 32), 1), ((128, 32), 1), ((8, 128), 0.5), ((16, 64), 0.5),
             ((192, 64), 0.5), ((64, 256), 0.5), ((64, 48), 0.5), ((128, 8), 0.5),
             ((32, 128), 0.5), ((64, 24), 0.3)]
SHAPES_1D = [((128,), 3), ((256,), 2), ((64,), 1), ((512,), 1), ((1024,), 0.5), ((192,), 0.3),
             ((384,), 0.3)]
GRIDS = [((1,), 3), ((2,), 3), ((3,), 1), ((4,), 2), ((2, 2), 1), ((1, 2), 1)]
FLOAT_CONSTANTS = [0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 3.0, 0.25, 1.5, -2.0, 10.0, 100.0, 0.125,
                   -0.0, math.inf, -math.inf, math.nan]
INT_CONSTANTS = [0, 1, -1, 2, 3, 7, 31, 100, -100, 255, 4096]
MAX_VALUES = 40  # statements per program, roughly


@dataclass
class Scope:
    """The values visible where statements are being added, and where they go."""

    values: list[tuple[str, VType]]
    body: list[Statement]
    counters: list[tuple[str, int]] = field(default_factory=list)  # (name, largest value)
    depth: int = 0


class Generator:
    def __init__(self, kind: str, seed: int) -> None:
        self.kind, self.seed = kind, seed
        self.rng = random.Random(f"smalti-differential:{kind}:{seed}")
        self.grid = self.pick(GRIDS)
        self.blocks = math.prod(self.grid)
        self.count = 0
        self.inputs: dict[str, tuple[str, list[int]]] = {}  # ref -> (dtype, extents)
        self.outputs: list[Ref] = []
        self.slots = 0
        self.statements = 0
        self.prints = 0
        # .mlir: sometimes a scalar i32 argument that windows are offset by
        self.dynamic = self.rng.randint(0, 9) if kind == "mlir" and self.chance(0.25) else None

    # -- choices -----------------------------------------------------------------------------
    def pick(self, weighted):
        items, weights = zip(*weighted, strict=True)
        return self.rng.choices(items, weights)[0]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def add(self, scope: Scope, statement: Statement) -> None:
        scope.body.append(statement)
        self.statements += 1

    def define(self, scope: Scope, statement: Statement, vtype: VType) -> str:
        self.add(scope, statement)
        (name,) = results(statement)
        scope.values.append((name, vtype))
        return name

    def float_dtype(self) -> str:
        return self.pick([("f32", 6), ("bf16", 3), ("f16", 2)])

    def any_dtype(self) -> str:
        """A type arithmetic is done in."""
        return self.pick([("f32", 6), ("bf16", 3), ("f16", 2), ("i32", 3), ("i16", 0.5)])

    def computes(self, vtype: VType) -> bool:
        return DTYPES[vtype.dtype].computes and not DTYPES[vtype.dtype].is_bool

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        rank = rank or self.pick([(2, 3), (1, 1)])
        return self.pick(SHAPES_2D if rank == 2 else SHAPES_1D)

    # -- values ------------------------------------------------------------------------------
    def existing(self, scope: Scope, want) -> str | None:
        """A value in scope whose type satisfies `want`, recent ones likelier."""
        matches = [name for name, vtype in scope.values if want(vtype)]
        if not matches:
            return None
        k = len(matches)
        return matches[min(int(k * (1 - self.rng.random() ** 2)), k - 1)]

    def value(self, scope: Scope, vtype: VType) -> str:
        """A value of exactly `vtype`: one in scope, or a new load, constant or cast."""
        found = self.existing(scope, lambda t: t == vtype)
        if found is not None and self.chance(0.8):
            return found
        dtype = DTYPES[vtype.dtype]
        if vtype.dtype in ARGUMENT_DTYPES[self.kind] and self.chance(0.8):
            return self.load(scope, vtype)
        if not dtype.computes:  # fp8: converted from f32
            source = self.value(scope, VType(vtype.shape, "f32"))
            return self.define(scope, Cast(self.fresh(), source, vtype.dtype), vtype)
        if dtype.is_bool:
            source = self.value(scope, VType(vtype.shape, self.any_dtype()))
            return self.compare(scope, source)
        if self.chance(0.3):
            return self.constant(scope, vtype)
        source_dtype = "i32" if vtype.dtype in ("f32", "i16") else "f32"
        source = self.value(scope, VType(vtype.shape, source_dtype))
        return self.define(scope, Cast(self.fresh(), source, vtype.dtype), vtype)

    def constant(self, scope: Scope, vtype: VType, value=None) -> str:
        dtype = DTYPES[vtype.dtype]
        if value is None:
            if dtype.is_bool:
                value = self.chance(0.5)
            elif dtype.is_int:
                value = self.rng.choice(INT_CONSTANTS)
            else:
                value = self.rng.choice(FLOAT_CONSTANTS[:-3] if self.chance(0.9)
                                        else FLOAT_CONSTANTS)
        literal = self.kind == "dsl" and self.chance(0.6)
        return self.define(scope, Const(self.fresh("k"), vtype, value, literal), vtype)

    def load(self, scope: Scope, vtype: VType) -> str:
        rank = len(vtype.shape)
        reusable = [name for name, (dtype, extents) in self.inputs.items()
                    if dtype == vtype.dtype and len(extents) == rank]
        if reusable and self.chance(0.3):
            ref = self.rng.choice(reusable)
        else:
            ref = f"in{len(self.inputs)}"
            self.inputs[ref] = (vtype.dtype, [0] * rank)
        starts = []
        block_dim = self.rng.randrange(rank)
        counter_dim = self.rng.randrange(rank)
        for d, size in enumerate(vtype.shape):
            const = self.pick([(0, 6), (size, 1), (self.rng.randint(1, 9), 1), (8, 1),
                               (self.rng.randint(1, 3) * 64, 1)])
            block = size if d == block_dim and self.blocks > 1 and self.chance(0.7) else 0
            if block and self.chance(0.2):
                block = self.rng.choice([1, 8, size // 2])
            if block and self.chance(0.15):  # the blocks in reverse order
                const, block = const + block * (self.blocks - 1), -block
            counters = ()
            if scope.counters and d == counter_dim and self.chance(0.7):
                name, _ = self.rng.choice(scope.counters)
                counters = ((name, self.rng.choice([size, size, 8, 1])),)
            dynamic = self.rng.choice([1, 1, 8]) if self.dynamic is not None and self.chance(
                0.4) else 0
            starts.append(Affine(const, block, counters, dynamic))
        extents = self.inputs[ref][1]
        for d, (start, size) in enumerate(zip(starts, vtype.shape, strict=True)):
            largest = start.const + max(0, start.block * (self.blocks - 1)) + sum(
                c * dict(scope.counters)[n] for n, c in start.counters) + start.dynamic * (
                self.dynamic or 0)
            extents[d] = max(extents[d], largest + size)
        return self.define(scope, Load(self.fresh(), ref, tuple(starts), vtype), vtype)

    # -- actions -----------------------------------------------------------------------------
    def elementwise(self, scope: Scope, vtype: VType | None = None) -> str:
        if vtype is None:
            source = self.existing(scope, lambda t: DTYPES[t.dtype].computes)
            vtype = dict(scope.values)[source] if source and self.chance(0.7) else VType(
                self.shape(), self.any_dtype())
        kind = DTYPES[vtype.dtype].kind
        ops = [op for op in ELEMENTWISE.values() if op.kind == kind and self.allowed(op)]
        op = self.rng.choices(ops, [o.weight for o in ops])[0]
        args = [self.value(scope, vtype) for _ in range(op.arity)]
        if op.arity == 2 and self.chance(0.3):
            args[1] = self.operand_constant(scope, op, vtype)
        args[0] = self.guard(scope, op, args[0], vtype)
        if op.domain == "divisor" and self.chance(0.7):
            args[1] = self.guard(scope, ELEMENTWISE["sqrt"], args[1], vtype)
        return self.define(scope, Apply(self.fresh(), op.name, tuple(args)), vtype)

    def allowed(self, op: Elementwise) -> bool:
        return (op.dsl if self.kind == "dsl" else op.mlir) is not None

    def operand_constant(self, scope: Scope, op: Elementwise, vtype: VType) -> str:
        if op.name in ("shli", "shrsi", "shrui"):
            bits = DTYPES[vtype.dtype].bits
            return self.constant(scope, vtype, self.rng.randrange(bits))
        return self.constant(scope, vtype)

    def guard(self, scope: Scope, op: Elementwise, value: str, vtype: VType) -> str:
        """Keep an operand in the op's domain, most of the time: |x| + 0.5 for log/sqrt,
        x / 4 for exp."""
        if not op.domain or op.domain == "divisor" or not self.chance(0.7):
            return value
        if op.domain == "small":
            quarter = self.constant(scope, vtype, 0.25)
            return self.define(scope, Apply(self.fresh(), "mulf", (value, quarter)), vtype)
        magnitude = self.define(scope, Apply(self.fresh(), "absf", (value,)), vtype)
        half = self.constant(scope, vtype, 0.5)
        return self.define(scope, Apply(self.fresh(), "addf", (magnitude, half)), vtype)

    def compare(self, scope: Scope, source: str | None = None) -> str:
        if source is None:
            source = self.value(scope, VType(self.shape(), self.any_dtype()))
        vtype = dict(scope.values)[source]
        if DTYPES[vtype.dtype].is_bool and self.kind == "dsl":  # the DSL compares no bools
            vtype = VType(vtype.shape, "i32")
            source = self.define(scope, Cast(self.fresh(), source, "i32"), vtype)
        if not DTYPES[vtype.dtype].computes:  # fp8 compares after extf
            vtype = VType(vtype.shape, "f32")
            source = self.define(scope, Cast(self.fresh(), source, "f32"), vtype)
        kind = DTYPES[vtype.dtype].kind
        predicates = [p for p in COMPARISONS.values() if p.kind == kind
                      and (p.dsl is not None or self.kind == "mlir")]
        predicate = self.rng.choice(predicates)
        other = (self.constant(scope, vtype) if self.chance(0.4)
                 else self.value(scope, vtype))
        return self.define(scope, Compare(self.fresh(), predicate.name, source, other),
                           VType(vtype.shape, "i1"))

    def select(self, scope: Scope) -> str:
        vtype = VType(self.shape(), self.any_dtype())
        source = self.existing(scope, lambda t: self.kind == "mlir" or not DTYPES[t.dtype].is_bool)
        if source is not None and self.chance(0.7):
            vtype = dict(scope.values)[source]
        condition = self.existing(scope, lambda t: t == VType(vtype.shape, "i1"))
        if condition is None or self.chance(0.3):
            condition = self.compare(scope, self.value(scope, VType(vtype.shape,
                                                                    self.any_dtype())))
        true, false = self.value(scope, vtype), self.value(scope, vtype)
        if self.chance(0.3) and DTYPES[vtype.dtype].computes:
            false = self.constant(scope, vtype)
        return self.define(scope, Select(self.fresh(), condition, true, false), vtype)

    def cast(self, scope: Scope) -> str:
        source = self.existing(scope, lambda t: True)
        vtype = dict(scope.values)[source] if source else VType(self.shape(), "f32")
        if source is None:
            source = self.value(scope, vtype)
        current = DTYPES[vtype.dtype]
        how = "astype"
        if self.kind == "mlir" and self.chance(0.35):
            how = self.rng.choice(["unsigned", "bits", "bitcast"])
        targets = [d for d in (*FLOATS, *FP8, *INTS, "i1")
                   if _castable(current, DTYPES[d], how)]
        if not targets:
            how = "astype"
            targets = [d for d in (*FLOATS, *FP8, *INTS, "i1")
                       if _castable(current, DTYPES[d], how)]
        target = self.rng.choice(targets)
        return self.define(scope, Cast(self.fresh(), source, target, how),
                           VType(vtype.shape, target))

    def numeric_2d(self, scope: Scope) -> tuple[str, VType]:
        source = self.existing(scope, lambda t: len(t.shape) == 2 and self.computes(t))
        if source is None or self.chance(0.3):
            vtype = VType(self.shape(2), self.pick([("f32", 4), ("bf16", 2), ("f16", 1),
                                                    ("i32", 2)]))
            source = self.value(scope, vtype)
        return source, dict(scope.values)[source]

    def reduce(self, scope: Scope, broadcast_back: bool = False) -> str:
        source, vtype = self.numeric_2d(scope)
        axis = self.rng.randrange(2)
        is_float = DTYPES[vtype.dtype].is_float
        kind = self.rng.choice([r.name for r in REDUCTIONS.values()
                                if (r.mlir_float if is_float else r.mlir_int) is not None
                                and (self.kind == "mlir" or r.dsl)
                                and (r.dsl or self.chance(0.3))])
        out = VType(tuple(d for i, d in enumerate(vtype.shape) if i != axis), vtype.dtype)
        acc = None
        if self.kind == "mlir" and self.chance(0.2):
            acc = self.value(scope, out)
        reduced = self.define(scope, Reduce(self.fresh(), kind, source, axis, acc,
                                            self.rng.randrange(3)), out)
        if not broadcast_back:
            return reduced
        spread = self.define(scope, Broadcast(self.fresh(), reduced, vtype.shape, 1 - axis,
                                              self.rng.randrange(2)), vtype)
        op = "subf" if DTYPES[vtype.dtype].is_float else "subi"
        if self.chance(0.3):
            op = self.rng.choice(["addf", "mulf", "divf"] if DTYPES[vtype.dtype].is_float
                                 else ["addi", "maxsi"])
        return self.define(scope, Apply(self.fresh(), op, (source, spread)), vtype)

    def softmax(self, scope: Scope) -> str:
        """exp(x - max(x)) / sum(...) along one axis, in a float type."""
        vtype = VType(self.shape(2), self.float_dtype())
        x = self.value(scope, vtype)
        axis = self.rng.randrange(2)
        out = VType((vtype.shape[1 - axis],), vtype.dtype)
        peak = self.define(scope, Reduce(self.fresh(), "max", x, axis, None,
                                         self.rng.randrange(3)), out)
        wide = self.define(scope, Broadcast(self.fresh(), peak, vtype.shape, 1 - axis,
                                            self.rng.randrange(2)), vtype)
        shifted = self.define(scope, Apply(self.fresh(), "subf", (x, wide)), vtype)
        e = self.define(scope, Apply(self.fresh(), "exp", (shifted,)), vtype)
        total = self.define(scope, Reduce(self.fresh(), "sum", e, axis, None,
                                          self.rng.randrange(3)), out)
        spread = self.define(scope, Broadcast(self.fresh(), total, vtype.shape, 1 - axis,
                                              self.rng.randrange(2)), vtype)
        return self.define(scope, Apply(self.fresh(), "divf", (e, spread)), vtype)

    def broadcast(self, scope: Scope) -> str:
        source = self.existing(scope, lambda t: len(t.shape) == 1)
        if source is None:
            source = self.value(scope, VType(self.shape(1), self.any_dtype()))
        (length,) = dict(scope.values)[source].shape
        dtype = dict(scope.values)[source].dtype
        other = self.rng.choice([16, 64, 128] if length <= 256 else [16, 64])
        dim = self.rng.randrange(2)
        shape = (length, other) if dim == 0 else (other, length)
        return self.define(scope, Broadcast(self.fresh(), source, shape, dim,
                                            self.rng.randrange(2)), VType(shape, dtype))

    def transpose(self, scope: Scope, source: str | None = None) -> str:
        if source is None or len(dict(scope.values)[source].shape) != 2:
            source = self.existing(scope, lambda t: len(t.shape) == 2)
        if source is None:
            source = self.value(scope, VType(self.shape(2), self.any_dtype()))
        vtype = dict(scope.values)[source]
        return self.define(scope, Transpose(self.fresh(), source),
                           VType(vtype.shape[::-1], vtype.dtype))

    def reshape(self, scope: Scope) -> str:
        source = self.existing(scope, lambda t: True) or self.value(
            scope, VType(self.shape(), self.any_dtype()))
        vtype = dict(scope.values)[source]
        size = math.prod(vtype.shape)
        shapes = [s for s, _ in SHAPES_2D + SHAPES_1D if math.prod(s) == size and s != vtype.shape]
        shapes += [(size,)] if len(vtype.shape) == 2 else []
        shapes += [(size // 64, 64)] if size % 64 == 0 and size > 64 and len(vtype.shape) == 1 \
            else []
        shapes = [s for s in shapes if s != vtype.shape]
        if not shapes:
            return self.transpose(scope) if len(vtype.shape) == 2 else self.elementwise(scope)
        shape = self.rng.choice(shapes)
        return self.define(scope, Reshape(self.fresh(), source, shape), VType(shape, vtype.dtype))

    def sub_shape(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(offsets, sizes) of a static slice: whole tiles mostly, sometimes not."""
        for _ in range(100):
            offsets, sizes = [], []
            for d in shape:
                choices = [c for c in (8, 16, 32, 64, 128) if c <= d] or [d]
                size = self.rng.choice(choices)
                if self.chance(0.9):
                    offset = self.rng.randrange(d // size) * size
                else:
                    offset = self.rng.randrange(d - size + 1)
                offsets.append(offset)
                sizes.append(size)
            if tuple(sizes) != shape and math.prod(sizes) >= 128:
                return tuple(offsets), tuple(sizes)
        half = (shape[0] // 2, *shape[1:])
        return (0,) * len(shape), half

    def slice(self, scope: Scope, source: str | None = None) -> str:
        if source is None or math.prod(dict(scope.values)[source].shape) < 256:
            source = self.existing(scope, lambda t: math.prod(t.shape) >= 256)
        if source is None:
            source = self.value(scope, VType(self.shape(), self.any_dtype()))
        vtype = dict(scope.values)[source]
        offsets, sizes = self.sub_shape(vtype.shape)
        return self.define(scope, Slice(self.fresh(), source, offsets, sizes),
                           VType(sizes, vtype.dtype))

    def insert(self, scope: Scope) -> str:
        big = self.existing(scope, lambda t: math.prod(t.shape) >= 256) or self.value(
            scope, VType(self.shape(), self.any_dtype()))
        vtype = dict(scope.values)[big]
        offsets, sizes = self.sub_shape(vtype.shape)
        small = self.value(scope, VType(sizes, vtype.dtype))
        return self.define(scope, Insert(self.fresh(), small, big, offsets), vtype)

    def iota(self, scope: Scope) -> str:
        shape = self.shape()
        vtype = VType(shape, "i32")
        value = self.define(scope, Iota(self.fresh(), vtype, self.rng.randrange(len(shape))),
                            vtype)
        if self.chance(0.5):
            target = self.float_dtype()
            value = self.define(scope, Cast(self.fresh(), value, target), VType(shape, target))
        return value

    def layout_cast(self, scope: Scope, source: str | None = None) -> str:
        if source is None:
            source = self.existing(scope, lambda t: any(c.fits(t.shape)
                                                        for c in LAYOUTS.values()))
        if source is None:
            source = self.value(scope, VType(self.shape(), self.any_dtype()))
        vtype = dict(scope.values)[source]
        choices = [c.name for c in LAYOUTS.values() if c.fits(vtype.shape)]
        if not choices:
            return self.elementwise(scope)
        return self.define(scope, LayoutCast(self.fresh(), source, self.rng.choice(choices)),
                           vtype)

    def round_trip(self, scope: Scope, source: str | None = None) -> str:
        if source is None:
            source = self.existing(scope, lambda t: self.kind == "mlir"
                                   or not DTYPES[t.dtype].is_bool)
        if source is None:
            source = self.value(scope, VType(self.shape(), self.float_dtype()))
        vtype = dict(scope.values)[source]
        if self.slots and self.chance(0.4):
            slot = self.rng.randrange(self.slots)
        else:
            slot, self.slots = self.slots, self.slots + 1
        return self.define(scope, SmemRoundTrip(self.fresh(), source, slot), vtype)

    def loop(self, scope: Scope) -> None:
        if scope.depth >= 2:
            self.elementwise(scope)
            return
        carried_count = self.pick([(1, 3), (2, 2)])
        inits = []
        for _ in range(carried_count):
            source = self.existing(scope, lambda t: DTYPES[t.dtype].computes)
            if source is None or self.chance(0.3):
                source = self.value(scope, VType(self.shape(), self.any_dtype()))
            inits.append(source)
        types = [dict(scope.values)[v] for v in inits]
        counter = self.fresh("i")
        lower, step = self.pick([(0, 6), (1, 1), (2, 1)]), self.pick([(1, 6), (2, 1), (3, 1)])
        upper = Affine(self.rng.randint(0, 3) + lower,
                       1 if self.blocks > 1 and self.chance(0.3) else 0)
        shape_of_loop = Loop((), counter, upper, (), (), (), (), lower, step)
        largest = shape_of_loop.largest_counter(self.blocks)
        carried = tuple(self.fresh("c") for _ in inits)
        inner = Scope(list(scope.values) + list(zip(carried, types, strict=True)), [],
                      [*scope.counters, (counter, largest)], scope.depth + 1)
        for _ in range(self.rng.randint(1, 4)):
            self.action(inner, nested=True)
        if scope.depth == 0 and shape_of_loop.counter_values(self.blocks - 1) \
                and self.chance(0.3):
            self.store_per_trip(inner, counter, largest + 1)
        yields = []
        for name, vtype in zip(carried, types, strict=True):
            defined = [v for v, t in inner.values[len(scope.values):] if t == vtype]
            if not defined or self.chance(0.2):
                yields.append(self.elementwise_on(inner, name, vtype))
            else:
                yields.append(defined[-1])
        outs = tuple(self.fresh() for _ in inits)
        self.add(scope, Loop(outs, counter, upper, tuple(inits), carried, tuple(inner.body),
                             tuple(yields), lower, step))
        scope.values.extend(zip(outs, types, strict=True))

    def elementwise_on(self, scope: Scope, value: str, vtype: VType) -> str:
        """A binary op of `value` with another value of its type (so loops carry changes)."""
        if not DTYPES[vtype.dtype].computes:  # fp8: a select of it and another value
            condition = self.compare(scope, self.value(scope, VType(vtype.shape, "f32")))
            other = self.value(scope, vtype)
            return self.define(scope, Select(self.fresh(), condition, value, other), vtype)
        kind = DTYPES[vtype.dtype].kind
        op = {"float": "addf", "int": "addi", "bool": "xor"}[kind]
        if kind == "float" and self.chance(0.5):
            op = self.rng.choice(["mulf", "maximumf", "subf"])
        other = self.value(scope, vtype)
        return self.define(scope, Apply(self.fresh(), op, (value, other)), vtype)

    def branch(self, scope: Scope) -> None:
        """scf.if with results: each branch computes a value of one type from values in
        scope."""
        source = self.existing(scope, lambda t: True) or self.value(
            scope, VType(self.shape(), self.any_dtype()))
        vtype = dict(scope.values)[source]
        branches = []
        for _ in range(2):
            inner = Scope(list(scope.values), [], list(scope.counters), scope.depth + 1)
            if self.chance(0.8):
                result = self.elementwise_on(inner, self.value(inner, vtype), vtype)
            else:
                result = self.value(inner, vtype)
            branches.append((tuple(inner.body), result))
        (then, then_value), (otherwise, otherwise_value) = branches
        out = self.fresh()
        cutoff = self.rng.randint(1, max(self.blocks - 1, 1))
        self.add(scope, When(cutoff, then, otherwise, (out,), (then_value,), (otherwise_value,)))
        scope.values.append((out, vtype))

    def block_select(self, scope: Scope) -> str:
        """One of two whole values, by a uniform condition on the block (.mlir)."""
        source = self.existing(scope, lambda t: True) or self.value(
            scope, VType(self.shape(), self.any_dtype()))
        vtype = dict(scope.values)[source]
        other = self.value(scope, vtype)
        cutoff = self.rng.randint(1, max(self.blocks - 1, 1))
        return self.define(scope, BlockSelect(self.fresh(), cutoff, source, other), vtype)

    def relayouts(self, scope: Scope) -> str:
        """A value cast to two or three layouts in turn, with elementwise ops between:
        relayouts by register moves and shuffles (within warps; others are refused)."""
        value = self.existing(scope, lambda t: len(t.shape) == 2 and t.shape[0] % 64 == 0)
        if value is None:
            value = self.value(scope, VType(self.pick([((64, 128), 1), ((128, 64), 1),
                                                        ((64, 32), 1)]),
                                            self.pick([("f32", 2), ("bf16", 2), ("f16", 1),
                                                       ("i32", 1), ("f8E4M3FN", 1)])))
        for _ in range(self.rng.randint(2, 3)):
            value = self.layout_cast(scope, value)
            vtype = dict(scope.values)[value]
            if self.chance(0.5) and self.computes(vtype):
                value = self.elementwise_on(scope, value, vtype)
        return value

    def print(self, scope: Scope) -> None:
        """A debug_print of a value in scope (its text is checked against the reference)."""
        source = self.existing(scope, lambda t: True) or self.value(
            scope, VType(self.shape(), self.any_dtype()))
        self.prints += 1
        self.add(scope, Print(source, self.prints))

    def barrier(self, scope: Scope) -> str:
        source = self.existing(scope, lambda t: True) or self.value(
            scope, VType(self.shape(), self.any_dtype()))
        return self.define(scope, Barrier(self.fresh(), source), dict(scope.values)[source])

    def fp8(self, scope: Scope) -> str:
        """A float value through fp8 and back (saturating, rounding), or fp8 data moved."""
        vtype = VType(self.shape(), self.rng.choice(FP8))
        value = self.value(scope, vtype)
        if self.chance(0.5):
            mover = self.rng.choice([self.transpose, self.round_trip, self.layout_cast,
                                     self.slice])
            value = mover(scope, value)
            vtype = dict(scope.values)[value]
        wide = VType(vtype.shape, self.float_dtype())
        if self.chance(0.6) and _castable(DTYPES[vtype.dtype], DTYPES[wide.dtype], "astype"):
            value = self.define(scope, Cast(self.fresh(), value, wide.dtype), wide)
        return value

    ACTIONS = [("load", 2), ("elementwise", 8), ("compare", 1.5), ("select", 1.5),
               ("cast", 2), ("reduce", 2), ("broadcast_back", 2), ("softmax", 0.7),
               ("broadcast", 1), ("transpose", 1.5), ("reshape", 1), ("slice", 1.5),
               ("insert", 0.7), ("iota", 0.7), ("layout_cast", 1.5), ("round_trip", 1),
               ("loop", 1.2), ("branch", 0.8), ("barrier", 0.3), ("fp8", 0.8),
               ("folding", 0.6), ("block_select", 0.5), ("relayouts", 0.8), ("print", 0.6)]
    MLIR_ONLY_ACTIONS = {"reshape", "insert", "branch", "barrier", "block_select"}

    def action(self, scope: Scope, nested: bool = False) -> None:
        actions = [(a, w) for a, w in self.ACTIONS
                   if self.kind == "mlir" or a not in self.MLIR_ONLY_ACTIONS]
        name = self.pick(actions)
        match name:
            case "load":
                self.load(scope, VType(self.shape(), self.pick(
                    [(d, 3 if d == "f32" else 1) for d in ARGUMENT_DTYPES[self.kind]])))
            case "broadcast_back":
                self.reduce(scope, broadcast_back=True)
            case "loop":
                self.loop(scope)
            case _:
                getattr(self, name)(scope)

    # -- outputs -----------------------------------------------------------------------------
    def store(self, scope: Scope, value: str, vtype: VType) -> None:
        """Store `value` (converted to an argument dtype) into an output of its own, in the
        block's window, sometimes behind a When with another value in the other branch."""
        value, vtype = self.storable(scope, value, vtype)
        rank = len(vtype.shape)
        block_dim, offset_dim = self.rng.randrange(rank), self.rng.randrange(rank)
        offset = self.pick([(0, 8), (self.rng.randint(1, 7), 1), (8, 1)])
        starts = tuple(Affine(offset if i == offset_dim else 0, d if i == block_dim else 0)
                       for i, d in enumerate(vtype.shape))
        shape = tuple(a.const + d * (self.blocks if i == block_dim else 1)
                      for i, (a, d) in enumerate(zip(starts, vtype.shape, strict=True)))
        ref = Ref(f"out{len(self.outputs)}", shape, vtype.dtype, output=True)
        self.outputs.append(ref)
        if self.chance(0.2):
            branch = Scope(list(scope.values), [], [], scope.depth + 1)
            other = self.elementwise_on(branch, value, vtype)
            cutoff = self.rng.randint(1, max(self.blocks - 1, 1))
            then, otherwise = [Store(value, ref.name, starts)], [*branch.body,
                                                                 Store(other, ref.name, starts)]
            if self.chance(0.5):
                then, otherwise = otherwise, then
            self.add(scope, When(cutoff, tuple(then), tuple(otherwise)))
        else:
            self.add(scope, Store(value, ref.name, starts))

    def store_per_trip(self, scope: Scope, counter: str, trips: int) -> None:
        """In a loop body: store a value of the body into an output of its own, one window
        per counter value below `trips` (and per block)."""
        defined = [(n, t) for n, t in scope.values if n.startswith(("v", "c"))][-6:]
        if not defined:
            return
        value, vtype = self.storable(scope, *self.rng.choice(defined))
        dim = self.rng.randrange(len(vtype.shape))
        size = vtype.shape[dim]
        block = trips * size if self.blocks > 1 else 0
        starts = tuple(Affine(0, block, ((counter, size),)) if i == dim else Affine()
                       for i in range(len(vtype.shape)))
        shape = tuple(d * trips * self.blocks if i == dim else d
                      for i, d in enumerate(vtype.shape))
        ref = Ref(f"out{len(self.outputs)}", shape, vtype.dtype, output=True)
        self.outputs.append(ref)
        self.add(scope, Store(value, ref.name, starts))

    def folding(self, scope: Scope) -> str:
        """An expression over constants and iotas only, which canonicalization folds (or
        does not) before anything runs."""
        vtype = VType(self.shape(), self.any_dtype())
        leaves = []
        for _ in range(2):
            if self.chance(0.3):
                iota = VType(vtype.shape, "i32")
                leaf = self.define(scope, Iota(self.fresh(), iota,
                                               self.rng.randrange(len(vtype.shape))), iota)
                if vtype.dtype != "i32":
                    leaf = self.define(scope, Cast(self.fresh(), leaf, vtype.dtype), vtype)
            else:
                leaf = self.constant(scope, vtype)
            leaves.append(leaf)
        kind = DTYPES[vtype.dtype].kind
        ops = [op for op in ELEMENTWISE.values() if op.kind == kind and op.arity == 2
               and self.allowed(op)]
        op = self.rng.choices(ops, [o.weight for o in ops])[0]
        value = self.define(scope, Apply(self.fresh(), op.name, tuple(leaves)), vtype)
        if self.kind == "mlir" and math.prod(vtype.shape) >= 256 and self.chance(0.4):
            offsets, sizes = self.sub_shape(vtype.shape)
            small = self.constant(scope, VType(sizes, vtype.dtype))
            value = self.define(scope, Insert(self.fresh(), small, value, offsets), vtype)
        return value

    def storable(self, scope: Scope, value: str, vtype: VType) -> tuple[str, VType]:
        if vtype.dtype in ARGUMENT_DTYPES[self.kind] and not (vtype.dtype == "i1"
                                                              and self.chance(0.7)):
            return value, vtype
        target = VType(vtype.shape, "i32" if not DTYPES[vtype.dtype].is_float else "f32")
        return self.define(scope, Cast(self.fresh(), value, target.dtype), target), target

    def program(self) -> Program:
        top = Scope([], [])
        for _ in range(self.rng.randint(1, 7)):
            if self.statements >= MAX_VALUES:
                break
            self.action(top)
        used = {v for s in top.body for v in operands(s)}
        leaves = [(name, vtype) for name, vtype in top.values if name not in used]
        self.rng.shuffle(leaves)
        for name, vtype in leaves[:5]:
            self.store(top, name, vtype)
        refs = [Ref(name, tuple(extents), dtype) for name, (dtype, extents) in self.inputs.items()]
        batch = 2 if self.kind == "dsl" and refs and self.chance(0.15) else 0  # jax.vmap
        program = Program(self.kind, self.seed, self.grid, (*refs, *self.outputs),
                          tuple(top.body), self.dynamic, batch)
        value_types(program)  # the generator's own check
        return program


def generate(kind: str, seed: int) -> Program:
    """The program of `kind` ("mlir" or "dsl") for `seed`."""
    return Generator(kind, seed).program()


__all__ = ["generate"]
