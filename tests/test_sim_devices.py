"""Several devices in one simulator launch: symmetric buffers reached through a peer table,
system-scope signals and spin waits, and the deadlocks and races between devices."""

import re

import numpy as np
import pytest

from smalti.ptx.toolchain import compile_ptx
from smalti.sim import PeerTable, SimError, run_ptx, run_ptx_devices

DEVICES = (2, 4, 8)

# Each device's symmetric buffer (u32 words): slots 0..7 get the ranks peers write, word 8
# counts the signals received (red.release.sys), word 9 is the ring token.
EXCHANGE_WORDS = 16
EXCHANGE = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry exchange(.param .u64 peers, .param .u32 rank, .param .u32 ndev,
                         .param .u32 need, .param .u64 out)
.maxntid 32, 1, 1
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    .reg .pred %p<4>;
    ld.param.u64 %rd0, [peers];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u32 %r0, [rank];
    ld.param.u32 %r1, [ndev];
    ld.param.u32 %r7, [need];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd1, %r0, 8;
    add.s64 %rd1, %rd0, %rd1;
    ld.global.u64 %rd2, [%rd1];
    setp.eq.u32 %p0, %r0, 0;
    @%p0 bra $pass;
$wait_token:
    ld.acquire.sys.global.u32 %r3, [%rd2+36];
    setp.eq.u32 %p1, %r3, 0;
    @%p1 bra $wait_token;
$pass:
    setp.ge.u32 %p2, %r2, %r1;
    @%p2 bra $signalled;
    mul.wide.u32 %rd3, %r2, 8;
    add.s64 %rd3, %rd0, %rd3;
    ld.global.u64 %rd4, [%rd3];
    mul.wide.u32 %rd5, %r0, 4;
    add.s64 %rd6, %rd4, %rd5;
    st.global.u32 [%rd6], %r0;
    red.release.sys.global.add.u32 [%rd4+32], 1;
$signalled:
    bar.sync 0;
    add.u32 %r4, %r0, 1;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra $wait_all;
    setp.ge.u32 %p2, %r4, %r1;
    @%p2 bra $wait_all;
    mul.wide.u32 %rd7, %r4, 8;
    add.s64 %rd7, %rd0, %rd7;
    ld.global.u64 %rd8, [%rd7];
    st.release.sys.global.u32 [%rd8+36], 1;
$wait_all:
    ld.acquire.sys.global.u32 %r5, [%rd2+32];
    setp.lt.u32 %p3, %r5, %r7;
    @%p3 bra $wait_all;
    setp.ge.u32 %p2, %r2, %r1;
    @%p2 bra $done;
    mul.wide.u32 %rd9, %r2, 4;
    add.s64 %rd10, %rd2, %rd9;
    ld.global.u32 %r6, [%rd10];
    ld.param.u64 %rd11, [out];
    cvta.to.global.u64 %rd11, %rd11;
    add.s64 %rd11, %rd11, %rd9;
    st.global.u32 [%rd11], %r6;
