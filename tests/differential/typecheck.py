"""The types of a program's values, and the checks that make a program well formed: what the
emitters and the reference rely on, and what the minimiser's rewrites must keep."""

from __future__ import annotations

import math

from tests.differential.dtypes import DTYPES, DType
from tests.differential.ops import COMPARISONS, ELEMENTWISE, LAYOUTS, REDUCTIONS
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
    VType,
    When,
)

MLIR_ONLY = (Reshape, Insert, Barrier, BlockSelect)  # statements the DSL has no way to write
CAST_KINDS = ("astype", "unsigned", "bits", "bitcast")


class InvalidProgram(ValueError):
    """A program that breaks a rule of the representation."""


def value_types(program: Program) -> dict[str, VType]:
    """Every value's type (loop bodies and branches included); InvalidProgram if any
    statement is ill-typed, a window leaves its ref, or an output is not written exactly
    once per block."""
    types: dict[str, VType] = {}
    refs = {r.name: r for r in program.refs}
    if len(refs) != len(program.refs):
        raise InvalidProgram("duplicate ref names")
    _require(program.batch == 0 or (program.kind == "dsl" and program.batch > 1), "batch")
    counters: dict[str, int] = {}  # loop counter -> its largest value
    _check_body(program, program.body, types, refs, counters, scope=set())
    stored = _stores_per_path(program.body)
    for ref in program.outputs:
        if stored.get(ref.name) != 1:
            raise InvalidProgram(f"output {ref.name} is stored {stored.get(ref.name, 0)} times")
    return types


