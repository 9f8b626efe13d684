"""TMA (`cp.async.bulk.tensor`, `cp.reduce.async.bulk.tensor`) through tensor maps over peers'
symmetric buffers in a launch over several devices: the numbers, and the race check between
devices (sim/peers.py) of the global bytes a tensor copy touches, at issue and at retirement."""

from __future__ import annotations

import re

import numpy as np
import pytest

from smalti.ptx.toolchain import ToolchainError, compile_ptx, find_tool
from smalti.sim import ParamStruct, PeerTable, SimError, TensorMap, run_ptx_devices
from smalti.sim.ops.tma import _box_runs

DEVICES = 2
THREADS = 128
ROWS, COLS = 16, 32  # the u32 tensor in every heap: 2048 bytes, 16 bytes per thread
BOX = (8, 32)  # two boxes of 8 rows: 1024 bytes, one 128-byte swizzle row per tensor row
DATA = 1024  # the tensor's byte offset in the heap; the flag is the u32 at 0
HEAP = DATA + ROWS * COLS * 4
TILE = ROWS * COLS * 4
POLICIES = ("eager", "latest", "random")
HEADER = """.version 8.6
.target sm_90a
.address_size 64
"""

# Addresses every kernel here starts from: %rd10 device `rank`'s own heap, %rd11 the heap of
# `src` = (rank + 1) % ndev (whose data this device reads, or into which it stores), %rd12 the
# heap of (rank + ndev - 1) % ndev (the device that reads this one's data or receives its
# flag), %rd13 the generic address of `src`'s tensor map in `tmaps`, %rd14 out; %r1 %tid.x,
# %p1 thread 0.
PROLOGUE = """
	ld.param.u64 	%rd1, [peers];
	cvta.to.global.u64 	%rd1, %rd1;
	ld.param.u32 	%r20, [rank];
	ld.param.u32 	%r21, [ndev];
	mul.wide.u32 	%rd2, %r20, 8;
	add.s64 	%rd2, %rd1, %rd2;
	ld.global.u64 	%rd10, [%rd2];
	add.u32 	%r22, %r20, 1;
	rem.u32 	%r22, %r22, %r21;
	mul.wide.u32 	%rd3, %r22, 8;
	add.s64 	%rd3, %rd1, %rd3;
	ld.global.u64 	%rd11, [%rd3];
	add.u32 	%r23, %r20, %r21;
	sub.u32 	%r23, %r23, 1;
	rem.u32 	%r23, %r23, %r21;
	mul.wide.u32 	%rd4, %r23, 8;
	add.s64 	%rd4, %rd1, %rd4;
	ld.global.u64 	%rd12, [%rd4];
	mov.b64 	%rd5, tmaps;
	mul.wide.u32 	%rd6, %r22, 128;
	add.s64 	%rd5, %rd5, %rd6;
	cvta.param.u64 	%rd13, %rd5;
	ld.param.u64 	%rd14, [out];
	cvta.to.global.u64 	%rd14, %rd14;
	mov.u32 	%r1, %tid.x;
	setp.eq.u32 	%p1, %r1, 0;
	shl.b32 	%r3, %r1, 4;
	cvt.u64.u32 	%rd7, %r3;"""

SIGNATURE = (".param .u64 peers, .param .u32 rank, .param .u32 ndev, "
             f".param .align 64 .b8 tmaps[{128 * DEVICES}], .param .u64 out")

# Thread 0 spins until its own flag is set (a peer's red.release.sys): the acquire.
POLL = """
	@!%p1 bra 	POLLED;
SPIN:
	ld.acquire.sys.global.u32 	%r30, [%rd10];
	setp.eq.u32 	%p2, %r30, 0;
	@%p2 bra 	SPIN;
POLLED:"""
SIGNAL = "@%p1 red.release.sys.global.add.u32 	[%rd12], 1;"
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
TMA_REDUCE = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"


