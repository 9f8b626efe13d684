"""tcgen05.cp in the simulator: every shape and multicast copies shared memory rows to the
tensor memory lanes the PTX ISA names ("tcgen05.cp", "Data Movement Shape"), from canonical
K-major layouts with and without swizzle; the copy is asynchronous (a tcgen05.ld of its
destination before the commit's mbarrier phase is waited on is a hazard) and ordered with the
same thread's tcgen05.mma (no wait between them).

The expected lane of each source row is written out per shape, the way the ISA describes it
(warp pairs 0/2 and 1/3 for .warpx2::02_13, 0/1 and 2/3 for .warpx2::01_23, every warp for
.warpx4), independently of the simulator's tables.
"""

from __future__ import annotations

import numpy as np
import pytest

from smalti.sim import SimError, run_ptx
from tests.tcgen05_ptx import assembles, copy_image, staged_prologue

HEADER = """.version 8.8
.target sm_100a
.address_size 64
"""
SMEM = 32768
MODE = {None: 0, 128: 2, 64: 4, 32: 6}




def smem_descriptor(start: int, lbo: int, sbo: int, span: int | None = None) -> int:
    """Bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 46-48 0b001, 61-63 swizzle."""
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | (
        ((sbo >> 4) & 0x3FFF) << 32) | (1 << 46) | (MODE[span] << 61)


def tmem_kernel(body: str, *, wait: bool = True, ncols: int = 8, col0: int = 0,
                smem_bytes: int = SMEM, params: str = "") -> str:
    """128 threads copy `image` to shared memory, warp 0 allocates 512 columns (address in
    %r9); thread 0 runs `body` (descriptors from `descs`, %rd11), then commits to an
    mbarrier everyone waits on; each warp reads columns col0.. of its 32 lanes to out."""
    regs = ", ".join(f"%q{i}" for i in range(ncols))
    stores = "\n".join(f"  st.global.b32 [%rd31+{4 * i}], %q{i};" for i in range(ncols))
    waiting = """
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [bar], 0;
  @!%p4 bra WAIT;""" if wait else ""
    return HEADER + f"""
.visible .entry tmem(.param .u64 image, .param .u64 descs, .param .u64 out{params})
.reqntid 128
{{
  .reg .b32 %r<40>;
  .reg .b32 %q<{ncols}>;
  .reg .b64 %rd<40>;
  .reg .pred %p<8>;
{staged_prologue(smem_bytes)}  ld.param.u64 %rd11, [descs];
  @!%p5 bra ISSUED;
{body}
  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
ISSUED:{waiting}
  tcgen05.fence::after_thread_sync;
  ld.param.u64 %rd30, [out];
  mul.wide.u32 %rd32, %r1, {4 * ncols};
  add.u64 %rd31, %rd30, %rd32;
  add.u32 %r13, %r11, {col0};
  tcgen05.ld.sync.aligned.32x32b.x{ncols}.b32 {{{regs}}}, [%r13];
  tcgen05.wait::ld.sync.aligned;
{stores}
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  @!%p2 bra DONE;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r9, 512;
DONE:
  ret;
}}
"""


def cp(shape: str, lane: int = 0, column: int = 0, desc: int = 0) -> str:
    return f"""  ld.global.u64 %rd20, [%rd11+{8 * desc}];
  add.u32 %r20, %r9, {(lane << 16) | column};
  tcgen05.cp.cta_group::1.{shape} [%r20], %rd20;"""


# shape -> (source rows, bytes per row, {source row: destination lanes})
def _lanes(shape: str) -> tuple[int, int, dict[int, list[int]]]:
    if shape == "128x256b":
        return 128, 32, {r: [r] for r in range(128)}
    if shape == "128x128b":
        return 128, 16, {r: [r] for r in range(128)}
    if shape == "4x256b":  # one row to each 32-lane quarter
        return 4, 32, {r: [32 * r] for r in range(4)}
    if shape == "64x128b.warpx2::02_13":  # rows 0-31: warps 0 and 2; 32-63: warps 1 and 3
        return 64, 16, {r: [r, r + 64] for r in range(64)}
    if shape == "64x128b.warpx2::01_23":  # rows 0-31: warps 0 and 1; 32-63: warps 2 and 3
        return 64, 16, {r: ([r, r + 32] if r < 32 else [r + 32, r + 64]) for r in range(64)}
    if shape == "32x128b.warpx4":  # rows 0-31: every warp
        return 32, 16, {r: [r, r + 32, r + 64, r + 96] for r in range(32)}
    raise ValueError(shape)


