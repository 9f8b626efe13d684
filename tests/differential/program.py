"""The program representation the differential tester generates, emits (as .mlir text and as
DSL source), interprets in numpy, and minimises.

A program is one kernel over one warpgroup: a grid of 1-4 blocks, global input and output
refs, and a list of statements in SSA form (each result is a named value; a value is a whole
array owned by the warpgroup, as in smalti). Every block runs the same statements; windows
of refs may depend on the block's linear id (`Affine.block`) and on loop counters. Every
output is written exactly once per block, into its own window, so blocks never race.

The dataclasses are frozen; the minimiser rewrites programs by building new ones. They
serialise to JSON (`to_json` / `from_json`), which is how a finding file carries its program
(for its inputs and its numpy reference).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass

Shape = tuple[int, ...]


@dataclass(frozen=True)
class VType:
    """The type of a value: a static shape and an element type name (tests.differential.dtypes)."""

    shape: Shape
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Affine:
    """An index: const + block * (the block's linear id) + sum(coefficient * loop counter)
    + dynamic * (the program's scalar argument, `Program.dynamic`; .mlir only)."""

    const: int = 0
    block: int = 0
    counters: tuple[tuple[str, int], ...] = ()
    dynamic: int = 0

    def evaluate(self, block: int, counters: dict[str, int], dynamic: int | None = None) -> int:
        return (self.const + self.block * block + sum(c * counters[n] for n, c in self.counters)
                + self.dynamic * (dynamic or 0))


@dataclass(frozen=True)
class Ref:
    """A global buffer argument (inputs first, then outputs, in `Program.refs` order)."""

    name: str
    shape: Shape
    dtype: str
    output: bool = False


# Statements. `out` names the result value; operands are value names.

@dataclass(frozen=True)
class Load:
    out: str
    ref: str
    starts: tuple[Affine, ...]
    type: VType


@dataclass(frozen=True)
class Store:
    value: str
    ref: str
    starts: tuple[Affine, ...]


@dataclass(frozen=True)
class Print:
    """smalti.debug_print of a value, as "p<label> = {}": its printed text is compared too."""

    value: str
    label: int


@dataclass(frozen=True)
class Const:
    """A splat constant; `literal`: the DSL writes it as a Python number where it can."""

    out: str
    type: VType
    value: float | int | bool
    literal: bool = False


@dataclass(frozen=True)
class Iota:
    out: str
    type: VType  # i32
    dimension: int


@dataclass(frozen=True)
class Apply:
    """An elementwise op of tests.differential.ops.ELEMENTWISE (by name)."""

    out: str
    op: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Compare:
    """A comparison of tests.differential.ops.COMPARISONS (by name): a bool result."""

    out: str
    predicate: str
    lhs: str
    rhs: str


@dataclass(frozen=True)
class Select:
    out: str
    condition: str
    true: str
    false: str


@dataclass(frozen=True)
class Cast:
    """Element conversion. `how`: "astype" (the DSL's, numpy's meaning); .mlir only:
    "unsigned" (uitofp, fptoui, extui: integers read unsigned), "bits" (i1 as a bit: trunci
    to i1 keeps the lowest bit, extsi/sitofp of i1 give -1), "bitcast" (the same bits)."""

    out: str
    value: str
    dtype: str
    how: str = "astype"


@dataclass(frozen=True)
class Reduce:
    """sum / max / min over `axis`; `acc` (mlir only): combined with the reduction."""

    out: str
    kind: str
    value: str
    axis: int
    acc: str | None = None
    style: int = 0  # DSL: axis=a, axis=a - 2, or keepdims=True (kept for its broadcasts)


@dataclass(frozen=True)
class Broadcast:
    """A 1-D value to 2-D `shape`: source dim 0 becomes result dim `dim`."""

    out: str
    value: str
    shape: Shape
    dim: int
    style: int = 0  # emission variant: mlir broadcast_in_dim / vector.broadcast, dsl form


@dataclass(frozen=True)
class Transpose:
    out: str
    value: str


@dataclass(frozen=True)
class Reshape:
    """vector.shape_cast (mlir only)."""

    out: str
    value: str
    shape: Shape


@dataclass(frozen=True)
class Slice:
    out: str
    value: str
    offsets: Shape
    sizes: Shape


@dataclass(frozen=True)
class Insert:
    """vector.insert_strided_slice of `small` into `big` at `offsets` (mlir only)."""

    out: str
    small: str
    big: str
    offsets: Shape


@dataclass(frozen=True)
class LayoutCast:
    """smalti.layout_cast to a layout of tests.differential.ops.LAYOUTS (by name)."""

    out: str
    value: str
    layout: str


@dataclass(frozen=True)
class SmemRoundTrip:
    """Store the value to shared-memory slot `slot`, load it back."""

    out: str
    value: str
    slot: int


@dataclass(frozen=True)
class Loop:
    """`for counter in range(lower, upper, step)` carrying values: `carried[k]` starts as
    `inits[k]`, the body's `yields[k]` is its next value, and `outs[k]` its last."""

    outs: tuple[str, ...]
    counter: str
    upper: Affine
    inits: tuple[str, ...]
    carried: tuple[str, ...]
    body: tuple[Statement, ...]
    yields: tuple[str, ...]
    lower: int = 0
    step: int = 1

    def counter_values(self, block: int) -> range:
        return range(self.lower, self.upper.evaluate(block, {}), self.step)

    def largest_counter(self, blocks: int) -> int:
        """The counter's largest value in any block (the upper bound grows with the block),
        or `lower` when no block runs a trip."""
        return max(self.counter_values(blocks - 1), default=self.lower)


@dataclass(frozen=True)
class When:
    """`if block < cutoff: then else: otherwise` (DSL: two sd.when), for stores; .mlir only:
    with results (`outs[k]` is `then_yields[k]` or `otherwise_yields[k]`)."""

    cutoff: int
    then: tuple[Statement, ...]
    otherwise: tuple[Statement, ...]
    outs: tuple[str, ...] = ()
    then_yields: tuple[str, ...] = ()
    otherwise_yields: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockSelect:
    """arith.select of whole values by a uniform i1 (block < cutoff) (.mlir only)."""

    out: str
    cutoff: int
    true: str
    false: str


@dataclass(frozen=True)
class Barrier:
    """smalti.optimization_barrier of one value (.mlir only): the value unchanged."""

    out: str
    value: str


Statement = (Load | Store | Print | Const | Iota | Apply | Compare | Select | Cast | Reduce | Broadcast
             | Transpose | Reshape | Slice | Insert | LayoutCast | SmemRoundTrip | Barrier
             | BlockSelect | Loop | When)
STATEMENT_CLASSES = (Load, Store, Print, Const, Iota, Apply, Compare, Select, Cast, Reduce, Broadcast,
                     Transpose, Reshape, Slice, Insert, LayoutCast, SmemRoundTrip, Barrier,
                     BlockSelect, Loop, When)


@dataclass(frozen=True)
class Program:
    """One kernel: `kind` is "mlir" or "dsl" (which ops it may use); `seed` names it and
    seeds its input data."""

    kind: str
    seed: int
    grid: tuple[int, ...]
    refs: tuple[Ref, ...]
    body: tuple[Statement, ...]
    dynamic: int | None = None  # .mlir: the value of a trailing i32 scalar argument
    batch: int = 0  # DSL: called through jax.vmap over this many input sets (0: plainly)

    @property
    def blocks(self) -> int:
        count = 1
        for g in self.grid:
            count *= g
        return count

    @property
    def inputs(self) -> tuple[Ref, ...]:
        return tuple(r for r in self.refs if not r.output)

    @property
    def outputs(self) -> tuple[Ref, ...]:
        return tuple(r for r in self.refs if r.output)

    def ref(self, name: str) -> Ref:
        return next(r for r in self.refs if r.name == name)


def results(statement: Statement) -> tuple[str, ...]:
    """The values a statement defines in its enclosing scope."""
    if isinstance(statement, Loop | When):
        return statement.outs
    if isinstance(statement, Store | Print):
        return ()
    return (statement.out,)


def operands(statement: Statement) -> tuple[str, ...]:
    """The values a statement reads from its enclosing scope (for loops and branches: also
    what their bodies read from outside them)."""
    match statement:
        case Load() | Const() | Iota():
            return ()
        case Store(value=v) | Print(value=v) | Cast(value=v) | Reduce(value=v, acc=None) | Broadcast(value=v) \
                | Transpose(value=v) | Reshape(value=v) | Slice(value=v) | LayoutCast(value=v) \
                | SmemRoundTrip(value=v) | Barrier(value=v):
            return (v,)
        case Reduce(value=v, acc=a):
            return (v, a)
        case Apply(args=args):
            return args
        case Compare(lhs=a, rhs=b):
            return (a, b)
        case Select(condition=c, true=a, false=b):
            return (c, a, b)
        case BlockSelect(true=a, false=b):
            return (a, b)
        case Insert(small=a, big=b):
            return (a, b)
        case Loop():
            inner = free_values(statement.body, set(statement.carried)) | set(statement.yields)
            inner -= {v for s in statement.body for v in results(s)} | set(statement.carried)
            return (*statement.inits, *sorted(inner))
        case When():
            then = free_values(statement.then, set()) | _escaping(statement.then,
                                                                  statement.then_yields)
            otherwise = free_values(statement.otherwise, set()) | _escaping(
                statement.otherwise, statement.otherwise_yields)
            return tuple(sorted(then | otherwise))
    raise TypeError(statement)


def free_values(body: tuple[Statement, ...], bound: set[str]) -> set[str]:
    """Values `body` reads that it does not define (nor are in `bound`)."""
    defined = set(bound)
    free: set[str] = set()
    for statement in body:
        free |= {v for v in operands(statement) if v not in defined}
        defined |= set(results(statement))
    return free


def _escaping(body: tuple[Statement, ...], yields: tuple[str, ...]) -> set[str]:
    """The yields of a branch that the branch does not define (values from outside)."""
    return set(yields) - {v for s in body for v in results(s)}


def walk(body: tuple[Statement, ...]) -> Iterator[Statement]:
    """Every statement, nested bodies included, in program order."""
    for statement in body:
        yield statement
        if isinstance(statement, Loop):
            yield from walk(statement.body)
        elif isinstance(statement, When):
            yield from walk(statement.then)
            yield from walk(statement.otherwise)


def to_json(program: Program) -> str:
    """One line of JSON (statements tagged with their class name)."""

    def encode(value: object) -> object:
        if dataclasses.is_dataclass(value):
            data = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return {"@": type(value).__name__, **data}
        if isinstance(value, tuple | list):
            return [encode(v) for v in value]
        if isinstance(value, float) and value != value:
            return {"@": "float", "value": "nan"}
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            return {"@": "float", "value": "inf" if value > 0 else "-inf"}
        return value

    return json.dumps(encode(program), separators=(",", ":"))


_CLASSES = {c.__name__: c for c in (*STATEMENT_CLASSES, Program, Ref, VType, Affine)}


def from_json(text: str) -> Program:
    def decode(value: object) -> object:
        if isinstance(value, list):
            return tuple(decode(v) for v in value)
        if isinstance(value, dict):
            tag = value["@"]
            if tag == "float":
                return float(value["value"])
            cls = _CLASSES[tag]
            return cls(**{k: decode(v) for k, v in value.items() if k != "@"})
        return value

    program = decode(json.loads(text))
    assert isinstance(program, Program)
    return program


__all__ = ["STATEMENT_CLASSES", "Affine", "Apply", "Barrier", "BlockSelect", "Broadcast", "Cast", "Compare", "Const",
           "Insert", "Iota", "LayoutCast", "Load", "Loop", "Print", "Program", "Reduce", "Ref",
           "Reshape", "Select", "Shape", "Slice", "SmemRoundTrip", "Statement", "Store",
           "Transpose", "VType", "When", "free_values", "from_json", "operands", "results",
           "to_json", "walk"]
