// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS

// tcgen05_mma, tcgen05_commit, tcgen05_cp (smalti/lowering/tcgen05.py), sm_100a. The warpgroup
// hands off to its thread 0 (tcgen05 fences around bar.sync 1, 128; elided when the last
// hand-off still stands: nothing but thread 0's tcgen05 issues since), which issues one
// tcgen05.mma per K step, elected (elect.sync) in a branch only warp 0 takes (its warp index
// broadcast by shfl.sync, so that ptxas sees a uniform branch and issues each UTCHMMA once,
// with no ELECT loop around it): sm_100 shared memory descriptors
// (wgmma's start/LBO/SBO/swizzle bits plus version 0b001 at bit 46), the instruction
// descriptor as a .b32 register, enable-input-d from `accumulate` on the first step and true
// after; commit arrives once on the barrier; the wait on it is followed by
// tcgen05.fence::after_thread_sync before the threads' tcgen05.ld. The second RUN line
// assembles every kernel with ptxas (UTCHMMA / UTCQMMA / UTCCP / UTCBAR in SASS).

// bf16, M = N = 128, K = 32 (two k16 steps). A K-major (inferred: 64-byte swizzle, SBO 512 =
// 0x8000402000010000: swizzle mode 4 at bit 61, version bit 46, SBO >> 4 at bit 32, LBO 16);
// B MN-major (128-byte swizzle, LBO 4096, SBO 1024: 0x4000404001000000). Instruction
// descriptor 0x8210490: D f32 (1 << 4), A and B bf16 (1 << 7, 1 << 10), B MN-major (1 << 16),
// N >> 3 = 16 at bit 17, M >> 4 = 8 at bit 24. The second step's descriptors advance 32 bytes
// of K: A by 2 (>> 4), B (MN-major: the next 8 K rows) by 2048 >> 4 = 128.
// CHECK-LABEL: .visible .entry mma_bf16(
// CHECK:       mbarrier.try_wait.parity.shared::cta.b64 {{%p[0-9]+}}, [[[BARS:%r[0-9]+]]], 0;
// CHECK:       or.b64 [[BDESC:%rd[0-9]+]], {{%rd[0-9]+}}, 4611756662066249728;
// CHECK:       or.b64 [[ADESC:%rd[0-9]+]], {{%rd[0-9]+}}, 9223442543037972480;
// CHECK-NEXT:  setp.ne.u32 [[FALSE:%p[0-9]+]], [[TID:%r[0-9]+]], [[TID]];
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 1, 128;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK-NEXT:  mov.b32 [[IDESC:%r[0-9]+]], 136381584;
// CHECK-NEXT:  add.s64 [[A1:%rd[0-9]+]], [[ADESC]], 2;
// CHECK-NEXT:  add.s64 [[B1:%rd[0-9]+]], [[BDESC]], 128;
// CHECK-NEXT:  setp.eq.u32 [[TRUE:%p[0-9]+]], [[TID]], [[TID]];
// CHECK-NEXT:  @[[OTHER:%p[0-9]+]] bra [[ISSUED:\$issued_[0-9]+]];
// CHECK-NEXT:  elect.sync _|[[ELECTED:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[ELECTED]] tcgen05.mma.cta_group::1.kind::f16 [[[D:%r[0-9]+]]], [[ADESC]], [[BDESC]], [[IDESC]], [[FALSE]];
// CHECK-NEXT:  @[[ELECTED]] tcgen05.mma.cta_group::1.kind::f16 [[[D]]], [[A1]], [[B1]], [[IDESC]], [[TRUE]];
// CHECK-NEXT:  [[ISSUED]]:
// CHECK-NEXT:  @[[OTHER]] bra [[ISSUED2:\$issued_[0-9]+]];
// CHECK-NEXT:  elect.sync _|[[ELECTED2:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[ELECTED2]] tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [[[BARS]]+8];
// CHECK-NEXT:  [[ISSUED2]]:
// CHECK-NEXT:  [[WAIT:\$wait_[0-9]+]]:
// CHECK-NEXT:  mbarrier.try_wait.parity.shared::cta.b64 [[DONE:%p[0-9]+]], [[[BARS]]+8], 0;
// CHECK-NEXT:  @![[DONE]] bra [[WAIT]];
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK:       tcgen05.ld.sync.aligned.32x32b.x128.b32
// SASS-LABEL: .text.mma_bf16:
// SASS:       UTCHMMA
// SASS-NOT:   ELECT
// SASS:       UTCHMMA
// SASS-NOT:   ELECT
// SASS:       UTCBAR
func.func @mma_bf16(%a: memref<128x32xbf16>, %b: memref<32x128xbf16>, %out: memref<128x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %false = arith.constant false
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x32xbf16, #gpu.address_space<workgroup>>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<32x128xbf16, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 16384 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<128x32xbf16>, memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%b, %sb, %bars, %c0, %c0, %c0) : (memref<32x128xbf16>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false) : (memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %v = "smalti.tmem_load"(%t) : (memref<128x128xf32, "tmem">) -> vector<128x128xf32>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
  return
}

