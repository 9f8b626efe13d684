"""Undefined register values (sim/poison.py, sim/registers.py): reading a register no thread
wrote is allowed, and pure instructions carry the undefined value ("poison") to their results;
the simulator faults only where one decides something observable (a stored value, an address,
a branch condition, a guard of an instruction with effects), naming the line that first read
the unwritten register and reporting the error at the line where it mattered."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, run_ptx
from tests.async_kernels import HEADER

THREADS = 4


def kernel(body: str) -> str:
    """A kernel `k(out)` of THREADS threads: %rd1 = out, %r1 = %tid.x, %rd2 = &out[%tid.x];
    %r9 and %r10 are never written. The body ends by storing %r20 to out[%tid.x]."""
    return HEADER + f"""
.visible .entry k(.param .u64 out)
{{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<32>;
	.reg .b64 	%rd<8>;
	ld.param.u64 	%rd1, [out];
	cvta.to.global.u64 	%rd1, %rd1;
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd2, %rd1, %rd3;
{body}
	st.global.u32 	[%rd2], %r20;
	ret;
}}
"""


def line_of(ptx: str, needle: str) -> int:
    return next(i + 1 for i, text in enumerate(ptx.split("\n")) if needle in text)


def run(ptx: str) -> np.ndarray:
    out = np.zeros(THREADS, np.uint32)
    run_ptx(ptx, "k", 1, THREADS, [out])
    return out


def fails(ptx: str, where: str, first_read: str | None) -> SimError:
    """The SimError of running `ptx`: at the line of `where`, naming the line of
    `first_read` (the unwritten register's first read) unless that is `where` itself."""
    with pytest.raises(SimError) as info:
        run(ptx)
    error = info.value
    assert error.line == line_of(ptx, where), str(error)
    if first_read is None:
        assert "read of uninitialised register" in str(error), str(error)
    else:
        assert f"uninitialised register at line {line_of(ptx, first_read)}" in str(error)
    return error


def test_arithmetic_on_an_undefined_value_that_is_then_discarded_is_harmless():
    out = run(kernel("""
	add.s32 	%r3, %r9, 1;
	mul.hi.u32 	%r4, %r3, %r1;
	shr.u32 	%r5, %r4, 2;
	setp.ge.s32 	%p1, %r5, %r3;
	cvt.u64.u32 	%rd4, %r5;
	mov.u32 	%r20, 7;"""))
    np.testing.assert_array_equal(out, 7)


def test_an_undefined_value_selected_away_by_selp_or_a_guard_is_harmless():
    out = run(kernel("""
	setp.eq.u32 	%p1, %r1, 100;
	selp.b32 	%r3, %r9, 7, %p1;
	@%p1 mov.u32 	%r3, %r10;
	@%p1 st.global.u32 	[%rd2], %r10;
	add.s32 	%r20, %r3, %r1;"""))
    np.testing.assert_array_equal(out, 7 + np.arange(THREADS))


def test_an_undefined_value_selected_by_selp_for_one_thread_is_caught_at_its_store():
    ptx = kernel("""
	setp.eq.u32 	%p1, %r1, 2;
	selp.b32 	%r20, %r9, %r1, %p1;""")
    error = fails(ptx, "st.global.u32", "selp.b32")
    assert "register %r20 holds an undefined value" in str(error)
    assert "thread (2, 0, 0)" in str(error)


def test_an_undefined_value_stored_to_memory_faults():
    ptx = kernel("""
	add.s32 	%r3, %r9, 1;
	mov.b32 	%r20, %r3;""")
    fails(ptx, "st.global.u32", "add.s32")


def test_storing_an_unwritten_register_directly_still_faults():
    fails(kernel("\tmov.u32 \t%r20, 0;\n\tst.global.u32 \t[%rd2], %r10;"),
          "st.global.u32 \t[%rd2], %r10", None)


def test_an_undefined_value_used_as_an_address_faults():
    ptx = kernel("""
	mov.u32 	%r20, 1;
	cvt.u64.u32 	%rd4, %r9;
	add.s64 	%rd5, %rd1, %rd4;
	ld.global.u32 	%r20, [%rd5];""")
    fails(ptx, "ld.global.u32", "cvt.u64.u32")


def test_an_undefined_branch_condition_faults():
    ptx = kernel("""
	mov.u32 	%r20, 1;
	setp.eq.u32 	%p1, %r9, 0;
	@%p1 bra 	SKIP;
	mov.u32 	%r20, 2;
SKIP:""")
    fails(ptx, "bra", "setp.eq.u32")


def test_an_undefined_guard_of_a_store_faults():
    ptx = kernel("""
	mov.u32 	%r20, 1;
	and.b32 	%r3, %r9, 1;
	setp.ne.u32 	%p1, %r3, 0;
	@%p1 st.global.u32 	[%rd1], %r20;""")
    fails(ptx, "@%p1 st.global.u32", "and.b32")


def test_an_undefined_guard_of_a_pure_instruction_makes_only_its_result_undefined():
    discarded = run(kernel("""
	setp.ne.u32 	%p1, %r9, 0;
	@%p1 add.s32 	%r3, %r1, 1;
	mov.u32 	%r20, 5;"""))
    np.testing.assert_array_equal(discarded, 5)
    ptx = kernel("""
	mov.u32 	%r3, 0;
	setp.ne.u32 	%p1, %r9, 0;
	@%p1 add.s32 	%r3, %r1, 1;
	mov.u32 	%r20, %r3;""")
    fails(ptx, "st.global.u32", "setp.ne.u32")
