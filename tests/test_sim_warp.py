"""Warp ops against the PTX ISA pseudo-code and numpy; named barriers; atomics that collide."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from smalti.sim import SimError
from tests.sim_body import run_body

RNG = np.random.default_rng(11)


def shfl_reference(mode: str, values: list[int], b: int, c: int) -> tuple[list[int], list[int]]:
    """PTX ISA, shfl.sync pseudo-code, one lane at a time."""
    out, preds = [], []
    for lane in range(32):
        bval, cval, segmask = b & 31, c & 31, (c >> 8) & 31
        max_lane = (lane & segmask) | (cval & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bval
            pval = j >= max_lane
        elif mode == "down":
            j = lane + bval
            pval = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            pval = j <= max_lane
        else:
            j = min_lane | (bval & ~segmask)
            pval = j <= max_lane
        if not pval:
            j = lane
        out.append(values[j])
        preds.append(int(pval))
    return out, preds


SHFL_CASES = [(mode, b, c) for mode, b, c in itertools.product(
    ("up", "down", "bfly", "idx"), (0, 1, 3, 8, 17, 31, 37),
    (0x0, 0x1F, 0x0C1F, 0x181F, 0x1F00, 0x1C00, 0x0807, 0x1007))]


@pytest.mark.parametrize(("mode", "b", "c"), SHFL_CASES)
def test_shfl_sync_against_isa_pseudocode(mode, b, c):
    values = RNG.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)
    body = f"""  shfl.sync.{mode}.b32 %r20|%p1, %r10, {b}, {c}, -1;
  selp.u32 %r21, 1, 0, %p1;"""
    out = run_body(body, values[:, None], 2, block=64)
    for warp in range(2):
        expected, preds = shfl_reference(mode, [int(v) for v in values[32 * warp:][:32]], b, c)
        np.testing.assert_array_equal(out[32 * warp:32 * warp + 32, 0], expected)
        np.testing.assert_array_equal(out[32 * warp:32 * warp + 32, 1], preds)


def test_shfl_with_register_operands_per_lane():
    lanes = np.arange(32)
    x = np.stack([lanes * 10, (lanes * 7) % 32, np.full(32, 0x1F)], axis=1)
    out = run_body("  shfl.sync.idx.b32 %r20, %r10, %r11, %r12, -1;", x, 1)
    np.testing.assert_array_equal(out[:, 0], ((lanes * 7) % 32) * 10)


DIVERGED = """  and.b32 %r5, %r0, 31;
  setp.lt.u32 %p2, %r5, 16;
  @!%p2 bra SKIP;
  shfl.sync.bfly.b32 %r20, %r10, 1, 0x1F, MASK;
SKIP:
"""


def test_shfl_in_divergent_code_with_matching_membermask():
    x = np.arange(32)[:, None] + 100
    out = run_body(DIVERGED.replace("MASK", "0xFFFF"), x, 1)
    lanes = np.arange(32)
    np.testing.assert_array_equal(out[:, 0], np.where(lanes < 16, (lanes ^ 1) + 100, 0))


def test_shfl_waits_for_members_and_proceeds_once_the_others_exited():
    # Lanes 16-31 skip the shuffle and exit; lanes 0-15 wait for them at it (PTX ISA: until
    # all non-exited members executed it), then go on.
    x = np.arange(32)[:, None] + 100
    out = run_body(DIVERGED.replace("MASK", "0xFFFFFFFF"), x, 1)
    lanes = np.arange(32)
    np.testing.assert_array_equal(out[:16, 0], (lanes[:16] ^ 1) + 100)


SPLIT = """  and.b32 %r5, %r0, 31;
  setp.lt.u32 %p2, %r5, 16;
  @!%p2 bra OTHER;
  shfl.sync.bfly.b32 %r20, %r10, 1, 0x1F, -1;
  bra.uni DONE;
OTHER:
  shfl.sync.bfly.b32 %r20, %r10, 2, 0x1F, -1;
DONE:
"""


def test_members_waiting_at_different_shuffles_are_a_deadlock():
    with pytest.raises(SimError, match=r"never reached this instruction.*does not reconverge"):
        run_body(SPLIT, np.zeros((32, 1)), 1)


def test_lanes_that_arrive_first_wait_for_the_rest_of_the_warp():
    # Lanes 16-31 reach the shuffle first (the lowest pc); lanes 0-15 do more work ahead of
    # it and come back with a backward branch: the early lanes wait, then all shuffle.
    source = """  and.b32 %r5, %r0, 31;
  mov.u32 %r6, 0;
  setp.lt.u32 %p2, %r5, 16;
  @%p2 bra AHEAD;
MEET:
  shfl.sync.bfly.b32 %r20, %r10, 16, 0x1F, -1;
  bra.uni DONE;
AHEAD:
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p3, %r6, 5;
  @%p3 bra AHEAD;
  bra.uni MEET;
DONE:
  add.u32 %r21, %r6, 0;
