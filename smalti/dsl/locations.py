"""The user's Python line: the MLIR location of every traced op and the prefix of misuse errors."""

from __future__ import annotations

import functools
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from jaxlib.mlir import ir

_DSL_DIR = str(Path(__file__).resolve().parent)


@dataclass(frozen=True)
class SourcePosition:
    """A file, line and (1-based) column of user code."""

    filename: str
    line: int
    column: int

    def location(self) -> ir.Location:
        return ir.Location.file(self.filename, self.line, self.column)

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}"


def user_position() -> SourcePosition:
    """Where user code called into the DSL: the innermost frame outside `smalti.dsl`."""
    frame = sys._getframe(1)
    while frame is not None and _inside_dsl(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return SourcePosition("<unknown>", 0, 0)
    positions = inspect.getframeinfo(frame, context=0).positions
    column = (positions.col_offset or 0) + 1 if positions is not None else 1
    return SourcePosition(frame.f_code.co_filename, frame.f_lineno, column)


@functools.cache
def _inside_dsl(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_DSL_DIR)


def user_location() -> ir.Location:
    """The MLIR location of the user line being traced."""
    return user_position().location()


def user_error(kind: type[Exception], message: str) -> Exception:
    """An exception of `kind` whose message starts with the user's `file:line:col`."""
    return kind(f"{user_position()}: {message}")
