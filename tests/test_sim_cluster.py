"""Clusters of CTAs in the simulator: cluster special registers, `mapa`, distributed shared
memory (`ld`/`st`/`atom` .shared::cluster), `barrier.cluster`, remote mbarrier arrivals,
multicast TMA loads, and the kernel's cluster directives."""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, TensorMap, run_ptx
from tests.async_kernels import HEADER

POLICIES = [("eager", 0), ("latest", 0), ("random", 1), ("random", 2)]


def kernel(body: str, params: str = ".param .u64 out", directives: str = "",
           shared: str = ".shared .align 16 .b8 buf[1024];") -> str:
    """A kernel `k` whose body starts with %rd1 = out, %r1 = %tid.x, %r2 = %cluster_ctarank."""
    return HEADER + f"""
.visible .entry k({params}){directives}
{{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<16>;
	{shared}
	ld.param.u64 	%rd1, [out];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %cluster_ctarank;
{body}
	ret;
}}
"""


def store_word(register: str, slot: int, words: int) -> str:
    """out[global thread id * words + slot] = register (u32)."""
    return f"""
	mov.u32 	%r30, %ctaid.x;
	mov.u32 	%r31, %ctaid.y;
	mov.u32 	%r32, %nctaid.x;
	mad.lo.u32 	%r30, %r31, %r32, %r30;
	mov.u32 	%r31, %ntid.x;
	mad.lo.u32 	%r30, %r30, %r31, %r1;
	mul.wide.u32 	%rd10, %r30, {4 * words};
	add.s64 	%rd11, %rd1, %rd10;
	st.global.u32 	[%rd11+{4 * slot}], {register};"""


SPECIALS = ["%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_nctaid.x", "%cluster_nctaid.y",
            "%cluster_ctarank", "%cluster_nctarank", "%clusterid.x", "%clusterid.y",
            "%nclusterid.x", "%nclusterid.y"]


def specials_kernel(directives: str = "") -> str:
    body = []
    for i, name in enumerate(SPECIALS):
        body.append(f"\tmov.u32 	%r10, {name};")
        body.append(store_word("%r10", i, len(SPECIALS) + 1))
    body.append("\tmov.pred 	%p1, %is_explicit_cluster;\n\tselp.u32 	%r10, 1, 0, %p1;")
    body.append(store_word("%r10", len(SPECIALS), len(SPECIALS) + 1))
    return kernel("\n".join(body), directives=directives)