$done:
    ret;
}
"""

# All-gather: device r's CHUNK values land at [16 + 4 * (r * CHUNK + t)] of every device's
# symmetric buffer by plain remote stores; word 0 counts the signals received.
CHUNK = 64
ALL_GATHER = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry all_gather(.param .u64 peers, .param .u32 rank, .param .u32 ndev,
                           .param .u64 src, .param .u64 out)
.maxntid 64, 1, 1
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<16>;
    .reg .pred %p<4>;
    ld.param.u64 %rd0, [peers];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u32 %r0, [rank];
    ld.param.u32 %r1, [ndev];
    mov.u32 %r2, %tid.x;
    ld.param.u64 %rd1, [src];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r3, [%rd3];
    mad.lo.u32 %r4, %r0, 64, %r2;
    mul.wide.u32 %rd4, %r4, 4;
    mov.u32 %r5, 0;
$put:
    mul.wide.u32 %rd5, %r5, 8;
    add.s64 %rd5, %rd0, %rd5;
    ld.global.u64 %rd6, [%rd5];
    add.s64 %rd7, %rd6, %rd4;
    st.global.u32 [%rd7+16], %r3;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p0, %r5, %r1;
    @%p0 bra $put;
    bar.sync 0;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra $wait;
    mov.u32 %r5, 0;
$signal:
    mul.wide.u32 %rd5, %r5, 8;
    add.s64 %rd5, %rd0, %rd5;
    ld.global.u64 %rd6, [%rd5];
    red.release.sys.global.add.u32 [%rd6], 1;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p0, %r5, %r1;
    @%p0 bra $signal;
$wait:
    mul.wide.u32 %rd8, %r0, 8;
    add.s64 %rd8, %rd0, %rd8;
    ld.global.u64 %rd9, [%rd8];
WAIT
    ld.param.u64 %rd10, [out];
    cvta.to.global.u64 %rd10, %rd10;
    mov.u32 %r5, 0;
$get:
    mad.lo.u32 %r7, %r5, 64, %r2;
    mul.wide.u32 %rd11, %r7, 4;
    add.s64 %rd12, %rd9, %rd11;
    ld.global.u32 %r8, [%rd12+16];
    add.s64 %rd13, %rd10, %rd11;
    st.global.u32 [%rd13], %r8;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p0, %r5, %r1;
    @%p0 bra $get;
    ret;
}
"""
SPIN_WAIT = """$spin:
    ld.acquire.sys.global.u32 %r6, [%rd9];
    setp.lt.u32 %p2, %r6, %r1;
    @%p2 bra $spin;"""


def all_gather(wait: str = SPIN_WAIT) -> str:
    return ALL_GATHER.replace("WAIT", wait)


def line_of(ptx: str, text: str) -> int:
    """The 1-based line of the first PTX line containing `text`."""
    return next(i for i, line in enumerate(ptx.splitlines(), 1) if text in line)


def test_kernels_assemble():
    for text in (EXCHANGE, all_gather(), all_gather("")):
        compile_ptx(text)


# The ring token passed by an atomic exchange instead of a release store.
TOKEN_BY_ATOM = ("st.release.sys.global.u32 [%rd8+36], 1;",
                 "atom.release.sys.global.exch.b32 %r6, [%rd8+36], 1;")


def run_exchange(n: int, need: int | None = None, ptx: str = EXCHANGE
                 ) -> tuple[np.ndarray, np.ndarray]:
    symmetric = [np.zeros(EXCHANGE_WORDS, np.uint32) for _ in range(n)]
    out = np.full((n, n), 99, np.uint32)
    args = [[PeerTable(), np.uint32(d), np.uint32(n), np.uint32(n if need is None else need),
             out[d]] for d in range(n)]
    run_ptx_devices(ptx, "exchange", 1, 32, args, symmetric=symmetric)
    return np.stack(symmetric), out


# The token polled by an atomic (a read-modify-write that changes nothing) ...
POLL_BY_ATOM = ("ld.acquire.sys.global.u32 %r3, [%rd2+36];",
                "atom.acquire.sys.global.or.b32 %r3, [%rd2+36], 0;")
# ... or by a load in a loop that counts its polls.
POLL_COUNTED = ("ld.acquire.sys.global.u32 %r3, [%rd2+36];",
                "ld.acquire.sys.global.u32 %r3, [%rd2+36];\n    add.u32 %r6, %r6, 1;")
