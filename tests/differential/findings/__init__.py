"""Finding files: a minimised program as a standalone .mlir or .py file, and its replay.

A finding file is the program's own text (the .mlir kernel, or the DSL module defining
`kernel`), after a header of comment lines:

    // FINDING: mismatch: wrong numbers in 1 output(s)      (.py files: `# FINDING: ...`)
    // ... (the outcome's message, as comments)
    // XFAIL: why, and whose it is                          (optional; see below)
    // PROGRAM: {...}                                        (the program, as JSON)

The JSON gives the inputs (seeded) and the numpy reference; the text is what runs, so the
file may be edited by hand. `python -m tests.differential.findings FILE...` replays files
and prints their outcomes; a .py finding also replays when run as a script from the
repository root. tests/test_differential.py replays every file in this directory and
expects a match, or, for a file with an XFAIL line, fails strictly until the bug is fixed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from tests.differential.program import Program, from_json, to_json
from tests.differential.runner import Outcome, run_program, source_text

DIRECTORY = Path(__file__).resolve().parent
PY_FOOTER = """

if __name__ == "__main__":  # replay, with the repository that holds this file importable
    import sys
    from pathlib import Path

    sys.path[:0] = [str(p) for p in Path(__file__).resolve().parents
                    if (p / "tests" / "differential").is_dir()][:1]
    from tests.differential.findings import main

    main([__file__])
"""


@dataclass(frozen=True)
class FindingFile:
    path: Path
    program: Program
    text: str
    expected: str  # the FINDING line: the outcome it was filed with
    xfail: str | None


def _comment(kind: str) -> str:
    return "//" if kind == "mlir" else "#"


def write_finding(program: Program, outcome: Outcome, directory: Path,
                  stem: str | None = None, xfail: str | None = None) -> Path:
    """Write the program and its outcome as `directory/STEM.mlir|.py`; the path. `xfail`:
    why the finding stays (its regression test is then an expected failure)."""
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".mlir" if program.kind == "mlir" else ".py"
    path = directory / f"{stem or f'{program.kind}_{program.seed}'}{suffix}"
    c = _comment(program.kind)
    lines = ["# ruff: noqa"] if program.kind == "dsl" else []  # generated code
    lines.append(f"{c} FINDING: {outcome.signature}")
    lines += [f"{c}   {line}" for line in outcome.message.strip().splitlines()[:30]]
    if xfail:
        lines.append(f"{c} XFAIL: {xfail}")
    lines.append(f"{c} Replay: python -m tests.differential.findings {path.name}")
    lines.append(f"{c} PROGRAM: {to_json(program)}")
    text = source_text(program)
    footer = PY_FOOTER if program.kind == "dsl" else ""
    path.write_text("\n".join(lines) + "\n" + text + footer)
    return path


def read_finding(path: Path) -> FindingFile:
    text = Path(path).read_text()
    kind = "mlir" if Path(path).suffix == ".mlir" else "dsl"
    c = _comment(kind)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        for key in ("FINDING", "XFAIL", "PROGRAM"):
            if line.startswith(f"{c} {key}: "):
                fields[key] = line[len(f"{c} {key}: "):]
    if "PROGRAM" not in fields:
        raise ValueError(f"{path}: no '{c} PROGRAM:' line")
    return FindingFile(Path(path), from_json(fields["PROGRAM"]), text,
                       fields.get("FINDING", ""), fields.get("XFAIL"))


def replay(path: Path) -> Outcome:
    """The outcome of the file's text today."""
    finding = read_finding(path)
    return run_program(finding.program, source=finding.text, filename=str(finding.path))


def finding_files(directory: Path = DIRECTORY) -> list[Path]:
    return sorted(p for p in [*directory.glob("*.mlir"), *directory.glob("*.py")]
                  if not p.name.startswith("_"))


def main(argv: list[str] | None = None) -> None:
    paths = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    failed = False
    for path in paths:
        if not path.exists() and (DIRECTORY / path).exists():
            path = DIRECTORY / path
        outcome = replay(path)
        failed |= outcome.kind != "match"
        print(f"{path}: {outcome.kind}{': ' + outcome.detail if outcome.detail else ''}")
        if outcome.kind != "match":
            print(outcome.message)
    sys.exit(1 if failed else 0)


__all__ = ["DIRECTORY", "FindingFile", "finding_files", "main", "read_finding", "replay",
           "write_finding"]
