// RUN: smalti-translate %s --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS

// tmem_alloc_shared (smalti/lowering/tmem_shared.py), sm_100a: warp 0 of warpgroup 1 (warp
// 4 of the block) allocates into a static shared slot, the whole block meets between the
// tcgen05 fences and reads the address back, before the roles branch off (and set their
// register budgets); warpgroup 0 stores into the region, and warpgroup 1 frees it in its
// own region (tmem_dealloc: its warpgroup meets, its warp 0 deallocates). SASS: it
// assembles, with the budgets honoured.

// CHECK-LABEL: .visible .entry shared_acc(
// CHECK:       .shared .align 4 .b8 [[SLOT:__smalti_tmem_shared_slot_0]][4];
// CHECK:       mov.u32 [[ADDRESS:%r[0-9]+]], [[SLOT]];
// CHECK-NEXT:  mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT:  shr.u32 [[WARP:%r[0-9]+]], [[TID]], 5;
// CHECK-NEXT:  setp.ne.u32 [[OTHERS:%p[0-9]+]], [[WARP]], 4;
// CHECK-NEXT:  @[[OTHERS]] bra [[DONE:\$tmem_shared_allocated_0]];
// CHECK-NEXT:  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [[[ADDRESS]]], 32;
// CHECK-NEXT:  [[DONE]]:
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 0;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK-NEXT:  ld.shared.b32 [[TMEM:%r[0-9]+]], [[[ADDRESS]]];
// CHECK:       setmaxnreg.dec.sync.aligned.u32 40;
// CHECK:       tcgen05.st.sync.aligned.32x32b.x32.b32
// CHECK:       $role_end_0:
// CHECK:       setmaxnreg.dec.sync.aligned.u32 232;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 2, 128;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK:       tcgen05.dealloc.cta_group::1.sync.aligned.b32 [[TMEM]], 32;
// SASS-LABEL: .text.shared_acc:
// SASS:        USETMAXREG
// SASS:        UTCATOMSWS

func.func @shared_acc(%out: memref<128x32xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  %acc = "smalti.tmem_alloc_shared"() {columns = 32 : i64, warpgroup = 1 : i64} : () -> memref<128x32xf32, "tmem">
  "smalti.warpgroup_region"() ({
    %v = arith.constant dense<2.0> : vector<128x32xf32>
    "smalti.tmem_store"(%v, %acc) : (vector<128x32xf32>, memref<128x32xf32, "tmem">) -> ()
  }) {warpgroup = 0 : i64, max_registers = 40 : i64} : () -> ()
  "smalti.warpgroup_region"() ({
    "smalti.tmem_dealloc"(%acc) : (memref<128x32xf32, "tmem">) -> ()
  }) {warpgroup = 1 : i64, max_registers = 232 : i64} : () -> ()
  return
}