TOKENS = {"st": [], "atom": [TOKEN_BY_ATOM], "atom poll": [POLL_BY_ATOM],
          "counted poll": [POLL_COUNTED, ("mov.u32 %r2, %tid.x;",
                                          "mov.u32 %r2, %tid.x;\n    mov.u32 %r6, 0;")]}


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("n", DEVICES)
def test_devices_exchange_ranks_through_peer_buffers(n, token):
    """Each device writes its rank into every peer's buffer and signals it with
    red.release.sys; a ring token (st.release.sys or atom.release.sys.exch) makes devices 1..
    poll (ld.acquire.sys, or an atomic, or a counting loop) before they write, so the
    devices must interleave to finish."""
    ptx = EXCHANGE
    for old, new in TOKENS[token]:
        assert old in ptx
        ptx = ptx.replace(old, new)
    if token != "st":
        compile_ptx(ptx)
    symmetric, out = run_exchange(n, ptx=ptx)
    np.testing.assert_array_equal(out, np.tile(np.arange(n, dtype=np.uint32), (n, 1)))
    np.testing.assert_array_equal(symmetric[:, :n], out)
    np.testing.assert_array_equal(symmetric[:, 8], np.full(n, n))  # n signals each
    np.testing.assert_array_equal(symmetric[:, 9], [0] + [1] * (n - 1))  # the ring token


@pytest.mark.parametrize("n", DEVICES)
def test_all_gather_by_remote_stores(n):
    rng = np.random.default_rng(n)
    src = rng.integers(0, 2**32, (n, CHUNK), dtype=np.uint32)
    symmetric = [np.zeros(4 + n * CHUNK, np.uint32) for _ in range(n)]
    out = np.zeros((n, n * CHUNK), np.uint32)
    args = [[PeerTable(), np.uint32(d), np.uint32(n), src[d], out[d]] for d in range(n)]
    run_ptx_devices(all_gather(), "all_gather", 1, CHUNK, args, symmetric=symmetric)
    expected = np.tile(src.reshape(-1), (n, 1))
    np.testing.assert_array_equal(out, expected)
    for d in range(n):
        np.testing.assert_array_equal(symmetric[d][4:], src.reshape(-1))
        assert symmetric[d][0] == n


def test_missing_wait_is_a_race():
    """Without the spin on the signal count, a device reads its buffer while peers' plain
    stores into it are unordered with the read: reported, naming both devices and lines."""
    n = 2
    ptx = all_gather("")
    src = np.arange(n * CHUNK, dtype=np.uint32).reshape(n, CHUNK)
    symmetric = [np.zeros(4 + n * CHUNK, np.uint32) for _ in range(n)]
    out = np.zeros((n, n * CHUNK), np.uint32)
    args = [[PeerTable(), np.uint32(d), np.uint32(n), src[d], out[d]] for d in range(n)]
    with pytest.raises(SimError, match="race between devices") as info:
        run_ptx_devices(ptx, "all_gather", 1, CHUNK, args, symmetric=symmetric)
    message = str(info.value)
    read, store = line_of(ptx, "ld.global.u32 %r8"), line_of(ptx, "st.global.u32 [%rd7+16]")
    assert info.value.line == read
    assert f"line {store}" in message
    assert "device 0" in message and "device 1" in message


def test_the_spin_wait_orders_the_reads():
    """The same reads after the acquire spin: no race (the other tests' kernels), and a
    .gpu-scope acquire instead does not order them against other devices."""
    n = 2
    ptx = all_gather(SPIN_WAIT.replace("acquire.sys", "acquire.gpu"))
    compile_ptx(ptx)
    src = np.arange(n * CHUNK, dtype=np.uint32).reshape(n, CHUNK)
    symmetric = [np.zeros(4 + n * CHUNK, np.uint32) for _ in range(n)]
    out = np.zeros((n, n * CHUNK), np.uint32)
    args = [[PeerTable(), np.uint32(d), np.uint32(n), src[d], out[d]] for d in range(n)]
    with pytest.raises(SimError, match="race between devices"):
        run_ptx_devices(ptx, "all_gather", 1, CHUNK, args, symmetric=symmetric)


