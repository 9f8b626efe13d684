"""Cluster launch control in the simulator: persistent kernels whose CTAs cancel clusters that
have not launched (`clusterlaunchcontrol.try_cancel`) and do their tiles, decoded with
`query_cancel`; every tile must be done exactly once, by the CTAs that run, whatever the
number of resident clusters and the completion policy. Every kernel assembles with ptxas for
sm_100a.
"""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, run_ptx
from tests.tcgen05_ptx import assembles

HEADER = """.version 8.7
.target sm_100a
.address_size 64
"""
B128_LOAD = "ld.shared.b128 %q1, [resp];"  # CUTLASS's form
PAIR_LOAD = "ld.shared.v2.b64 {%rd9, %rd10}, [resp];\n  mov.b128 %q1, {%rd9, %rd10};"  # CCCL's
TRY_CANCEL = ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
              ".b128 [resp], [bar];")
# The registers, response slot and mbarrier of the kernels below, their parameters loaded, %r1
# the thread and %r2 the block's x id.
PROLOGUE = """  .reg .pred %p<6>;
  .reg .b32 %r<24>;
  .reg .b64 %rd<12>;
  .reg .f32 %f<4>;
  .reg .b128 %q1;
  .shared .align 16 .b8 resp[16];
  .shared .align 8 .b64 bar;

  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  ld.param.u64 %rd8, [owner];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd8, %rd8;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
"""
MULTICAST = ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
             ".multicast::cluster::all.b128 [resp], [bar];")


def tile_work(tile: str) -> str:
    """Tile `tile`'s work (out += 2 * in over its 128 floats, thread 0 recording the CTA in
    owner), then thread 0 expecting the next try_cancel response on `bar`."""
    return f"""  mad.lo.u32 %r5, {tile}, 128, %r1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f1, %f1, %f1;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.f32 %f2, [%rd5];
  add.f32 %f2, %f2, %f1;
  st.global.f32 [%rd5], %f2;
  mul.wide.u32 %rd6, {tile}, 4;
  add.s64 %rd7, %rd8, %rd6;
  @%p1 st.global.u32 [%rd7], %r14;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 16;
"""


def tiles_kernel(load: str = B128_LOAD, request: str = TRY_CANCEL) -> str:
    """One CTA per cluster, 128 threads: tile t (linear in a 2-D grid) is out[t] += 2 * in[t]
    over 128 floats; thread 0 records the CTA that did it in owner[t] and asks for the next
    tile by try_cancel, which every thread decodes after the mbarrier phase completed."""
    return HEADER + f"""
.visible .entry clc_tiles(.param .u64 in, .param .u64 out, .param .u64 owner)
.reqntid 128
{{
{PROLOGUE}  mov.u32 %r3, %ctaid.y;
  mov.u32 %r11, %nctaid.x;
  mad.lo.u32 %r14, %r3, %r11, %r2;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
  bar.sync 0;
  mov.u32 %r10, 0;
LOOP:
  mad.lo.u32 %r4, %r3, %r11, %r2;
{tile_work("%r4")}  @%p1 {request}
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], %r10;
  @!%p2 bra WAIT;
  xor.b32 %r10, %r10, 1;
  {load}
  clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p3, %q1;
  @%p3 clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {{%r2, %r3, %r6, _}}, %q1;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  @%p3 bra LOOP;
  ret;
}}
"""


def pairs_kernel() -> str:
    """Clusters of 2 CTAs along x: rank 0's thread 0 asks for the next cluster with the
    multicast try_cancel, whose response lands in both CTAs (each expects its 16 bytes on its
    own mbarrier); each CTA does the tile of its rank in the canceled cluster."""
    return HEADER + f"""
.visible .entry clc_pairs(.param .u64 in, .param .u64 out, .param .u64 owner)
.reqntid 128
.reqnctapercluster 2, 1, 1
{{
{PROLOGUE}  mov.u32 %r14, %ctaid.x;
  mov.u32 %r7, %cluster_ctarank;
  setp.eq.u32 %p1, %r1, 0;
  setp.eq.u32 %p4, %r7, 0;
  and.pred %p4, %p4, %p1;
  @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  mov.u32 %r10, 0;
LOOP:
{tile_work("%r2")}  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  @%p4 {MULTICAST}
WAIT:
  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [bar], %r10;
  @!%p2 bra WAIT;
  xor.b32 %r10, %r10, 1;
  {B128_LOAD}
  clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p3, %q1;
  @%p3 clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r2, %q1;
  add.u32 %r2, %r2, %r7;
  fence.proxy.async.shared::cta;
  @%p3 bra LOOP;
  ret;
}}
"""