def pull_kernel(poll: bool = True) -> str:
    """Every thread writes 16 bytes of its device's tensor ((rank << 16) | word index) with
    st.global; thread 0 signals the device that reads them, waits for its own signal (unless
    not `poll`), and TMA-loads `src`'s tensor as two 8-row boxes; everyone waits on the
    mbarrier and copies the 2048 bytes of shared memory to `out`."""
    return HEADER + f"""
.visible .entry pull({SIGNATURE})
.maxntid {THREADS}, 1, 1
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<20>;
	.shared .align 1024 .b8 smem[{TILE}];
	.shared .align 8 .b64 bar;
{PROLOGUE}
	shl.b32 	%r4, %r20, 16;
	shr.u32 	%r5, %r3, 2;
	or.b32 	%r6, %r4, %r5;
	add.u32 	%r7, %r6, 1;
	add.u32 	%r8, %r6, 2;
	add.u32 	%r9, %r6, 3;
	add.s64 	%rd8, %rd10, {DATA};
	add.s64 	%rd8, %rd8, %rd7;
	st.global.v4.u32 	[%rd8], {{%r6, %r7, %r8, %r9}};
	@!%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 1;
	fence.mbarrier_init.release.cluster;
INIT_DONE:
	bar.sync 	0;
	{SIGNAL}
{POLL if poll else ""}
	@!%p1 bra 	ISSUED;
	fence.proxy.async.global;
	mbarrier.arrive.expect_tx.shared::cta.b64 	%rd9, [bar], {TILE};
	mov.u32 	%r10, 0;
	mov.u32 	%r11, {BOX[0]};
	{TMA_LOAD} [smem], [%rd13, {{%r10, %r10}}], [bar];
	{TMA_LOAD} [smem+{TILE // 2}], [%rd13, {{%r10, %r11}}], [bar];
ISSUED:
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [bar], 0;
	@!%p3 bra 	WAIT;
	mov.u32 	%r12, smem;
	add.u32 	%r12, %r12, %r3;
	ld.shared.v4.u32 	{{%r13, %r14, %r15, %r16}}, [%r12];
	add.s64 	%rd15, %rd14, %rd7;
	st.global.v4.u32 	[%rd15], {{%r13, %r14, %r15, %r16}};
	ret;
}}
"""


def push_kernel(copy: str = TMA_STORE, poll: bool = True, signal_first: bool = False) -> str:
    """Every thread fills 16 bytes of shared memory ((rank << 16) | word index); thread 0
    stores (or reduces) them as two 8-row boxes into `src`'s tensor through its tensor map,
    waits for the bulk group and signals `src` (with `signal_first`, signals before the
    wait); thread 0 waits for its own signal (unless not `poll`) and everyone copies its own
    tensor to `out` with ld.global."""
    wait = "@%p1 cp.async.bulk.wait_group 	0;"
    steps = f"{SIGNAL}\n\t{wait}" if signal_first else f"{wait}\n\t{SIGNAL}"
    return HEADER + f"""
.visible .entry push({SIGNATURE})
.maxntid {THREADS}, 1, 1
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<20>;
	.shared .align 1024 .b8 smem[{TILE}];
{PROLOGUE}
	shl.b32 	%r4, %r20, 16;
	shr.u32 	%r5, %r3, 2;
	or.b32 	%r6, %r4, %r5;
	add.u32 	%r7, %r6, 1;
	add.u32 	%r8, %r6, 2;
	add.u32 	%r9, %r6, 3;
	mov.u32 	%r12, smem;
	add.u32 	%r12, %r12, %r3;
	st.shared.v4.u32 	[%r12], {{%r6, %r7, %r8, %r9}};
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	@!%p1 bra 	ISSUED;
	mov.u32 	%r10, 0;
	mov.u32 	%r11, {BOX[0]};
	{copy} [%rd13, {{%r10, %r10}}], [smem];
	{copy} [%rd13, {{%r10, %r11}}], [smem+{TILE // 2}];
	cp.async.bulk.commit_group;
ISSUED:
	{steps}
{POLL if poll else ""}
	bar.sync 	0;
	add.s64 	%rd8, %rd10, {DATA};
	add.s64 	%rd8, %rd8, %rd7;
	ld.global.v4.u32 	{{%r13, %r14, %r15, %r16}}, [%rd8];
	add.s64 	%rd15, %rd14, %rd7;
	st.global.v4.u32 	[%rd15], {{%r13, %r14, %r15, %r16}};
	ret;
}}
"""


