"""Non-tensor bulk copies (`cp.async.bulk` global <-> shared, `cp.reduce.async.bulk` into global)
through the asynchronous engine, on one device and across devices (a peer's symmetric buffer
as the global side), with their race checks, size and alignment rules and errors."""

import ml_dtypes
import numpy as np
import pytest

from smalti.ptx.toolchain import ToolchainError, compile_ptx, find_tool
from smalti.sim import Multicast, PeerTable, SimError, run_ptx, run_ptx_devices

DEVICES = (2, 4, 8)
POLICIES = ("eager", "latest", "random")
THREADS = 32
SIZE = 16 * THREADS  # bytes of one copy: each thread moves 16 of them in or out of smem
HEADER = """
.version 8.6
.target sm_90a
.address_size 64
"""


def needs_ptxas() -> None:
    try:
        find_tool("ptxas")
    except ToolchainError:
        pytest.skip("ptxas is not installed")


def line_of(ptx: str, text: str) -> int:
    return next(i for i, line in enumerate(ptx.splitlines(), 1) if text in line)


# Pull: thread 0 copies SIZE bytes at [src] into smem with cp.async.bulk (DST: .shared::cta
# or .shared::cluster) on an mbarrier; everyone waits and writes smem to out. The source is a
# peer's symmetric buffer (peers, rank, ndev: device d pulls device (d + 1) % ndev's) or, with
# `local`, the array `src`.
def pull_kernel(dst: str = "shared::cta", local: bool = False, wait: bool = True,
                size: str = str(SIZE), offset: int = 0) -> str:
    source = """
    ld.param.u64 %rd0, [src];
    cvta.to.global.u64 %rd2, %rd0;""" if local else """
    ld.param.u64 %rd0, [peers];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u32 %r6, [rank];
    ld.param.u32 %r7, [ndev];
    add.u32 %r6, %r6, 1;
    rem.u32 %r6, %r6, %r7;
    mul.wide.u32 %rd1, %r6, 8;
    add.s64 %rd1, %rd0, %rd1;
    ld.global.u64 %rd2, [%rd1];"""
    params = (".param .u64 src" if local else
              ".param .u64 peers, .param .u32 rank, .param .u32 ndev")
    waiting = """$wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], 0;
    @!%p1 bra $wait;""" if wait else ""
    return HEADER + f"""
.visible .entry pull({params}, .param .u32 size, .param .u64 out)
.maxntid {THREADS}, 1, 1
{{
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    .reg .pred %p<4>;
    .shared .align 128 .b8 smem[{SIZE}];
    .shared .align 8 .b64 bar;
{source}
    ld.param.u32 %r8, [size];
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p0, %r0, 0;
    @!%p0 bra $init_done;
    mbarrier.init.shared::cta.b64 [bar], 1;
    fence.mbarrier_init.release.cluster;
$init_done:
    bar.sync 0;
    @!%p0 bra $issued;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], {SIZE};
    cp.async.bulk.{dst}.global.mbarrier::complete_tx::bytes [smem], [%rd2+{offset}], {size}, [bar];
$issued:
{waiting}
    mov.u32 %r1, smem;
    shl.b32 %r2, %r0, 4;
    add.u32 %r3, %r1, %r2;
    ld.shared.v4.b32 {{%r4, %r5, %r9, %r10}}, [%r3];
    ld.param.u64 %rd4, [out];
    cvta.to.global.u64 %rd4, %rd4;
    cvt.u64.u32 %rd5, %r2;
    add.s64 %rd6, %rd4, %rd5;
    st.global.v4.b32 [%rd6], {{%r4, %r5, %r9, %r10}};
    ret;
}}
"""