def _run(ptx: str, kernel: str, grid: tuple[int, int], **options):
    tiles = grid[0] * grid[1]
    rng = np.random.default_rng(tiles)
    a = rng.standard_normal(tiles * 128).astype(np.float32)
    out = rng.standard_normal(tiles * 128).astype(np.float32)
    owner = np.full(tiles, -1, np.int32)
    expected = out + (a + a)
    run_ptx(ptx, kernel, grid, 128, [a, out, owner], **options)
    np.testing.assert_array_equal(out, expected)  # every tile once: twice would add 4a
    return owner


@pytest.mark.parametrize("grid, resident", [((5, 1), None), ((8, 1), 2), ((9, 1), 1),
                                            ((4, 3), 5), ((3, 4), 12)])
@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_persistent_tiles_each_once(grid, resident, policy):
    ptx = tiles_kernel()
    assembles(ptx)
    owner = _run(ptx, "clc_tiles", grid, resident_clusters=resident, async_completion=policy,
                 seed=3)
    tiles = grid[0] * grid[1]
    running = tiles if resident is None else resident
    assert set(owner.tolist()) <= set(range(running))  # canceled CTAs never ran
    if running == tiles:  # nothing was pending: every request failed, each CTA its own tile
        np.testing.assert_array_equal(owner, np.arange(tiles))


def test_next_cluster_in_launch_order():
    """One resident CTA takes every other tile in launch order; then two share them."""
    ptx = tiles_kernel()
    np.testing.assert_array_equal(_run(ptx, "clc_tiles", (6, 1), resident_clusters=1),
                                  np.zeros(6))
    owner = _run(ptx, "clc_tiles", (6, 1), resident_clusters=2)
    assert owner[:2].tolist() == [0, 1] and set(owner[2:].tolist()) == {0, 1}


def test_response_packed_from_two_b64():
    """CCCL's form: the response loaded as two .b64 and packed with mov.b128."""
    ptx = tiles_kernel(load=PAIR_LOAD)
    assembles(ptx)
    owner = _run(ptx, "clc_tiles", (7, 1), resident_clusters=3)
    assert set(owner.tolist()) <= {0, 1, 2}


@pytest.mark.parametrize("grid, resident", [((8, 1), 1), ((8, 1), 2), ((6, 1), None),
                                            ((10, 1), 3)])
@pytest.mark.parametrize("policy", ["eager", "random"])
def test_clusters_of_two_multicast(grid, resident, policy):
    ptx = pairs_kernel()
    assembles(ptx)
    owner = _run(ptx, "clc_pairs", grid, resident_clusters=resident, async_completion=policy,
                 seed=5)
    running = grid[0] if resident is None else 2 * resident
    assert set(owner.tolist()) <= set(range(running))
    assert (owner % 2 == np.arange(grid[0]) % 2).all()  # a tile of rank r done by a rank r CTA


def _error(ptx: str, kernel: str = "clc_tiles", grid=(4, 1), **options) -> str:
    with pytest.raises(SimError) as info:
        _run(ptx, kernel, grid, **options)
    return str(info.value)


def test_needs_sm_100():
    message = _error(tiles_kernel().replace("sm_100a", "sm_90a"))
    assert "needs .target sm_100 or later; the module targets sm_90a" in message
    assert "at line 46" in message and "clusterlaunchcontrol.try_cancel" in message


def test_needs_ptx_8_6():
    message = _error(tiles_kernel().replace(".version 8.7", ".version 8.5"))
    assert "needs PTX ISA .version 8.6 or later" in message


def test_multicast_needs_arch_specific_target():
    message = _error(pairs_kernel().replace("sm_100a", "sm_100"), "clc_pairs")
    assert "needs .target sm_100a (or another arch-specific target)" in message


def test_unaligned_response():
    ptx = tiles_kernel(request=TRY_CANCEL.replace("[resp]", "[resp+8]"))
    assembles(ptx)
    message = _error(ptx, resident_clusters=1)
    assert "response address 0x8 is not 16-byte aligned" in message
    assert "at line 46" in message and "block (0, 0, 0) thread (0, 0, 0)" in message


def test_request_after_observed_failure():
    """A CTA that decoded a failure and asks again: undefined, reported."""
    ptx = tiles_kernel().replace("@%p3 bra LOOP;", "bra LOOP;")
    assembles(ptx)
    message = _error(ptx, resident_clusters=2)
    assert "already observed a failed try_cancel" in message


def test_decoding_what_is_no_response():
    """Thread 0 stores zeros in the slot and completes the tx itself: no try_cancel wrote the
    16 bytes query_cancel decodes."""
    ptx = tiles_kernel().replace(
        "@%p1 " + TRY_CANCEL, "@%p1 st.shared.v4.b32 [resp], {%r1, %r1, %r1, %r1};\n"
        "  @%p1 mbarrier.complete_tx.shared::cta.b64 [bar], 16;")
    assembles(ptx)
    message = _error(ptx)
    assert "query_cancel decodes %q1, which holds no try_cancel response" in message
    assert "at line 53" in message


