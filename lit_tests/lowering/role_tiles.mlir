// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS

// role_tiles (smalti/lowering/role_tiles.py), sm_100a: each warp-specialised role walks the
// tiles itself. Pass n uses response slot n % 2 (16 bytes apart) and its barriers (8 bytes
// apart) with parity (n / 2) & 1. The requesting role (warpgroup 0) starts each pass with
// its issuer (thread 0; of the cluster's rank 0 in clusters) waiting until every role
// released the slot (parity flipped: a fresh barrier passes), thread 0 expecting the 16
// response bytes, and the issuer asking for the next cluster; every role ends a pass
// waiting for the response, decoding it, fencing its read for the async proxy, meeting its
// warpgroup, and thread 0 releasing the slot (on rank 0's barrier, at cluster scope, in
// clusters); a canceled cluster's first ctaid (plus %cluster_ctaid) is the next pass's ids.
// In clusters the waits acquire at cluster scope, the request is multicast, and each walk
// ends at the cluster's meeting. The SASS line assembles both (the request is
// UGETNEXTWORKID).

// CHECK-LABEL: .visible .entry walk(
// CHECK:       @!{{%p[0-9]+}} bra $role_end_0;
// CHECK-NEXT:  mov.u32 [[SMEM:%r[0-9]+]], smalti_smem;
// CHECK-NEXT:  add.u32 [[FULL:%r[0-9]+]], [[SMEM]], 32;
// CHECK-NEXT:  add.u32 [[EMPTY:%r[0-9]+]], [[SMEM]], 48;
// CHECK-NEXT:  and.b32 [[T:%r[0-9]+]], %r{{[0-9]+}}, 127;
// CHECK-NEXT:  setp.eq.u32 [[FIRST:%p[0-9]+]], [[T]], 0;
// CHECK-NEXT:  mov.u32 [[CTAID:%r[0-9]+]], %ctaid.x;
// CHECK-NEXT:  cvt.u64.u32 [[X:%rd[0-9]+]], [[CTAID]];
// CHECK-NEXT:  mov.u32 [[N:%r[0-9]+]], 0;
// CHECK-NEXT:  mov.u64 [[PASS:%rd[0-9]+]], 0;
// CHECK-NEXT:  [[LOOP:\$role_tiles_0]]:
// CHECK-NEXT:  and.b32 [[SLOT:%r[0-9]+]], [[N]], 1;
// CHECK-NEXT:  shr.u32 [[ROUND:%r[0-9]+]], [[N]], 1;
// CHECK-NEXT:  and.b32 [[PARITY:%r[0-9]+]], [[ROUND]], 1;
// CHECK-NEXT:  mad.lo.u32 [[RESPONSE:%r[0-9]+]], [[SLOT]], 16, [[SMEM]];
// CHECK-NEXT:  mad.lo.u32 [[FULL_S:%r[0-9]+]], [[SLOT]], 8, [[FULL]];
// CHECK-NEXT:  mad.lo.u32 [[EMPTY_S:%r[0-9]+]], [[SLOT]], 8, [[EMPTY]];
// CHECK-NEXT:  @![[FIRST]] bra [[REQUEST:\$role_tiles_request_0]];
// CHECK-NEXT:  xor.b32 [[FREED:%r[0-9]+]], [[PARITY]], 1;
// CHECK-NEXT:  [[W0:\$role_tiles_wait_0]]:
// CHECK-NEXT:  mbarrier.try_wait.parity.shared::cta.b64 [[P0:%p[0-9]+]], [[[EMPTY_S]]], [[FREED]];
// CHECK-NEXT:  @![[P0]] bra [[W0]];
// CHECK-NEXT:  [[REQUEST]]:
// CHECK-NEXT:  @[[FIRST]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[FULL_S]]], 16;
// CHECK-NEXT:  @[[FIRST]] clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [[[RESPONSE]]], [[[FULL_S]]];
// CHECK-NEXT:  [[W1:\$role_tiles_wait_1]]:
// CHECK-NEXT:  mbarrier.try_wait.parity.shared::cta.b64 [[P1:%p[0-9]+]], [[[FULL_S]]], [[PARITY]];
// CHECK-NEXT:  @![[P1]] bra [[W1]];
// CHECK-NEXT:  ld.shared.b128 [[Q:%q[0-9]+]], [[[RESPONSE]]];
// CHECK-NEXT:  clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 [[CANCELED:%p[0-9]+]], [[Q]];
// CHECK-NEXT:  @[[CANCELED]] clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {[[NX:%r[0-9]+]], _, _, _}, [[Q]];
// CHECK-NEXT:  fence.proxy.async.shared::cta;
// CHECK-NEXT:  bar.sync 1, 128;
// CHECK-NEXT:  and.pred [[RELEASES:%p[0-9]+]], [[CANCELED]], [[FIRST]];
// CHECK-NEXT:  @[[RELEASES]] mbarrier.arrive.shared::cta.b64 _, [[[EMPTY_S]]];
// CHECK-NEXT:  @![[CANCELED]] bra.uni [[END:\$role_tiles_end_0]];
// CHECK-NEXT:  cvt.u64.u32 [[X]], [[NX]];
// CHECK-NEXT:  add.u32 [[N]], [[N]], 1;
// CHECK-NEXT:  add.s64 [[PASS]], [[PASS]], 1;
// CHECK-NEXT:  bra.uni [[LOOP]];
// CHECK-NEXT:  [[END]]:
// CHECK-NEXT:  add.s64 %rd{{[0-9]+}}, [[PASS]], 1;
// CHECK-NEXT:  $role_end_0:
// The second role walks without requesting; its body stores at column 128 x.
// CHECK:       $role_tiles_1:
// CHECK-NOT:   clusterlaunchcontrol.try_cancel
// CHECK:       st.global.v4.f32
// CHECK:       clusterlaunchcontrol.query_cancel.is_canceled.pred.b128
// CHECK:       bar.sync 2, 128;
// CHECK:       bra.uni $role_tiles_1;
// SASS-LABEL: .text.walk:
// SASS:        UGETNEXTWORKID

