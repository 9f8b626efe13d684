"""Diagnostics reduced to plain values, and a collector that gathers them from an MLIR context.

Both the MLIR parser and upstream passes (through the context) and smalti passes (through
`DiagnosticError`) report problems; the drivers print and match them in one form: `Reported`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import TracebackType

from jaxlib.mlir import ir

from smalti.dialect.bindings import file_line_col
from smalti.dialect.diagnostics import Diagnostic

_SEVERITY = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}

# The note MLIR attaches to verifier errors; mlir-opt leaves it out under --verify-diagnostics.
CURRENT_OPERATION_NOTE = "see current operation:"


@dataclass(frozen=True)
class Reported:
    """One diagnostic: where (file, line, col; None when unknown), how bad, what, and notes."""

    file: str | None
    line: int
    col: int
    severity: str
    message: str
    notes: tuple[Reported, ...] = field(default_factory=tuple)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.col}" if self.file is not None else "<unknown>"

    def format(self) -> str:
        """`file:line:col: severity: message`, then one such line per note."""
        lines = [f"{self.where}: {self.severity}: {self.message}"]
        lines.extend(note.format() for note in self.notes)
        return "\n".join(lines)

    def without_current_operation_notes(self) -> Reported:
        """This diagnostic less MLIR's `see current operation:` notes."""
        kept = tuple(n for n in self.notes if not n.message.startswith(CURRENT_OPERATION_NOTE))
        return replace(self, notes=kept)


def _split_location(location: ir.Location) -> tuple[str | None, int, int]:
    """(file, line, col) of a location, or (None, 0, 0) when it names no file position."""
    return file_line_col(location) or (None, 0, 0)


def from_mlir(diagnostic: ir.Diagnostic, severity: str | None = None) -> Reported:
    """A Reported copy of an MLIR diagnostic (which is only valid inside its handler)."""
    file, line, col = _split_location(diagnostic.location)
    notes = tuple(from_mlir(note, "note") for note in diagnostic.notes)
    return Reported(file, line, col, severity or _SEVERITY[diagnostic.severity],
                    str(diagnostic.message), notes)


def from_smalti(diagnostic: Diagnostic, severity: str | None = None) -> Reported:
    """A Reported copy of a smalti Diagnostic (its notes are printed as notes)."""
    file, line, col = _split_location(diagnostic.location)
    notes = tuple(from_smalti(note, "note") for note in diagnostic.notes)
    return Reported(file, line, col, severity or diagnostic.severity, diagnostic.message, notes)


def merge_smalti_notes(reported: list[Reported], smalti: list[Diagnostic]) -> list[Reported]:
    """`reported` with each error that a smalti pass re-emitted (message only) replaced by the
    full smalti diagnostic, notes included; smalti diagnostics never emitted are appended."""
    pending = [from_smalti(d) for d in smalti]
    merged = []
    for item in reported:
        twin = next((p for p in pending if (p.where, p.message) == (item.where, item.message)
                     and item.severity == "error"), None)
        if twin is not None:
            pending.remove(twin)
            merged.append(replace(item, notes=item.notes + twin.notes))
        else:
            merged.append(item)
    return merged + pending


class DiagnosticCollector:
    """Collects every diagnostic of a context, errors included, in emission order.

    Use as a context manager: on entry it attaches a handler and routes errors to handlers
    (instead of into MLIRError exceptions); on exit it restores both.
    """

    def __init__(self, context: ir.Context) -> None:
        self.context = context
        self.diagnostics: list[Reported] = []
        self._handler: ir.DiagnosticHandler | None = None
        self._emit_errors_before = False

    def _handle(self, diagnostic: ir.Diagnostic) -> bool:
        self.diagnostics.append(from_mlir(diagnostic))
        return True

    def take(self) -> list[Reported]:
        """The diagnostics collected since the last take()."""
        taken, self.diagnostics = self.diagnostics, []
        return taken

    def __enter__(self) -> DiagnosticCollector:
        self._emit_errors_before = self.context.emit_error_diagnostics
        self.context.emit_error_diagnostics = True
        self._handler = self.context.attach_diagnostic_handler(self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._handler is not None:
            self._handler.detach()
            self._handler = None
        self.context.emit_error_diagnostics = self._emit_errors_before