def test_second_request_into_a_slot_in_flight():
    """Two requests into one response slot, the first not yet waited for."""
    ptx = tiles_kernel().replace("@%p1 " + TRY_CANCEL, f"@%p1 {TRY_CANCEL}\n  @%p1 {TRY_CANCEL}")
    assembles(ptx)
    message = _error(ptx, resident_clusters=1, async_completion="latest")
    assert ("write to shared memory at shared address 0x0 that the "
            "clusterlaunchcontrol.try_cancel at line 46 still owns") in message
    assert "at line 47" in message


def test_mbarrier_must_be_initialised():
    ptx = tiles_kernel().replace("@%p1 mbarrier.init.shared::cta.b64 [bar], 1;", "")
    message = _error(ptx)
    assert "used before mbarrier.init" in message


def test_resident_clusters_checked():
    with pytest.raises(SimError, match="resident_clusters must be at least 1"):
        _run(tiles_kernel(), "clc_tiles", (2, 1), resident_clusters=0)


QUERY_KERNEL = HEADER + """
.visible .entry clc_query(.param .u64 out)
.reqntid 32
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .reg .b128 %q<2>;
  .shared .align 16 .b8 resp[16];
  .shared .align 8 .b64 bar;

  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.y;
  mov.u32 %r3, %ctaid.z;
  mad.lo.u32 %r4, %r3, 2, %r2;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
  bar.sync 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 16;
  @%p1 clusterlaunchcontrol.try_cancel.async.mbarrier::complete_tx::bytes.b128 [resp], [bar];
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
  @!%p2 bra WAIT;
  ld.shared.b128 %q0, [resp];
  clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p3, %q0;
  selp.u32 %r5, 1, 0, %p3;
  clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r6, %q0;
  clusterlaunchcontrol.query_cancel.get_first_ctaid::y.b32.b128 %r7, %q0;
  clusterlaunchcontrol.query_cancel.get_first_ctaid::z.b32.b128 %r8, %q0;
  clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%r9, %r10, %r11, _}, %q0;
  mov.b128 {%rd2, %rd3}, %q0;
  mov.b128 %q1, {%rd2, %rd3};
  clusterlaunchcontrol.query_cancel.get_first_ctaid::z.b32.b128 %r12, %q1;
  @!%p1 bra DONE;
  mul.wide.u32 %rd4, %r4, 32;
  add.s64 %rd5, %rd1, %rd4;
  st.global.v4.u32 [%rd5], {%r5, %r6, %r7, %r8};
  st.global.v4.u32 [%rd5+16], {%r9, %r10, %r11, %r12};
DONE:
  ret;
}
"""


def test_query_forms_and_launch_order():
    """Grid (1, 2, 3), four clusters resident: the first two requests (issued together,
    in thread order) cancel clusters 4 and 5, blocks (0, 0, 2) and (0, 1, 2), the next two
    fail; every decoding form agrees (the .b128 register unpacked and packed again too)."""
    assembles(QUERY_KERNEL)
    out = np.zeros((6, 8), np.uint32)
    run_ptx(QUERY_KERNEL, "clc_query", (1, 2, 3), 32, [out], resident_clusters=4)
    np.testing.assert_array_equal(out[0], [1, 0, 0, 2, 0, 0, 2, 2])
    np.testing.assert_array_equal(out[1], [1, 0, 1, 2, 0, 1, 2, 2])
    assert out[2:4, 0].tolist() == [0, 0]
    assert (out[4:] == 0).all()  # the canceled blocks never ran


B128_COPY = HEADER + """
.visible .entry copy128(.param .u64 src, .param .u64 dst)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<8>;
  .reg .b128 %q<2>;
  .shared .align 16 .b8 buf[512];
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.b128 %q0, [%rd4];
  shl.b32 %r2, %r1, 4;
  st.shared.b128 [%r2], %q0;
  bar.sync 0;
  xor.b32 %r3, %r2, 16;
  ld.shared.b128 %q1, [%r3];
  st.global.b128 [%rd5], %q1;
  ret;
}
"""


def test_b128_registers_move_16_bytes():
    """.b128 registers (what responses are decoded from) load and store whole: each thread
    copies its neighbour's 16 bytes through shared memory."""
    assembles(B128_COPY)
    src = np.arange(32 * 4, dtype=np.uint32)
    dst = np.zeros_like(src)
    run_ptx(B128_COPY, "copy128", 1, 32, [src, dst])
    np.testing.assert_array_equal(dst.reshape(32, 4), src.reshape(32, 4)[np.arange(32) ^ 1])
