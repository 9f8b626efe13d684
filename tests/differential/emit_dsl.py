"""Programs as smalti.dsl source: a module that defines `kernel`, an `sd.kernel` whose body
writes the program with the DSL's public names (docs/dsl.md) only."""

from __future__ import annotations

import math

from tests.differential.dtypes import DTYPES
from tests.differential.ops import COMPARISONS, ELEMENTWISE, LAYOUTS
from tests.differential.program import (
    Affine,
    Apply,
    Broadcast,
    Cast,
    Compare,
    Const,
    Iota,
    LayoutCast,
    Load,
    Loop,
    Print,
    Program,
    Reduce,
    Select,
    Slice,
    SmemRoundTrip,
    Statement,
    Store,
    Transpose,
    VType,
    When,
    walk,
)
from tests.differential.typecheck import value_types

HEADER = """import jax
import jax.numpy as jnp

import smalti.dsl as sd
"""


def python_number(value: float | int | bool, dtype: str) -> str:
    """A Python literal of the value (float('nan') and float('inf') for the specials)."""
    if DTYPES[dtype].is_bool:
        return repr(bool(value))
    if DTYPES[dtype].is_int:
        return str(int(value))
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        return f"float({str(value)!r})"
    return repr(value)


def index_expression(affine: Affine, extra: int = 0) -> str:
    """`affine + extra` as a Python expression over `b` (the block's linear id) and counters."""
    terms = []
    if affine.block:
        terms.append("b" if affine.block == 1 else f"b * {affine.block}")
    for counter, coefficient in affine.counters:
        if coefficient:
            terms.append(counter if coefficient == 1 else f"{counter} * {coefficient}")
    const = affine.const + extra
    if const or not terms:
        terms.append(str(const))
    return " + ".join(terms)


def window(starts: tuple[Affine, ...], shape: tuple[int, ...]) -> str:
    return ", ".join(f"{index_expression(a)}:{index_expression(a, n)}"
                     for a, n in zip(starts, shape, strict=True))


def smem_declarations(program: Program) -> dict[int, list[VType]]:
    """slot -> the distinct types its round trips store (one sd.SMEM each; a slot of several
    is an sd.Union: its members share memory, as .mlir slots do)."""
    types = value_types(program)
    slots: dict[int, list[VType]] = {}
    for s in walk(program.body):
        if isinstance(s, SmemRoundTrip):
            members = slots.setdefault(s.slot, [])
            if types[s.value] not in members:
                members.append(types[s.value])
    return dict(sorted(slots.items()))


def smem_name(slot: int, member: int) -> str:
    return f"smem{slot}_{member}"