def _stores_per_path(body: tuple[Statement, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for statement in body:
        if isinstance(statement, Store):
            counts[statement.ref] = counts.get(statement.ref, 0) + 1
        elif isinstance(statement, When):
            then, otherwise = _stores_per_path(statement.then), _stores_per_path(statement.otherwise)
            if then != otherwise:
                raise InvalidProgram("the branches of a When store different outputs")
            for ref, n in then.items():
                counts[ref] = counts.get(ref, 0) + n
        elif isinstance(statement, Loop):  # one store per trip, into per-trip windows
            for ref, n in _stores_per_path(statement.body).items():
                counts[ref] = counts.get(ref, 0) + n
    return counts


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidProgram(message)


def _check_window(program: Program, ref_shape: tuple[int, ...], starts: tuple[Affine, ...],
                  shape: tuple[int, ...], counters: dict[str, int], what: str) -> None:
    _require(len(starts) == len(ref_shape), f"{what}: {len(starts)} indices for rank "
                                            f"{len(ref_shape)}")
    _require(len(shape) == len(ref_shape), f"{what}: rank {len(shape)} of rank {len(ref_shape)}")
    for start, size, extent in zip(starts, shape, ref_shape, strict=True):
        _require(all(n in counters for n, _ in start.counters), f"{what}: unknown counter")
        _require(not start.dynamic or (program.kind == "mlir" and program.dynamic is not None),
                 f"{what}: a dynamic index without the scalar argument")
        dynamic = start.dynamic * (program.dynamic or 0)
        low = start.const + dynamic + min(0, start.block * (program.blocks - 1)) + sum(
            min(0, c * counters[n]) for n, c in start.counters)
        high = start.const + dynamic + max(0, start.block * (program.blocks - 1)) + sum(
            max(0, c * counters[n]) for n, c in start.counters)
        _require(low >= 0 and high + size <= extent, f"{what}: window [{low}, {high + size}) "
                                                     f"out of {extent}")


def _check_body(program: Program, body: tuple[Statement, ...], types: dict[str, VType],
                refs: dict, counters: dict[str, int], scope: set[str]) -> None:
    """Type `body` into `types`; `scope` holds the values visible here (updated)."""
    for statement in body:
        _check_statement(program, statement, types, refs, counters, scope)


def _operand(types: dict[str, VType], scope: set[str], name: str) -> VType:
    _require(name in scope, f"{name} is used where it is not defined")
    return types[name]


def _define(types: dict[str, VType], scope: set[str], name: str, vtype: VType) -> None:
    _require(name not in types, f"{name} is defined twice")
    _require(all(d > 0 for d in vtype.shape) and 1 <= len(vtype.shape) <= 2,
             f"{name}: bad shape {vtype.shape}")
    _require(vtype.dtype in DTYPES, f"{name}: bad dtype {vtype.dtype}")
    types[name] = vtype
    scope.add(name)


def _check_statement(program: Program, s: Statement, types: dict[str, VType], refs: dict,
                     counters: dict[str, int], scope: set[str]) -> None:
    kind = program.kind
    if kind == "dsl" and isinstance(s, MLIR_ONLY):
        raise InvalidProgram(f"{type(s).__name__} is not written in the DSL")
    match s:
        case Load():
            _require(s.ref in refs and not refs[s.ref].output, f"load from {s.ref}")
            ref = refs[s.ref]
            _require(ref.dtype == s.type.dtype, "load dtype")
            _check_window(program, ref.shape, s.starts, s.type.shape, counters, s.out)
            _define(types, scope, s.out, s.type)
        case Store():
            vtype = _operand(types, scope, s.value)
            _require(s.ref in refs and refs[s.ref].output, f"store to {s.ref}")
            ref = refs[s.ref]
            _require(ref.dtype == vtype.dtype, "store dtype")
            _check_window(program, ref.shape, s.starts, vtype.shape, counters, s.ref)
            _require(program.blocks == 1 or any(
                abs(a.block) >= size + sum(abs(c) * counters[n] for n, c in a.counters)
                for a, size in zip(s.starts, vtype.shape, strict=True)),
                f"blocks store overlapping windows of {s.ref}")
        case Print():
            _operand(types, scope, s.value)
            _require(s.label >= 0, "print label")
        case Const():
            _define(types, scope, s.out, s.type)
        case Iota():
            _require(s.type.dtype == "i32" and 0 <= s.dimension < len(s.type.shape), "iota")
            _define(types, scope, s.out, s.type)
        case Apply():
            op = ELEMENTWISE.get(s.op)
            _require(op is not None, f"unknown op {s.op}")
            assert op is not None
            _require(kind == "mlir" or op.dsl is not None, f"{s.op} is not in the DSL")
            _require(kind == "dsl" or op.mlir is not None, f"{s.op} is not in .mlir")
            args = [_operand(types, scope, a) for a in s.args]
            _require(len(args) == op.arity and len(set(args)) == 1, f"{s.op} operands {args}")
            _require(DTYPES[args[0].dtype].kind == op.kind and DTYPES[args[0].dtype].computes,
                     f"{s.op} of {args[0]}")
            _define(types, scope, s.out, args[0])
        case Compare():
            predicate = COMPARISONS.get(s.predicate)
            _require(predicate is not None, f"unknown predicate {s.predicate}")
            assert predicate is not None
            _require(kind == "mlir" or predicate.dsl is not None, "predicate not in the DSL")
            a, b = _operand(types, scope, s.lhs), _operand(types, scope, s.rhs)
            _require(a == b and DTYPES[a.dtype].kind == predicate.kind
                     and DTYPES[a.dtype].computes, "compare operands")
            _define(types, scope, s.out, VType(a.shape, "i1"))
        case Select():
            c = _operand(types, scope, s.condition)
            a, b = _operand(types, scope, s.true), _operand(types, scope, s.false)
            _require(a == b and c == VType(a.shape, "i1"), "select operands")
            _define(types, scope, s.out, a)
        case Cast():
            a = _operand(types, scope, s.value)
            _require(s.how == "astype" or kind == "mlir", f"{s.how} casts are .mlir only")
            _require(_castable(DTYPES[a.dtype], DTYPES[s.dtype], s.how),
                     f"no {s.how} cast {a.dtype} -> {s.dtype}")
            _define(types, scope, s.out, VType(a.shape, s.dtype))
        case Reduce():
            a = _operand(types, scope, s.value)
            _require(len(a.shape) == 2 and s.axis in (0, 1), "reduce of a 2-D value")
            _require(s.kind in REDUCTIONS and not DTYPES[a.dtype].is_bool
                     and DTYPES[a.dtype].computes, "reduction kind")
            reduction = REDUCTIONS[s.kind]
            _require((reduction.mlir_float if DTYPES[a.dtype].is_float else reduction.mlir_int)
                     is not None and (kind == "mlir" or reduction.dsl),
                     f"no {s.kind} reduction of {a.dtype}")
            out = VType(tuple(d for i, d in enumerate(a.shape) if i != s.axis), a.dtype)
            if s.acc is not None:
                _require(kind == "mlir", "accumulators are .mlir only")
                _require(_operand(types, scope, s.acc) == out, "accumulator type")
            _define(types, scope, s.out, out)
        case Broadcast():
            a = _operand(types, scope, s.value)
            _require(len(a.shape) == 1 and len(s.shape) == 2 and s.dim in (0, 1)
                     and s.shape[s.dim] == a.shape[0], "broadcast shapes")
            _define(types, scope, s.out, VType(s.shape, a.dtype))
        case Transpose():
            a = _operand(types, scope, s.value)
            _require(len(a.shape) == 2, "transpose of a 2-D value")
            _define(types, scope, s.out, VType(a.shape[::-1], a.dtype))
        case Reshape():
            a = _operand(types, scope, s.value)
            _require(math.prod(a.shape) == math.prod(s.shape) and a.shape != s.shape, "reshape")
            _define(types, scope, s.out, VType(s.shape, a.dtype))
        case Slice():
            a = _operand(types, scope, s.value)
            _require(len(s.offsets) == len(s.sizes) == len(a.shape), "slice rank")
            _require(all(o >= 0 and z > 0 and o + z <= d
                         for o, z, d in zip(s.offsets, s.sizes, a.shape, strict=True))
                     and s.sizes != a.shape, "slice bounds")
            _define(types, scope, s.out, VType(s.sizes, a.dtype))
        case Insert():
            small, big = _operand(types, scope, s.small), _operand(types, scope, s.big)
            _require(small.dtype == big.dtype and len(small.shape) == len(big.shape)
                     == len(s.offsets), "insert types")
            _require(all(o >= 0 and o + z <= d
                         for o, z, d in zip(s.offsets, small.shape, big.shape, strict=True)),
                     "insert bounds")
            _define(types, scope, s.out, big)
        case LayoutCast():
            a = _operand(types, scope, s.value)
            _require(s.layout in LAYOUTS and LAYOUTS[s.layout].fits(a.shape), "layout")
            _define(types, scope, s.out, a)
        case SmemRoundTrip():
            a = _operand(types, scope, s.value)
            _require(s.slot >= 0, "slot")
            _define(types, scope, s.out, a)
        case Barrier():
            _define(types, scope, s.out, _operand(types, scope, s.value))
        case BlockSelect():
            a, b = _operand(types, scope, s.true), _operand(types, scope, s.false)
            _require(a == b and s.cutoff >= 1, "block select")
            _define(types, scope, s.out, a)
        case Loop():
            inits = [_operand(types, scope, v) for v in s.inits]
            _require(len(inits) == len(s.carried) == len(s.yields) == len(s.outs) >= 1,
                     "loop arity")
            _require(s.upper.const >= 0 and s.upper.block >= 0 and not s.upper.counters
                     and not s.upper.dynamic and s.lower >= 0 and s.step >= 1, "loop bounds")
            _require(s.counter not in counters, "counter reused")
            inner = set(scope)
            for name, vtype in zip(s.carried, inits, strict=True):
                _define(types, inner, name, vtype)
            counters[s.counter] = s.largest_counter(program.blocks)
            _check_body(program, s.body, types, refs, counters, inner)
            del counters[s.counter]
            yields = [_operand(types, inner, v) for v in s.yields]
            _require(yields == inits, "loop yields")
            for name, vtype in zip(s.outs, inits, strict=True):
                _define(types, scope, name, vtype)
        case When():
            _require(s.cutoff >= 1, "cutoff")
            _require(not s.outs or kind == "mlir", "branches with results are .mlir only")
            _require(len(s.outs) == len(s.then_yields) == len(s.otherwise_yields),
                     "branch arity")
            branch_types = []
            for body, yields in ((s.then, s.then_yields), (s.otherwise, s.otherwise_yields)):
                inner = set(scope)
                _check_body(program, body, types, refs, counters, inner)
                branch_types.append([_operand(types, inner, v) for v in yields])
            _require(branch_types[0] == branch_types[1], "branch yields")
            for name, vtype in zip(s.outs, branch_types[0], strict=True):
                _define(types, scope, name, vtype)
        case _:
            raise InvalidProgram(f"unknown statement {s!r}")


def _castable(source: DType, target: DType, how: str) -> bool:
    """Whether a cast of this kind exists between the two element types."""
    if source == target:
        return False
    if how == "bitcast":
        return source.bits == target.bits and not source.is_bool and source.computes \
            and target.computes
    if not (source.computes and target.computes):  # fp8: only to and from other floats
        return how == "astype" and source.is_float and target.is_float \
            and source.bits != target.bits
    if how == "astype":
        return not (source.is_float and target.is_float and source.bits == target.bits)
    if how == "unsigned":
        return (source.is_int and (target.is_float or (target.is_int
                                                       and target.bits > source.bits))) \
            or (source.is_float and target.is_int)
    if how == "bits":
        return (source.is_bool and not target.is_bool) or (target.is_bool and not
                                                           source.is_bool)
    return False


__all__ = ["CAST_KINDS", "MLIR_ONLY", "InvalidProgram", "value_types"]
