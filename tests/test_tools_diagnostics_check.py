"""The --verify-diagnostics matcher: annotation syntax, target lines, and mismatch reports."""

from smalti.tools.diagnostics_check import check_chunk, parse_expectations
from smalti.tools.reported import Reported
from smalti.tools.split import Chunk

FILE = "in.mlir"


def error(line: int, message: str, severity: str = "error", notes=()) -> Reported:
    return Reported(FILE, line, 3, severity, message, tuple(notes))


def lines(*texts: str, first_line: int = 1) -> Chunk:
    return Chunk("".join(t + "\n" for t in texts), first_line)


def test_target_lines():
    chunk = lines(
        "op",                                  # 1
        "op // expected-error {{same}}",       # 2
        "// expected-error @+2 {{plus}}",      # 3
        "// expected-warning @-3 {{minus}}",   # 4
        "op",                                  # 5
        "// expected-note @above {{above}}",   # 6 -> 5
        "// expected-remark @above {{again}}", # 7 -> 5 (skips annotation lines)
        "// expected-error @below {{below}}",  # 8 -> 10
        "// expected-error @below {{below2}}", # 9 -> 10
        "op",                                  # 10
        "// expected-error @unknown {{nowhere}}",
    )
    expected, problems = parse_expectations(chunk, FILE)
    assert problems == []
    assert [(e.severity, e.line, e.message) for e in expected] == [
        ("error", 2, "same"), ("error", 5, "plus"), ("warning", 1, "minus"),
        ("note", 5, "above"), ("remark", 5, "again"), ("error", 10, "below"),
        ("error", 10, "below2"), ("error", None, "nowhere"),
    ]


def test_lines_are_those_of_the_original_file():
    chunk = lines("op", "// expected-error @-1 {{x}}", first_line=40)
    expected, _ = parse_expectations(chunk, FILE)
    assert expected[0].line == 40
    assert expected[0].annotation_line == 41


def test_all_matched_is_no_problem():
    chunk = lines("op", "// expected-error @-1 {{undeclared SSA}}")
    produced = [error(1, "use of undeclared SSA value name")]
    assert check_chunk(chunk, FILE, produced) == []


def test_wrong_line_is_both_unexpected_and_not_produced():
    chunk = lines("op", "op", "// expected-error @-1 {{boom}}")
    problems = [p.format() for p in check_chunk(chunk, FILE, [error(1, "boom")])]
    assert problems == [
        "in.mlir:1:3: error: unexpected error: boom",
        'in.mlir:3: error: expected error "boom" was not produced',
    ]


def test_severity_must_match():
    chunk = lines("op // expected-warning {{careful}}")
    problems = check_chunk(chunk, FILE, [error(1, "careful")])
    assert [p.message for p in problems] == [
        "unexpected error: careful", 'expected warning "careful" was not produced']


def test_each_expectation_matches_one_diagnostic():
    chunk = lines("op // expected-error {{twice}}")
    problems = check_chunk(chunk, FILE, [error(1, "twice"), error(1, "twice again")])
    assert [p.message for p in problems] == ["unexpected error: twice again"]


def test_notes_are_matched_and_current_operation_notes_ignored():
    produced = [error(1, "bad op", notes=[
        error(1, "see current operation: %0 = ...", "note"), error(2, "defined here", "note")])]
    assert check_chunk(lines("op // expected-error {{bad op}}",
                             "op // expected-note {{defined here}}"), FILE, produced) == []
    problems = check_chunk(lines("op // expected-error {{bad op}}", "op"), FILE, produced)
    assert [p.message for p in problems] == ["unexpected note: defined here"]


def test_regex_messages():
    chunk = lines("op // expected-error-re {{value {{[0-9]+}} (x)}}")
    assert check_chunk(chunk, FILE, [error(1, "bad value 42 (x) here")]) == []
    assert len(check_chunk(chunk, FILE, [error(1, "bad value 4x (x)")])) == 2


def test_unknown_and_foreign_locations():
    chunk = lines("// expected-error @unknown {{lost}}")
    lost = Reported(None, 0, 0, "error", "lost")
    assert check_chunk(chunk, FILE, [lost]) == []
    foreign = Reported("other.mlir", 1, 1, "error", "lost")
    problems = check_chunk(chunk, FILE, [foreign])
    assert [p.where for p in problems] == ["other.mlir:1:1", "in.mlir:1"]


def test_malformed_annotations_are_reported():
    chunk = lines("// expected-error @+1 no braces", "op",
                  "// expected-error @+5 {{past the end}}", "// expected-error@bogus {{x}}")
    expected, problems = parse_expectations(chunk, FILE)
    assert expected == []
    assert [p.where for p in problems] == ["in.mlir:1:4", "in.mlir:4:4", "in.mlir:3:4"]
    assert "malformed expected-error" in problems[0].message
    assert "no line to refer to" in problems[2].message


def test_no_annotations_and_no_diagnostics():
    assert check_chunk(lines("op"), FILE, []) == []
