"""PTX text line numbers of a kernel's statements, for error messages."""

from __future__ import annotations

from smalti.ptx.module import Instruction, Kernel, LabelDef, Module
from smalti.ptx.printer import format_instruction, print_kernel, print_module


def statement_lines(module: Module, kernel: Kernel) -> tuple[int | None, ...]:
    """1-based line of every statement: parsed lines if known, else lines in the printed text."""
    known = tuple(s.line for s in kernel.body)
    if all(line is not None for line in known):
        return known
    text = print_module(module).split("\n")
    header = print_kernel(kernel)[0]
    try:
        cursor = text.index(header)
    except ValueError:
        return known
    lines: list[int | None] = []
    for statement in kernel.body:
        printed = (f"{statement.name}:" if isinstance(statement, LabelDef)
                   else "\t" + format_instruction(statement))
        try:
            cursor = text.index(printed, cursor + 1)
        except ValueError:
            return known
        lines.append(cursor + 1)
    return tuple(lines)


def instruction_text(inst: Instruction) -> str:
    """The instruction as PTX text, for error messages."""
    return format_instruction(inst)
