"""`--verify-diagnostics`: match produced diagnostics against `// expected-*` annotations.

Annotations (mlir-opt's syntax; the message matches as a substring, or with `-re` as text
whose `{{...}}` parts are regular expressions):
  // expected-error {{msg}}           on this line
  // expected-error @+N {{msg}}       N lines below;  @-N: N lines above
  // expected-error @above {{msg}}    the nearest line above without an annotation
  // expected-error @below {{msg}}    the nearest line below without an annotation
  // expected-error @unknown {{msg}}  a diagnostic with no file location
and the same with expected-warning, expected-note and expected-remark.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from smalti.tools.reported import Reported
from smalti.tools.split import Chunk

_KIND = re.compile(r"expected-(error|warning|note|remark)\b")
_ANNOTATION = re.compile(
    r"expected-(?P<severity>error|warning|note|remark)(?P<re>-re)?"
    r"[ \t]*(?:@(?P<target>[+-]\d+|above|below|unknown))?"
    r"[ \t]*\{\{(?P<message>.*)\}\}[ \t]*$"
)


@dataclass(frozen=True)
class Expected:
    """One annotation: a diagnostic of `severity` on `line` (None: unknown location)."""

    severity: str
    line: int | None
    message: str
    is_regex: bool
    annotation_line: int
    annotation_col: int

    def matches(self, message: str) -> bool:
        """Whether a produced diagnostic's message satisfies this annotation."""
        if not self.is_regex:
            return self.message in message
        return re.search(_regex_of(self.message), message) is not None


@dataclass(frozen=True)
class Problem:
    """A mismatch, printed as `where: error: message`."""

    where: str
    message: str

    def format(self) -> str:
        return f"{self.where}: error: {self.message}"


def _regex_of(message: str) -> str:
    """A Python regex for a `-re` message: `{{...}}` parts are regexes, the rest literal."""
    parts = re.split(r"\{\{(.*?)\}\}", message)
    return "".join(part if i % 2 else re.escape(part) for i, part in enumerate(parts))


def parse_expectations(chunk: Chunk, file: str) -> tuple[list[Expected], list[Problem]]:
    """The annotations of one chunk, with lines of the original file, and malformed ones."""
    lines = chunk.text.splitlines()
    found: list[tuple[int, int, re.Match[str]]] = []  # (line, col, match)
    problems: list[Problem] = []
    for index, text in enumerate(lines):
        line = chunk.first_line + index
        kind = _KIND.search(text)
        if kind is None:
            continue
        match = _ANNOTATION.match(text, kind.start())
        if match is None:
            problems.append(Problem(
                f"{file}:{line}:{kind.start() + 1}",
                f"malformed expected-{kind.group(1)} annotation: expected "
                "'@+N', '@-N', '@above', '@below' or '@unknown', then '{{message}}'"))
            continue
        found.append((line, kind.start() + 1, match))

    annotated = {line for line, _, _ in found}
    first, last = chunk.first_line, chunk.first_line + len(lines) - 1
    expected = []
    for line, col, match in found:
        target_line = _target_line(match.group("target"), line, annotated, first, last)
        if target_line == 0:
            problems.append(Problem(f"{file}:{line}:{col}",
                                    f"expected-{match.group('severity')} "
                                    f"@{match.group('target')} has no line to refer to"))
            continue
        expected.append(Expected(match.group("severity"), target_line, match.group("message"),
                                 match.group("re") is not None, line, col))
    return expected, problems


def _target_line(target: str | None, line: int, annotated: set[int], first: int,
                 last: int) -> int | None:
    """The line an annotation refers to: None for @unknown, 0 when there is none."""
    match target:
        case None:
            return line
        case "unknown":
            return None
        case "above":
            candidates = range(line - 1, first - 1, -1)
        case "below":
            candidates = range(line + 1, last + 1)
        case _:
            target_line = line + int(target)
            return target_line if first <= target_line <= last else 0
    return next((n for n in candidates if n not in annotated), 0)


def _flatten(diagnostics: list[Reported]) -> list[Reported]:
    """Each diagnostic followed by its notes, as separate items to match."""
    flat = []
    for diagnostic in diagnostics:
        flat.append(diagnostic)
        flat.extend(_flatten(list(diagnostic.notes)))
    return flat


def check_chunk(chunk: Chunk, file: str, produced: list[Reported]) -> list[Problem]:
    """Every mismatch between `produced` and the annotations of `chunk` (empty: all matched)."""
    expected, problems = parse_expectations(chunk, file)
    unmatched = list(expected)
    for diagnostic in _flatten([d.without_current_operation_notes() for d in produced]):
        match diagnostic.file:
            case None:
                line = None
            case same if same == file:
                line = diagnostic.line
            case _:
                line = -1  # another file: no annotation here can mean it
        hit = next((e for e in unmatched if e.severity == diagnostic.severity
                    and e.line == line and e.matches(diagnostic.message)), None)
        if hit is None:
            problems.append(Problem(diagnostic.where,
                                    f"unexpected {diagnostic.severity}: {diagnostic.message}"))
        else:
            unmatched.remove(hit)
    problems.extend(
        Problem(f"{file}:{e.annotation_line}",
                f'expected {e.severity} "{e.message}" was not produced')
        for e in unmatched)
    return problems


def report_chunk(chunk: Chunk, file: str, produced: tuple[Reported, ...], *, verify: bool,
                 failed: bool) -> bool:
    """Print a chunk's diagnostics on stderr, or under --verify-diagnostics its mismatches
    against the annotations; whether the chunk counts as failed (`failed` when printing)."""
    if verify:
        problems = check_chunk(chunk, file, list(produced))
        for problem in problems:
            print(problem.format(), file=sys.stderr)
        return bool(problems)
    for diagnostic in produced:
        print(diagnostic.format(), file=sys.stderr)
    return failed
