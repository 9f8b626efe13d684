// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s

// Before an mbarrier's bytes hold anything else (PTX ISA, mbarrier.inval): the block meets,
// thread 0 invalidates every barrier of the array, the block meets again; then the bytes
// are stored to as data. The buffer's address and the thread index are read afresh, not
// kept live from the prologue (through a pipeline's loop they would cost registers there).
// CHECK-LABEL: .visible .entry invalidate(
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: mbarrier.init.shared::cta.b64 [[[BASE]]], 1;
// CHECK: mbarrier.init.shared::cta.b64 [[[BASE]]+8], 1;
// CHECK: $barriers_ready_0:
// CHECK-NEXT: bar.sync 0;
// CHECK-NEXT: bar.sync 0;
// CHECK-NEXT: mov.u32 [[AGAIN:%r[0-9]+]], smalti_smem;
// CHECK-NEXT: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT: setp.eq.u32 [[FIRST:%p[0-9]+]], [[TID]], 0;
// CHECK-NEXT: @[[FIRST]] mbarrier.inval.shared::cta.b64 [[[AGAIN]]];
// CHECK-NEXT: @[[FIRST]] mbarrier.inval.shared::cta.b64 [[[AGAIN]]+8];
// CHECK-NEXT: bar.sync 0;
// CHECK: st.shared
func.func @invalidate(%x: memref<128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.invalidate_barrier"(%bars) : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  %data = "smalti.slice_smem"(%c0) : (index) -> memref<128xf32, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%x, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  "smalti.vector_store"(%v, %data, %c0) : (vector<128xf32>, memref<128xf32, #gpu.address_space<workgroup>>, index) -> ()
  %w = "smalti.vector_load"(%data, %c0) : (memref<128xf32, #gpu.address_space<workgroup>>, index) -> vector<128xf32>
  "smalti.vector_store"(%w, %x, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}
