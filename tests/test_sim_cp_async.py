"""cp.async (non-bulk): copies land by the thread's wait_group, partial source sizes fill with
zeros, and reading the destination before waiting is reported."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, run_ptx

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"
POLICIES = ["eager", "latest", "random"]


def kernel(copy: str = "cp.async.cg.shared.global \t[%r4], [%rd6], 16, %r9;",
           wait: str = "cp.async.wait_group \t0;", src_size: str = "mov.u32 \t%r9, 16;") -> str:
    """Each of 64 threads copies 16 bytes of `src` into shared memory with cp.async, waits,
    meets the block, and copies the 16 bytes of its neighbour (t + 1) % 64 to `out`."""
    return HEADER + f"""
.visible .entry k(.param .u64 src, .param .u64 out)
{{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<12>;
	.shared .align 16 .b8 smem[1024];

	ld.param.u64 	%rd1, [src];
	cvta.to.global.u64 	%rd2, %rd1;
	ld.param.u64 	%rd3, [out];
	cvta.to.global.u64 	%rd4, %rd3;
	mov.u32 	%r1, %tid.x;
	shl.b32 	%r3, %r1, 4;
	mov.u32 	%r2, smem;
	add.u32 	%r4, %r2, %r3;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd6, %rd2, %rd5;
	{src_size}
	{copy}
	cp.async.commit_group;
	{wait}
	bar.sync 	0;
	add.u32 	%r5, %r1, 1;
	and.b32 	%r5, %r5, 63;
	shl.b32 	%r5, %r5, 4;
	add.u32 	%r6, %r2, %r5;
	ld.shared.v4.u32 	{{%r10, %r11, %r12, %r13}}, [%r6];
	add.s64 	%rd7, %rd4, %rd5;
	st.global.v4.u32 	[%rd7], {{%r10, %r11, %r12, %r13}};
	ret;
}}
"""


def expected(src: np.ndarray) -> np.ndarray:
    return np.roll(src.reshape(64, 16), -1, axis=0).reshape(-1)


@pytest.mark.parametrize("policy", POLICIES)
def test_copies_land_by_wait_group(policy):
    src = np.arange(1024, dtype=np.uint32).view(np.uint8)[:1024].copy()
    out = np.zeros(1024, np.uint8)
    run_ptx(kernel(), "k", 1, 64, [src, out], async_completion=policy, seed=2)
    np.testing.assert_array_equal(out, expected(src))


def test_wait_all_and_ca_with_implicit_size():
    src = np.random.default_rng(0).integers(0, 255, 1024).astype(np.uint8)
    out = np.zeros(1024, np.uint8)
    ptx = kernel("cp.async.ca.shared.global \t[%r4], [%rd6], 16;", "cp.async.wait_all;")
    run_ptx(ptx, "k", 1, 64, [src, out], async_completion="latest")
    np.testing.assert_array_equal(out, expected(src))


def test_src_size_reads_a_prefix_and_zero_fills_the_rest():
    src = np.full(1024, 0xAB, np.uint8)
    out = np.ones(1024, np.uint8)
    ptx = kernel(src_size="and.b32 \t%r9, %r1, 15;")  # thread t reads t % 16 bytes
    run_ptx(ptx, "k", 1, 64, [src, out])
    rows = out.reshape(64, 16)
    reads = (np.arange(64) + 1) % 64 % 16  # row t holds thread t+1's copy
    for t in range(64):
        assert (rows[t, :reads[t]] == 0xAB).all() and (rows[t, reads[t]:] == 0).all()


def test_ignore_src_predicate_fills_zeros():
    src = np.full(1024, 7, np.uint8)
    out = np.ones(1024, np.uint8)
    ptx = kernel("cp.async.cg.shared.global \t[%r4], [%rd6], 16, %p1;",
                 src_size="setp.ge.u32 \t%p1, %r1, 32;")
    run_ptx(ptx, "k", 1, 64, [src, out])
    rows = out.reshape(64, 16)
    assert (rows[:31] == 7).all() and (rows[31:63] == 0).all() and (rows[63] == 7).all()


@pytest.mark.parametrize("policy", POLICIES)
def test_reading_before_waiting_is_reported(policy):
    ptx = kernel(wait="")
    with pytest.raises(SimError, match=r"the cp.async at line .* still owns") as info:
        run_ptx(ptx, "k", 1, 64, [np.zeros(1024, np.uint8), np.zeros(1024, np.uint8)],
                async_completion=policy, seed=1)
    assert "ld.shared.v4.u32" in str(info.value)


def test_out_of_bounds_source_names_the_copy():
    with pytest.raises(SimError, match="out-of-bounds global load") as info:
        run_ptx(kernel(), "k", 1, 64, [np.zeros(512, np.uint8), np.zeros(1024, np.uint8)])
    assert "cp.async.cg.shared.global" in str(info.value)