class _Emitter:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.types = value_types(program)
        self.lines: list[str] = []
        self.slots = smem_declarations(program)
        self.literals = {s.out: s for s in walk(program.body)
                         if isinstance(s, Const) and s.literal}
        self.keepdims = self.reductions_kept()
        self.inline_broadcasts = self.broadcasts_written_inline()

    def reductions_kept(self) -> set[str]:
        """Reductions (style 2) only broadcast back along the reduced axis: written with
        keepdims=True, and their broadcasts broadcast the kept unit dim."""
        kept = {s.out: s for s in walk(self.program.body) if isinstance(s, Reduce)
                and s.style == 2}
        for s in walk(self.program.body):
            for value in set(_uses(s)) & set(kept):
                if not (isinstance(s, Broadcast) and s.dim == 1 - kept[value].axis):
                    del kept[value]
        return set(kept)

    def broadcasts_written_inline(self) -> dict[str, str]:
        """Broadcasts (style 1) whose every use is a binary elementwise op with a full-shaped
        other operand: written `x[:, None]` / `x[None, :]`, broadcast by the operator."""
        candidates = {s.out: s for s in walk(self.program.body)
                      if isinstance(s, Broadcast) and s.style == 1}
        for s in walk(self.program.body):
            uses = _uses(s)
            for value in set(uses) & set(candidates):
                binary = (isinstance(s, Apply) and ELEMENTWISE[s.op].arity == 2
                          and ELEMENTWISE[s.op].dsl is not None
                          and not ELEMENTWISE[s.op].dsl.startswith("sd.")) or isinstance(s, Compare)
                others = [u for u in uses if u != value]
                if not binary or not others or any(o in candidates or o in self.literals
                                                   for o in others):
                    del candidates[value]
        return {name: (s.value if s.value in self.keepdims else f"{s.value}[:, None]"
                       if s.dim == 0 else f"{s.value}[None, :]")
                for name, s in candidates.items()}

    def operand(self, name: str, literal_allowed: bool = False) -> str:
        if name in self.inline_broadcasts:
            return self.inline_broadcasts[name]
        if literal_allowed and name in self.literals:
            const = self.literals[name]
            return python_number(const.value, const.type.dtype)
        return name

    def emit(self, line: str, depth: int) -> None:
        self.lines.append("    " * depth + line)

    def text(self) -> str:
        program = self.program
        outs = "".join(f"jax.ShapeDtypeStruct({r.shape}, {DTYPES[r.dtype].dsl}), "
                       for r in program.outputs)
        smem = []
        params = [r.name for r in program.refs]
        for slot, members in self.slots.items():
            decls = [f"sd.SMEM({m.shape}, {DTYPES[m.dtype].dsl})" for m in members]
            smem.append(decls[0] if len(decls) == 1 else f"sd.Union({', '.join(decls)})")
            params += [smem_name(slot, k) for k in range(len(members))]
        grid = ", ".join(map(str, program.grid)) + ("," if len(program.grid) == 1 else "")
        smem_argument = f", smem=[{', '.join(smem)}]" if smem else ""
        lines = [HEADER, "",
                 f"@sd.kernel(grid=({grid}), out_shape=({outs.rstrip()}){smem_argument})",
                 f"def kernel({', '.join(params)}):"]
        if len(program.grid) == 2:
            self.emit(f"b = sd.program_id(0) * {program.grid[1]} + sd.program_id(1)", 1)
        else:
            self.emit("b = sd.program_id(0)", 1)
        self.body(program.body, 1)
        return "\n".join(lines + self.lines) + "\n"

    def body(self, statements: tuple[Statement, ...], depth: int) -> None:
        for statement in statements:
            self.statement(statement, depth)

    def statement(self, s: Statement, depth: int) -> None:
        match s:
            case Load():
                self.emit(f"{s.out} = {s.ref}[{window(s.starts, s.type.shape)}]", depth)
            case Store():
                shape = self.types[s.value].shape
                self.emit(f"{s.ref}[{window(s.starts, shape)}] = {self.operand(s.value)}", depth)
            case Print():
                self.emit(f'sd.debug_print("p{s.label} = {{}}", {self.operand(s.value)})', depth)
            case Const():
                self.emit(f"{s.out} = sd.full({s.type.shape}, "
                          f"{python_number(s.value, s.type.dtype)}, "
                          f"{DTYPES[s.type.dtype].dsl})", depth)
            case Iota():
                self.emit(f"{s.out} = sd.iota({s.type.shape}, jnp.int32, "
                          f"dimension={s.dimension})", depth)
            case Apply():
                op = ELEMENTWISE[s.op]
                assert op.dsl is not None
                binary = op.arity == 2
                args = [self.operand(a, binary and not self.is_literal_partner(s.args, k))
                        for k, a in enumerate(s.args)]
                self.emit(f"{s.out} = {op.dsl.format(*args)}", depth)
            case Compare():
                predicate = COMPARISONS[s.predicate]
                lhs = self.operand(s.lhs)
                rhs = self.operand(s.rhs, literal_allowed=s.lhs not in self.literals)
                self.emit(f"{s.out} = ({lhs} {predicate.dsl} {rhs})", depth)
            case Select():
                true = self.operand(s.true, literal_allowed=s.false not in self.literals)
                false = self.operand(s.false, literal_allowed=True)
                self.emit(f"{s.out} = sd.where({s.condition}, {true}, {false})", depth)
            case Cast():
                self.emit(f"{s.out} = {self.operand(s.value)}.astype({DTYPES[s.dtype].dsl})",
                          depth)
            case Reduce():
                axis = f"axis={s.axis - 2 if s.style == 1 else s.axis}"
                if s.out in self.keepdims:
                    axis += ", keepdims=True"
                self.emit(f"{s.out} = {self.operand(s.value)}.{s.kind}({axis})", depth)
            case Broadcast():
                if s.out in self.inline_broadcasts:
                    return
                source = (s.value if s.value in self.keepdims or s.dim == 1
                          else f"{s.value}[:, None]")
                self.emit(f"{s.out} = sd.broadcast_to({source}, {s.shape})", depth)
            case Transpose():
                self.emit(f"{s.out} = {self.operand(s.value)}.T", depth)
            case Slice():
                ranges = ", ".join(f"{o}:{o + n}" for o, n in zip(s.offsets, s.sizes, strict=True))
                self.emit(f"{s.out} = {self.operand(s.value)}[{ranges}]", depth)
            case LayoutCast():
                self.emit(f"{s.out} = sd.layout_cast({self.operand(s.value)}, "
                          f"{'#smalti.' + LAYOUTS[s.layout].text!r})", depth)
            case SmemRoundTrip():
                member = self.slots[s.slot].index(self.types[s.value])
                ref = smem_name(s.slot, member)
                self.emit(f"{ref}[...] = {self.operand(s.value)}", depth)
                self.emit(f"{s.out} = {ref}[...]", depth)
            case Loop():
                self.loop(s, depth)
            case When():
                for condition, branch in ((f"b < {s.cutoff}", s.then),
                                          (f"b >= {s.cutoff}", s.otherwise)):
                    self.emit(f"@sd.when({condition})", depth)
                    self.emit("def _():", depth)
                    self.body(branch, depth + 1)
                    if not branch:
                        self.emit("pass", depth + 1)
            case _:
                raise TypeError(f"{type(s).__name__} is not written in the DSL")

    def is_literal_partner(self, args: tuple[str, ...], k: int) -> bool:
        """Whether another operand of a binary op is already written as a Python number."""
        return any(a in self.literals for i, a in enumerate(args) if i < k)

    def loop(self, s: Loop, depth: int) -> None:
        name = f"body_{s.counter}"
        self.emit(f"def {name}({s.counter}, carry):", depth)
        self.emit(f"({''.join(c + ', ' for c in s.carried)}) = carry", depth + 1)
        self.body(s.body, depth + 1)
        self.emit(f"return ({''.join(self.operand(y) + ', ' for y in s.yields)})", depth + 1)
        inits = "".join(self.operand(v) + ", " for v in s.inits)
        step = f", step={s.step}" if s.step != 1 else ""
        self.emit(f"({''.join(o + ', ' for o in s.outs)}) = sd.fori({s.lower}, "
                  f"{index_expression(s.upper)}, {name}, ({inits}){step})", depth)


def _uses(s: Statement) -> tuple[str, ...]:
    """The values one statement reads directly (not those of nested bodies)."""
    match s:
        case Apply(args=args):
            return args
        case Compare(lhs=a, rhs=b):
            return (a, b)
        case Select(condition=c, true=a, false=b):
            return (c, a, b)
        case Loop():
            return (*s.inits, *s.yields)
        case When():
            return ()
        case _:
            return tuple(getattr(s, f) for f in ("value", "acc", "small", "big")
                         if getattr(s, f, None) is not None)


def emit_dsl(program: Program) -> str:
    """The program as a Python module defining `kernel` (a smalti.dsl kernel)."""
    assert program.kind == "dsl", program.kind
    return _Emitter(program).text()


__all__ = ["emit_dsl", "index_expression", "python_number", "smem_declarations"]