def expected_specials(grid: tuple[int, int], cluster: tuple[int, int], explicit: int):
    """The PTX ISA's definitions, per block (x fastest) and register."""
    rows = []
    for by in range(grid[1]):
        for bx in range(grid[0]):
            cx, cy = bx % cluster[0], by % cluster[1]
            rows.append([cx, cy, cluster[0], cluster[1], cx + cluster[0] * cy,
                         cluster[0] * cluster[1], bx // cluster[0], by // cluster[1],
                         grid[0] // cluster[0], grid[1] // cluster[1], explicit])
    return np.array(rows, np.uint32)


@pytest.mark.parametrize("cluster", [(2, 2), (4, 1), (1, 2), (1, 1)])
def test_cluster_special_registers_follow_the_isa(cluster):
    grid, threads = (4, 2), 32
    out = np.zeros((grid[0] * grid[1], threads, len(SPECIALS) + 1), np.uint32)
    run_ptx(specials_kernel(), "k", grid, threads, [out], cluster=cluster)
    expected = expected_specials(grid, cluster, 1)
    np.testing.assert_array_equal(out, np.broadcast_to(expected[:, None], out.shape))


def test_a_launch_without_cluster_is_one_cta_clusters_not_explicit():
    out = np.zeros((4, 32, len(SPECIALS) + 1), np.uint32)
    run_ptx(specials_kernel(), "k", (2, 2), 32, [out])
    np.testing.assert_array_equal(out, np.broadcast_to(
        expected_specials((2, 2), (1, 1), 0)[:, None], out.shape))


def test_reqnctapercluster_sets_the_cluster_and_rejects_another():
    text = specials_kernel(" .reqnctapercluster 2, 1, 1")
    out = np.zeros((4, 32, len(SPECIALS) + 1), np.uint32)
    run_ptx(text, "k", (4, 1), 32, [out])
    np.testing.assert_array_equal(out, np.broadcast_to(
        expected_specials((4, 1), (2, 1), 1)[:, None], out.shape))
    with pytest.raises(SimError, match=r"requires clusters of \(2, 1, 1\)"):
        run_ptx(text, "k", (4, 1), 32, [out], cluster=(4, 1, 1))


def test_explicitcluster_and_maxclusterrank_are_checked():
    out = np.zeros((4, 32, len(SPECIALS) + 1), np.uint32)
    with pytest.raises(SimError, match="explicitcluster"):
        run_ptx(specials_kernel(" .explicitcluster"), "k", 4, 32, [out])
    run_ptx(specials_kernel(" .explicitcluster"), "k", 4, 32, [out], cluster=2)
    with pytest.raises(SimError, match="maxclusterrank 2"):
        run_ptx(specials_kernel(" .maxclusterrank 2"), "k", 4, 32, [out], cluster=4)


@pytest.mark.parametrize("grid, cluster, message", [
    (3, 2, "whole number of clusters"), (32, 32, "exceeds sm_90's 16")])
def test_bad_cluster_shapes_are_rejected(grid, cluster, message):
    out = np.zeros((grid, 32, len(SPECIALS) + 1), np.uint32)
    with pytest.raises(SimError, match=message):
        run_ptx(specials_kernel(), "k", grid, 32, [out], cluster=cluster)


EXCHANGE = """
	// buf[tid] = 1000 * rank + tid in every CTA, then read the peer's word through mapa.
	mad.lo.u32 	%r3, %r2, 1000, %r1;
	mov.u32 	%r4, buf;
	shl.b32 	%r5, %r1, 2;
	add.u32 	%r6, %r4, %r5;
	st.shared.u32 	[%r6], %r3;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	xor.b32 	%r7, %r2, 1;
	mapa.shared::cluster.u32 	%r8, %r6, %r7;
	ld.shared::cluster.u32 	%r9, [%r8];
""" + store_word("%r9", 0, 4) + """
	// write into the peer's buf2[tid] remotely; after the barrier, read our own buf2
	add.u32 	%r10, %r6, 512;
	mapa.shared::cluster.u32 	%r11, %r10, %r7;
	add.u32 	%r12, %r3, 7;
	st.shared::cluster.u32 	[%r11], %r12;
	// every thread of both CTAs adds 1 to rank 0's counter at buf+1020
	add.u32 	%r13, %r4, 1020;
	mapa.shared::cluster.u32 	%r14, %r13, 0;
	atom.shared::cluster.add.u32 	%r15, [%r14], 1;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	ld.shared.u32 	%r16, [%r10];
""" + store_word("%r16", 1, 4) + """
	ld.shared::cluster.u32 	%r17, [%r14];
""" + store_word("%r17", 2, 4) + """
	// the generic form: cvta the address, mapa.u64, an ordinary ld
	cvta.shared.u64 	%rd2, %rd3;
	mapa.u64 	%rd4, %rd2, %r7;
	ld.u32 	%r18, [%rd4];
""" + store_word("%r18", 3, 4)


def exchange_kernel() -> str:
    body = EXCHANGE.replace("cvta.shared.u64 	%rd2, %rd3;",
                            "cvt.u64.u32 	%rd3, %r6;\n\tcvta.shared.u64 	%rd2, %rd3;")
    # The counter must start at zero: thread 0 of each CTA clears it before the first barrier.
    clear = """
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	CLEARED;
	mov.u32 	%r20, 0;
	st.shared.u32 	[buf+1020], %r20;
CLEARED:"""
    return kernel(clear + body)


@pytest.mark.parametrize("grid", [2, 6])
def test_dsmem_exchange_between_the_ctas_of_a_cluster(grid):
    threads = 64
    out = np.zeros((grid, threads, 4), np.uint32)
    run_ptx(exchange_kernel(), "k", grid, threads, [out], cluster=2)
    rank = np.arange(grid) % 2
    tid = np.arange(threads)
    own = 1000 * rank[:, None] + tid
    peer = 1000 * (1 - rank)[:, None] + tid
    np.testing.assert_array_equal(out[..., 0], peer)  # ld.shared::cluster of the peer's buf
    np.testing.assert_array_equal(out[..., 1], peer + 7)  # what the peer stored into us
    np.testing.assert_array_equal(out[..., 2], 2 * threads)  # atomics from both CTAs
    np.testing.assert_array_equal(out[..., 3], peer)  # the generic mapa address
    assert (out[..., 0] != own).all()


def test_reading_a_peer_without_a_cluster_barrier_is_a_race():
    text = kernel("""
	mov.u32 	%r4, buf;
	shl.b32 	%r5, %r1, 2;
	add.u32 	%r6, %r4, %r5;
	st.shared.u32 	[%r6], %r1;
	xor.b32 	%r7, %r2, 1;
	mapa.shared::cluster.u32 	%r8, %r6, %r7;
	ld.shared::cluster.u32 	%r9, [%r8];""")
    with pytest.raises(SimError, match="shared-memory race") as info:
        run_ptx(text, "k", 2, 32, [np.zeros(64, np.uint32)], cluster=2)
    assert "ld.shared::cluster.u32" in str(info.value)


def test_a_bar_sync_does_not_order_accesses_of_another_cta():
    text = kernel("""
	mov.u32 	%r4, buf;
	shl.b32 	%r5, %r1, 2;
	add.u32 	%r6, %r4, %r5;
	xor.b32 	%r7, %r2, 1;
	mapa.shared::cluster.u32 	%r8, %r6, %r7;
	setp.eq.u32 	%p1, %r2, 0;
	@%p1 st.shared::cluster.u32 	[%r8], %r1;
	bar.sync 	0;
	setp.eq.u32 	%p2, %r2, 1;
	@%p2 ld.shared.u32 	%r9, [%r6];""")
    with pytest.raises(SimError, match="shared-memory race"):
        run_ptx(text, "k", 2, 32, [np.zeros(64, np.uint32)], cluster=2)


@pytest.mark.parametrize("address, message", [
    ("mapa.shared::cluster.u32 	%r8, %r4, 2;", "rank 2 of a cluster of 2"),
    ("mov.u32 	%r8, 0x3000000;", "outside the cluster of 2")])
def test_addresses_outside_the_cluster_fault(address, message):
    text = kernel(f"""
	mov.u32 	%r4, buf;
	{address}
	ld.shared::cluster.u32 	%r9, [%r8];""")
    with pytest.raises(SimError, match=message):
        run_ptx(text, "k", 2, 32, [np.zeros(64, np.uint32)], cluster=2)


def test_cluster_wait_without_arrive_and_double_arrive_fault():
    wait_only = kernel("\tbarrier.cluster.wait.aligned;")
    with pytest.raises(SimError, match=r"no barrier\.cluster\.arrive before it"):
        run_ptx(wait_only, "k", 2, 32, [np.zeros(1, np.uint32)], cluster=2)
    twice = kernel("\tbarrier.cluster.arrive.aligned;\n\tbarrier.cluster.arrive.aligned;")
    with pytest.raises(SimError, match="twice"):
        run_ptx(twice, "k", 2, 32, [np.zeros(1, np.uint32)], cluster=2)


def test_exited_threads_do_not_hold_up_the_cluster_barrier():
    text = kernel("""
	setp.eq.u32 	%p1, %r2, 1;
	@%p1 bra 	DONE;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
""" + store_word("%r2", 0, 1) + "\nDONE:")
    out = np.full(64, 9, np.uint32)
    run_ptx(text, "k", 2, 32, [out], cluster=2)
    np.testing.assert_array_equal(out, [0] * 32 + [9] * 32)


def test_a_cta_waiting_on_a_cluster_barrier_its_peer_never_reaches_deadlocks():
    text = kernel("""
	setp.eq.u32 	%p1, %r2, 1;
	@%p1 bra 	SPIN;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	bra.uni 	DONE;
SPIN:
	mbarrier.init.shared::cta.b64 	[buf], 1;
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [buf], 0;
	@!%p2 bra 	SPIN;
DONE:""")
    with pytest.raises(SimError, match="deadlock"):
        run_ptx(text, "k", 2, 32, [np.zeros(1, np.uint32)], cluster=2)


REMOTE_ARRIVE = """
	// CTA 0 owns an mbarrier expecting the 32 threads of CTA 1; CTA 1 writes its values into
	// CTA 0's buf remotely, then arrives on CTA 0's barrier; CTA 0 waits and publishes them.
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 32;
INIT_DONE:
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.relaxed.aligned;
	barrier.cluster.wait.aligned;
	setp.eq.u32 	%p2, %r2, 0;
	@%p2 bra 	CONSUMER;
	mov.u32 	%r4, buf;
	shl.b32 	%r5, %r1, 2;
	add.u32 	%r6, %r4, %r5;
	mapa.shared::cluster.u32 	%r7, %r6, 0;
	mul.lo.u32 	%r8, %r1, 3;
	st.shared::cluster.u32 	[%r7], %r8;
	mov.u32 	%r9, bar;
	mapa.shared::cluster.u32 	%r10, %r9, 0;
	mbarrier.arrive.release.cluster.shared::cluster.b64 	_, [%r10];
	bra.uni 	END;
CONSUMER:
	mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 	%p3, [bar], 0;
	@!%p3 bra 	CONSUMER;
	shl.b32 	%r5, %r1, 2;
	ld.shared.u32 	%r11, [buf+%r5];
END:
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	@!%p2 bra 	SKIP;
"""


@pytest.mark.parametrize("policy, seed", POLICIES)
def test_remote_mbarrier_arrive_releases_the_owner(policy, seed):
    body = REMOTE_ARRIVE.replace("ld.shared.u32 	%r11, [buf+%r5];",
                                 "mov.u32 	%r12, buf;\n\tadd.u32 	%r12, %r12, %r5;\n"
                                 "\tld.shared.u32 	%r11, [%r12];")
    text = kernel(body + store_word("%r11", 0, 1) + "\nSKIP:",
                  shared=".shared .align 16 .b8 buf[1024];\n\t.shared .align 8 .b64 bar;")
    out = np.zeros(64, np.uint32)
    run_ptx(text, "k", 2, 32, [out], cluster=2, async_completion=policy, seed=seed)
    np.testing.assert_array_equal(out[:32], 3 * np.arange(32))


def test_mbarrier_waits_on_another_ctas_barrier_are_rejected():
    text = kernel("""
	mov.u32 	%r9, buf;
WAIT:
	mbarrier.try_wait.parity.shared::cluster.b64 	%p3, [%r9], 0;
	@!%p3 bra 	WAIT;""")
    with pytest.raises(SimError, match=r"mbarrier waits take a \.shared::cta"):
        run_ptx(text, "k", 2, 32, [np.zeros(1, np.uint32)], cluster=2)


def multicast_kernel(mask: int, issuer_rank: int = 0, rows: int = 8) -> str:
    """Every CTA inits its mbarrier and expects one tile; CTA `issuer_rank` multicasts the
    tile (rows x 32 f32 at row 8 * cluster id) to the CTAs of `mask`; all copy it out."""
    tile = rows * 32 * 4
    body = f"""
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 1;
	mbarrier.arrive.expect_tx.shared::cta.b64 	%rd2, [bar], {tile};
INIT_DONE:
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	setp.ne.u32 	%p1, %r1, 0;
	setp.ne.u32 	%p4, %r2, {issuer_rank};
	or.pred 	%p1, %p1, %p4;
	mov.u32 	%r20, %clusterid.x;
	mul.lo.u32 	%r20, %r20, {rows};
	mov.u16 	%rs1, {mask};
	@%p1 bra 	ISSUED;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [smem], [tmap, {{0, %r20}}], [bar], %rs1;
ISSUED:
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [bar], 0;
	@!%p2 bra 	WAIT;
	shl.b32 	%r3, %r1, 4;
	mov.u32 	%r4, smem;
	add.u32 	%r4, %r4, %r3;
	ld.shared.v4.b32 	{{%r5, %r6, %r7, %r8}}, [%r4];
	mov.u32 	%r9, %ctaid.x;
	mul.lo.u32 	%r9, %r9, {tile};
	add.u32 	%r9, %r9, %r3;
	cvt.u64.u32 	%rd5, %r9;
	add.s64 	%rd6, %rd1, %rd5;
	st.global.v4.b32 	[%rd6], {{%r5, %r6, %r7, %r8}};
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;"""
    return kernel(body, params=".param .align 64 .b8 tmap[128], .param .u64 out",
                  shared=f""".shared .align 1024 .b8 smem[{tile}];
	.shared .align 8 .b64 bar;
	.reg .b16 	%rs<2>;""")


@pytest.mark.parametrize("policy, seed", POLICIES)
@pytest.mark.parametrize("cluster, issuer", [(2, 0), (2, 1), (4, 3)])
def test_multicast_tma_load_fills_every_cta_of_the_mask(policy, seed, cluster, issuer):
    rows, grid = 8, 2 * cluster
    source = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    out = np.zeros((grid, rows, 32), np.float32)
    tmap = TensorMap(source, (rows, 32))
    run_ptx(multicast_kernel((1 << cluster) - 1, issuer, rows), "k", grid, rows * 32 // 4,
            [tmap, out], cluster=cluster, async_completion=policy, seed=seed)
    for block in range(grid):
        first = rows * (block // cluster)
        np.testing.assert_array_equal(out[block], source[first:first + rows])


def test_a_cta_left_out_of_the_mask_never_completes_its_phase():
    source = np.zeros((64, 32), np.float32)
    with pytest.raises(SimError, match="mbarrier deadlock"):
        run_ptx(multicast_kernel(0b01), "k", 2, 64, [TensorMap(source, (8, 32)),
                                                       np.zeros((2, 8, 32), np.float32)],
                cluster=2)


def test_a_mask_naming_ctas_outside_the_cluster_faults():
    source = np.zeros((64, 32), np.float32)
    with pytest.raises(SimError, match="ctaMask 0x7"):
        run_ptx(multicast_kernel(0b111), "k", 2, 64, [TensorMap(source, (8, 32)),
                                                        np.zeros((2, 8, 32), np.float32)],
                cluster=2)


# A remote arrive orders the arriving thread's accesses before the waiter's only when both
# synchronise at cluster scope (PTX ISA, "Memory Consistency Model": the release and the
# acquire must each have the other's thread in scope). Otherwise the waiter's read of what
# CTA 1 stored into its buf is a data race, reported with both lines and the wait.
def _remote_arrive_kernel(arrive: str = "mbarrier.arrive.release.cluster.shared::cluster.b64",
                          wait: str = "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64"
                          ) -> str:
    body = (REMOTE_ARRIVE
            .replace("mbarrier.arrive.release.cluster.shared::cluster.b64", arrive)
            .replace("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64", wait)
            .replace("ld.shared.u32 	%r11, [buf+%r5];",
                     "mov.u32 	%r12, buf;\n\tadd.u32 	%r12, %r12, %r5;\n"
                     "\tld.shared.u32 	%r11, [%r12];"))
    return kernel(body + store_word("%r11", 0, 1) + "\nSKIP:",
                  shared=".shared .align 16 .b8 buf[1024];\n\t.shared .align 8 .b64 bar;")


@pytest.mark.parametrize("policy, seed", POLICIES)
@pytest.mark.parametrize("wait", ["mbarrier.try_wait.parity.shared::cta.b64",
                                  "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",
                                  "mbarrier.test_wait.parity.shared::cta.b64"])
def test_a_wait_at_cta_scope_does_not_acquire_a_remote_release(policy, seed, wait):
    with pytest.raises(SimError, match=r"race: read .* \(another CTA's write at line 32\); the "
                                       r"mbarrier wait at line 38 \(\.acquire\.cta\) observed a "
                                       r"phase a thread of another CTA arrived on at line 35 "
                                       r"\(\.release\.cluster\).* at line 43: `ld\.shared"):
        run_ptx(_remote_arrive_kernel(wait=wait), "k", 2, 32, [np.zeros(64, np.uint32)],
                cluster=2, async_completion=policy, seed=seed)


@pytest.mark.parametrize("arrive, semantics", [
    ("mbarrier.arrive.release.cta.shared::cluster.b64", r"\.release\.cta"),
    ("mbarrier.arrive.shared::cluster.b64", r"\.release\.cta"),  # the ISA's defaults
])
def test_a_remote_arrive_released_at_cta_scope_is_reported(arrive, semantics):
    with pytest.raises(SimError, match=f"race: read .*arrived on at line 35 \\({semantics}\\), "
                                       r"which orders nothing between the CTAs: arrive with "
                                       r"\.release\.cluster and wait with \.acquire\.cluster"):
        run_ptx(_remote_arrive_kernel(arrive=arrive), "k", 2, 32, [np.zeros(64, np.uint32)],
                cluster=2)


def test_an_arrive_on_its_own_cta_through_a_cluster_address_is_local():
    # every CTA maps its own barrier (rank %r2) and waits at the default .cta scope
    body = """
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 32;
INIT_DONE:
	bar.sync 	0;
	mov.u32 	%r9, bar;
	mapa.shared::cluster.u32 	%r10, %r9, %r2;
	mbarrier.arrive.shared::cluster.b64 	_, [%r10];
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [bar], 0;
	@!%p3 bra 	WAIT;
	selp.u32 	%r11, 1, 0, %p3;""" + store_word("%r11", 0, 1)
    out = np.zeros(64, np.uint32)
    run_ptx(kernel(body, shared=".shared .align 8 .b64 bar;"), "k", 2, 32, [out], cluster=2)
    np.testing.assert_array_equal(out, 1)


# A CTA's shared memory exists while the CTA runs: its peers must be done with it (mbarrier
# arrivals and distributed shared-memory accesses included) before it exits.
def _exits_early_kernel(access: str, meet: bool) -> str:
    """CTA 0 leaves right after the cluster meets; CTA 1 then reaches into its shared memory
    (`access`, %r10 = CTA 0's `bar`, %r11 = its `buf`), with or without a final meeting."""
    leave = "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;\n" if meet else ""
    return kernel(f"""
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 32;
INIT_DONE:
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	setp.ne.u32 	%p2, %r2, 0;
	@%p2 bra 	PEER;
{leave}	ret;
PEER:
	mov.u32 	%r9, bar;
	mapa.shared::cluster.u32 	%r10, %r9, 0;
	mov.u32 	%r9, buf;
	mapa.shared::cluster.u32 	%r11, %r9, 0;
	{access}
{leave}""", shared=".shared .align 16 .b8 buf[1024];\n\t.shared .align 8 .b64 bar;")


ACCESSES = {
    "arrive": "mbarrier.arrive.release.cluster.shared::cluster.b64 	_, [%r10];",
    "store": "shl.b32 	%r13, %r1, 2;\n\tadd.u32 	%r11, %r11, %r13;\n"
             "\tst.shared::cluster.u32 	[%r11], %r1;",
    "load": "ld.shared::cluster.u32 	%r12, [%r11];",
}


@pytest.mark.parametrize("policy, seed", POLICIES)
@pytest.mark.parametrize("access", sorted(ACCESSES))
def test_reaching_into_an_exited_ctas_shared_memory_is_reported(policy, seed, access):
    with pytest.raises(SimError, match=r"reaches CTA rank 0 of the cluster, which has exited"):
        run_ptx(_exits_early_kernel(ACCESSES[access], meet=False), "k", 2, 32,
                [np.zeros(1, np.uint32)], cluster=2, async_completion=policy, seed=seed)


@pytest.mark.parametrize("access", ["arrive", "store"])
def test_a_cluster_barrier_before_exiting_keeps_the_shared_memory_alive(access):
    run_ptx(_exits_early_kernel(ACCESSES[access], meet=True), "k", 2, 32,
            [np.zeros(1, np.uint32)], cluster=2)


def test_a_multicast_into_an_exited_cta_is_reported():
    body = """
	setp.ne.u32 	%p1, %r1, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 1;
INIT_DONE:
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.aligned;
	barrier.cluster.wait.aligned;
	setp.ne.u32 	%p2, %r2, 0;
	@%p2 bra 	PEER;
	ret;
PEER:
	@%p1 bra 	DONE;
	mov.u16 	%rs1, 3;
	mov.u32 	%r20, 0;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [smem], [tmap, {%r20, %r20}], [bar], %rs1;
DONE:"""
    text = kernel(body, params=".param .align 64 .b8 tmap[128], .param .u64 out",
                  shared=""".shared .align 1024 .b8 smem[1024];
	.shared .align 8 .b64 bar;
	.reg .b16 	%rs<2>;""")
    source = np.zeros((64, 32), np.float32)
    with pytest.raises(SimError, match=r"ctaMask 0x3 names CTA rank 0 of the cluster, which "
                                       "has exited"):
        run_ptx(text, "k", 2, 32, [TensorMap(source, (8, 32)), np.zeros(1, np.uint32)],
                cluster=2)


def test_a_ctas_shared_addresses_carry_its_cluster_rank():
    """A CTA's .shared::cta addresses are its .shared::cluster ones, rank * 2^24 + offset (as
    on hardware: CUTLASS's 2-SM kernels clear bit 24 of a local mbarrier address to name the
    even CTA of the pair). Each CTA stores its `bar` address and mapa of it to rank 0; rank 1
    arrives on rank 0's barrier through its own address with bit 24 cleared."""
    body = """
	setp.ne.u32 	%p1, %r2, 0;
	@%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 1;
	fence.mbarrier_init.release.cluster;
INIT_DONE:
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	mov.u32 	%r9, bar;
	mapa.shared::cluster.u32 	%r10, %r9, 0;
	@!%p1 bra 	WAIT;
	and.b32 	%r11, %r9, 0xFEFFFFFF;
	mbarrier.arrive.release.cluster.shared::cluster.b64 	_, [%r11];
	bra.uni 	DONE;
WAIT:
	mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 	%p3, [bar], 0;
	@!%p3 bra 	WAIT;
DONE:
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;""" + store_word("%r9", 0, 2) + store_word("%r10", 1, 2)
    ptx = kernel(body, shared=".shared .align 8 .b64 bar;")
    out = np.zeros((2, 2), np.uint32)
    run_ptx(ptx, "k", 2, 1, [out], cluster=2)
    assert out[1, 0] == out[0, 0] | (1 << 24)
    np.testing.assert_array_equal(out[:, 1], out[0, 0])


def test_a_shared_cta_access_to_another_ctas_address_is_reported():
    body = """
	mov.u32 	%r9, bar;
	xor.b32 	%r9, %r9, 0x1000000;
	ld.shared::cta.u64 	%rd5, [%r9];"""
    with pytest.raises(SimError, match=r"not in the executing CTA's shared memory \(cluster "
                                       r"rank 0\): use \.shared::cluster"):
        run_ptx(kernel(body, shared=".shared .align 8 .b64 bar;"), "k", 2, 1,
                [np.zeros(2, np.uint32)], cluster=2)
