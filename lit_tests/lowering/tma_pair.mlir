// RUN: smalti-translate %s --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS
// RUN: not smalti-translate %s --arch=sm_90a --to=ptx 2>&1 | filecheck %s --check-prefix=ARCH

// async_load with cta_group = 2 (smalti/lowering/tma.py): each CTA of a pair loads its own
// tile, but the bytes complete on the barrier of the pair's leader (the even rank): the
// barrier's address is mapped there (mapa to %cluster_ctarank & ~1) and the copy takes
// .cta_group::2. Only the leader expects the pair's bytes; its wait acquires at cluster
// scope (the odd CTA's copy signals it).
// CHECK-LABEL: .visible .entry pair_load(
// CHECK:       .reqnctapercluster 2, 1, 1
// CHECK:       mov.u32 [[BARS:%r[0-9]+]], smalti_smem;
// CHECK:       mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// CHECK-NEXT:  and.b32 [[EVEN:%r[0-9]+]], [[RANK]], 4294967294;
// CHECK-NEXT:  add.u32 [[BAR:%r[0-9]+]], [[BARS]], 8;
// CHECK-NEXT:  mapa.shared::cluster.u32 [[REMOTE:%r[0-9]+]], [[BAR]], [[EVEN]];
// CHECK:       @{{%p[0-9]+}} cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2 [{{%r[0-9]+}}], [{{%rd[0-9]+}}, {{{%r[0-9]+}}, {{%r[0-9]+}}}], [[[REMOTE]]];
// CHECK:       mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 {{%p[0-9]+}}, [{{%r[0-9]+}}+8], 0;
// SASS-LABEL: .text.pair_load:
// SASS:       UTMALDG.2D.2CTA
// ARCH:       tma_pair.mlir:[[# @LINE + 18]]:3: error: 'smalti.async_load' op needs sm_100a: sm_90a has no TMA loads completing on the pair leader's barrier (cp.async.bulk.tensor .cta_group::2); compile with --arch=sm_100a
func.func @pair_load(%a: memref<256x64xbf16>, %out: memref<256x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %o_t = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %t = "smalti.slice_smem"(%o_t) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.cluster_barrier"() : () -> ()
  %rank = gpu.cluster_block_id x
  %leader = arith.cmpi eq, %rank, %c0 : index
  scf.if %leader {
    "smalti.arrive_expect_tx"(%bars, %c1) {bytes = 32768 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  }
  %bx = gpu.block_id x
  %row = arith.muli %bx, %c128 : index
  "smalti.async_load"(%a, %t, %bars, %c1, %row, %c0) {cta_group = 2 : i64} : (memref<256x64xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  scf.if %leader {
    %p = arith.constant 0 : i32
    "smalti.wait"(%bars, %c1, %p) : (memref<2xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  }
  "smalti.cluster_barrier"() : () -> ()
  "smalti.async_store"(%t, %out, %row, %c0) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<256x64xbf16>, index, index) -> ()
  "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  return
}