# Push: every thread fills 16 bytes of smem from `src`, then thread 0 bulk-stores (or, with
# OP, reduces) smem into device (d + 1) % ndev's symmetric buffer at byte 16, waits for its
# bulk group and signals that device (red.release.sys on word 0). Everyone then waits for its
# own signal and copies its buffer's bytes 16.. to out.
def push_kernel(op: str = "", wait: str = "cp.async.bulk.wait_group 0;", signal_first: bool
                = False, receive: bool = True) -> str:
    copy = (f"cp.reduce.async.bulk.global.shared::cta.bulk_group{op}" if op
            else "cp.async.bulk.global.shared::cta.bulk_group")
    signal = "red.release.sys.global.add.u32 [%rd7], 1;"
    steps = [wait, signal][::-1] if signal_first else [wait, signal]
    receiving = """$spin:
    ld.acquire.sys.global.u32 %r9, [%rd9];
    setp.eq.u32 %p1, %r9, 0;
    @%p1 bra $spin;""" if receive else ""
    return HEADER + f"""
.visible .entry push(.param .u64 peers, .param .u32 rank, .param .u32 ndev, .param .u64 src,
                     .param .u64 out)
.maxntid {THREADS}, 1, 1
{{
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .reg .pred %p<4>;
    .shared .align 128 .b8 smem[{SIZE}];
    ld.param.u64 %rd0, [peers];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u32 %r6, [rank];
    ld.param.u32 %r7, [ndev];
    mov.u32 %r0, %tid.x;
    shl.b32 %r2, %r0, 4;
    cvt.u64.u32 %rd5, %r2;
    ld.param.u64 %rd1, [src];
    cvta.to.global.u64 %rd1, %rd1;
    add.s64 %rd2, %rd1, %rd5;
    ld.global.v4.b32 {{%r10, %r11, %r12, %r13}}, [%rd2];
    mov.u32 %r1, smem;
    add.u32 %r3, %r1, %r2;
    st.shared.v4.b32 [%r3], {{%r10, %r11, %r12, %r13}};
    fence.proxy.async.shared::cta;
    bar.sync 0;
    setp.ne.u32 %p0, %r0, 0;
    @%p0 bra $sent;
    add.u32 %r8, %r6, 1;
    rem.u32 %r8, %r8, %r7;
    mul.wide.u32 %rd3, %r8, 8;
    add.s64 %rd3, %rd0, %rd3;
    ld.global.u64 %rd7, [%rd3];
    add.s64 %rd8, %rd7, 16;
    {copy} [%rd8], [smem], {SIZE};
    cp.async.bulk.commit_group;
    {steps[0]}
    {steps[1]}
$sent:
    mul.wide.u32 %rd3, %r6, 8;
    add.s64 %rd3, %rd0, %rd3;
    ld.global.u64 %rd9, [%rd3];
{receiving}
    add.s64 %rd10, %rd9, 16;
    add.s64 %rd10, %rd10, %rd5;
    ld.global.v4.b32 {{%r10, %r11, %r12, %r13}}, [%rd10];
    ld.param.u64 %rd11, [out];
    cvta.to.global.u64 %rd11, %rd11;
    add.s64 %rd11, %rd11, %rd5;
    st.global.v4.b32 [%rd11], {{%r10, %r11, %r12, %r13}};
    ret;
}}
"""


# cp.reduce.async.bulk into global memory: (operation modifiers, element type) per the ISA.
REDUCTIONS = [(".add.u32", np.uint32), (".add.s32", np.int32), (".add.u64", np.uint64),
              (".add.f32", np.float32), (".add.f64", np.float64),
              (".add.noftz.f16", np.float16), (".add.noftz.bf16", ml_dtypes.bfloat16),
              *[(f".{op}.{t}", d) for op in ("min", "max")
                for t, d in (("u32", np.uint32), ("s32", np.int32), ("u64", np.uint64),
                             ("s64", np.int64), ("f16", np.float16),
                             ("bf16", ml_dtypes.bfloat16))],
              (".inc.u32", np.uint32), (".dec.u32", np.uint32),
              *[(f".{op}.{t}", d) for op in ("and", "or", "xor")
                for t, d in (("b32", np.uint32), ("b64", np.uint64))]]


def reduce_name(case) -> str:
    return case[0].strip(".")


def reference(op: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """old (op) new as the ISA defines it, rounded once to the element type."""
    name = op.split(".")[1]
    dtype = old.dtype
    if name == "add":
        if dtype.kind == "f":
            return (old.astype(np.float64) + new.astype(np.float64)).astype(dtype)
        return old + new
    fns = {"min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
           "xor": np.bitwise_xor}
    if name in fns:
        return fns[name](old, new)
    if name == "inc":
        return np.where(old >= new, 0, old + 1).astype(dtype)
    return np.where((old == 0) | (old > new), new, old - 1).astype(dtype)


def random_values(dtype, shape, rng: np.random.Generator) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        low, high = (0, 8) if dtype == np.uint32 and rng.random() < 0.5 else (info.min,
                                                                              info.max)
        return rng.integers(low, high, shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-4, 4, shape)).astype(dtype)


