"""smalti-opt, run in-process through main(argv): output, diagnostics, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from smalti.dialect.diagnostics import Diagnostic, DiagnosticError
from smalti.passes import registry
from smalti.tools.opt import main

ADD_TWICE = """\
func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  return %1 : i32
}
"""


def write(tmp_path: Path, text: str, name: str = "in.mlir") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_round_trip_and_pass_flags(tmp_path, capsys):
    path = write(tmp_path, ADD_TWICE)
    assert main([path]) == 0
    assert capsys.readouterr().out.count("arith.addi") == 2
    assert main([path, "--cse"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("module {") and out.count("arith.addi") == 1


def test_pass_flags_are_generated_from_the_registry(monkeypatch, tmp_path, capsys):
    seen = []
    monkeypatch.setitem(registry.REGISTRY, "test-record", registry.PassInfo(
        "test-record", "records the op name", lambda op: seen.append(op.name)))
    assert main([write(tmp_path, ADD_TWICE), "--test-record", "--cse", "--test-record"]) == 0
    assert seen == ["builtin.module", "builtin.module"]
    assert "--test-record" in _help(capsys)


def _help(capsys) -> str:
    assert main(["--help"]) == 0
    return capsys.readouterr().out


def test_parse_error_is_located_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path, "func.func @f() {\n  return %x : i32\n}\n")
    out = tmp_path / "out.mlir"
    assert main([path, "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"{path}:2:10: error: use of undeclared SSA value name")
    assert captured.out == ""
    assert not out.exists()


def test_output_file_replaces_atomically(tmp_path, capsys):
    out = tmp_path / "out.mlir"
    out.write_text("old")
    assert main([write(tmp_path, ADD_TWICE), "--cse", "-o", str(out)]) == 0
    assert out.read_text().count("arith.addi") == 1
    assert capsys.readouterr().out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mlir", "out.mlir"]  # no temp


def test_stdin(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("func.func @f() {\n  return %y : i32\n}\n"))
    assert main(["-"]) == 1
    assert capsys.readouterr().err.startswith("<stdin>:2:10: error:")


def test_split_input_file_keeps_line_numbers(tmp_path, capsys):
    text = "func.func @a() {\n  return\n}\n// -----\nfunc.func @b() {\n  return %z : i32\n}\n"
    path = write(tmp_path, text)
    assert main([path, "--split-input-file"]) == 1
    assert capsys.readouterr().err.startswith(f"{path}:6:10: error:")
    assert main([path]) == 1
    assert capsys.readouterr().err.startswith(f"{path}:6:10: error:")


def _raise_located(op) -> None:
    func = op.regions[0].blocks[0].operations[0]
    note = Diagnostic(func.location, "the kernel starts here", "note")
    raise DiagnosticError(Diagnostic(func.location, "'func.func' op is not a kernel",
                                     notes=(note,)))


def test_pass_errors_print_with_notes(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(registry.REGISTRY, "test-reject", registry.PassInfo(
        "test-reject", "rejects every module", _raise_located))
    path = write(tmp_path, ADD_TWICE)
    assert main([path, "--test-reject"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:1:1: error: 'func.func' op is not a kernel",
        f"{path}:1:1: note: the kernel starts here",
    ]


def test_verify_diagnostics_sees_pass_errors_and_notes(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(registry.REGISTRY, "test-reject", registry.PassInfo(
        "test-reject", "rejects every module", _raise_located))
    annotated = ("// expected-error @below {{is not a kernel}}\n"
                 "// expected-note @below {{starts here}}\n" + ADD_TWICE)
    path = write(tmp_path, annotated + "// -----\nfunc.func @ok() {\n  return\n}\n")
    assert main([path, "--verify-diagnostics", "--pass-pipeline=builtin.module(cse)"]) == 1
    err = capsys.readouterr().err
    assert 'expected error "is not a kernel" was not produced' in err
    path = write(tmp_path, annotated, "one.mlir")
    assert main([path, "--verify-diagnostics", "--test-reject"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")


def test_verify_diagnostics_prints_successful_chunks(tmp_path, capsys):
    text = ("func.func @a() {\n  // expected-error @+1 {{undeclared}}\n  return %z : i32\n}\n"
            "// -----\nfunc.func @b() {\n  return\n}\n")
    assert main([write(tmp_path, text), "--split-input-file", "--verify-diagnostics"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// -----\nmodule {\n  func.func @b()")


def test_unknown_pass_is_a_clean_error(tmp_path, capsys):
    path = write(tmp_path, ADD_TWICE)
    assert main([path, "--pass-pipeline=builtin.module(cse,nope)"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("smalti-opt: error: invalid pass pipeline")
    assert "'nope'" in err and "Traceback" not in err
    assert main([path, "--nope"]) == 1
    assert "unrecognized arguments: --nope" in capsys.readouterr().err


def _crash(op) -> None:
    func = op.regions[0].blocks[0].operations[0]  # noqa: F841  (the op the crash names)
    raise KeyError("no rule")


def test_internal_error_names_pass_and_op(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(registry.REGISTRY, "test-crash", registry.PassInfo(
        "test-crash", "crashes", _crash))
    monkeypatch.delenv("SMALTI_DEBUG", raising=False)
    path = write(tmp_path, ADD_TWICE)
    assert main([path, "--test-crash"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("smalti-opt: internal error: KeyError: 'no rule' (in pass 'test-crash'")
    assert "Traceback" not in err
    monkeypatch.setenv("SMALTI_DEBUG", "1")
    assert main([path, "--test-crash"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_internal_error_names_the_innermost_op(monkeypatch, tmp_path, capsys):
    from smalti.tools import cli_common

    monkeypatch.setattr(cli_common, "_is_smalti_frame", lambda filename: True)
    monkeypatch.setitem(registry.REGISTRY, "test-crash", registry.PassInfo(
        "test-crash", "crashes", _crash))
    path = write(tmp_path, ADD_TWICE)
    assert main([path, "--test-crash"]) == 2
    assert f"(in pass 'test-crash' at op {path}:1:1)" in capsys.readouterr().err


def test_print_ir_after_all_goes_to_stderr(tmp_path, capfd):
    assert main([write(tmp_path, ADD_TWICE), "--cse", "--mlir-print-ir-after-all"]) == 0
    captured = capfd.readouterr()
    assert "IR Dump After" in captured.err and "IR Dump After" not in captured.out


def test_debuginfo(tmp_path, capsys):
    path = write(tmp_path, ADD_TWICE)
    assert main([path, "--mlir-print-debuginfo"]) == 0
    assert f'loc("{path}":4:3)' in capsys.readouterr().out


def test_console_script_end_to_end(tmp_path):
    path = write(tmp_path, "func.func @f() {\n  return %x : i32\n}\n")
    script = Path(sys.executable).parent / "smalti-opt"
    result = subprocess.run([str(script), path], capture_output=True, text=True,
                            env={**os.environ, "SMALTI_DEBUG": "0"}, check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(f"{path}:2:10: error: use of undeclared SSA value name")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("flag", ["--canonicalize", "--cse", "--smalti-verify"])
def test_listed_flags_exist(flag, capsys):
    assert flag in _help(capsys)
