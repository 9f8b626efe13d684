"""Builds a PTX kernel from typed virtual registers, labels and instructions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

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
        self._body.append(Instruction(opcode, ops, guard, source=self.source))

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