def early_release_kernel() -> str:
    """Thread 0 TMA-loads `src`'s tensor, then at once tells the device whose tensor it reads
    that it is done (a release before the mbarrier wait that covers the load), waits for its
    own such signal and overwrites its own tensor's first 16 bytes; then everyone waits on
    the mbarrier and copies shared memory to `out`. Wrong: the load may still read until the
    wait, so the peer's write after acquiring the signal races with it."""
    return HEADER + f"""
.visible .entry early({SIGNATURE})
.maxntid {THREADS}, 1, 1
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<40>;
	.reg .b64 	%rd<20>;
	.shared .align 1024 .b8 smem[{TILE}];
	.shared .align 8 .b64 bar;
{PROLOGUE}
	@!%p1 bra 	DONE;
	mbarrier.init.shared::cta.b64 	[bar], 1;
	mbarrier.arrive.expect_tx.shared::cta.b64 	%rd9, [bar], {TILE};
	mov.u32 	%r10, 0;
	mov.u32 	%r11, {BOX[0]};
	{TMA_LOAD} [smem], [%rd13, {{%r10, %r10}}], [bar];
	{TMA_LOAD} [smem+{TILE // 2}], [%rd13, {{%r10, %r11}}], [bar];
	red.release.sys.global.add.u32 	[%rd11], 1;
SPIN:
	ld.acquire.sys.global.u32 	%r30, [%rd10];
	setp.eq.u32 	%p2, %r30, 0;
	@%p2 bra 	SPIN;
	st.global.v4.u32 	[%rd10+{DATA}], {{%r10, %r10, %r10, %r10}};
DONE:
	bar.sync 	0;
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p3, [bar], 0;
	@!%p3 bra 	WAIT;
	mov.u32 	%r12, smem;
	add.u32 	%r12, %r12, %r3;
	ld.shared.v4.u32 	{{%r13, %r14, %r15, %r16}}, [%r12];
	add.s64 	%rd15, %rd14, %rd7;
	st.global.v4.u32 	[%rd15], {{%r13, %r14, %r15, %r16}};
	ret;
}}
"""


def line_of(ptx: str, text: str) -> int:
    return next(i for i, line in enumerate(ptx.splitlines(), 1) if text in line)


def earlier_line(error: SimError) -> int:
    """The PTX line of the earlier access a race report names."""
    return int(re.search(r"by device \d+ at line (\d+) `", str(error)).group(1))


def swizzled(tile: np.ndarray, span: int | None) -> np.ndarray:
    """The bytes of `tile` as a TMA load with swizzle `span` (None or 128) lays them out:
    the 16-byte chunk c of 128-byte row r lands at chunk c ^ (r % 8)."""
    raw = tile.view(np.uint8).reshape(-1)
    if span is None:
        return raw
    logical = np.arange(raw.size)
    out = np.empty_like(raw)
    out[logical ^ (((logical >> 7) & 7) << 4)] = raw
    return out


def tensors(heaps: list[np.ndarray]) -> list[np.ndarray]:
    """Each heap's u32 tensor, a view (so a tensor map over it reads device memory)."""
    return [heap[DATA:].view(np.uint32).reshape(ROWS, COLS) for heap in heaps]