// -----

// Block-scaled e4m3 (.kind::mxf8f6f4, E8M0 scales), N = 64, K = 64 (two k32 steps). The
// first tcgen05_cp hands off, then thread 0 copies 32 rows of 16 bytes (descriptor
// 0x400800010000: no swizzle, SBO 128, LBO 16, version) to every lane quarter; the second cp
// and the MMA need no hand-off of their own (nothing written or synced since the first: one
// hand-off for cp, cp, mma). The instruction descriptor of
// step s puts the scale data ID s in bits 4-5 (B) and 29-30 (A): 0x8900000 (UE8M0 at bit 23,
// N >> 3 = 8, M >> 4 = 8), then 0x28900010; the scale refs' addresses stay (one group).
// CHECK-LABEL: .visible .entry mma_block_scaled(
// CHECK:       tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 1, 128;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK:       or.b64 [[CPA:%rd[0-9]+]], {{%rd[0-9]+}}, 70403103981568;
// CHECK:       @[[OTHER:%p[0-9]+]] bra
// CHECK-NEXT:  elect.sync _|[[E1:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[E1]] tcgen05.cp.cta_group::1.32x128b.warpx4 [[[SFA:%r[0-9]+]]], [[CPA]];
// CHECK-NOT:   bar.sync
// CHECK:       or.b64 [[CPB:%rd[0-9]+]], {{%rd[0-9]+}}, 70403103981568;
// CHECK-NEXT:  @[[OTHER]] bra
// CHECK-NEXT:  elect.sync _|[[E2:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[E2]] tcgen05.cp.cta_group::1.32x128b.warpx4 [[[SFB:%r[0-9]+]]], [[CPB]];
// CHECK-NOT:   bar.sync
// CHECK:       setp.eq.u32 [[TRUE:%p[0-9]+]]
// CHECK-NEXT:  mov.b32 [[I0:%r[0-9]+]], 143654912;
// CHECK-NEXT:  mov.b32 [[I1:%r[0-9]+]], 680525840;
// CHECK:       @[[OTHER]] bra
// CHECK-NEXT:  elect.sync _|[[E3:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[E3]] tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [[[D:%r[0-9]+]]], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[I0]], [[[SFA]]], [[[SFB]]], [[TRUE]];
// CHECK-NEXT:  @[[E3]] tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [[[D]]], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[I1]], [[[SFA]]], [[[SFB]]], [[TRUE]];
// CHECK-NEXT:  $issued
// CHECK-NEXT:  @[[OTHER]] bra
// CHECK-NEXT:  elect.sync _|[[E4:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[E4]] tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// SASS-LABEL: .text.mma_block_scaled:
// SASS-COUNT-2: UTCCP.T.S.4
// SASS-COUNT-2: UTCQMMA
func.func @mma_block_scaled(%a: memref<128x64xf8E4M3FN>, %bt: memref<64x64xf8E4M3FN>, %sfa: memref<1x32x16xf8E8M0FNU>, %sfb: memref<1x32x16xf8E8M0FNU>, %out: memref<128x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %o_sfa = arith.constant 13312 : index
  %o_sfb = arith.constant 13824 : index
  %true = arith.constant true
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %sbt = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %sbt_tiled = "smalti.with_transforms"(%sbt) {transforms = [#smalti.tile<[8, 64]>, #smalti.swizzle<64>]} : (memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %sb_raw = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %sb = "smalti.with_transforms"(%sb_raw) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[8, 64]>, #smalti.swizzle<64>]} : (memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %ssfa = "smalti.slice_smem"(%o_sfa) : (index) -> memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>
  %ssfb = "smalti.slice_smem"(%o_sfb) : (index) -> memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  %tsfa = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x128xf8E8M0FNU, "tmem">
  %tsfb = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x128xf8E8M0FNU, "tmem">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 13312 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<128x64xf8E4M3FN>, memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%bt, %sbt_tiled, %bars, %c0, %c0, %c0) : (memref<64x64xf8E4M3FN>, memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%sfa, %ssfa, %bars, %c0, %c0, %c0, %c0) : (memref<1x32x16xf8E8M0FNU>, memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index, index) -> ()
  "smalti.async_load"(%sfb, %ssfb, %bars, %c0, %c0, %c0, %c0) : (memref<1x32x16xf8E8M0FNU>, memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.tcgen05_cp"(%ssfa, %tsfa) {shape = "32x128b.warpx4"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tcgen05_cp"(%ssfb, %tsfb) {shape = "32x128b.warpx4"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %true, %tsfa, %tsfb) : (memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>, memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x64xf32, "tmem">, i1, memref<128x128xf8E8M0FNU, "tmem">, memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %v = "smalti.tmem_load"(%t) : (memref<128x64xf32, "tmem">) -> vector<128x64xf32>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%tsfb) : (memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tmem_dealloc"(%tsfa) : (memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  return
}

// -----

// A from tensor memory (tmem_store'd f16), D f32 (instruction descriptor 0x8110010: D type 1,
// N = 64, B MN-major): A's TMEM address advances 8 columns (32 bytes of K) per step.
// CHECK-LABEL: .visible .entry mma_a_in_tmem_f16(
// CHECK:       tcgen05.st.sync.aligned.32x32b.x16.b32
// CHECK:       mov.b32 [[IDESC:%r[0-9]+]], 135331856;
// CHECK-NEXT:  add.u32 [[A1:%r[0-9]+]], [[A:%r[0-9]+]], 8;
// CHECK-NEXT:  add.s64 [[B1:%rd[0-9]+]], [[B0:%rd[0-9]+]], 128;
// CHECK-NEXT:  setp.eq.u32 [[TRUE:%p[0-9]+]]
// CHECK:       elect.sync _|[[ELECTED:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[ELECTED]] tcgen05.mma.cta_group::1.kind::f16 [[[D:%r[0-9]+]]], [[[A]]], [[B0]], [[IDESC]], {{%p[0-9]+}};
// CHECK-NEXT:  @[[ELECTED]] tcgen05.mma.cta_group::1.kind::f16 [[[D]]], [[[A1]]], [[B1]], [[IDESC]], [[TRUE]];
// SASS-LABEL: .text.mma_a_in_tmem_f16:
// SASS-COUNT-2: UTCHMMA
func.func @mma_a_in_tmem_f16(%a: memref<128x32xf16>, %b: memref<32x64xf16>, %out: memref<128x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o_b = arith.constant 1024 : index
  %false = arith.constant false
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<32x64xf16, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  %ta = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x64xf16, "tmem">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 4096 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%b, %sb, %bars, %c0, %c0, %c0) : (memref<32x64xf16>, memref<32x64xf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %va = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x32xf16>, index, index) -> vector<128x32xf16>
  "smalti.tmem_store"(%va, %ta) : (vector<128x32xf16>, memref<128x64xf16, "tmem">) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.tcgen05_mma"(%ta, %sb, %t, %false) : (memref<128x64xf16, "tmem">, memref<32x64xf16, #gpu.address_space<workgroup>>, memref<128x64xf32, "tmem">, i1) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %v = "smalti.tmem_load"(%t) : (memref<128x64xf32, "tmem">) -> vector<128x64xf32>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%ta) : (memref<128x64xf16, "tmem">) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  return
}

// -----

// CTA pair (collective: .cta_group::2), M = 256, N = 64: the kernel's TMEM allocation takes
// .cta_group::2 too; the even CTA's thread 0 issues (instruction descriptor 0x10110490: M >> 4
// = 16; the issuing branch is taken by warp 0 of the even CTA), and the commit multicasts to both CTAs (mask 0b11 at the pair's even rank), whose
// waits acquire at cluster scope.
// CHECK-LABEL: .visible .entry pair(
// CHECK:       tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32
// CHECK:       mov.b32 [[IDESC:%r[0-9]+]], 269550736;
// CHECK:       setp.ne.u32 [[OTHER_WARP:%p[0-9]+]], {{%r[0-9]+}}, 0;
// CHECK-NEXT:  mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// CHECK-NEXT:  and.b32 [[ODD:%r[0-9]+]], [[RANK]], 1;
// CHECK-NEXT:  setp.ne.or.b32 [[OTHER:%p[0-9]+]], [[ODD]], 0, [[OTHER_WARP]];
// CHECK-NEXT:  @[[OTHER]] bra
// CHECK-NEXT:  elect.sync _|[[ELECTED:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[ELECTED]] tcgen05.mma.cta_group::2.kind::f16 [{{%r[0-9]+}}], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[IDESC]], {{%p[0-9]+}};
// CHECK-NEXT:  @[[ELECTED]] tcgen05.mma.cta_group::2.kind::f16
// CHECK-NEXT:  $issued
// CHECK-NEXT:  and.b32 [[EVEN:%r[0-9]+]], [[RANK]], 4294967294;
// CHECK-NEXT:  shl.b32 [[MASK:%r[0-9]+]], 3, [[EVEN]];
// CHECK-NEXT:  cvt.u16.u32 [[MASK16:%rs[0-9]+]], [[MASK]];
// CHECK-NEXT:  @[[OTHER]] bra
// CHECK-NEXT:  elect.sync _|[[ELECTED2:%p[0-9]+]], 4294967295;
// CHECK-NEXT:  @[[ELECTED2]] tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [{{%r[0-9]+}}+8], [[MASK16]];
// CHECK:       mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 {{%p[0-9]+}}, [{{%r[0-9]+}}+8], 0;
// CHECK:       tcgen05.dealloc.cta_group::2.sync.aligned.b32
// SASS-LABEL: .text.pair:
// SASS:       UTCHMMA.2CTA
// SASS:       UTCBAR.2CTA.MULTICAST
func.func @pair(%a: memref<256x32xbf16>, %b: memref<32x64xbf16>, %out: memref<256x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %chalf = arith.constant 32 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %false = arith.constant false
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x32xbf16, #gpu.address_space<workgroup>>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<32x32xbf16, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  %rank = gpu.block_id x
  %row = arith.muli %rank, %c128 : index
  %col = arith.muli %rank, %chalf : index
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 10240 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %row, %c0) : (memref<256x32xbf16>, memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%b, %sb, %bars, %c0, %c0, %col) : (memref<32x64xbf16>, memref<32x32xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.cluster_barrier"() : () -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false) {collective = true} : (memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<32x32xbf16, #gpu.address_space<workgroup>>, memref<128x64xf32, "tmem">, i1) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) {collective = true} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %v0 = "smalti.tmem_load"(%t) {column = 0 : i64} : (memref<128x64xf32, "tmem">) -> vector<128x64xf32>
  %col0 = arith.constant 0 : index
  "smalti.vector_store"(%v0, %out, %row, %col0) : (vector<128x64xf32>, memref<256x64xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  return
}

// -----

// Hand-offs between MMAs: the second MMA right after the first needs none (only thread 0
// issued since the hand-off); after the warpgroup's generic stores into A2 the third needs
// one (fence.proxy.async for the stores, then the tcgen05 fences around bar.sync).
// CHECK-LABEL: .visible .entry mma_store_mma(
// CHECK:       tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 1, 128;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK:       tcgen05.mma.cta_group::1.kind::f16
// CHECK:       tcgen05.mma.cta_group::1.kind::f16
// CHECK-NOT:   bar.sync
// CHECK:       tcgen05.mma.cta_group::1.kind::f16
// CHECK-NOT:   bar.sync
// CHECK:       tcgen05.mma.cta_group::1.kind::f16
// CHECK-NOT:   tcgen05.mma
// CHECK:       st.shared.v4.b32
// CHECK:       fence.proxy.async.shared::cta;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 1, 128;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK:       tcgen05.mma.cta_group::1.kind::f16
// SASS-LABEL: .text.mma_store_mma:
// SASS-COUNT-6: UTCHMMA
func.func @mma_store_mma(%a: memref<128x32xbf16>, %a2: memref<128x32xbf16>, %b: memref<32x128xbf16>, %out: memref<128x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %o_a2 = arith.constant 17408 : index
  %false = arith.constant false
  %true = arith.constant true
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x32xbf16, #gpu.address_space<workgroup>>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<32x128xbf16, #gpu.address_space<workgroup>>
  %sa2 = "smalti.slice_smem"(%o_a2) : (index) -> memref<128x32xbf16, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 16384 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<128x32xbf16>, memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%b, %sb, %bars, %c0, %c0, %c0) : (memref<32x128xbf16>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false) : (memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %true) : (memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  %v = "smalti.vector_load"(%a2, %c0, %c0) : (memref<128x32xbf16>, index, index) -> vector<128x32xbf16>
  "smalti.vector_store"(%v, %sa2, %c0, %c0) : (vector<128x32xbf16>, memref<128x32xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.tcgen05_mma"(%sa2, %sb, %t, %true) : (memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %r = "smalti.tmem_load"(%t) : (memref<128x128xf32, "tmem">) -> vector<128x128xf32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
  return
}

// -----

// An f16 D (f16 inputs): tcgen05.mma writes one element per 32-bit column, so the
// accumulator is an unpacked ref (strided<[2C, 2]>) and column 32 is 32-bit column 32.
// Instruction descriptor 0x8210000: D f16 (0 << 4), A and B f16 (0), B MN-major (1 << 16),
// N >> 3 = 16 at bit 17, M >> 4 = 8 at bit 24. The result is read with .pack::16b.
// CHECK-LABEL: .visible .entry mma_f16_accumulator(
// CHECK:       tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{{%r[0-9]+}}], 256;
// CHECK:       ld.shared.b32 [[T:%r[0-9]+]], [{{%r[0-9]+}}];
// CHECK:       add.u32 [[D:%r[0-9]+]], [[T]], 32;
// CHECK:       mov.b32 [[IDESC:%r[0-9]+]], 136380416;
// CHECK:       @{{%p[0-9]+}} tcgen05.mma.cta_group::1.kind::f16 [[[D]]], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[IDESC]], {{%p[0-9]+}};
// CHECK:       tcgen05.ld.sync.aligned.32x32b.x64.pack::16b.b32
// SASS-LABEL: .text.mma_f16_accumulator:
// SASS:       UTCHMMA
// SASS:       LDTM.x64.PACK16BIT
func.func @mma_f16_accumulator(%a: memref<128x32xf16>, %b: memref<32x128xf16>, %out: memref<128x128xf16>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %false = arith.constant false
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x32xf16, #gpu.address_space<workgroup>>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<32x128xf16, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 256 : i64} : () -> memref<128x256xf16, strided<[512, 2]>, "tmem">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 16384 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<128x32xf16>, memref<128x32xf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%b, %sb, %bars, %c0, %c0, %c0) : (memref<32x128xf16>, memref<32x128xf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false) {column = 32 : i64} : (memref<128x32xf16, #gpu.address_space<workgroup>>, memref<32x128xf16, #gpu.address_space<workgroup>>, memref<128x256xf16, strided<[512, 2]>, "tmem">, i1) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %v = "smalti.tmem_load"(%t) {column = 32 : i64} : (memref<128x256xf16, strided<[512, 2]>, "tmem">) -> vector<128x128xf16>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<128x128xf16>, memref<128x128xf16>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x256xf16, strided<[512, 2]>, "tmem">) -> ()
  return
}