func.func @walk(%out: memref<128x256xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #gpu.address_space<workgroup>>
  %c32 = arith.constant 32 : index
  %full = "smalti.slice_smem"(%c32) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %c48 = arith.constant 48 : index
  %empty = "smalti.slice_smem"(%c48) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%full) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.initialize_barrier"(%empty) {arrival_count = 2 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.warpgroup_region"() ({
    %n = "smalti.role_tiles"(%ring, %full, %empty) ({
    ^bb0(%x: index, %y: index, %z: index, %pass: index):
    }) {request = true} : (memref<2x16xi8, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  "smalti.warpgroup_region"() ({
    %n = "smalti.role_tiles"(%ring, %full, %empty) ({
    ^bb0(%x: index, %y: index, %z: index, %pass: index):
      %c128 = arith.constant 128 : index
      %col = arith.muli %x, %c128 : index
      %v = arith.constant dense<1.0> : vector<128x128xf32>
      "smalti.vector_store"(%v, %out, %c0, %col) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
    }) : (memref<2x16xi8, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>) -> index
  }) {warpgroup = 1 : i64} : () -> ()
  return
}

// -----

// CHECK-LABEL: .visible .entry pair_walk(
// CHECK:       mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// CHECK-NEXT:  setp.eq.u32 [[RANK0:%p[0-9]+]], [[RANK]], 0;
// CHECK-NEXT:  and.pred [[ISSUER:%p[0-9]+]], [[FIRST:%p[0-9]+]], [[RANK0]];
// CHECK:       @![[ISSUER]] bra [[REQUEST:\$role_tiles_request_0]];
// CHECK:       mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 {{%p[0-9]+}}, [[[EMPTY_S:%r[0-9]+]]]
// CHECK:       [[REQUEST]]:
// CHECK-NEXT:  @[[FIRST]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[FULL_S:%r[0-9]+]]], 16;
// CHECK-NEXT:  @[[ISSUER]] clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [{{%r[0-9]+}}], [[[FULL_S]]];
// CHECK-NEXT:  $role_tiles_wait_1:
// CHECK-NEXT:  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 {{%p[0-9]+}}, [[[FULL_S]]]
// CHECK:       bar.sync 1, 128;
// CHECK-NEXT:  and.pred [[RELEASES:%p[0-9]+]], [[CANCELED:%p[0-9]+]], [[FIRST]];
// CHECK-NEXT:  mapa.shared::cluster.u32 [[REMOTE:%r[0-9]+]], [[EMPTY_S]], 0;
// CHECK-NEXT:  @[[RELEASES]] mbarrier.arrive.release.cluster.shared::cluster.b64 _, [[[REMOTE]]];
// CHECK-NEXT:  @![[CANCELED]] bra.uni [[END:\$role_tiles_end_0]];
// CHECK-NEXT:  mov.u32 [[MINE:%r[0-9]+]], %cluster_ctaid.x;
// CHECK-NEXT:  add.u32 [[NEXT:%r[0-9]+]], {{%r[0-9]+}}, [[MINE]];
// CHECK-NEXT:  cvt.u64.u32 {{%rd[0-9]+}}, [[NEXT]];
// CHECK:       [[END]]:
// CHECK-NEXT:  add.s64
// CHECK-NEXT:  barrier.cluster.arrive.release.aligned;
// CHECK-NEXT:  barrier.cluster.wait.acquire.aligned;
// CHECK-NEXT:  $role_end_0:
// SASS-LABEL: .text.pair_walk:
// SASS:        UGETNEXTWORKID

func.func @pair_walk(%out: memref<128x512xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.cluster = array<i64: 2, 1, 1>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #gpu.address_space<workgroup>>
  %c32 = arith.constant 32 : index
  %full = "smalti.slice_smem"(%c32) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %c48 = arith.constant 48 : index
  %empty = "smalti.slice_smem"(%c48) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%full) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.initialize_barrier"(%empty) {arrival_count = 4 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.warpgroup_region"() ({
    %n = "smalti.role_tiles"(%ring, %full, %empty) ({
    ^bb0(%x: index, %y: index, %z: index, %pass: index):
    }) {request = true} : (memref<2x16xi8, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  "smalti.warpgroup_region"() ({
    %n = "smalti.role_tiles"(%ring, %full, %empty) ({
    ^bb0(%x: index, %y: index, %z: index, %pass: index):
      %c128 = arith.constant 128 : index
      %col = arith.muli %x, %c128 : index
      %v = arith.constant dense<1.0> : vector<128x128xf32>
      "smalti.vector_store"(%v, %out, %c0, %col) : (vector<128x128xf32>, memref<128x512xf32>, index, index) -> ()
    }) : (memref<2x16xi8, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>) -> index
  }) {warpgroup = 1 : i64} : () -> ()
  return
}
