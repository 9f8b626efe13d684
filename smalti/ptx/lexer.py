"""Splits PTX text into raw statements with line numbers, so the parser sees one at a time.

Works line by line: comments are blanked first (keeping line numbers), then each line is cut
at `;`, `{`, `}` and labels. Most lines are one complete instruction and take a fast path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    STATEMENT = "statement"  # text up to (not including) its ';', or a line-ended directive
    HEADER = "header"  # a function header: `.visible .entry name(...) .maxntid ...`
    OPEN = "open"  # '{' opening a function body or a scope inside one
    CLOSE = "close"  # '}'
    LABEL = "label"  # `name:`; text is the name


@dataclass(frozen=True)
class RawStatement:
    """One statement as written: its kind, text and the 1-based line it starts on."""

    kind: Kind
    text: str
    line: int


class LexError(ValueError):
    """Malformed statement structure at `line` (the parser turns it into a PtxParseError)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_DELIMITER = re.compile(r'[;{}]|"(?:[^"\\\n]|\\.)*"')
_LABEL = re.compile(r"([A-Za-z_$][\w$]*)\s*:(?!:)\s*")
_HEADER = re.compile(r"(?:\.(?:visible|extern|weak)\s+)*\.(?:entry|func)\b")
# Directives that end at the end of their line, without a ';'.
_LINE_DIRECTIVES = (".version", ".target", ".address_size", ".file", ".loc")


def strip_comments(text: str) -> str:
    """`text` with // and /* */ comments blanked out; strings and line count untouched."""
    if "/" not in text:
        return text

    def blank(match: re.Match[str]) -> str:
        found = match.group()
        if found[0] == '"':
            return found
        return "\n" * found.count("\n")

    return _COMMENT_OR_STRING.sub(blank, text)


def split_statements(text: str) -> list[RawStatement]:
    """The raw statements of PTX `text`, comments removed, `.section` blocks skipped."""
    return _Splitter().run(strip_comments(text))


class _Splitter:
    """Cuts lines into statements; state carries statements that span lines."""

    def __init__(self) -> None:
        self.out: list[RawStatement] = []
        self.pending: list[str] = []  # pieces of a statement not yet ended
        self.pending_line = 0
        self.depth = 0  # braces open inside the pending statement (vectors, initializers)
        self.section: tuple[int, bool] | None = None  # (depth, seen '{') in a `.section`

    def run(self, text: str) -> list[RawStatement]:
        out = self.out
        statement = Kind.STATEMENT
        for number, raw in enumerate(text.split("\n"), 1):
            line = raw.strip()
            if not line:
                continue
            if self.section is not None:
                self._skip_section(line)
                continue
            if (
                not self.pending
                and line[-1] == ";"
                and line.count(";") == 1
                and "{" not in line
                and "}" not in line
                and '"' not in line
                and (":" not in line or not _LABEL.match(line))
            ):
                out.append(RawStatement(statement, line[:-1].rstrip(), number))
                continue
            self._split_line(line, number)
        if self.pending or self.section is not None:
            raise LexError("unterminated statement at end of input", self.pending_line)
        return out

    def _skip_section(self, line: str) -> None:
        """Skip a debug `.section NAME { ... }` block, which may span many lines."""
        assert self.section is not None
        depth = self.section[0] + line.count("{") - line.count("}")
        seen = self.section[1] or "{" in line
        self.section = None if seen and depth <= 0 else (depth, seen)

    def _split_line(self, line: str, number: int) -> None:
        pos = 0
        end = len(line)
        while pos < end:
            if not self.pending:
                while pos < end and line[pos] in " \t\r":
                    pos += 1
                if pos == end:
                    return
                if line.startswith(".section", pos):
                    self.section = (0, False)
                    self._skip_section(line[pos:])
                    return
                label = _LABEL.match(line, pos)
                if label is not None:
                    self.out.append(RawStatement(Kind.LABEL, label.group(1), number))
                    pos = label.end()
                    continue
                if line[pos] == "{":
                    self.out.append(RawStatement(Kind.OPEN, "{", number))
                    pos += 1
                    continue
                if line[pos] == "}":
                    self.out.append(RawStatement(Kind.CLOSE, "}", number))
                    pos += 1
                    continue
                self.pending_line = number
            match = _DELIMITER.search(line, pos)
            if match is None:
                self.pending.append(line[pos:])
                break
            token = match.group()
            if token == ";":
                if self.depth != 0:
                    raise LexError("unbalanced '{' in statement", self.pending_line)
                self._emit(Kind.STATEMENT, line[pos:match.start()])
            elif token == "{":
                head = " ".join([*self.pending, line[pos:match.start()]]).strip()
                if self.depth == 0 and _HEADER.match(head):
                    self._emit(Kind.HEADER, line[pos:match.start()])
                    self.out.append(RawStatement(Kind.OPEN, "{", number))
                else:
                    self.depth += 1
                    self.pending.append(line[pos:match.end()])
            elif token == "}":
                if self.depth == 0:
                    raise LexError("unexpected '}' inside a statement", number)
                self.depth -= 1
                self.pending.append(line[pos:match.end()])
            else:  # a string
                self.pending.append(line[pos:match.end()])
            pos = match.end()
        if self.pending and self.depth == 0:
            head = self.pending[0].lstrip()
            if head.startswith(_LINE_DIRECTIVES):
                self._emit(Kind.STATEMENT, "")

    def _emit(self, kind: Kind, tail: str) -> None:
        text = " ".join([*self.pending, tail]).strip()
        self.out.append(RawStatement(kind, text, self.pending_line))
        self.pending = []
        self.depth = 0
