// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS

// Tensor memory (smalti/lowering/tmem.py), sm_100a. tmem_alloc: warp 0 of the warpgroup
// allocates (a warp-uniform branch around tcgen05.alloc), writing the address to a static
// shared slot; the warpgroup meets between tcgen05 fences and every thread reads the slot.
// tmem_store / tmem_load: one tcgen05.st / ld per warp and instruction of the layout's
// data movement shape (a loaded value that is stored has 16 bytes of its row to a register
// vector: the .32x32b registers regrouped, one 16-byte store each), at the warp's lanes (lane in the upper 16 bits of the address: the
// warp's 32 * warp lanes shifted left by 16) and the first column, then a wait and a
// tcgen05.fence::before_thread_sync (the access ordered before any later thread sync: a
// release of the cells to another role).
// tmem_dealloc: the warpgroup meets (fenced) and warp 0 frees the columns. The second RUN
// line assembles every kernel with ptxas (STTM / LDTM in SASS).

// CHECK:       .version 8.6
// CHECK:       .target sm_100a
// CHECK-LABEL: .visible .entry roundtrip(
// CHECK:       .shared .align 4 .b8 [[SLOT:__smalti_tmem_slot_[0-9]+]][4];
// CHECK:       mov.u32 [[SLOTA:%r[0-9]+]], [[SLOT]];
// CHECK-NEXT:  mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT:  setp.ge.u32 [[NOT0:%p[0-9]+]], [[TID]], 32;
// CHECK-NEXT:  @[[NOT0]] bra [[SKIP:\$tmem_warp0_end_[0-9]+]];
// CHECK-NEXT:  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [[[SLOTA]]], 128;
// CHECK-NEXT:  [[SKIP]]:
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 1, 128;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK-NEXT:  ld.shared.b32 [[TADDR:%r[0-9]+]], [[[SLOTA]]];
// CHECK:       and.b32 [[LANES:%r[0-9]+]], [[TID]], 96;
// CHECK-NEXT:  shl.b32 [[LANEBITS:%r[0-9]+]], [[LANES]], 16;
// CHECK-NEXT:  add.u32 [[WARPADDR:%r[0-9]+]], [[TADDR]], [[LANEBITS]];
// CHECK-NEXT:  add.u32 [[ST:%r[0-9]+]], [[WARPADDR]], 64;
// CHECK-NEXT:  tcgen05.st.sync.aligned.32x32b.x64.b32 [[[ST]]], {%f0, %f1, {{.*}}, %f63};
// CHECK-NEXT:  tcgen05.wait::st.sync.aligned;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  add.u32 [[WARPADDR2:%r[0-9]+]], [[TADDR]], [[LANEBITS]];
// CHECK-NEXT:  add.u32 [[LD:%r[0-9]+]], [[WARPADDR2]], 64;
// CHECK-NEXT:  tcgen05.ld.sync.aligned.32x32b.x64.b32 {%f64, %f65, {{.*}}, %f127}, [[[LD]]];
// CHECK-NEXT:  tcgen05.wait::ld.sync.aligned;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK:       st.global.v4.f32 [{{.*}}], {%f64, %f65, %f66, %f67};
// CHECK:       tcgen05.fence::before_thread_sync;
// CHECK-NEXT:  bar.sync 1, 128;
// CHECK-NEXT:  tcgen05.fence::after_thread_sync;
// CHECK-NEXT:  @[[NOT0]] bra [[SKIP2:\$tmem_warp0_end_[0-9]+]];
// CHECK-NEXT:  tcgen05.dealloc.cta_group::1.sync.aligned.b32 [[TADDR]], 128;
// CHECK-NEXT:  [[SKIP2]]:
// CHECK-NEXT:  @[[NOT0]] bra [[SKIP3:\$tmem_warp0_end_[0-9]+]];
// CHECK-NEXT:  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
// CHECK-NEXT:  [[SKIP3]]:
// SASS-LABEL: .text.roundtrip:
// SASS:       STTM.x64
// SASS:       LDTM.x64
func.func @roundtrip(%a: memref<128x64xf32>, %out: memref<128x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  "smalti.tmem_store"(%v, %t) {column = 64 : i64} : (vector<128x64xf32>, memref<128x128xf32, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) {column = 64 : i64} : (memref<128x128xf32, "tmem">) -> vector<128x64xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
  "smalti.tmem_relinquish_alloc_permit"() : () -> ()
  return
}

// -----

// The .16x256b layout (the wgmma accumulator's pattern): a warp's 32 lanes take two
// instructions, the second 16 lanes on (16 << 16 = 1048576); 64 f32 columns are .x8.
// CHECK-LABEL: .visible .entry store_16x256b(
// CHECK:       add.u32 [[W:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT:  add.u32 [[H:%r[0-9]+]], [[W]], 1048576;
// CHECK-NEXT:  tcgen05.st.sync.aligned.16x256b.x8.b32 [[[W]]], {%f0, %f1, %f2, %f3, %f8, {{.*}}};
// CHECK-NEXT:  tcgen05.st.sync.aligned.16x256b.x8.b32 [[[H]]], {%f4, %f5, %f6, %f7, %f12, {{.*}}};
// CHECK-NEXT:  tcgen05.wait::st.sync.aligned;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK:       tcgen05.ld.sync.aligned.32x32b.x64.b32
// CHECK-NEXT:  tcgen05.wait::ld.sync.aligned;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// SASS-LABEL: .text.store_16x256b:
// SASS:       STTM.16dp256bit.x8
func.func @store_16x256b(%a: memref<128x64xf32>, %out: memref<128x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %c = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[128, 8], [32, 8], [16, 8], [8, 8], [1, 2]], warp = [-10], lane = [-4, -3], vector = -1>} : (vector<128x64xf32>) -> vector<128x64xf32>
  "smalti.tmem_store"(%c, %t) : (vector<128x64xf32>, memref<128x64xf32, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) : (memref<128x64xf32, "tmem">) -> vector<128x64xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  return
}