@pytest.mark.parametrize("n", (2, 4))
def test_a_wait_never_signalled_is_a_deadlock(n):
    """Every device waits for one signal more than the devices send."""
    with pytest.raises(SimError, match="spin deadlock") as info:
        run_exchange(n, need=n + 1)
    poll = line_of(EXCHANGE, "[%rd2+32]")
    message = str(info.value)
    for d in range(n):
        assert f"device {d} block (0, 0, 0) (32 thread(s)) polls line {poll}" in message
    assert re.search(r"at line \d+", message)


@pytest.mark.parametrize("poll", ("ld", "atom"))
def test_a_device_waiting_for_a_peer_that_exits_is_a_deadlock(poll):
    """Device 1 waits for the ring token (by ld.acquire.sys, or by an atomic that changes
    nothing); device 0 never passes it (ndev=1 tells it it is alone), and exits: device 1's
    poll is named."""
    ptx = EXCHANGE if poll == "ld" else EXCHANGE.replace(*POLL_BY_ATOM)
    symmetric = [np.zeros(EXCHANGE_WORDS, np.uint32) for _ in range(2)]
    out = np.zeros((2, 2), np.uint32)
    args = [[PeerTable(), np.uint32(d), np.uint32(1), np.uint32(1), out[d]] for d in range(2)]
    with pytest.raises(SimError, match="spin deadlock") as info:
        run_ptx_devices(ptx, "exchange", 1, 32, args, symmetric=symmetric)
    message = str(info.value)
    assert f"device 1 block (0, 0, 0) (32 thread(s)) polls line {line_of(ptx, '+36]')}" \
        in message
    assert "device 0" not in message


def test_devices_see_their_own_grid_and_arguments():
    """%ctaid and parameters are per device; blocks of every device run."""
    ptx = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 scale)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd0, [out];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u32 %r0, [scale];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r4, %r1, %r2, %r3;
    mul.lo.u32 %r5, %r4, %r0;
    mul.wide.u32 %rd1, %r4, 4;
    add.s64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r5;
    ret;
}
"""
    outs = [np.zeros(3 * 8, np.uint32) for _ in range(3)]
    run_ptx_devices(ptx, "k", 3, 8, [[outs[d], np.uint32(d + 1)] for d in range(3)])
    for d in range(3):
        np.testing.assert_array_equal(outs[d], np.arange(24) * (d + 1))


def test_symmetric_buffers_must_match():
    with pytest.raises(SimError, match="one size"):
        run_ptx_devices(EXCHANGE, "exchange", 1, 32, [[PeerTable(), 0, 2, 2, np.zeros(2)]] * 2,
                        symmetric=[np.zeros(4, np.uint32), np.zeros(8, np.uint32)])


FENCED_SIGNAL = ("red.release.sys.global.add.u32 [%rd6], 1;",
                 "fence.acq_rel.sys;\n    red.relaxed.sys.global.add.u32 [%rd6], 1;")
VOLATILE_WAIT = """$spin:
    ld.volatile.global.u32 %r6, [%rd9];
    setp.lt.u32 %p2, %r6, %r1;
    @%p2 bra $spin;
    FENCE"""


@pytest.mark.parametrize(("fence", "race"), [("fence.acq_rel.sys;", False),
                                             ("fence.sc.sys;", False),
                                             ("membar.sys;", False),
                                             ("fence.acq_rel.gpu;", True),
                                             ("", True)])
def test_fences_make_release_and_acquire_patterns(fence, race):
    """fence.acq_rel.sys then a relaxed .sys red signals (the release pattern); a volatile
    poll then a system-scope fence waits (the acquire pattern). Without the reader's fence,
    or with a .gpu one, the reads race with the peers' stores."""
    n = 4
    ptx = all_gather(VOLATILE_WAIT.replace("FENCE", fence)).replace(*FENCED_SIGNAL)
    compile_ptx(ptx)
    src = np.arange(n * CHUNK, dtype=np.uint32).reshape(n, CHUNK) * 3
    symmetric = [np.zeros(4 + n * CHUNK, np.uint32) for _ in range(n)]
    out = np.zeros((n, n * CHUNK), np.uint32)
    args = [[PeerTable(), np.uint32(d), np.uint32(n), src[d], out[d]] for d in range(n)]
    if race:
        with pytest.raises(SimError, match="race between devices"):
            run_ptx_devices(ptx, "all_gather", 1, CHUNK, args, symmetric=symmetric)
        return
    run_ptx_devices(ptx, "all_gather", 1, CHUNK, args, symmetric=symmetric)
    np.testing.assert_array_equal(out, np.tile(src.reshape(-1), (n, 1)))


