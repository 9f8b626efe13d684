""".cta_group::2 in the simulator: a CTA pair (cluster ranks 0 and 1) computes an M = 256 MMA.

PTX ISA, "tcgen05" (CTA pairs) and "tcgen05.mma": one thread of the pair issues
`tcgen05.mma.cta_group::2`; each CTA holds half of A's 256 rows (its 128) and half of B's N
columns in its own shared memory at the descriptors' addresses, and gets its 128 rows of D in
its own tensor memory. `tcgen05.alloc/dealloc.cta_group::2` are executed by one warp of each
CTA; `tcgen05.commit.cta_group::2....multicast::cluster` arrives on the mbarrier of every CTA
of the ctaMask; `tcgen05.cp.cta_group::2` copies in both CTAs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import SimError, TensorMapEncodeTiled, run_ptx
from tests.tcgen05_ptx import assembles, copy_image
from tests.test_sim_tcgen05_copy import HEADER, canonical, smem_descriptor

SMEM = 32768


def pair_kernel(n: int, steps: int, *, body: str | None = None, ncols: int | None = None,
                m: int = 256) -> str:
    """Two CTAs of a cluster: each copies images[ctaid] to shared memory, warp 0 of each
    allocates 256 columns with .cta_group::2; rank 0's thread 0 issues `steps` M = 256 MMAs
    (descriptors A, B per step from descs) and a .cta_group::2 commit multicast to `bar` in
    both CTAs; each CTA waits and writes its 128 rows of D (columns 0..ncols) to
    out[ctaid]."""
    ncols = ncols or n
    idesc = (1 << 4) | (1 << 7) | (1 << 10) | ((n >> 3) << 17) | ((m >> 4) << 24)
    if body is None:
        body = "\n".join(f"""  ld.global.u64 %rd20, [%rd11+{16 * s}];
  ld.global.u64 %rd21, [%rd11+{16 * s + 8}];
  setp.ne.u32 %p3, {s}, 0;
  tcgen05.mma.cta_group::2.kind::f16 [%r9], %rd20, %rd21, %r22, %p3;""" for s in range(steps))
    chunk = min(ncols, 64)
    reads = []
    for c in range(ncols // chunk):
        regs = ", ".join(f"%q{i}" for i in range(chunk))
        stores = "\n".join(f"  st.global.b32 [%rd31+{4 * (c * chunk + i)}], %q{i};"
                           for i in range(chunk))
        reads.append(f"""  add.u32 %r13, %r11, {c * chunk};
  tcgen05.ld.sync.aligned.32x32b.x{chunk}.b32 {{{regs}}}, [%r13];
  tcgen05.wait::ld.sync.aligned;
{stores}""")
    return HEADER + f"""