def launch(ptx: str, kernel: str, swizzle: int | None = None, policy: str = "eager",
           initial: np.ndarray | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """Run `kernel` on DEVICES devices, each with a map per device over that device's
    tensor; (the heaps, out)."""
    heaps = [np.zeros(HEAP, np.uint8) for _ in range(DEVICES)]
    if initial is not None:
        for tensor in tensors(heaps):
            tensor[:] = initial
    maps = {128 * p: TensorMap(t, box=BOX, swizzle=swizzle) for p, t in enumerate(tensors(heaps))}
    out = np.zeros((DEVICES, TILE), np.uint8)
    args = [[PeerTable(), np.uint32(d), np.uint32(DEVICES),
             ParamStruct(bytes(128 * DEVICES), tensor_maps=maps), out[d]]
            for d in range(DEVICES)]
    run_ptx_devices(ptx, kernel, 1, THREADS, args, symmetric=heaps, async_completion=policy,
                    seed=5)
    return heaps, out


def written(rank: int) -> np.ndarray:
    """What device `rank` writes: (rank << 16) | word index, as the u32 tensor."""
    return ((rank << 16) | np.arange(ROWS * COLS, dtype=np.uint32)).reshape(ROWS, COLS)


@pytest.mark.parametrize("ptx", [pull_kernel(), pull_kernel(poll=False), push_kernel(),
                                 push_kernel(TMA_REDUCE), push_kernel(signal_first=True),
                                 early_release_kernel()])
def test_kernels_assemble(ptx):
    try:
        find_tool("ptxas")
    except ToolchainError:
        pytest.skip("ptxas is not installed")
    compile_ptx(ptx)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("swizzle", [None, 128])
def test_tma_load_of_a_peers_buffer_after_its_release(swizzle, policy):
    """Device d writes its tensor, releases to the device that reads it, acquires its own
    flag and TMA-loads its peer's tensor: the peer's numbers, no race."""
    heaps, out = launch(pull_kernel(), "pull", swizzle, policy)
    for d in range(DEVICES):
        src = (d + 1) % DEVICES
        np.testing.assert_array_equal(tensors(heaps)[d], written(d))
        np.testing.assert_array_equal(out[d], swizzled(written(src), swizzle))


def test_tma_load_of_a_peers_buffer_without_the_acquire_races():
    ptx = pull_kernel(poll=False)
    with pytest.raises(SimError, match="race between devices") as info:
        launch(ptx, "pull")
    message = str(info.value)
    assert info.value.line == line_of(ptx, TMA_LOAD)
    assert f"line {line_of(ptx, 'st.global.v4.u32 	[%rd8]')}" in message
    assert "plain read by device 0" in message and "write by device 1" in message


@pytest.mark.parametrize("policy", POLICIES)
def test_tma_store_into_a_peers_buffer_then_signal(policy):
    """Device d stores its shared tile into its peer's tensor, waits for the bulk group and
    releases; the peer acquires and reads the tile with plain loads: no race."""
    heaps, out = launch(push_kernel(), "push", policy=policy)
    for d in range(DEVICES):
        sender = (d + DEVICES - 1) % DEVICES
        np.testing.assert_array_equal(tensors(heaps)[d], written(sender))
        np.testing.assert_array_equal(out[d].view(np.uint32).reshape(ROWS, COLS),
                                      written(sender))


def test_tma_reduce_into_a_peers_buffer_then_signal():
    initial = np.full((ROWS, COLS), 7, np.uint32)
    heaps, out = launch(push_kernel(TMA_REDUCE), "push", initial=initial)
    for d in range(DEVICES):
        sender = (d + DEVICES - 1) % DEVICES
        np.testing.assert_array_equal(tensors(heaps)[d], written(sender) + 7)
        np.testing.assert_array_equal(out[d].view(np.uint32).reshape(ROWS, COLS),
                                      written(sender) + 7)


@pytest.mark.parametrize("copy", [TMA_STORE, TMA_REDUCE])
def test_tma_store_racing_with_the_peers_reads_is_reported(copy):
    """The receiver reads its tensor with no acquire: the peer's TMA store (or reduce) into
    it is unordered with those plain reads."""
    ptx = push_kernel(copy, poll=False)
    with pytest.raises(SimError, match="race between devices") as info:
        launch(ptx, "push")
    assert {info.value.line, earlier_line(info.value)} == {
        line_of(ptx, copy), line_of(ptx, "ld.global.v4.u32")}


def test_signalling_before_the_tma_stores_wait_group_races():
    """The release comes before the wait_group that covers the store: the store may still
    write after the peer acquired the release, so the peer's reads race with it (reported at
    the read or, when the wait comes after the read, at the wait)."""
    ptx = push_kernel(signal_first=True)
    with pytest.raises(SimError, match="race between devices") as info:
        launch(ptx, "push")
    assert info.value.line == line_of(ptx, "ld.global.v4.u32")
    assert earlier_line(info.value) == line_of(ptx, TMA_STORE)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_peers_write_before_the_tma_loads_wait_is_reported_at_the_wait(policy):
    """The peer writes its tensor after acquiring a release made after the load's issue,
    so that write is ordered after the load's issue, but not after its end: the check at the
    mbarrier wait, against what the device had at issue, reports it."""
    ptx = early_release_kernel()
    with pytest.raises(SimError, match="race between devices") as info:
        launch(ptx, "early", policy=policy)
    message = str(info.value)
    assert f"the TMA load at line {line_of(ptx, TMA_LOAD)}, synchronised with here" in message
    assert info.value.line == line_of(ptx, "mbarrier.try_wait")
    assert earlier_line(info.value) == line_of(ptx, f"[%rd10+{DATA}]")


def test_tma_of_a_tensor_outside_the_symmetric_buffers_is_not_checked():
    """A map over an ordinary device buffer (not symmetric) in a launch over several devices:
    each device loads its own buffer, no race check applies, the numbers arrive."""
    ptx = pull_kernel(poll=False).replace("[%rd13,", "[%rd16,").replace(
        "cvta.param.u64 	%rd13, %rd5;", """cvta.param.u64 	%rd13, %rd5;
	mov.b64 	%rd16, tmaps;
	mul.wide.u32 	%rd17, %r20, 128;
	add.s64 	%rd16, %rd16, %rd17;
	cvta.param.u64 	%rd16, %rd16;""")
    heaps = [np.zeros(HEAP, np.uint8) for _ in range(DEVICES)]
    own = [written(10 + d) for d in range(DEVICES)]
    maps = {128 * p: TensorMap(own[p], box=BOX) for p in range(DEVICES)}
    out = np.zeros((DEVICES, TILE), np.uint8)
    args = [[PeerTable(), np.uint32(d), np.uint32(DEVICES),
             ParamStruct(bytes(128 * DEVICES), tensor_maps=maps), out[d]]
            for d in range(DEVICES)]
    run_ptx_devices(ptx, "pull", 1, THREADS, args, symmetric=heaps)
    for d in range(DEVICES):
        np.testing.assert_array_equal(out[d].view(np.uint32).reshape(ROWS, COLS), own[d])


@pytest.mark.parametrize(("shape", "box", "strides", "point"), [
    ((16, 32), (8, 32), None, (0, 8)),
    ((16, 32), (8, 32), None, (0, 12)),  # rows 12..19: four outside
    ((5, 12, 16), (2, 6, 8), (1, 2, 1), (8, 1, 3)),  # every other row of the middle dim
    ((5, 12, 16), (2, 6, 8), (1, 1, 2), (12, -3, 4)),  # every other element of a row
    ((3, 10, 24), (4, 4, 16), None, (-8, 8, 1)),
])
def test_box_runs_cover_exactly_the_in_bounds_elements(shape, box, strides, point):
    """The byte runs the race check is given are the bytes of the box's in-bounds elements,
    each once (against every element's bytes, enumerated one by one)."""
    backing = np.zeros(2 * int(np.prod(shape)) + 64, np.uint16)
    array = backing[32:32 + 2 * int(np.prod(shape))].reshape(*shape[:-1], 2 * shape[-1])
    array = array[..., :shape[-1]]  # rows are strided: every other half of the backing row
    tm = TensorMap(array, box=box, element_strides=strides)
    base = 1 << 32
    addresses, nbytes = _box_runs(tm, point, base)
    got = sorted(int(a) - base + k for a in addresses for k in range(nbytes))
    index, inside = tm.indices(point)
    expected = sorted(
        sum(int(i) * s for i, s in zip(element, array.strides, strict=True)) + k
        for position in zip(*np.nonzero(inside), strict=True)
        for element in [tuple(index[d][p] for d, p in enumerate(position))]
        for k in range(array.itemsize))
    assert got == expected
