"""Located diagnostics: how every pass and verifier reports bad input.

Passes raise `DiagnosticError`; the driver prints each diagnostic as
`file:line:col: error: message` and the Python API shows the same text in the exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jaxlib.mlir import ir

from smalti.dialect.bindings import file_line_col

Severity = Literal["error", "warning", "note", "remark"]


def format_location(location: ir.Location) -> str:
    """`file:line:col` for file locations (looking through names and fusions), else '<unknown>'."""
    position = file_line_col(location)
    if position is None:
        return "<unknown>"
    file, line, col = position
    return f"{file}:{line}:{col}"


@dataclass(frozen=True)
class Diagnostic:
    location: ir.Location
    message: str
    severity: Severity = "error"
    notes: tuple[Diagnostic, ...] = field(default_factory=tuple)

    def format(self) -> str:
        lines = [f"{format_location(self.location)}: {self.severity}: {self.message}"]
        lines.extend(note.format() for note in self.notes)
        return "\n".join(lines)


class DiagnosticError(Exception):
    """One or more located errors in the input IR."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic) -> None:
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.format() for d in self.diagnostics))


def error_at(op_or_location: ir.Operation | ir.OpView | ir.Location, message: str,
             notes: tuple[Diagnostic, ...] = ()) -> DiagnosticError:
    """A DiagnosticError for one op (its location) with `message`, prefixed by the op name."""
    if isinstance(op_or_location, ir.Location):
        return DiagnosticError(Diagnostic(op_or_location, message, notes=notes))
    op = op_or_location.operation
    return DiagnosticError(Diagnostic(op.location, f"'{op.name}' op {message}", notes=notes))