def canonical(image: np.ndarray, base: int, rows: int, row_bytes: int,
              span: int | None) -> tuple[np.ndarray, int]:
    """Random words laid out K-major in the canonical layout at `base`; (rows x row_bytes
    bytes, the descriptor). No swizzle: 8-row core matrices of 16-byte rows, the second 16
    bytes LBO = 128 away, 8-row groups SBO apart; swizzled: rows one span apart, swizzled."""
    rng = np.random.default_rng(rows + row_bytes)
    data = rng.integers(0, 256, (rows, row_bytes), dtype=np.uint8)
    r, c = np.arange(rows)[:, None], np.arange(row_bytes)[None, :]
    if span is None:
        lbo, sbo = 128, 128 * (row_bytes // 16)
        offset = (r % 8) * 16 + (r // 8) * sbo + (c // 16) * lbo + c % 16
    else:
        lbo, sbo = 16, 8 * span
        offset = r * span + c
    address = base + offset
    if span is not None:
        bits = {32: 1, 64: 3, 128: 7}[span]
        address = address ^ (((address >> 7) & bits) << 4)
    image[address] = data
    return data, smem_descriptor(base, lbo, sbo, span)


SHAPES = ["128x256b", "128x128b", "4x256b", "64x128b.warpx2::02_13", "64x128b.warpx2::01_23",
          "32x128b.warpx4"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("span", [None, 128])
@pytest.mark.parametrize("policy", ["eager", "latest"])
def test_copy_puts_each_row_in_the_lanes_the_isa_names(shape: str, span: int | None,
                                                       policy: str) -> None:
    rows, row_bytes, lanes = _lanes(shape)
    image = np.zeros(SMEM, np.uint8)
    data, desc = canonical(image, 4096, rows, row_bytes, span)
    lane0 = 5 if shape == "4x256b" else 0
    column = 40
    ptx = tmem_kernel(cp(shape, lane0, column), col0=column, ncols=row_bytes // 4)
    assembles(ptx)
    out = np.zeros((128, row_bytes // 4), np.uint32)
    run_ptx(ptx, "tmem", 1, 128, [image, np.array([desc], np.uint64), out],
            async_completion=policy)
    words = data.view("<u4")
    written = set()
    for row, targets in lanes.items():
        for target in targets:
            np.testing.assert_array_equal(out[lane0 + target], words[row], err_msg=f"row {row}")
            written.add(lane0 + target)
    others = [lane for lane in range(128) if lane not in written]
    assert not out[others].any()


def test_reading_the_copy_before_its_commit_is_waited_on_is_a_hazard() -> None:
    image = np.zeros(SMEM, np.uint8)
    _, desc = canonical(image, 0, 128, 32, None)
    ptx = tmem_kernel(cp("128x256b"), wait=False)
    assembles(ptx)
    with pytest.raises(SimError, match=r"tensor memory that the tcgen05.cp at line \d+ still "
                                       r"writes: a wait on the mbarrier"):
        run_ptx(ptx, "tmem", 1, 128, [image, np.array([desc], np.uint64),
                                      np.zeros((128, 8), np.uint32)], async_completion="latest")


def test_copy_then_mma_from_tensor_memory_needs_no_wait() -> None:
    """tcgen05.cp writes A (bf16, row i in lane i) and the same thread's tcgen05.mma reads it
    right away: the two execute in issue order."""
    import ml_dtypes

    rng = np.random.default_rng(7)
    a = (rng.integers(-4, 5, (128, 16)) / 4).astype(ml_dtypes.bfloat16)  # one K step
    b = (rng.integers(-4, 5, (64, 16)) / 4).astype(ml_dtypes.bfloat16)
    image = np.zeros(SMEM, np.uint8)
    r, c = np.arange(128)[:, None], np.arange(32)[None, :]
    image[(r % 8) * 16 + (r // 8) * 256 + (c // 16) * 128 + c % 16] = a.view(np.uint8)
    r = np.arange(64)[:, None]
    image[8192 + (r % 8) * 16 + (r // 8) * 256 + (c // 16) * 128 + c % 16] = b.view(np.uint8)
    a_desc = smem_descriptor(0, 128, 256)
    b_desc = smem_descriptor(8192, 128, 256)
    idesc = (1 << 4) | (1 << 7) | (1 << 10) | ((64 >> 3) << 17) | ((128 >> 4) << 24)
    body = cp("128x256b", 0, 256) + f"""
  ld.global.u64 %rd21, [%rd11+8];
  add.u32 %r21, %r9, 256;
  mov.u32 %r22, {idesc};
  setp.ne.u32 %p3, 0, 0;
  tcgen05.mma.cta_group::1.kind::f16 [%r9], [%r21], %rd21, %r22, %p3;"""
    ptx = tmem_kernel(body, ncols=64)
    assembles(ptx)
    for policy in ("eager", "latest", "random"):
        out = np.zeros((128, 64), np.float32)
        run_ptx(ptx, "tmem", 1, 128, [image, np.array([a_desc, b_desc], np.uint64), out],
                async_completion=policy, seed=3)
        np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


@pytest.mark.parametrize(("body", "match"), [
    (cp("128x256b", lane=32), "from tensor memory lane 0"),
    (cp("128x256b", column=508), "not allocated|outside"),
])
def test_copy_faults(body: str, match: str) -> None:
    image = np.zeros(SMEM, np.uint8)
    _, desc = canonical(image, 0, 128, 32, None)
    with pytest.raises(SimError, match=match):
        run_ptx(tmem_kernel(body), "tmem", 1, 128, [image, np.array([desc], np.uint64),
                                                    np.zeros((128, 8), np.uint32)])


def multicast_kernel(mask: int) -> str:
    """A cluster of two CTAs: both initialise `bar`; CTA rank 0 copies 128x256b to tensor
    memory and commits with .multicast::cluster to `bar` in the CTAs of `mask`; every CTA
    waits on its own `bar`, then CTA 0 reads the copy back to out."""
    regs = ", ".join(f"%q{i}" for i in range(8))
    stores = "\n".join(f"  st.global.b32 [%rd31+{4 * i}], %q{i};" for i in range(8))
    return HEADER + f"""
.visible .entry mc(.param .u64 image, .param .u64 descs, .param .u64 out)
.reqntid 128
{{
  .reg .b32 %r<40>;
  .reg .b32 %q<8>;
  .reg .b64 %rd<40>;
  .reg .pred %p<8>;
  .shared .align 1024 .b8 smem[{SMEM}];
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 slot;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  mov.u32 %r30, %cluster_ctarank;
  ld.param.u64 %rd1, [image];
{copy_image(SMEM)}  setp.eq.u32 %p2, %r2, 0;
  @!%p2 bra ALLOCATED;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
ALLOCATED:
  setp.eq.u32 %p5, %r1, 0;
  @%p5 mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
  tcgen05.fence::before_thread_sync;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  tcgen05.fence::after_thread_sync;
  ld.shared.b32 %r9, [slot];
  setp.eq.u32 %p6, %r30, 0;
  and.pred %p7, %p5, %p6;
  @!%p7 bra ISSUED;
  ld.param.u64 %rd11, [descs];
  ld.global.u64 %rd20, [%rd11];
  tcgen05.cp.cta_group::1.128x256b [%r9], %rd20;
  mov.b16 %rs1, {mask};
  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], %rs1;
ISSUED:
WAIT:
  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p4, [bar], 0;
  @!%p4 bra WAIT;
  tcgen05.fence::after_thread_sync;
  ld.param.u64 %rd30, [out];
  mul.wide.u32 %rd32, %r1, 32;
  add.u64 %rd31, %rd30, %rd32;
  shl.b32 %r16, %r2, 21;
  add.u32 %r13, %r9, %r16;
  @!%p6 bra READ_DONE;
  tcgen05.ld.sync.aligned.32x32b.x8.b32 {{{regs}}}, [%r13];
  tcgen05.wait::ld.sync.aligned;
{stores}
READ_DONE:
  tcgen05.fence::before_thread_sync;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  @!%p2 bra DONE;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r9, 32;
DONE:
  ret;
}}
""".replace(".reg .pred %p<8>;", ".reg .pred %p<8>;\n  .reg .b16 %rs<2>;")


@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_commit_multicast_arrives_on_every_cta_of_the_mask(policy: str) -> None:
    image = np.zeros(SMEM, np.uint8)
    data, desc = canonical(image, 0, 128, 32, None)
    ptx = multicast_kernel(0b11)
    assembles(ptx)
    out = np.zeros((128, 8), np.uint32)
    run_ptx(ptx, "mc", 2, 128, [image, np.array([desc], np.uint64), out], cluster=2,
            async_completion=policy, seed=1)
    np.testing.assert_array_equal(out, data.view("<u4"))


def test_commit_multicast_missing_a_cta_leaves_its_wait_blocked() -> None:
    image = np.zeros(SMEM, np.uint8)
    _, desc = canonical(image, 0, 128, 32, None)
    with pytest.raises(SimError, match="mbarrier deadlock"):
        run_ptx(multicast_kernel(0b01), "mc", 2, 128,
                [image, np.array([desc], np.uint64), np.zeros((128, 8), np.uint32)], cluster=2)
