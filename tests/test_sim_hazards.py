"""Planted-bug kernels: each hazard is reported as a SimError naming the right PTX line."""

from __future__ import annotations

import re

import numpy as np
import pytest

from smalti.sim import SimError, TensorMap, run_ptx
from tests.async_kernels import HEADER, tma_load_kernel, tma_store_kernel, wgmma_kernel
from tests.test_sim_cluster import kernel as cluster_kernel

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


# Cross-CTA mbarrier signals (sim/ops/mbarrier.py): a wait that observes another CTA's arrive
# orders that CTA's accesses before its own only when the arrive releases, and the wait
# acquires, at .cluster scope. At the default .cta scope nothing is ordered between the CTAs,
# which is a bug only when a generic access then races with one of the other CTA's.
CLUSTER_SCOPE = (".release.cluster", ".acquire.cluster")
CTA_SCOPE = ("", "")  # the ISA's defaults: .release.cta and .acquire.cta


def _slot_ring_kernel(scope: tuple[str, str]) -> str:
    """Thread 0 of CTA 0 multicasts two 8x32 f32 tiles in turn into one slot of both CTAs;
    each CTA copies the slot out with cp.async.bulk (out[round][cta]), and CTA 1 then tells
    CTA 0 the slot is free with an arrive on CTA 0's `empty` barrier, at `scope`. Everything
    the arrive orders moves through the async proxy."""
    release, acquire = scope
    return cluster_kernel(f"""
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[full], 1;
	mbarrier.init.shared::cta.b64 	[empty], 1;
INIT_DONE:
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	@%p1 bra 	END;
	mov.u16 	%rs1, 3;
	setp.ne.u32 	%p4, %r2, 0;
	mov.u32 	%r9, %ctaid.x;
	mul.wide.u32 	%rd5, %r9, 1024;
	add.s64 	%rd6, %rd1, %rd5;
	mbarrier.arrive.expect_tx.shared::cta.b64 	%rd2, [full], 1024;
	@%p4 bra 	ISSUED0;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [smem], [tmap, {{0, 0}}], [full], %rs1;
ISSUED0:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [full], 0;
	@!%p2 bra 	ISSUED0;
	cp.async.bulk.global.shared::cta.bulk_group 	[%rd6], [smem], 1024;
	cp.async.bulk.commit_group;
	cp.async.bulk.wait_group.read 	0;
	mbarrier.arrive.expect_tx.shared::cta.b64 	%rd2, [full], 1024;
	@!%p4 bra 	EMPTY;
	mov.u32 	%r10, empty;
	mapa.shared::cluster.u32 	%r11, %r10, 0;
	mbarrier.arrive{release}.shared::cluster.b64 	_, [%r11];
	bra.uni 	ISSUED1;
EMPTY:
	mbarrier.try_wait.parity{acquire}.shared::cta.b64 	%p3, [empty], 0;
	@!%p3 bra 	EMPTY;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [smem], [tmap, {{0, 8}}], [full], %rs1;
ISSUED1:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [full], 1;
	@!%p2 bra 	ISSUED1;
	add.s64 	%rd6, %rd6, 2048;
	cp.async.bulk.global.shared::cta.bulk_group 	[%rd6], [smem], 1024;
	cp.async.bulk.commit_group;
	cp.async.bulk.wait_group 	0;
END:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;""", params=".param .align 64 .b8 tmap[128], .param .u64 out",
                          shared=""".shared .align 1024 .b8 smem[1024];
	.shared .align 8 .b64 full;
	.shared .align 8 .b64 empty;
	.reg .b16 	%rs<2>;""")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scope", [CTA_SCOPE, CLUSTER_SCOPE], ids=["cta", "cluster"])