def test_kernels_assemble():
    needs_ptxas()
    for dst in ("shared::cta", "shared::cluster"):
        compile_ptx(pull_kernel(dst))
        compile_ptx(pull_kernel(dst, local=True, size="%r8"))
    compile_ptx(MULTICAST_PULL)
    compile_ptx(push_kernel())
    compile_ptx(push_kernel(signal_first=True))
    compile_ptx(push_kernel(receive=False))
    for op, _ in REDUCTIONS:
        compile_ptx(push_kernel(op))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dst", ["shared::cta", "shared::cluster"])
def test_pull_from_global_on_one_device(dst, policy):
    rng = np.random.default_rng(1)
    src = rng.integers(0, 2**32, SIZE // 4 + 8, dtype=np.uint32)
    out = np.zeros(SIZE // 4, np.uint32)
    run_ptx(pull_kernel(dst, local=True, size="%r8", offset=32), "pull", 1, THREADS,
            [src, np.uint32(SIZE), out], async_completion=policy, seed=3)
    np.testing.assert_array_equal(out, src[8:])


def pull_from_peers(n: int, ptx: str, policy: str = "eager") -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(n)
    symmetric = [rng.integers(0, 2**32, SIZE // 4, dtype=np.uint32) for _ in range(n)]
    out = np.zeros((n, SIZE // 4), np.uint32)
    args = [[PeerTable(), np.uint32(d), np.uint32(n), np.uint32(SIZE), out[d]]
            for d in range(n)]
    run_ptx_devices(ptx, "pull", 1, THREADS, args, symmetric=symmetric,
                    async_completion=policy, seed=n)
    return symmetric, out


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n", DEVICES)
def test_pull_from_a_peers_symmetric_buffer(n, policy):
    """Device d copies device d + 1's buffer into its shared memory: a remote bulk read of
    memory nobody writes, so no race."""
    symmetric, out = pull_from_peers(n, pull_kernel("shared::cluster"), policy)
    for d in range(n):
        np.testing.assert_array_equal(out[d], symmetric[(d + 1) % n])


def test_reading_shared_memory_before_the_mbarrier_wait_is_reported():
    ptx = pull_kernel(wait=False)
    with pytest.raises(SimError, match="the bulk copy at line") as info:
        pull_from_peers(2, ptx, "latest")
    assert info.value.line == line_of(ptx, "ld.shared.v4")


# Thread 0 of CTA rank 0 multicasts SIZE bytes of `src` into both CTAs of a 2-CTA cluster;
# each CTA waits on its own mbarrier and writes its smem to out[%cluster_ctarank].
MULTICAST_PULL = HEADER + f"""
.visible .entry mpull(.param .u64 src, .param .u64 out)
.maxntid {THREADS}, 1, 1
.reqnctapercluster 2, 1, 1
{{
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    .reg .b16 %h<2>;
    .reg .pred %p<4>;
    .shared .align 128 .b8 smem[{SIZE}];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd0, [src];
    cvta.to.global.u64 %rd2, %rd0;
    mov.u32 %r0, %tid.x;
    mov.u32 %r11, %cluster_ctarank;
    setp.eq.u32 %p0, %r0, 0;
    @!%p0 bra $init_done;
    mbarrier.init.shared::cta.b64 [bar], 1;
    fence.mbarrier_init.release.cluster;
$init_done:
    barrier.cluster.arrive;
    barrier.cluster.wait;
    @!%p0 bra $issued;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], {SIZE};
    setp.ne.u32 %p2, %r11, 0;
    @%p2 bra $issued;
    mov.b16 %h0, 3;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [smem], [%rd2], {SIZE}, [bar], %h0;
$issued:
$wait:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p1, [bar], 0;
    @!%p1 bra $wait;
    mov.u32 %r1, smem;
    shl.b32 %r2, %r0, 4;
    add.u32 %r3, %r1, %r2;
    ld.shared.v4.b32 {{%r4, %r5, %r9, %r10}}, [%r3];
    ld.param.u64 %rd4, [out];
    cvta.to.global.u64 %rd4, %rd4;
    mul.wide.u32 %rd7, %r11, {SIZE};
    add.s64 %rd4, %rd4, %rd7;
    cvt.u64.u32 %rd5, %r2;
    add.s64 %rd6, %rd4, %rd5;
    st.global.v4.b32 [%rd6], {{%r4, %r5, %r9, %r10}};
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
}}
"""


@pytest.mark.parametrize("policy", POLICIES)
def test_multicast_pull_fills_every_cta_of_the_mask(policy):
    src = np.arange(SIZE // 4, dtype=np.uint32) * 3
    out = np.zeros((4, SIZE // 4), np.uint32)
    run_ptx(MULTICAST_PULL, "mpull", 2, THREADS, [src, out[:2]], async_completion=policy)
    np.testing.assert_array_equal(out[:2], np.tile(src, (2, 1)))


def push_to_peers(n: int, ptx: str, op_type=np.uint32, policy: str = "eager",
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(initial buffers, srcs, out) of a push kernel run on n devices."""
    rng = np.random.default_rng(seed + n)
    words = SIZE // np.dtype(op_type).itemsize
    initial = random_values(op_type, (n, words), rng)
    src = random_values(op_type, (n, words), rng)
    symmetric = [np.zeros(16 + SIZE, np.uint8) for _ in range(n)]
    for d in range(n):
        symmetric[d][16:] = initial[d].view(np.uint8)
    out = np.zeros((n, words), op_type)
    args = [[PeerTable(), np.uint32(d), np.uint32(n), src[d], out[d]] for d in range(n)]
    run_ptx_devices(ptx, "push", 1, THREADS, args, symmetric=symmetric,
                    async_completion=policy, seed=seed)
    for d in range(n):
        assert symmetric[d][:4].view(np.uint32)[0] == 1  # one signal each
        np.testing.assert_array_equal(symmetric[d][16:], out[d].view(np.uint8))
    return initial, src, out


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n", DEVICES)
def test_push_into_a_peers_buffer_then_signal(n, policy):
    """A bulk store into the next device's buffer, waited for (wait_group 0) and then
    released (red.release.sys): the receiver's acquire orders its plain reads after it."""
    _, src, out = push_to_peers(n, push_kernel(), policy=policy)
    for d in range(n):
        np.testing.assert_array_equal(out[d], src[(d - 1) % n])


@pytest.mark.parametrize("n", DEVICES)
@pytest.mark.parametrize("case", REDUCTIONS, ids=reduce_name)
def test_reduce_into_a_peers_buffer(case, n):
    op, dtype = case
    initial, src, out = push_to_peers(n, push_kernel(op), dtype, seed=len(op))
    for d in range(n):
        expected = reference(op, initial[d], src[(d - 1) % n])
        np.testing.assert_array_equal(out[d].view(np.uint8), expected.view(np.uint8))


def test_reduce_add_f32_flushes_subnormals_and_half_keeps_them():
    """cp.reduce.async.bulk.add.f32 flushes subnormal inputs and results to zero (PTX ISA);
    .add.noftz.f16 keeps them."""
    n = 2
    tiny32 = np.float32(1e-39)  # subnormal in f32
    tiny16 = np.float16(1e-7)  # subnormal in f16
    for op, dtype, tiny, expected in ((".add.f32", np.float32, tiny32, 0.0),
                                      (".add.noftz.f16", np.float16, tiny16, 2 * tiny16)):
        words = SIZE // np.dtype(dtype).itemsize
        symmetric = [np.zeros(16 + SIZE, np.uint8) for _ in range(n)]
        for d in range(n):
            symmetric[d][16:] = np.full(words, tiny, dtype).view(np.uint8)
        src = np.full((n, words), tiny, dtype)
        out = np.zeros((n, words), dtype)
        run_ptx_devices(push_kernel(op), "push", 1, THREADS,
                        [[PeerTable(), np.uint32(d), np.uint32(n), src[d], out[d]]
                         for d in range(n)], symmetric=symmetric)
        np.testing.assert_array_equal(out.astype(np.float64), np.float64(expected))


def test_a_release_before_the_bulk_group_wait_does_not_order_the_store():
    """Signalling before wait_group 0: the store may still be in flight when the peer reads
    (the copy is checked again when it is waited for, with the clock after the release)."""
    ptx = push_kernel(signal_first=True)
    with pytest.raises(SimError, match="race between devices") as info:
        push_to_peers(2, ptx)
    assert f"line {line_of(ptx, 'cp.async.bulk.global')}" in str(info.value)
    assert info.value.line == line_of(ptx, "ld.global.v4.b32 {%r10, %r11, %r12, %r13}, [%rd10]")


def test_reading_a_peers_bulk_store_without_waiting_races():
    ptx = push_kernel(receive=False)
    with pytest.raises(SimError, match="race between devices") as info:
        push_to_peers(2, ptx)
    assert "plain read by device" in str(info.value)
    assert f"line {line_of(ptx, 'cp.async.bulk.global')}" in str(info.value)


def test_concurrent_bulk_reduces_into_one_buffer_race():
    """Each element of cp.reduce.async.bulk is .relaxed.gpu: two devices reducing into the
    same peer bytes are not ordered at system scope."""
    ptx = push_kernel(".add.u32").replace("add.u32 %r8, %r6, 1;", "mov.u32 %r8, 0;")
    with pytest.raises(SimError, match="race between devices"):
        push_to_peers(2, ptx)


@pytest.mark.parametrize(("size", "offset", "message"), [
    (24, 0, "size 24 is not a multiple of 16"),
    (SIZE, 8, "is not 16-byte aligned"),
    (SIZE, SIZE, "out-of-bounds global access of 512 bytes")])
def test_bad_bulk_copies_are_faults_at_their_line(size, offset, message):
    ptx = pull_kernel(local=True, size="%r8", offset=offset)
    src = np.zeros(SIZE // 4 + 8, np.uint32)
    with pytest.raises(SimError, match=message) as info:
        run_ptx(ptx, "pull", 1, THREADS, [src, np.uint32(size), np.zeros(SIZE // 4, np.uint32)])
    assert info.value.line == line_of(ptx, "cp.async.bulk.")


def test_a_bulk_copy_from_the_multicast_address_is_a_fault():
    ptx = pull_kernel(local=True, size="%r8")
    symmetric = [np.zeros(SIZE, np.uint8) for _ in range(2)]
    with pytest.raises(SimError, match="multicast address"):
        run_ptx_devices(ptx, "pull", 1, THREADS,
                        [[Multicast(), np.uint32(SIZE), np.zeros(SIZE // 4, np.uint32)]
                         for _ in range(2)], symmetric=symmetric)


@pytest.mark.parametrize(("opcode", "detail"), [
    ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes",
     "unsupported bulk copy direction"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f16", "need .noftz"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.min.f32", "does not take .f32"),
])
def test_unsupported_bulk_forms_are_named(opcode, detail):
    ptx = pull_kernel(local=True).replace(
        "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes", opcode)
    with pytest.raises(SimError, match="unsupported PTX instruction") as info:
        run_ptx(ptx, "pull", 1, THREADS, [np.zeros(SIZE // 4, np.uint32), np.uint32(SIZE),
                                           np.zeros(SIZE // 4, np.uint32)])
    assert detail in str(info.value)


# Device 0 pulls 16 bytes of device 1's buffer, tells device 1 (st.release.sys) it may write
# them and waits for its answer before waiting for the copy: device 1's write meets the copy
# in flight, although device 0 acquired it before the wait.
EARLY_RELEASE = HEADER + """
.visible .entry early(.param .u64 peers, .param .u32 rank)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    .reg .pred %p<4>;
    .shared .align 128 .b8 smem[16];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd0, [peers];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u32 %r0, [rank];
    ld.global.u64 %rd1, [%rd0+8];
    ld.global.u64 %rd3, [%rd0];
    setp.eq.u32 %p0, %r0, 0;
    @%p0 bra $pull;
$spin:
    ld.acquire.sys.global.u32 %r1, [%rd1];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra $spin;
    st.global.u32 [%rd1+16], 7;
    st.release.sys.global.u32 [%rd3], 1;
    ret;
$pull:
    mbarrier.init.shared::cta.b64 [bar], 1;
    fence.mbarrier_init.release.cluster;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [bar], 16;
    cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [smem], [%rd1+16], 16, [bar];
    st.release.sys.global.u32 [%rd1], 1;
$answer:
    ld.acquire.sys.global.u32 %r2, [%rd3];
    setp.eq.u32 %p3, %r2, 0;
    @%p3 bra $answer;
$wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
    @!%p2 bra $wait;
    ret;
}
"""


@pytest.mark.parametrize("policy", POLICIES)
def test_a_bulk_read_is_checked_until_it_is_waited_for(policy):
    """The copy is retired at device 0's mbarrier wait; device 1's store came after its issue
    and before that wait: a race, reported at the wait, whatever device 0 acquired since."""
    needs_ptxas()
    compile_ptx(EARLY_RELEASE)
    symmetric = [np.zeros(32, np.uint8) for _ in range(2)]
    with pytest.raises(SimError, match="race between devices") as info:
        run_ptx_devices(EARLY_RELEASE, "early", 1, 1,
                        [[PeerTable(), np.uint32(d)] for d in range(2)], symmetric=symmetric,
                        async_completion=policy)
    copy = line_of(EARLY_RELEASE, "cp.async.bulk")
    assert f"the bulk copy at line {copy}, synchronised with here" in str(info.value)
    assert info.value.line == line_of(EARLY_RELEASE, "mbarrier.try_wait")
    assert f"line {line_of(EARLY_RELEASE, 'st.global.u32')}" in str(info.value)