"""
    x = np.arange(32)[:, None] + 100
    out = run_body(source, x, 2)
    lanes = np.arange(32)
    np.testing.assert_array_equal(out[:, 0], (lanes ^ 16) + 100)
    np.testing.assert_array_equal(out[:, 1], np.where(lanes < 16, 5, 0))


def test_shfl_outside_own_membermask_is_an_error():
    with pytest.raises(SimError, match="not in its membermask"):
        run_body("  shfl.sync.bfly.b32 %r20, %r10, 1, 0x1F, 0xFF;", np.zeros((32, 1)), 1)


def test_exited_threads_do_not_block_warp_ops():
    source = """  and.b32 %r5, %r0, 31;
  setp.ge.u32 %p2, %r5, 20;
  @%p2 exit;
  vote.sync.ballot.b32 %r20, %p2, -1;
  setp.lt.u32 %p3, %r5, 3;
  vote.sync.ballot.b32 %r21, %p3, -1;
"""
    out = run_body(source, np.zeros((32, 1)), 2)
    np.testing.assert_array_equal(out[:20, 0], 0)
    np.testing.assert_array_equal(out[:20, 1], 0b111)


@pytest.mark.parametrize("members", [0xFFFFFFFF, 0x0000FFFF, 0xF0F0F0F0, 0x80000001])
def test_vote_and_redux_against_numpy(members):
    x = RNG.integers(0, 1 << 32, (64, 1), dtype=np.uint64).astype(np.uint32)
    x[:8] = 7  # repeated values for match.sync
    lane = np.arange(64) % 32
    inside = ((members >> lane) & 1).astype(bool)
    body = f"""  and.b32 %r5, %r0, 31;
  shr.u32 %r6, {members:#x}, %r5;
  and.b32 %r6, %r6, 1;
  setp.eq.u32 %p4, %r6, 0;
  @%p4 bra OUT;
  and.b32 %r7, %r10, 1;
  setp.ne.u32 %p1, %r7, 0;
  vote.sync.all.pred %p2, %p1, {members:#x};
  selp.u32 %r20, 1, 0, %p2;
  vote.sync.any.pred %p2, %p1, {members:#x};
  selp.u32 %r21, 1, 0, %p2;
  vote.sync.uni.pred %p2, %p1, {members:#x};
  selp.u32 %r22, 1, 0, %p2;
  vote.sync.ballot.b32 %r23, %p1, {members:#x};
  redux.sync.add.u32 %r24, %r10, {members:#x};
  redux.sync.min.s32 %r25, %r10, {members:#x};
  redux.sync.max.u32 %r26, %r10, {members:#x};
  redux.sync.and.b32 %r27, %r10, {members:#x};
  redux.sync.or.b32 %r28, %r10, {members:#x};
  redux.sync.xor.b32 %r29, %r10, {members:#x};
  match.any.sync.b32 %r30, %r7, {members:#x};
  activemask.b32 %r31;
OUT:
"""
    out = run_body(body, x, 12, block=64)
    for warp in range(2):
        rows = slice(32 * warp, 32 * warp + 32)
        vals = x[rows, 0][inside[rows]]
        bits = (vals & 1).astype(bool)
        got = out[rows][inside[rows]]
        ballot = sum(1 << int(i) for i in np.flatnonzero(inside[rows]) if x[rows][i, 0] & 1)
        assert (got[:, 0] == bits.all()).all() and (got[:, 1] == bits.any()).all()
        assert (got[:, 2] == (bits.all() or not bits.any())).all()
        assert (got[:, 3] == ballot).all()
        assert (got[:, 4] == vals.astype(np.uint64).sum() % (1 << 32)).all()
        assert (got[:, 5] == vals.view(np.int32).min().view(np.uint32)).all()
        assert (got[:, 6] == vals.max()).all()
        assert (got[:, 7] == np.bitwise_and.reduce(vals)).all()
        assert (got[:, 8] == np.bitwise_or.reduce(vals)).all()
        assert (got[:, 9] == np.bitwise_xor.reduce(vals)).all()
        member_lanes = np.flatnonzero(inside[rows])
        for i, lane_i in enumerate(member_lanes):
            parity = x[rows][lane_i, 0] & 1
            same = sum(1 << int(j) for j in member_lanes if x[rows][j, 0] & 1 == parity)
            assert got[i, 10] == same
        assert (got[:, 11] == members).all()  # activemask: the lanes that took the branch


PRODUCER_CONSUMER = """  setp.lt.u32 %p1, %r0, 64;
  @%p1 bra PRODUCER;
  bar.sync 1, 128;
  sub.u32 %r5, %r0, 64;
  shl.b32 %r6, %r5, 2;
  mov.u32 %r7, smem;
  add.u32 %r7, %r7, %r6;
  ld.shared.u32 %r20, [%r7];
  bra END;
PRODUCER:
  shl.b32 %r6, %r0, 2;
  mov.u32 %r7, smem;
  add.u32 %r7, %r7, %r6;
  mul.lo.u32 %r8, %r0, 3;
  st.shared.u32 [%r7], %r8;
  bar.arrive 1, 128;
  mov.u32 %r20, 1;
END:
"""


def test_named_barrier_producer_consumer():
    out = run_body(PRODUCER_CONSUMER, np.zeros((256, 1)), 1, block=128, grid=2)
    tid = np.arange(256) % 128
    np.testing.assert_array_equal(out[:, 0], np.where(tid < 64, 1, (tid - 64) * 3))


def test_named_barrier_that_never_completes_is_a_deadlock():
    with pytest.raises(SimError, match="deadlock"):
        run_body(PRODUCER_CONSUMER.replace("bar.arrive 1, 128", "bar.arrive 2, 128"),
                 np.zeros((128, 1)), 1, block=128)


def test_barrier_thread_count_must_be_a_warp_multiple():
    with pytest.raises(SimError, match="multiple of the warp size"):
        run_body("  bar.sync 1, 48;", np.zeros((64, 1)), 1, block=64)


ATOM_BODY = """  shl.b32 %r5, %r0, 2;
  mov.u32 %r6, smem;
  add.u32 %r6, %r6, %r5;
  st.shared.u32 [%r6], 0;
  st.shared.u32 [%r6+256], 0;
  bar.sync 0;
  rem.u32 %r5, %r0, 3;
  shl.b32 %r5, %r5, 2;
  mov.u32 %r6, smem;
  add.u32 %r6, %r6, %r5;
  atom.shared.add.u32 %r20, [%r6], 1;
  bar.sync 0;
  ld.shared.u32 %r21, [%r6];
  add.u32 %r7, %r6, 64;
  atom.shared.exch.b32 %r22, [%r7], %r0;
  add.u32 %r8, %r6, 128;
  atom.shared.cas.b32 %r23, [%r8], %r0, 1000;
  add.u32 %r9, %r6, 192;
  atom.shared.inc.u32 %r24, [%r9], 4;
  add.u32 %r9, %r6, 256;
  atom.shared.max.s32 %r25, [%r9], %r10;
  add.u32 %r9, %r6, 320;
  red.shared.add.f32 [%r9], 0f3F000000;
  bar.sync 0;
  ld.shared.u32 %r26, [%r9];
  ld.shared.u32 %r27, [%r8];
"""


def test_atomics_with_colliding_addresses():
    x = RNG.integers(-1000, 1000, (64, 1)).astype(np.int32).view(np.uint32)
    out = run_body(ATOM_BODY, x, 8, block=64)
    slot = np.arange(64) % 3
    for s in range(3):
        rows = out[slot == s]
        count = len(rows)
        assert sorted(rows[:, 0]) == list(range(count))  # each saw a distinct old value
        assert (rows[:, 1] == count).all()
        # exch: the first thread sees 0, every later one sees an earlier thread's id.
        assert rows[0, 2] == 0 and set(rows[1:, 2]) <= set(np.flatnonzero(slot == s))
        # cas with compare value = thread id: only thread 0 (which compares with 0) swaps.
        assert rows[0, 3] == 0 and (rows[0, 7] == (1000 if s == 0 else 0))
        np.testing.assert_array_equal(rows[:, 4], np.arange(count) % 5)
        maxes = np.maximum.accumulate(np.r_[0, x[slot == s, 0].view(np.int32)])[:-1]
        np.testing.assert_array_equal(rows[:, 5].view(np.int32), maxes)
        assert rows[:, 6].view(np.float32)[0] == 0.5 * count


def test_global_atomic_out_of_bounds_is_reported():
    body = """  mul.wide.u32 %rd7, %r0, 1024;
  add.s64 %rd8, %rd2, %rd7;
  atom.global.add.u32 %r20, [%rd8], 1;"""
    with pytest.raises(SimError, match="out-of-bounds"):
        run_body(body, np.zeros((32, 1)), 1)


def test_bar_warp_sync_after_divergence_waits_for_the_lanes_still_working():
    # CUTLASS's pattern: one lane does extra work (here a loop) while the others go on to
    # bar.warp.sync and wait there; the backward branch brings the worker to them.
    source = """  and.b32 %r5, %r0, 31;
  mov.u32 %r6, 0;
  setp.eq.u32 %p2, %r5, 0;
  @%p2 bra WORK;
SYNC:
  bar.warp.sync -1;
  shfl.sync.idx.b32 %r20, %r6, 0, 0x1F, -1;
  bra.uni DONE;
WORK:
  add.u32 %r6, %r6, 3;
  setp.lt.u32 %p3, %r6, 30;
  @%p3 bra WORK;
  bra.uni SYNC;
DONE:
"""
    out = run_body(source, np.zeros((64, 1)), 1, block=64)
    np.testing.assert_array_equal(out[:, 0], 30)  # every lane reads lane 0's finished count
