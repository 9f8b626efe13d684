"""`--split-input-file`: cut a file at `// -----` lines, keeping original line numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass

SPLIT_MARKER = "// -----"
_MARKER_LINE = re.compile(r"^[ \t]*// -----")


@dataclass(frozen=True)
class Chunk:
    """Part of an input file: `text` starts on line `first_line` (1-based) of the original."""

    text: str
    first_line: int = 1

    @property
    def padded_text(self) -> str:
        """The text behind one newline per line that precedes it, so parsed locations carry
        the original file's line numbers."""
        return "\n" * (self.first_line - 1) + self.text


def split_input(text: str) -> list[Chunk]:
    """The chunks between lines starting with `// -----` (the marker lines themselves dropped)."""
    lines = text.splitlines(keepends=True)
    chunks, start = [], 0
    for index, line in enumerate(lines):
        if _MARKER_LINE.match(line):
            chunks.append(Chunk("".join(lines[start:index]), start + 1))
            start = index + 1
    chunks.append(Chunk("".join(lines[start:]), start + 1))
    return chunks


def join_outputs(outputs: list[str]) -> str:
    """Chunk outputs joined by marker lines, as mlir-opt prints them."""
    return f"{SPLIT_MARKER}\n".join(outputs)