// -----

// 16-bit elements pack two columns to a .b32 register (no .pack::16b): 64 bf16 columns
// at column 64 (32-bit column 32) are .32x32b.x32.
// CHECK-LABEL: .visible .entry bf16(
// CHECK:       add.u32 [[A:%r[0-9]+]], {{%r[0-9]+}}, 32;
// CHECK-NEXT:  tcgen05.st.sync.aligned.32x32b.x32.b32 [[[A]]], {{{.*}}};
// CHECK:       tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{.*}}}, [{{%r[0-9]+}}];
// CHECK-NEXT:  tcgen05.wait::ld.sync.aligned;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK:       tcgen05.dealloc.cta_group::1.sync.aligned.b32 {{%r[0-9]+}}, 64;
// SASS-LABEL: .text.bf16:
// SASS:       STTM.x32
// SASS:       LDTM.x32
func.func @bf16(%a: memref<128x64xbf16>, %out: memref<128x64xbf16>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x128xbf16, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xbf16>, index, index) -> vector<128x64xbf16>
  "smalti.tmem_store"(%v, %t) {column = 64 : i64} : (vector<128x64xbf16>, memref<128x128xbf16, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) : (memref<128x128xbf16, "tmem">) -> vector<128x64xbf16>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xbf16>, memref<128x64xbf16>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xbf16, "tmem">) -> ()
  return
}

// -----

// Two warpgroups: each allocates its own region; its slot is the warpgroup's 4 bytes.
// CHECK-LABEL: .visible .entry two_warpgroups(
// CHECK:       .shared .align 4 .b8 [[SLOT:__smalti_tmem_slot_[0-9]+]][8];
// CHECK:       mov.u32 [[S:%r[0-9]+]], [[SLOT]];
// CHECK:       shr.u32 [[WG:%r[0-9]+]], %{{r[0-9]+}}, 7;
// CHECK-NEXT:  mad.lo.u32 [[MINE:%r[0-9]+]], [[WG]], 4, [[S]];
// CHECK:       tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [[[MINE]]], 32;
// CHECK:       ld.shared.b32 {{%r[0-9]+}}, [[[MINE]]];
// SASS-LABEL: .text.two_warpgroups:
// SASS:       STTM.x32
func.func @two_warpgroups(%a: memref<128x32xi32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xi32, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x32xi32>, index, index) -> vector<128x32xi32>
  "smalti.tmem_store"(%v, %t) : (vector<128x32xi32>, memref<128x32xi32, "tmem">) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x32xi32, "tmem">) -> ()
  return
}

// -----

// An unpacked f16 ref (strided<[2C, 2]>: one element in the low half of each 32-bit
// column) from column 33: the column is the 32-bit column; the stores take .unpack::16b and
// the loads .pack::16b (a register, two 16-bit elements, spans two columns), here .16x128b
// (two instructions per warp, the second 16 lanes on) and .32x32b.
// CHECK-LABEL: .visible .entry unpacked(
// CHECK:       tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{{%r[0-9]+}}], 128;
// CHECK:       add.u32 [[W:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT:  add.u32 [[A:%r[0-9]+]], [[W]], 33;
// CHECK-NEXT:  add.u32 [[H:%r[0-9]+]], [[W]], 1048609;
// CHECK-NEXT:  tcgen05.st.sync.aligned.16x128b.x8.unpack::16b.b32 [[[A]]], {{{.*}}};
// CHECK-NEXT:  tcgen05.st.sync.aligned.16x128b.x8.unpack::16b.b32 [[[H]]], {{{.*}}};
// CHECK-NEXT:  tcgen05.wait::st.sync.aligned;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// CHECK:       add.u32 [[L:%r[0-9]+]], {{%r[0-9]+}}, 33;
// CHECK-NEXT:  tcgen05.ld.sync.aligned.32x32b.x32.pack::16b.b32 {{{.*}}}, [[[L]]];
// CHECK-NEXT:  tcgen05.wait::ld.sync.aligned;
// CHECK-NEXT:  tcgen05.fence::before_thread_sync;
// SASS-LABEL: .text.unpacked:
// SASS:       STTM.16dp128bit.x8.EXPAND16BIT
// SASS:       LDTM.x32.PACK16BIT
func.func @unpacked(%a: memref<128x64xf16>, %out: memref<128x64xf16>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf16, strided<[256, 2]>, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf16>, index, index) -> vector<128x64xf16>
  %c = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[128, 8], [32, 8], [16, 8], [8, 8], [1, 2]], warp = [-10], lane = [-4, -3], vector = -1>} : (vector<128x64xf16>) -> vector<128x64xf16>
  "smalti.tmem_store"(%c, %t) {column = 33 : i64} : (vector<128x64xf16>, memref<128x128xf16, strided<[256, 2]>, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) {column = 33 : i64} : (memref<128x128xf16, strided<[256, 2]>, "tmem">) -> vector<128x64xf16>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf16>, memref<128x64xf16>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf16, strided<[256, 2]>, "tmem">) -> ()
  "smalti.tmem_relinquish_alloc_permit"() : () -> ()
  return
}