def test_a_cross_cta_arrive_guarding_only_async_proxy_data_needs_no_cluster_scope(policy,
                                                                                  scope):
    source = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros((2, 2, 8, 32), np.float32)  # round, CTA, tile
    run_ptx(_slot_ring_kernel(scope), "k", 2, 32, [TensorMap(source, (8, 32)), out],
            cluster=2, async_completion=policy, seed=1)
    np.testing.assert_array_equal(out, np.broadcast_to(source.reshape(2, 1, 8, 32), out.shape))


def _handoff_kernel(scope: tuple[str, str], store: str = "st.shared::cluster.u32") -> str:
    """CTA 1 stores a word per thread into CTA 0's buf (generic proxy), then arrives on CTA
    0's barrier at `scope`; CTA 0 waits and reads the words back (to out[thread])."""
    release, acquire = scope
    return cluster_kernel(f"""
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 32;
INIT_DONE:
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	shl.b32 	%r5, %r1, 2;
	mov.u32 	%r4, buf;
	add.u32 	%r6, %r4, %r5;
	setp.eq.u32 	%p2, %r2, 0;
	@%p2 bra 	CONSUMER;
	mapa.shared::cluster.u32 	%r7, %r6, 0;
	mul.lo.u32 	%r8, %r1, 3;
	{store} 	[%r7], %r8;
	mov.u32 	%r9, bar;
	mapa.shared::cluster.u32 	%r10, %r9, 0;
	mbarrier.arrive{release}.shared::cluster.b64 	_, [%r10];
	bra.uni 	END;
CONSUMER:
	mbarrier.try_wait.parity{acquire}.shared::cta.b64 	%p3, [bar], 0;
	@!%p3 bra 	CONSUMER;
	ld.shared.u32 	%r11, [%r6];
	cvt.u64.u32 	%rd3, %r5;
	add.s64 	%rd4, %rd1, %rd3;
	st.global.u32 	[%rd4], %r11;
END:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;""", shared=""".shared .align 16 .b8 buf[128];
	.shared .align 8 .b64 bar;""")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scope", [CTA_SCOPE, (".release.cluster", ""), ("", ".acquire.cluster")],
                         ids=["cta", "cta-wait", "cta-arrive"])
def test_a_cross_cta_arrive_guarding_a_generic_store_is_a_race_without_cluster_scope(policy,
                                                                                     scope):
    ptx = _handoff_kernel(scope)
    release = ".release.cluster" if scope[0] else ".release.cta"
    acquire = ".acquire.cluster" if scope[1] else ".acquire.cta"
    error = fails_at_cluster(ptx, "ld.shared.u32", policy, (
        rf"shared-memory race: read of shared address 0x[0-9a-f]+ .*another CTA's write at "
        rf"line {line_of(ptx, 'st.shared::cluster.u32')}\); the mbarrier wait at line "
        rf"{line_of(ptx, 'mbarrier.try_wait')} \({re.escape(acquire)}\) observed a phase a "
        rf"thread of another CTA arrived on at line {line_of(ptx, 'mbarrier.arrive')} "
        rf"\({re.escape(release)}\), which orders nothing between the CTAs: arrive with "
        r"\.release\.cluster and wait with \.acquire\.cluster"))
    assert error.thread is not None and "block (0, 0, 0)" in error.thread


@pytest.mark.parametrize("policy", POLICIES)
def test_a_cross_cta_arrive_at_cluster_scope_orders_a_generic_store(policy):
    out = np.zeros(64, np.uint32)
    run_ptx(_handoff_kernel(CLUSTER_SCOPE), "k", 2, 32, [out], cluster=2,
            async_completion=policy, seed=1)
    np.testing.assert_array_equal(out[:32], 3 * np.arange(32))


def fails_at_cluster(ptx: str, needle: str, policy: str, match: str) -> SimError:
    """The SimError of running `ptx` on a 2-CTA cluster, checked to be at `needle`'s line."""
    with pytest.raises(SimError, match=match) as info:
        run_ptx(ptx, "k", 2, 32, [np.zeros(64, np.uint32)], cluster=2, async_completion=policy,
                seed=1)
    assert info.value.line == line_of(ptx, needle), str(info.value)
    return info.value