# Block b > 0 of a device waits (thread 0 polls, the others at bar.sync) for block b - 1's
# flag in the device's own buffer, then writes its %ctaid.x and %cluster_ctarank.
BLOCK_CHAIN = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry chain(.param .u64 flags, .param .u64 out, .param .u32 last)
.maxntid 32, 1, 1
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    ld.param.u64 %rd0, [flags];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r7, [last];
    mov.u32 %r0, %ctaid.x;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p0, %r1, 0;
    @%p0 bra $joined;
    setp.eq.u32 %p1, %r0, 0;
    @%p1 bra $joined;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd0, %rd2;
$poll:
    ld.volatile.global.u32 %r2, [%rd3+-4];
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bra $poll;
$joined:
    bar.sync 0;
    @%p0 bra $done;
    setp.ge.u32 %p3, %r0, %r7;
    mul.wide.u32 %rd4, %r0, 8;
    add.s64 %rd5, %rd1, %rd4;
    mov.u32 %r3, %cluster_ctarank;
    st.global.v2.u32 [%rd5], {%r0, %r3};
    @%p3 bra $done;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd6, %rd0, %rd2;
    st.volatile.global.u32 [%rd6], 1;
$done:
    ret;
}
"""


def test_blocks_of_a_device_wait_for_each_other_in_clusters():
    """Blocks poll earlier blocks' flags (a chain against min-PC order): every device's
    blocks finish, and each sees its own %ctaid and cluster rank."""
    compile_ptx(BLOCK_CHAIN)
    n, blocks = 3, 4
    flags = np.zeros((n, blocks), np.uint32)
    out = np.zeros((n, blocks, 2), np.uint32)
    run_ptx_devices(BLOCK_CHAIN, "chain", blocks, 32,
                    [[flags[d], out[d], np.uint32(blocks - 1)] for d in range(n)],
                    cluster=(2, 1, 1))
    expected = np.stack([np.arange(blocks), np.arange(blocks) % 2], axis=1)
    np.testing.assert_array_equal(out, np.broadcast_to(expected, out.shape))
    np.testing.assert_array_equal(flags[:, :blocks - 1], 1)


def test_a_broken_chain_is_a_deadlock_naming_the_waiting_blocks():
    """Block 1 never sets its flag (last=1): blocks 2 and 3 of every device poll forever,
    their other threads wait at bar.sync."""
    n, blocks = 2, 4
    flags = np.zeros((n, blocks), np.uint32)
    out = np.zeros((n, blocks, 2), np.uint32)
    with pytest.raises(SimError, match="spin deadlock") as info:
        run_ptx_devices(BLOCK_CHAIN, "chain", blocks, 32,
                        [[flags[d], out[d], np.uint32(1)] for d in range(n)])
    message = str(info.value)
    poll = line_of(BLOCK_CHAIN, "ld.volatile")
    for d in range(n):
        for b in (2, 3):
            assert f"device {d} block ({b}, 0, 0) (1 thread(s)) polls line {poll}" in message
    assert "124 more thread(s) wait at bar.sync" in message
    assert info.value.line == poll


def test_a_devices_symmetric_buffer_as_an_argument_is_the_same_memory():
    """Passing symmetric[d] to device d as an array argument passes its symmetric address:
    the peer table's entry for the device equals the argument, and stores through it land
    in the buffer."""
    ptx = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 peers, .param .u64 mine, .param .u32 rank)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [peers];
    ld.param.u64 %rd1, [mine];
    ld.param.u32 %r0, [rank];
    mul.wide.u32 %rd2, %r0, 8;
    add.s64 %rd3, %rd0, %rd2;
    ld.global.u64 %rd4, [%rd3];
    setp.eq.u64 %p0, %rd4, %rd1;
    selp.u32 %r1, 7, 5, %p0;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
    compile_ptx(ptx)
    symmetric = [np.zeros(4, np.uint32) for _ in range(2)]
    run_ptx_devices(ptx, "k", 1, 1, [[PeerTable(), symmetric[d], np.uint32(d)]
                                     for d in range(2)], symmetric=symmetric)
    np.testing.assert_array_equal(np.stack(symmetric)[:, 0], [7, 7])


def test_module_variables_are_per_device():
    """A module-scope .global variable has one copy per device: each device's threads count
    into their own."""
    ptx = """
