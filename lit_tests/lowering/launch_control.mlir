// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS
// RUN: not smalti-translate %s --split-input-file --arch=sm_90a --to=ptx 2>&1 | filecheck %s --check-prefix=ARCH

// persistent_tiles (smalti/lowering/launch_control.py), sm_100a: thread 0 initialises an
// mbarrier in a static slot and the block meets; each pass runs the body with the block ids
// in index registers (%ctaid first), then thread 0 expects the 16-byte response and asks to
// cancel a cluster (clusterlaunchcontrol.try_cancel), every thread waits for the response,
// decodes it, fences its read for the async proxy and meets the others before the next
// request; a canceled cluster's first ctaid is the next pass's ids, a failure ends the loop.
// In clusters, rank 0's thread 0 asks with .multicast::cluster::all, the waits acquire at
// cluster scope, the cluster meets, and each CTA adds its %cluster_ctaid. The SASS line
// assembles every kernel (the request is UGETNEXTWORKID); sm_90a has no such instruction.

// CHECK:       .version 8.6
// CHECK:       .target sm_100a
// CHECK-LABEL: .visible .entry tiles(
// CHECK:       .reg .b128 %q<1>;
// CHECK:       .shared .align 16 .b8 [[RESPONSE:__smalti_clc_response_0]][16];
// CHECK-NEXT:  .shared .align 8 .b8 [[BARRIER:__smalti_clc_barrier_0]][8];
// CHECK:       mov.u32 [[RESP:%r[0-9]+]], [[RESPONSE]];
// CHECK-NEXT:  mov.u32 [[BAR:%r[0-9]+]], [[BARRIER]];
// CHECK-NEXT:  mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT:  setp.eq.u32 [[FIRST:%p[0-9]+]], [[TID]], 0;
// CHECK-NEXT:  @[[FIRST]] mbarrier.init.shared::cta.b64 [[[BAR]]], 1;
// CHECK-NEXT:  fence.mbarrier_init.release.cluster;
// CHECK-NEXT:  bar.sync 0;
// CHECK-NEXT:  mov.u32 [[CTAID:%r[0-9]+]], %ctaid.x;
// CHECK-NEXT:  cvt.u64.u32 [[X:%rd[0-9]+]], [[CTAID]];
// CHECK-NEXT:  mov.b32 [[PHASE:%r[0-9]+]], 0;
// CHECK-NEXT:  [[LOOP:\$tiles_0]]:
// CHECK-NEXT:  mul.lo.s64 {{%rd[0-9]+}}, [[X]], 128;
// CHECK:       st.global.f32
// CHECK-NEXT:  @[[FIRST]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[BAR]]], 16;
// CHECK-NEXT:  @[[FIRST]] clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [[[RESP]]], [[[BAR]]];
// CHECK-NEXT:  [[WAIT:\$clc_wait_0]]:
// CHECK-NEXT:  mbarrier.try_wait.parity.shared::cta.b64 [[DONE:%p[0-9]+]], [[[BAR]]], [[PHASE]];
// CHECK-NEXT:  @![[DONE]] bra [[WAIT]];
// CHECK-NEXT:  xor.b32 [[PHASE]], [[PHASE]], 1;
// CHECK-NEXT:  ld.shared.b128 [[Q:%q[0-9]+]], [[[RESP]]];
// CHECK-NEXT:  clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 [[CANCELED:%p[0-9]+]], [[Q]];
// CHECK-NEXT:  @[[CANCELED]] clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {[[NX:%r[0-9]+]], _, _, _}, [[Q]];
// CHECK-NEXT:  fence.proxy.async.shared::cta;
// CHECK-NEXT:  bar.sync 0;
// CHECK-NEXT:  @![[CANCELED]] bra.uni [[END:\$tiles_end_0]];
// CHECK-NEXT:  cvt.u64.u32 [[X]], [[NX]];
// CHECK-NEXT:  bra.uni [[LOOP]];
// CHECK-NEXT:  [[END]]:
// CHECK-NEXT:  ret;
// SASS-LABEL: .text.tiles:
// SASS:       UGETNEXTWORKID.SELFCAST
// ARCH:       launch_control.mlir:[[# @LINE + 2]]:3: error: 'smalti.persistent_tiles' op needs sm_100a: sm_90a has no cluster launch control (clusterlaunchcontrol.try_cancel); compile with --arch=sm_100a
func.func @tiles(%a: memref<1024xf32>, %out: memref<1024xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 8>} {
  "smalti.persistent_tiles"() ({
  ^bb0(%x: index, %y: index, %z: index):
    %c128 = arith.constant 128 : index
    %col = arith.muli %x, %c128 : index
    %v = "smalti.vector_load"(%a, %col) : (memref<1024xf32>, index) -> vector<128xf32>
    %w = arith.addf %v, %v : vector<128xf32>
    "smalti.vector_store"(%w, %out, %col) : (vector<128xf32>, memref<1024xf32>, index) -> ()
  }) : () -> ()
  return
}

