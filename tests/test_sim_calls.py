"""Calls nvcc emits for device-side assert and printf (tests/fixtures/foreign_ptx/nvcc):
__assertfail fails the run with the assertion's message, file and line; vprintf prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from smalti.ptx.module import ParamList, Symbol
from smalti.ptx.parser import parse_module
from smalti.ptx.printer import print_module
from smalti.sim import SimError, run_ptx

PTX = (Path(__file__).parent / "fixtures" / "foreign_ptx" / "nvcc" / "assert_printf.ptx"
       ).read_text()
SOURCE_LINE = 9  # the assert in assert_printf.cu


def test_call_sequences_parse_and_print_back():
    module = parse_module(PTX)
    assert [d.name for d in module.declarations] == ["vprintf", "__assertfail"]
    assert [p.type for p in module.declarations[0].returns] == ["b32"]
    calls = [s for s in module.kernels[0].body if getattr(s, "base", "") == "call"]
    assert len(calls) == 2
    printf = next(c for c in calls if Symbol("vprintf") in c.operands)
    returns, _, arguments = printf.operands
    assert isinstance(returns, ParamList) and isinstance(arguments, ParamList)
    assert len(arguments.elements) == 2
    # The call sequence's .param variables are renamed per scope, like scoped registers.
    names = [d.name for d in module.kernels[0].local if d.state == "param"]
    assert len(names) == len(set(names)) == 8
    again = parse_module(print_module(module))
    assert again.declarations == module.declarations
    assert [s.opcode for s in again.kernels[0].body if hasattr(s, "opcode")] == [
        s.opcode for s in module.kernels[0].body if hasattr(s, "opcode")]


def test_printf_prints_the_formatted_line(capfd):
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    run_ptx(PTX, "checked_scale", 1, 32, [x, y, np.int32(8), np.float32(1.5)])
    np.testing.assert_array_equal(y, x * 1.5)
    printed = capfd.readouterr().out
    assert printed == "thread 3: x=3.000000 y=4.50 n=8 ok 8000000000 Z|   ff|7   |\n"


def test_a_failed_assert_stops_the_run_with_its_message_file_and_line():
    x = np.arange(8, dtype=np.float32)
    x[5] = -1
    with pytest.raises(SimError) as info:
        run_ptx(PTX, "checked_scale", 1, 32, [x, np.zeros(8, np.float32), np.int32(8),
                                              np.float32(1.5)])
    error = info.value
    message = str(error)
    assert "device assertion failed" in message
    assert f"assert_printf.cu:{SOURCE_LINE}: void checked_scale(" in message
    assert "Assertion `x[i] >= 0.0f && \"inputs must be non-negative\"` failed." in message
    assert "thread (5, 0, 0)" in message
    assert error.source is not None and error.source.file.endswith("assert_printf.cu")
    assert error.text.startswith("call.uni")


def test_calls_to_functions_the_simulator_does_not_know_are_refused():
    ptx = PTX.replace("__assertfail, ", "my_helper, ").replace(
        ".extern .func __assertfail", ".extern .func my_helper")
    with pytest.raises(SimError, match="only __assertfail and vprintf are simulated"):
        run_ptx(ptx, "checked_scale", 1, 32, [np.zeros(8, np.float32), np.zeros(8, np.float32),
                                              np.int32(8), np.float32(1.0)])


def test_trap_and_brkpt_fail_the_run():
    for opcode, message in (("trap", "executed trap"), ("brkpt", "breakpoint")):
        ptx = PTX.replace("\tret;", f"\t{opcode};\n\tret;", 1)
        with pytest.raises(SimError, match=message):
            run_ptx(ptx, "checked_scale", 1, 32, [np.zeros(8, np.float32),
                                                  np.zeros(8, np.float32), np.int32(8),
                                                  np.float32(1.0)])