.visible .entry pair(.param .u64 images, .param .u64 descs, .param .u64 out)
.reqntid 128
{{
  .reg .b32 %r<40>;
  .reg .b32 %q<64>;
  .reg .b64 %rd<40>;
  .reg .b16 %rs<2>;
  .reg .pred %p<8>;
  .shared .align 1024 .b8 smem[{SMEM}];
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 slot;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  mov.u32 %r30, %cluster_ctarank;
  mov.u32 %r31, %ctaid.x;
  ld.param.u64 %rd1, [images];
  mul.wide.u32 %rd4, %r31, {SMEM};
  add.u64 %rd1, %rd1, %rd4;
{copy_image(SMEM)}  setp.eq.u32 %p2, %r2, 0;
  @!%p2 bra ALLOCATED;
  tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [slot], 256;
  tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;
ALLOCATED:
  setp.eq.u32 %p5, %r1, 0;
  @%p5 mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
  tcgen05.fence::before_thread_sync;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  tcgen05.fence::after_thread_sync;
  ld.shared.b32 %r9, [slot];
  shl.b32 %r16, %r2, 21;
  add.u32 %r11, %r9, %r16;
  setp.eq.u32 %p6, %r30, 0;
  and.pred %p7, %p5, %p6;
  @!%p7 bra ISSUED;
  ld.param.u64 %rd11, [descs];
  mov.u32 %r22, {idesc};
{body}
  mov.b16 %rs1, 3;
  tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], %rs1;
ISSUED:
WAIT:
  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p4, [bar], 0;
  @!%p4 bra WAIT;
  tcgen05.fence::after_thread_sync;
  ld.param.u64 %rd30, [out];
  mad.lo.u32 %r17, %r31, 128, %r1;
  mul.wide.u32 %rd32, %r17, {4 * ncols};
  add.u64 %rd31, %rd30, %rd32;
{chr(10).join(reads)}
  tcgen05.fence::before_thread_sync;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  @!%p2 bra DONE;
  tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r9, 256;
DONE:
  ret;
}}
"""


def k_major(image: np.ndarray, base: int, mat: np.ndarray) -> list[int]:
    """mat (rows x K, bf16) K-major without swizzle (8-row core matrices of 16-byte rows, K
    chunks LBO = 128 apart, 8-row groups SBO apart); one descriptor per 16 elements of K."""
    rows, k = mat.shape
    r, c = np.arange(rows)[:, None], np.arange(2 * k)[None, :]
    sbo = 128 * (2 * k // 16)
    raw = np.ascontiguousarray(mat).view(np.uint8)
    image[base + (r % 8) * 16 + (r // 8) * sbo + (c // 16) * 128 + c % 16] = raw
    return [smem_descriptor(base + 256 * s, 128, sbo) for s in range(2 * k // 32)]


@pytest.mark.parametrize("n", [64, 128])
@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_pair_mma_m256_matches_numpy(n: int, policy: str) -> None:
    rng = np.random.default_rng(n)
    k = 32
    a = (rng.integers(-4, 5, (256, k)) / 4).astype(ml_dtypes.bfloat16)
    b = (rng.integers(-4, 5, (n, k)) / 4).astype(ml_dtypes.bfloat16)
    images = np.zeros((2, SMEM), np.uint8)
    for rank in range(2):  # rows 128 rank.. of A, columns n/2 rank.. of B, same addresses
        a_descs = k_major(images[rank], 0, a[128 * rank:128 * (rank + 1)])
        b_descs = k_major(images[rank], 16384, b[n // 2 * rank:n // 2 * (rank + 1)])
    descs = [v for pair in zip(a_descs, b_descs, strict=True) for v in pair]  # both CTAs'

    ptx = pair_kernel(n, len(descs) // 2)
    assembles(ptx)
    out = np.zeros((256, n), np.float32)
    run_ptx(ptx, "pair", 2, 128, [images, np.array(descs, np.uint64), out], cluster=2,
            async_completion=policy, seed=2)
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


def test_pair_copy_writes_both_ctas() -> None:
    images = np.zeros((2, SMEM), np.uint8)
    data = [canonical(images[rank], 0, 128, 32, None)[0] for rank in range(2)]
    desc = smem_descriptor(0, 128, 256)
    body = """  ld.global.u64 %rd20, [%rd11];
  tcgen05.cp.cta_group::2.128x256b [%r9], %rd20;"""
    ptx = pair_kernel(8, 0, body=body, ncols=8)
    assembles(ptx)
    out = np.zeros((256, 8), np.uint32)
    run_ptx(ptx, "pair", 2, 128, [images, np.array([desc], np.uint64), out], cluster=2,
            async_completion="latest")
    np.testing.assert_array_equal(out[:128], data[0].view("<u4"))
    np.testing.assert_array_equal(out[128:], data[1].view("<u4"))


def test_pair_needs_a_cluster_and_m256() -> None:
    images = np.zeros((2, SMEM), np.uint8)
    ptx = pair_kernel(64, 1)
    descs = np.array([smem_descriptor(0, 128, 512), smem_descriptor(16384, 128, 512)],
                     np.uint64)
    with pytest.raises(SimError, match="clusters of an even number of CTAs"):
        run_ptx(ptx.replace("barrier.cluster.arrive.release.aligned;\n  barrier.cluster.wait"
                            ".acquire.aligned;", "bar.sync 0;"),
                "pair", 1, 128, [images[:1], descs, np.zeros((128, 64), np.float32)])
    with pytest.raises(SimError, match=r"M = 128; \.cta_group::2 supports M = 256"):
        run_ptx(pair_kernel(64, 1, m=128), "pair", 2, 128,
                [images, descs, np.zeros((256, 64), np.float32)], cluster=2)


def pair_tma_kernel(group: str) -> str:
    """Two CTAs of a cluster, 32 threads each: each CTA's thread 0 TMA-loads its 8 x 32 box
    (rows 8 * rank ..) of `tmap` into its `tile`, signalling rank 0's `bar` (its own address
    with bit 24 cleared, as CUTLASS's 2-SM mainloop does) with `.cta_group`; rank 0 waits for
    both boxes' bytes, then copies its tile and rank 1's (through mapa) to out."""
    return HEADER + f"""
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 out)
{{
  .reg .pred %p<4>;
  .reg .b32 %r<24>;
  .reg .b64 %rd<8>;
  .shared .align 128 .b8 tile[1024];
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %cluster_ctarank;
  setp.eq.u32 %p1, %r1, 0;
  setp.eq.u32 %p2, %r2, 0;
  and.pred %p3, %p1, %p2;
  @!%p3 bra INIT_DONE;
  mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 2048;
INIT_DONE:
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  @!%p1 bra LOADED;
  mov.u32 %r3, bar;
  and.b32 %r3, %r3, 0xFEFFFFFF;
  mov.u32 %r4, tile;
  shl.b32 %r5, %r2, 3;
  mov.b64 %rd4, tmap;
  cvta.param.u64 %rd5, %rd4;
  cp.async.bulk.tensor.2d.{group}.shared::cluster.global.mbarrier::complete_tx::bytes [%r4], [%rd5, {{0, %r5}}], [%r3];
LOADED:
  @!%p2 bra DONE;
WAIT:
  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p3, [bar], 0;
  @!%p3 bra WAIT;
  ld.param.u64 %rd1, [out];
  mov.u32 %r6, tile;
  mapa.shared::cluster.u32 %r7, %r6, 1;
  shl.b32 %r8, %r1, 5;
  mul.wide.u32 %rd2, %r1, 32;
  add.s64 %rd3, %rd1, %rd2;
  add.u32 %r9, %r6, %r8;
  add.u32 %r10, %r7, %r8;
  ld.shared::cluster.v4.u32 {{%r11, %r12, %r13, %r14}}, [%r9];
  ld.shared::cluster.v4.u32 {{%r15, %r16, %r17, %r18}}, [%r9+16];
  st.global.v4.u32 [%rd3], {{%r11, %r12, %r13, %r14}};
  st.global.v4.u32 [%rd3+16], {{%r15, %r16, %r17, %r18}};
  ld.shared::cluster.v4.u32 {{%r11, %r12, %r13, %r14}}, [%r10];
  ld.shared::cluster.v4.u32 {{%r15, %r16, %r17, %r18}}, [%r10+16];
  st.global.v4.u32 [%rd3+1024], {{%r11, %r12, %r13, %r14}};
  st.global.v4.u32 [%rd3+1040], {{%r15, %r16, %r17, %r18}};
DONE:
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ret;
}}
"""


def run_pair_tma(group: str) -> tuple[np.ndarray, np.ndarray]:
    source = np.arange(16 * 32, dtype=np.uint32).reshape(16, 32)
    tmap = TensorMapEncodeTiled(source, "UINT32", (32, 16), (128,), (32, 8))
    out = np.zeros((16, 32), np.uint32)
    run_ptx(pair_tma_kernel(group), "k", 2, 32, [tmap, out], cluster=2)
    return source, out


def test_pair_tma_loads_signal_the_even_ctas_barrier() -> None:
    """cp.async.bulk.tensor.cta_group::2: the mbarrier may be in the destination CTA's peer
    (PTX ISA, "cp.async.bulk.tensor")."""
    assembles(pair_tma_kernel("cta_group::2"))
    source, out = run_pair_tma("cta_group::2")
    np.testing.assert_array_equal(out, source)


def test_cta_group_1_tma_loads_signal_their_own_ctas_barrier() -> None:
    with pytest.raises(SimError, match=r"with \.cta_group::1 the mbarrier must be in the "
                                       r"destination CTA \(cluster rank 1\)"):
        run_pair_tma("cta_group::1")