.version 8.0
.target sm_90a
.address_size 64
.global .align 4 .u32 counter;
.global .align 4 .u32 base = 100;
.visible .entry k(.param .u64 out, .param .u32 add)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u32 %r0, [add];
    mov.u64 %rd0, counter;
    atom.global.add.u32 %r1, [%rd0], %r0;
    bar.sync 0;
    ld.global.u32 %r2, [counter];
    ld.global.u32 %r3, [base];
    add.u32 %r2, %r2, %r3;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    st.global.u32 [%rd1], %r2;
    ret;
}
"""
    compile_ptx(ptx)
    out = np.zeros((4, 1), np.uint32)
    run_ptx_devices(ptx, "k", 1, 64, [[out[d], np.uint32(d + 1)] for d in range(4)])
    np.testing.assert_array_equal(out[:, 0], 100 + 64 * np.arange(1, 5))


# One device: blocks that wait for each other (split-K semaphores, decoupled look-back)
# run through the same spin waits.

FLAG = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry flag(.param .u64 flag, .param .u64 out, .param .u32 producer)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r3, [producer];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %ctaid.x;
    setp.eq.u32 %p, %r1, %r3;
    @%p bra $produce;
$wait:
    ld.acquire.gpu.global.u32 %r2, [%rd1];
    setp.eq.u32 %p, %r2, 0;
    @%p bra $wait;
    ld.global.u32 %r2, [%rd2];
    add.u32 %r2, %r2, 1;
    st.global.u32 [%rd2+4], %r2;
    ret;
$produce:
    st.global.u32 [%rd2], 41;
    st.release.gpu.global.u32 [%rd1], 1;
    ret;
}
"""


def test_a_block_waiting_for_a_later_block_of_its_device_runs():
    """Block 0 polls a flag that block 1 sets after writing its result: the waiting block
    sleeps while block 1 runs, then reads the result (run_ptx: one device)."""
    compile_ptx(FLAG)
    flag, out = np.zeros(1, np.uint32), np.zeros(2, np.uint32)
    run_ptx(FLAG, "flag", 2, 1, [flag, out, np.uint32(1)])
    np.testing.assert_array_equal(out, [41, 42])


def test_a_block_waiting_for_no_block_is_a_deadlock_at_its_line():
    """No block produces (producer 5 of a grid of 2): both blocks poll for ever."""
    flag, out = np.zeros(1, np.uint32), np.zeros(2, np.uint32)
    with pytest.raises(SimError, match="spin deadlock") as info:
        run_ptx(FLAG, "flag", 2, 1, [flag, out, np.uint32(5)])
    poll = line_of(FLAG, "ld.acquire.gpu.global.u32")
    for block in ("(0, 0, 0)", "(1, 0, 0)"):
        assert f"block {block} (1 thread(s)) polls line {poll}" in str(info.value)
