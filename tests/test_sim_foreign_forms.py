"""Forms Triton and nvcc emit that smalti's own lowering does not: debug information, .param
addresses, elect.sync, prefetch.tensormap, .pragma, cache hints on TMA."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.ptx.module import SourceLocation
from smalti.ptx.parser import parse_module
from smalti.sim import SimError, TensorMap, run_ptx

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"

DEBUG = HEADER + """
.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0,
	.param .u32 k_param_1
)
.reqntid 32
{
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<4>;
	.loc	1 10 0                          // kernel.py:10:0
$L__func_begin0:
	.loc	1 10 0
	ld.param.b64 	%rd1, [k_param_0];
	.loc	1 12 7                          // kernel.py:12:7
	ld.param.b32 	%r1, [k_param_1];
	mov.u32 	%r2, %tid.x;
	.loc	2 3 1, function_name $L__info_string0, inlined_at 1 13 9 // helpers.py:3:1
	add.s32 	%r3, %r2, %r1;
	mul.wide.u32 	%rd2, %r2, 4;
	add.s64 	%rd3, %rd1, %rd2;
	.loc	1 14 5
	st.global.b32 	[%rd3], %r3;
	.loc	1 15 1
	ret;
$L__func_end0:
}
	.file	1 "/src/kernel.py"
	.file	2 "/src/helpers.py"
	.section	.debug_abbrev
	{
.b8 1                                   // Abbreviation Code
.b8 17                                  // DW_TAG_compile_unit
	}
	.section	.debug_info
	{
.b32 70
.b8 2
	}
	.section	.debug_macinfo	{	}
"""


def test_debug_information_is_kept_and_skipped():
    module = parse_module(DEBUG)
    body = [s for s in module.kernels[0].body if hasattr(s, "opcode")]
    assert body[0].source == SourceLocation("/src/kernel.py", 10, 0)
    assert body[2].source == SourceLocation("/src/kernel.py", 12, 7)
    assert body[3].source == SourceLocation("/src/helpers.py", 3, 1)
    out = np.zeros(32, np.int32)
    run_ptx(DEBUG, "k", 1, 32, [out, np.int32(5)])
    np.testing.assert_array_equal(out, np.arange(32) + 5)


def test_errors_name_the_source_line_and_the_ptx_line():
    out = np.zeros(16, np.int32)  # too small: the store at kernel.py:14:5 faults
    with pytest.raises(SimError) as info:
        run_ptx(DEBUG, "k", 1, 32, [out, np.int32(5)])
    error = info.value
    assert error.source == SourceLocation("/src/kernel.py", 14, 5)
    assert error.line == DEBUG.split("\n").index("\tst.global.b32 \t[%rd3], %r3;") + 1
    assert "(/src/kernel.py:14:5)" in str(error)


def test_kernels_alike_but_for_their_source_files_name_their_own_lines():
    """Two texts that differ only in `.file` (one kernel traced from two files) must not
    share a decoded program: each fault names its own file."""
    other = DEBUG.replace('"/src/kernel.py"', '"/src/other.py"')
    for text, file in ((DEBUG, "/src/kernel.py"), (other, "/src/other.py")):
        with pytest.raises(SimError) as info:
            run_ptx(text, "k", 1, 32, [np.zeros(16, np.int32), np.int32(5)])
        assert info.value.source == SourceLocation(file, 14, 5)


PARAMS = HEADER + """
.visible .entry k(
	.param .align 8 .b8 k_param_0[24],
	.param .u64 k_param_1
)
{
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<8>;
	mov.b32 	%r1, k_param_0;           // Triton: a parameter's address, 32-bit
	cvt.u64.u32 	%rd1, %r1;
	cvta.param.u64 	%rd2, %rd1;
	ld.u32 	%r2, [%rd2+4];                // through its generic address
	mov.b64 	%rd3, k_param_0;          // nvcc/CUTLASS: 64-bit, then ld.param through it
	ld.param.u32 	%r3, [%rd3+8];
	ld.param.u64 	%rd4, [%rd3+16];
	ld.param.u64 	%rd5, [k_param_1];
	cvta.to.global.u64 	%rd6, %rd5;
	st.global.u32 	[%rd6], %r2;
	st.global.u32 	[%rd6+4], %r3;
	st.global.u64 	[%rd6+8], %rd4;
	ret;
}
"""


def test_parameter_addresses_in_param_and_generic_space():
    struct = np.array([11, 22, 33, 0, 44, 0], np.uint32)
    out = np.zeros(4, np.uint32)
    run_ptx(PARAMS, "k", 1, 1, [struct, out])
    np.testing.assert_array_equal(out, [22, 33, 44, 0])


def test_a_parameter_read_past_the_parameters_faults():
    ptx = PARAMS.replace("[%rd3+8]", "[%rd3+4000]")
    with pytest.raises(SimError, match="runs past the kernel's 32 parameter bytes"):
        run_ptx(ptx, "k", 1, 1, [np.zeros(6, np.uint32), np.zeros(4, np.uint32)])


def test_stores_to_a_parameter_are_refused():
    ptx = PARAMS.replace("st.global.u32 \t[%rd6], %r2;", "st.u32 \t[%rd2], %r2;")
    with pytest.raises(SimError, match="read-only"):
        run_ptx(ptx, "k", 1, 1, [np.zeros(6, np.uint32), np.zeros(4, np.uint32)])


ELECT = HEADER + """
.visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128])
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<8>;
	.pragma "nounroll";
	ld.param.u64 	%rd1, [out];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mov.b64 	%rd5, tmap;
	cvta.param.u64 	%rd6, %rd5;
	prefetch.param.tensormap 	[%rd6];
	prefetch.tensormap 	[%rd6];
	prefetch.global.L2 	[%rd2];
	setp.ge.u32 	%p1, %r1, 40;
	setp.ge.u32 	%p3, %r1, 32;
	selp.b32 	%r6, 0xFF, -1, %p3;
	@%p1 bra 	LATE;
	elect.sync 	%r2|%p2, %r6;
	bra.uni 	DONE;
