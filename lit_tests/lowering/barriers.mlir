// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// Thread 0 of the block inits both barriers, fences, and the block meets; arrive_expect_tx
// is thread 0's, arrive everyone's; wait loops on try_wait.parity with the index's low bit.
// CHECK: .extern .shared .align 1024 .b8 smalti_smem[];
// CHECK-LABEL: .visible .entry barriers(
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: setp.eq.u32 [[FIRST:%p[0-9]+]], {{%r[0-9]+}}, 0;
// CHECK: @![[FIRST]] bra $barriers_ready_0;
// CHECK: mbarrier.init.shared::cta.b64 [[[BASE]]], 128;
// CHECK: mbarrier.init.shared::cta.b64 [[[BASE]]+8], 128;
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: $barriers_ready_0:
// CHECK: bar.sync 0;
// CHECK: @{{%p[0-9]+}} mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[BASE]]+8], 4096;
// CHECK: mbarrier.arrive.shared::cta.b64 _, [[[BASE]]];
// CHECK: and.b32 [[PARITY:%r[0-9]+]], {{%r[0-9]+}}, 1;
// CHECK: $wait_0:
// CHECK: mbarrier.try_wait.parity.shared::cta.b64 [[DONE:%p[0-9]+]], [[[BASE]]], [[PARITY]];
// CHECK: @![[DONE]] bra $wait_0;
// CHECK: bar.sync 1, 128;
// The cluster barrier: arrive (release) then wait (acquire), every thread of every CTA.
// CHECK-NEXT: barrier.cluster.arrive.aligned;
// CHECK-NEXT: barrier.cluster.wait.aligned;
// CHECK-NEXT: ret;
func.func @barriers(%phase: i32) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 128 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c1) {bytes = 4096 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.arrive"(%bars, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c0, %phase) : (memref<2xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  "smalti.cluster_barrier"() : () -> ()
  return
}
