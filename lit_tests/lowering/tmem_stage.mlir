// RUN: smalti-translate %s --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS

// tmem_stage (smalti/lowering/tmem.py): stage %k of a 128-column f32 ref split into 2 is
// the ref's address plus k x 64 columns (the column is the address's low 16 bits), one
// mad.lo.u32; the store through it is an ordinary tcgen05.st at that address. Block b
// zeroes its region, stores %a's 64 columns into stage b, and loads all 128 columns back.
// CHECK-LABEL: .visible .entry staged(
// CHECK:       ld.shared.b32 [[T:%r[0-9]+]], [{{%r[0-9]+}}];
// CHECK:       tcgen05.st.sync.aligned.32x32b.x128.b32
// CHECK:       mov.u32 [[B:%r[0-9]+]], %ctaid.x;
// CHECK:       cvt.u32.u64 [[K:%r[0-9]+]], {{%rd[0-9]+}};
// CHECK-NEXT:  mad.lo.u32 [[S:%r[0-9]+]], [[K]], 64, [[T]];
// CHECK:       add.u32 [[W:%r[0-9]+]], [[S]], {{%r[0-9]+}};
// CHECK-NEXT:  tcgen05.st.sync.aligned.32x32b.x64.b32 [[[W]]], {{{.*}}};
// CHECK:       tcgen05.ld.sync.aligned.32x32b.x128.b32
// SASS-LABEL: .text.staged:
// SASS:       STTM.x64
func.func @staged(%a: memref<256x64xf32>, %out: memref<256x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  %zero = arith.constant dense<0.0> : vector<128x128xf32>
  "smalti.tmem_store"(%zero, %t) : (vector<128x128xf32>, memref<128x128xf32, "tmem">) -> ()
  %b = gpu.block_id x
  %row = arith.muli %b, %c128 : index
  %s = "smalti.tmem_stage"(%t, %b) {stages = 2 : i64} : (memref<128x128xf32, "tmem">, index) -> memref<128x64xf32, "tmem">
  %v = "smalti.vector_load"(%a, %row, %c0) : (memref<256x64xf32>, index, index) -> vector<128x64xf32>
  "smalti.tmem_store"(%v, %s) : (vector<128x64xf32>, memref<128x64xf32, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) : (memref<128x128xf32, "tmem">) -> vector<128x128xf32>
  "smalti.vector_store"(%w, %out, %row, %c0) : (vector<128x128xf32>, memref<256x128xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
  "smalti.tmem_relinquish_alloc_permit"() : () -> ()
  return
}
