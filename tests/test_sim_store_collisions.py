"""Several threads storing to one address in one instruction (PTX ISA: one of the writes
succeeds): no race within a warp, a warning when the values differ, a race across warps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from smalti.sim import NondeterministicStoreWarning, SimError, SimWarning, run_ptx

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def kernel(value: str, address: str, extra: str = "", store: str = "st.shared.u32 \t[%r4], %r5;",
           space: str = "shared") -> str:
    """Each thread stores `value` at shared `address` (a function of %r1 = tid), the block
    meets at bar.sync, thread t reads word t // 32 back into out[t]. A global variant stores
    to out directly."""
    target = ("\tmov.u32 \t%r2, smem;\n\tadd.u32 \t%r4, %r2, %r3;" if space == "shared" else
              "\tcvt.u64.u32 \t%rd5, %r3;\n\tadd.s64 \t%rd6, %rd4, %rd5;")
    return HEADER + f"""
.visible .entry k(.param .u64 out)
{{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<8>;
	.shared .align 16 .b8 smem[512];

	ld.param.u64 	%rd3, [out];
	cvta.to.global.u64 	%rd4, %rd3;
	mov.u32 	%r1, %tid.x;
	{address}
{target}
	{value}
	{extra}
	{store}
	bar.sync 	0;
	shr.u32 	%r6, %r1, 5;
	shl.b32 	%r6, %r6, 2;
	mov.u32 	%r2, smem;
	add.u32 	%r7, %r2, %r6;
	mul.wide.u32 	%rd1, %r1, 4;
	add.s64 	%rd2, %rd4, %rd1;
	{"ld.shared.u32 	%r8, [%r7];" if space == "shared" else ""}
	{"st.global.u32 	[%rd2], %r8;" if space == "shared" else ""}
	ret;
}}
"""


WARP_WORD = "shr.u32 \t%r3, %r1, 5;\n\tshl.b32 \t%r3, %r3, 2;"  # byte offset 4 * warp


def test_every_lane_storing_one_value_to_its_warps_word_is_no_race():
    out = np.zeros(128, np.uint32)
    ptx = kernel("shr.u32 \t%r5, %r1, 5;\n\tadd.u32 \t%r5, %r5, 100;", WARP_WORD)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_ptx(ptx, "k", 1, 128, [out])
    np.testing.assert_array_equal(out, 100 + np.arange(128) // 32)


def test_a_quad_storing_one_row_statistic_with_v2_is_no_race():
    # The four lanes of each quad store the same pair at the quad's 8 bytes.
    ptx = kernel("shr.u32 \t%r5, %r1, 2;\n\tadd.u32 \t%r9, %r5, 1;",
                 "shr.u32 \t%r3, %r1, 2;\n\tshl.b32 \t%r3, %r3, 3;",
                 store="st.shared.v2.u32 \t[%r4], {%r5, %r9};")
    out = np.zeros(64, np.uint32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_ptx(ptx, "k", 1, 64, [out])
    # thread t reads word t // 32 (word w holds quad w//2's pair: w//2 + (w & 1))
    words = np.arange(64) // 32
    np.testing.assert_array_equal(out, words // 2 + (words & 1))


def test_different_values_to_one_address_warn_and_name_the_threads():
    ptx = kernel("mov.u32 \t%r5, %r1;", WARP_WORD)
    out = np.zeros(64, np.uint32)
    with pytest.warns(NondeterministicStoreWarning) as caught:
        run_ptx(ptx, "k", 1, 64, [out])
    assert len(caught) == 1  # once per instruction and launch
    message = str(caught[0].message)
    assert "32 threads wrote different values to address 0x" in message
    assert "block (0, 0, 0) thread (0, 0, 0)" in message and "st.shared.u32" in message
    assert issubclass(NondeterministicStoreWarning, SimWarning)
    # One of the values landed: each warp's word holds one of its lanes' ids.
    assert (out[:32] < 32).all() and ((out[32:] >= 32) & (out[32:] < 64)).all()


def test_nondeterministic_store_can_be_made_an_error():
    ptx = kernel("mov.u32 \t%r5, %r1;", WARP_WORD)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        with pytest.raises(NondeterministicStoreWarning):
            run_ptx(ptx, "k", 1, 64, [np.zeros(64, np.uint32)])


def test_threads_of_different_warps_storing_one_word_race():
    ptx = kernel("mov.u32 \t%r5, 1;", "mov.u32 \t%r3, 0;")
    with pytest.raises(SimError, match="by threads of different warps") as info:
        run_ptx(ptx, "k", 1, 64, [np.zeros(64, np.uint32)])
    assert "st.shared.u32" in str(info.value)


def test_a_race_between_two_instructions_is_still_reported():
    ptx = kernel("mov.u32 \t%r5, 1;", WARP_WORD,
                 extra="@%p1 bra \tSKIP;\nSKIP:\n\tadd.u32 \t%r10, %r1, 0;")
    ptx = ptx.replace("\tbar.sync \t0;\n\tshr.u32 \t%r6", "\tshr.u32 \t%r6")  # no barrier
    ptx = ptx.replace("mov.u32 \t%r1, %tid.x;", "mov.u32 \t%r1, %tid.x;\n\tsetp.eq.u32 \t%p1, "
                      "%r1, 0;")
    with pytest.raises(SimError, match="shared-memory race"):
        run_ptx(ptx, "k", 1, 64, [np.zeros(64, np.uint32)])


def test_global_stores_of_different_values_to_one_address_warn():
    ptx = kernel("mov.u32 \t%r5, %r1;", "mov.u32 \t%r3, 0;", space="global",
                 store="st.global.u32 \t[%rd6], %r5;")
    out = np.zeros(64, np.uint32)
    with pytest.warns(NondeterministicStoreWarning, match="64 threads"):
        run_ptx(ptx, "k", 1, 64, [out])
    assert out[0] < 64