// -----

// CHECK-LABEL: .visible .entry pairs(
// CHECK:       .reqnctapercluster 2, 1, 1
// CHECK:       mov.u32 [[RESP:%r[0-9]+]], __smalti_clc_response_0;
// CHECK-NEXT:  mov.u32 [[BAR:%r[0-9]+]], __smalti_clc_barrier_0;
// CHECK-NEXT:  mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT:  setp.eq.u32 [[FIRST:%p[0-9]+]], [[TID]], 0;
// CHECK-NEXT:  @[[FIRST]] mbarrier.init.shared::cta.b64 [[[BAR]]], 1;
// CHECK-NEXT:  fence.mbarrier_init.release.cluster;
// CHECK-NEXT:  barrier.cluster.arrive.release.aligned;
// CHECK-NEXT:  barrier.cluster.wait.acquire.aligned;
// CHECK-NEXT:  mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// CHECK-NEXT:  setp.eq.u32 [[RANK0:%p[0-9]+]], [[RANK]], 0;
// CHECK-NEXT:  and.pred [[LEADER:%p[0-9]+]], [[FIRST]], [[RANK0]];
// CHECK-NEXT:  mov.u32 [[CX:%r[0-9]+]], %ctaid.x;
// CHECK-NEXT:  cvt.u64.u32 [[X:%rd[0-9]+]], [[CX]];
// CHECK-NEXT:  mov.u32 [[CY:%r[0-9]+]], %ctaid.y;
// CHECK-NEXT:  cvt.u64.u32 [[Y:%rd[0-9]+]], [[CY]];
// CHECK-NEXT:  mov.b32 [[PHASE:%r[0-9]+]], 0;
// CHECK-NEXT:  [[LOOP:\$tiles_0]]:
// CHECK:       @[[FIRST]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[BAR]]], 16;
// CHECK-NEXT:  @[[LEADER]] clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [[[RESP]]], [[[BAR]]];
// CHECK-NEXT:  [[WAIT:\$clc_wait_0]]:
// CHECK-NEXT:  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 [[DONE:%p[0-9]+]], [[[BAR]]], [[PHASE]];
// CHECK-NEXT:  @![[DONE]] bra [[WAIT]];
// CHECK-NEXT:  xor.b32 [[PHASE]], [[PHASE]], 1;
// CHECK-NEXT:  ld.shared.b128 [[Q:%q[0-9]+]], [[[RESP]]];
// CHECK-NEXT:  clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 [[CANCELED:%p[0-9]+]], [[Q]];
// CHECK-NEXT:  @[[CANCELED]] clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {[[NX:%r[0-9]+]], [[NY:%r[0-9]+]], _, _}, [[Q]];
// CHECK-NEXT:  fence.proxy.async.shared::cta;
// CHECK-NEXT:  barrier.cluster.arrive.release.aligned;
// CHECK-NEXT:  barrier.cluster.wait.acquire.aligned;
// CHECK-NEXT:  @![[CANCELED]] bra.uni [[END:\$tiles_end_0]];
// CHECK-NEXT:  mov.u32 [[MINE:%r[0-9]+]], %cluster_ctaid.x;
// CHECK-NEXT:  add.u32 [[OWN:%r[0-9]+]], [[NX]], [[MINE]];
// CHECK-NEXT:  cvt.u64.u32 [[X]], [[OWN]];
// CHECK-NEXT:  cvt.u64.u32 [[Y]], [[NY]];
// CHECK-NEXT:  bra.uni [[LOOP]];
// CHECK-NEXT:  [[END]]:
// CHECK-NEXT:  ret;
// SASS-LABEL: .text.pairs:
// SASS:       UGETNEXTWORKID.BROADCAST
func.func @pairs(%a: memref<64x256xf32>, %out: memref<64x256xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 2, 2>, smalti.cluster = array<i64: 2, 1>} {
  "smalti.persistent_tiles"() ({
  ^bb0(%x: index, %y: index, %z: index):
    %c128 = arith.constant 128 : index
    %c32 = arith.constant 32 : index
    %col = arith.muli %x, %c128 : index
    %row = arith.muli %y, %c32 : index
    %v = "smalti.vector_load"(%a, %row, %col) : (memref<64x256xf32>, index, index) -> vector<32x128xf32>
    %w = arith.addf %v, %v : vector<32x128xf32>
    "smalti.vector_store"(%w, %out, %row, %col) : (vector<32x128xf32>, memref<64x256xf32>, index, index) -> ()
  }) : () -> ()
  return
}
