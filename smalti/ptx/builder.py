"""Builds a PTX kernel from typed virtual registers, labels and instructions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from smalti.ptx.module import (
    REGISTER_PREFIX,
    Guard,
    Immediate,
    InlineBlock,
    Instruction,
    Kernel,
    Label,
    LabelDef,
    Operand,
    Param,
    Register,
    RegisterDecl,
    SharedDecl,
    SourceLocation,
    Statement,
    Symbol,
    register_class,
)


class KernelBuilder:
    """Collects one kernel's parameters, registers and statements, in program order."""

    def __init__(
        self,
        name: str,
        *,
        maxntid: tuple[int, ...] | None = None,
        reqntid: tuple[int, ...] | None = None,
        directives: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.maxntid = maxntid
        self.reqntid = reqntid
        self.directives = directives
        self._params: list[Param] = []
        self._shared: list[SharedDecl] = []
        self._body: list[Statement] = []
        self._register_counts: dict[str, int] = defaultdict(int)
        self._label_counts: dict[str, int] = defaultdict(int)
        self._special_cache: dict[str, Register] = {}
        # The source location of the instructions emitted next (the op being lowered).
        self.source: SourceLocation | None = None

    # Declarations.
    def param(self, name: str, ptx_type: str = "u64", *, align: int | None = None,
              array: int | None = None) -> Symbol:
        self._params.append(Param(f"{self.name}_param_{name}", ptx_type, align, array))
        return Symbol(self._params[-1].name)

    def shared(self, name: str, size: int | None, *, align: int = 16) -> Symbol:
        self._shared.append(SharedDecl(name, align, size))
        return Symbol(name)

    def variable(self, hint: str, state: str, data: tuple[int, ...], *, align: int = 16
                 ) -> Symbol:
        """A fresh module-scope `.global` or `.const` byte array holding `data` (the module
        declares it; its name is `hint` and a number)."""
        index = self._label_counts[f"variable {hint}"]
        self._label_counts[f"variable {hint}"] += 1
        name = f"{hint}_{index}"
        self._shared.append(SharedDecl(name, align, len(data), "b8", state, data))
        return Symbol(name)

    def reg(self, ptx_type: str) -> Register:
        """A fresh register able to hold a value of `ptx_type`."""
        cls = register_class(ptx_type)
        index = self._register_counts[cls]
        self._register_counts[cls] += 1
        return Register(f"{REGISTER_PREFIX[cls]}{index}", cls)

    def new_label(self, hint: str) -> Label:
        index = self._label_counts[hint]
        self._label_counts[hint] += 1
        return Label(f"${hint}_{index}")

    # Statements.
    def emit(self, opcode: str, *operands: Operand | int, guard: Guard | None = None) -> None:
        ops = tuple(Immediate(o) if isinstance(o, int) else o for o in operands)
        division = _constant_division(opcode, ops)
        if division is not None:
            self._divide(division, guard)
            return
        self._body.append(Instruction(opcode, ops, guard, source=self.source))

    def _divide(self, division: _ConstantDivision, guard: Guard | None) -> None:
        """An unsigned `div`/`rem` by a constant without a division (ptxas keeps `div` by a
        constant a division routine: about 20 instructions for 32 bits, a call for 64).
        By 2^k a shift or a mask; by another d, Granlund and Montgomery's multiply by
        m = floor(2^w (2^l - d) / d) + 1, l = ceil(log2 d): t = mulhi(x, m),
        q = (t + (x - t) / 2) >> (l - 1), exact for every w-bit x (no w+1-bit product)."""
        d, w, x, dest = division.divisor, division.width, division.dividend, division.dest
        u, b = f"u{w}", f"b{w}"

        def put(opcode: str, target: Register, *sources: Operand | int) -> None:
            self._body.append(Instruction(opcode, (target, *(
                Immediate(o) if isinstance(o, int) else o for o in sources)), guard,
                source=self.source))

        def value(opcode: str, *sources: Operand | int) -> Register:
            target = self.reg(b)
            put(opcode, target, *sources)
            return target

        if d & (d - 1) == 0:
            if division.remainder:
                put(f"and.{b}", dest, x, d - 1)
            else:
                put(f"shr.{u}", dest, x, d.bit_length() - 1)
            return
        shift = (d - 1).bit_length()
        multiplier = ((1 << w) * ((1 << shift) - d)) // d + 1
        if multiplier >= 1 << 63:  # PTX integer literals are signed 64-bit: the same bits
            multiplier -= 1 << 64
        high = value(f"mul.hi.{u}", x, multiplier)
        half = value(f"shr.{u}", value(f"sub.{u}", x, high), 1)
        if not division.remainder:
            put(f"shr.{u}", dest, value(f"add.{u}", high, half), shift - 1)
            return
        quotient = value(f"shr.{u}", value(f"add.{u}", high, half), shift - 1)
        put(f"sub.{u}", dest, x, value(f"mul.lo.{u}", quotient, d))

    def compute(self, opcode: str, result_type: str, *sources: Operand | int,
                guard: Guard | None = None) -> Register:
        """Emit `opcode d, sources...` into a fresh register d of `result_type`; return d."""
        dest = self.reg(result_type)
        self.emit(opcode, dest, *sources, guard=guard)
        return dest

    def inline(self, text: str) -> None:
        """Emit PTX `text` verbatim in its own `{ }` scope (inline_ptx)."""
        self._body.append(InlineBlock(text, source=self.source))

    def place(self, label: Label) -> None:
        self._body.append(LabelDef(label.name))

    def special(self, name: str) -> Register:
        """The value of a 32-bit special register (%tid.x, %ctaid.y, ...), read once."""
        if name not in self._special_cache:
            self._special_cache[name] = self.compute("mov.u32", "u32", Symbol(name))
        return self._special_cache[name]

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Special registers first read inside are forgotten after it: code in a branch or
        a loop body may not run, so later reads must not rely on its registers."""
        saved = dict(self._special_cache)
        try:
            yield
        finally:
            self._special_cache = saved

    def build(self) -> Kernel:
        registers = tuple(
            RegisterDecl(cls, REGISTER_PREFIX[cls], count)
            for cls, count in sorted(self._register_counts.items())
            if count
        )
        return Kernel(
            name=self.name,
            params=tuple(self._params),
            registers=registers,
            body=tuple(self._body),
            maxntid=self.maxntid,
            reqntid=self.reqntid,
            shared=tuple(self._shared),
            extra_directives=self.directives,
        )


@dataclass(frozen=True)
class _ConstantDivision:
    """`div.uW dest, dividend, divisor` (or `rem`) with a constant divisor >= 1."""

    dest: Register
    dividend: Register
    divisor: int
    width: int
    remainder: bool


def _constant_division(opcode: str, operands: tuple[Operand, ...]) -> _ConstantDivision | None:
    """The unsigned division by a constant `opcode operands` is, if it is one."""
    kind, _, width = opcode.partition(".u")
    if kind not in ("div", "rem") or width not in ("16", "32", "64") or len(operands) != 3:
        return None
    dest, dividend, divisor = operands
    if not (isinstance(dest, Register) and isinstance(dividend, Register)
            and isinstance(divisor, Immediate) and isinstance(divisor.value, int)):
        return None
    if not 0 < divisor.value < 1 << int(width):
        return None
    return _ConstantDivision(dest, dividend, divisor.value, int(width), kind == "rem")