LATE:
	elect.sync 	%r2|%p2, 0xFFFFFF00;
DONE:
	selp.u32 	%r3, 1, 0, %p2;
	shl.b32 	%r4, %r2, 8;
	or.b32 	%r5, %r4, %r3;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r5;
	ret;
}
"""


def test_elect_sync_picks_the_lowest_member_and_hints_do_nothing():
    out = np.zeros(64, np.uint32)
    tm = TensorMap(np.zeros((8, 8), np.float32), box=(8, 8))
    run_ptx(ELECT, "k", 1, 64, [out, tm])
    leader, elected = out >> 8, out & 1
    # warp 0: all lanes at the first elect (membermask -1); warp 1: lanes 0-7 (threads 32-39)
    # at the first (membermask 0xFF), lanes 8-31 at the second (membermask 0xFFFFFF00).
    np.testing.assert_array_equal(leader[:32], 0)
    np.testing.assert_array_equal(leader[32:40], 0)
    np.testing.assert_array_equal(leader[40:], 8)
    assert np.flatnonzero(elected).tolist() == [0, 32, 40]


def test_elect_sync_outside_its_membermask_faults():
    ptx = ELECT.replace("elect.sync \t%r2|%p2, 0xFFFFFF00;", "elect.sync \t%r2|%p2, 0xFF;")
    with pytest.raises(SimError, match="is not in its membermask"):
        run_ptx(ptx, "k", 1, 64, [np.zeros(64, np.uint32),
                                  TensorMap(np.zeros((8, 8), np.float32), box=(8, 8))])


def test_tma_cache_hints_are_accepted():
    from tests.async_kernels import tma_load_kernel

    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    ptx = tma_load_kernel(2, [(0, (0, 0))], a.nbytes, a.nbytes)
    ptx = ptx.replace("complete_tx::bytes [smem+0], [tmap, {0, 0}], [bar];",
                      "complete_tx::bytes.L2::cache_hint [smem+0], [tmap, {0, 0}], [bar], "
                      "%rd7;")
    ptx = ptx.replace("ld.param.u64 \t%rd3, [out];",
                      "ld.param.u64 \t%rd3, [out];\n\tmov.u64 \t%rd7, 0x12F0000000000000;")
    assert ".L2::cache_hint" in ptx
    out = np.zeros(a.nbytes, np.uint8)
    run_ptx(ptx, "tma_load", 1, 128, [TensorMap(a, box=(16, 32)), out])
    np.testing.assert_array_equal(out.view(np.float32).reshape(16, 32), a)


ODD_SHARED = HEADER + """
.visible .entry k(.param .u64 out)
{
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<6>;
	.shared .align 4 .b32 w[1];
	.shared .align 1 .b8 c[1];
	mov.u32 	%r1, %ctaid.x;
	st.shared.u32 	[w], %r1;
	st.shared.u8 	[c], %r1;
	ld.shared.u32 	%r2, [w];
	ld.param.u64 	%rd1, [out];
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r2;
	ret;
}
"""


def test_blocks_with_an_odd_amount_of_shared_memory_keep_their_words_apart():
    # 5 bytes of shared memory per block: each block's words stay aligned (a regression: an
    # unaligned block base made word accesses of block 1 land in block 0's bytes).
    out = np.zeros(4, np.uint32)
    run_ptx(ODD_SHARED, "k", 4, 1, [out])
    np.testing.assert_array_equal(out, np.arange(4))
