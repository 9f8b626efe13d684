"""Planted-bug kernels: each hazard is reported as a SimError naming the right PTX line."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, TensorMap, run_ptx
from tests.async_kernels import HEADER, tma_load_kernel, tma_store_kernel, wgmma_kernel

POLICIES = ["eager", "latest", "random"]


def line_of(ptx: str, needle: str, nth: int = 0) -> int:
    """1-based line of the `nth` line containing `needle`."""
    hits = [i + 1 for i, text in enumerate(ptx.split("\n")) if needle in text]
    return hits[nth]


def fails_at(ptx: str, kernel: str, args, needle: str, match: str, nth: int = 0,
             policy: str = "eager", block: int = 128) -> SimError:
    with pytest.raises(SimError, match=match) as info:
        run_ptx(ptx, kernel, 1, block, args, async_completion=policy, seed=1)
    assert info.value.line == line_of(ptx, needle, nth), str(info.value)
    return info.value


@pytest.mark.parametrize("policy", POLICIES)
def test_reading_a_tma_destination_before_waiting(policy):
    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    tm = TensorMap(a, box=(16, 32))
    ptx = tma_load_kernel(2, [(0, (0, 0))], a.nbytes, a.nbytes, wait=False)
    fails_at(ptx, "tma_load", [tm, np.zeros(a.nbytes, np.uint8)], "ld.shared.v4.b32",
             "that the TMA load at line .* still owns", policy=policy)


def test_waiting_makes_the_same_kernel_clean():
    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros(a.nbytes, np.uint8)
    run_ptx(tma_load_kernel(2, [(0, (0, 0))], a.nbytes, a.nbytes), "tma_load", 1, 128,
            [TensorMap(a, box=(16, 32)), out], async_completion="latest")
    np.testing.assert_array_equal(out.view(np.float32).reshape(16, 32), a)


def _wgmma_smem() -> tuple[np.ndarray, list[tuple[int, int]]]:
    smem = np.zeros(4096, np.uint8)
    smem[:] = 0x3F  # bf16 0x3F3F, a finite value, everywhere
    a_desc = (0 >> 4) | (128 >> 4 << 16) | (256 >> 4 << 32)
    b_desc = (2048 >> 4) | (128 >> 4 << 16) | (256 >> 4 << 32)
    return smem, [(a_desc, b_desc)]


def _wgmma_args(smem: np.ndarray, n: int = 16) -> list[np.ndarray]:
    return [smem, np.zeros(512, np.uint32), np.zeros(64 * n, np.float32),
            np.zeros(64 * n, np.float32)]


@pytest.mark.parametrize("policy", POLICIES)
def test_reading_a_wgmma_accumulator_before_waiting(policy):
    smem, steps = _wgmma_smem()
    ptx = wgmma_kernel(16, "bf16.bf16", steps, smem.size, trans=(0, 0), wait=False,
                       read_before_wait=True)
    fails_at(ptx, "wgmma_test", _wgmma_args(smem), "st.global.f32 \t[%rd7], %d0;",
             "read of register %d0 that the wgmma at line .* still owns", policy=policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_writing_a_wgmma_source_before_completion(policy):
    smem, steps = _wgmma_smem()
    ptx = wgmma_kernel(16, "bf16.bf16", steps, smem.size, trans=(0, 0))
    ptx = ptx.replace("\twgmma.commit_group.sync.aligned;",
                      "\twgmma.commit_group.sync.aligned;\n\tst.shared.u32 \t[smem+2048], %r1;")
    fails_at(ptx, "wgmma_test", _wgmma_args(smem), "st.shared.u32 \t[smem+2048]",
             "write to shared memory .* that the wgmma at line .* still owns", policy=policy)


def test_missing_proxy_fence_before_wgmma():
    smem, steps = _wgmma_smem()
    ptx = wgmma_kernel(16, "bf16.bf16", steps, smem.size, trans=(0, 0), fence=False)
    fails_at(ptx, "wgmma_test", _wgmma_args(smem), "wgmma.mma_async",
             "generic proxy with no fence.proxy.async")


def test_missing_proxy_fence_before_tma_store():
    dst = np.zeros((16, 16), np.float32)
    ptx = tma_store_kernel(2, (0, 0), dst.nbytes, fence=False)
    fails_at(ptx, "tma_store", [TensorMap(dst, box=(16, 16)), np.ones(dst.nbytes, np.uint8)],
             "cp.async.bulk.tensor.2d.global", "no fence.proxy.async")


@pytest.mark.parametrize("policy", POLICIES)
def test_writing_a_tma_store_source_before_it_was_read(policy):
    dst = np.zeros((16, 16), np.float32)
    ptx = tma_store_kernel(2, (0, 0), dst.nbytes, wait=False)
    ptx = ptx.replace("\tcp.async.bulk.commit_group;",
                      "\tcp.async.bulk.commit_group;\n\tst.shared.u32 \t[smem+64], %r1;")
    fails_at(ptx, "tma_store", [TensorMap(dst, box=(16, 16)), np.ones(dst.nbytes, np.uint8)],
             "st.shared.u32 \t[smem+64]", "the TMA store at line .* still owns", policy=policy)


RACE = HEADER + """
.visible .entry race(.param .u64 out)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<4>;
	.shared .align 4 .b8 smem[512];

	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, smem;
	shl.b32 	%r3, %r1, 2;
	add.u32 	%r4, %r2, %r3;
	st.shared.u32 	[%r4], %r1;
	BARRIER
	add.u32 	%r5, %r1, 1;
	and.b32 	%r5, %r5, 127;
	shl.b32 	%r5, %r5, 2;
	add.u32 	%r5, %r2, %r5;
	ld.shared.u32 	%r6, [%r5];
	ld.param.u64 	%rd1, [out];
	cvta.to.global.u64 	%rd1, %rd1;
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd1, %rd1, %rd2;
	st.global.u32 	[%rd1], %r6;
	ret;
}
"""


def test_shared_memory_race_without_barrier():
    ptx = RACE.replace("BARRIER", "")
    error = fails_at(ptx, "race", [np.zeros(128, np.uint32)], "ld.shared.u32",
                     "shared-memory race")
    assert "thread (" in str(error)
    out = np.zeros(128, np.uint32)
    run_ptx(RACE.replace("BARRIER", "bar.sync 0;"), "race", 1, 128, [out])
    np.testing.assert_array_equal(out, (np.arange(128) + 1) % 128)


def test_reading_uninitialised_shared_memory():
    ptx = RACE.replace("BARRIER", "bar.sync 0;").replace("and.b32 \t%r5, %r5, 127;",
                                                         "and.b32 \t%r5, %r5, 255;").replace(
        "smem[512]", "smem[1024]")
    fails_at(ptx, "race", [np.zeros(128, np.uint32)], "ld.shared.u32",
             "uninitialised shared memory", block=128)


@pytest.mark.parametrize("policy", POLICIES)
def test_mbarrier_that_never_completes_is_a_deadlock(policy):
    a = np.zeros((8, 8), np.float32)
    ptx = tma_load_kernel(2, [(0, (0, 0))], a.nbytes, a.nbytes).replace(
        "mbarrier.init.shared::cta.b64 \t[bar], 1;", "mbarrier.init.shared::cta.b64 \t[bar], 2;")
    error = fails_at(ptx, "tma_load", [TensorMap(a, box=(8, 8)), np.zeros(256, np.uint8)],
                     "mbarrier.try_wait", "mbarrier deadlock: 128 thread", policy=policy)
    assert "1 of 2 arrivals pending" in str(error)


def test_expecting_fewer_bytes_than_the_box_is_a_deadlock():
    a = np.zeros((8, 8), np.float32)
    ptx = tma_load_kernel(2, [(0, (0, 0))], a.nbytes, a.nbytes, expect=128)
    fails_at(ptx, "tma_load", [TensorMap(a, box=(8, 8)), np.zeros(256, np.uint8)],
             "mbarrier.try_wait", "tx-count -128")


def test_out_of_bounds_global_access():
    ptx = RACE.replace("BARRIER", "bar.sync 0;")
    fails_at(ptx, "race", [np.zeros(64, np.uint32)], "st.global.u32",
             "out-of-bounds global store")
