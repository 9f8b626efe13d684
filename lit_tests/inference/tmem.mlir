// RUN: smalti-opt %s --split-input-file --smalti-infer-layouts | filecheck %s

// Tensor memory (smalti/dialect/ops_tmem.py). tmem_load's result and tmem_store's value
// take a layout some tcgen05.ld/st data movement shape realises (smalti.tiling.tmem_accesses),
// the .32x32b one (a row per thread) preferred; the TMEM refs get no attributes.

// A value loaded from global memory and stored to TMEM takes the .32x32b layout (vector_load
// accepts any distributed layout); the value loaded back, which is stored, takes .32x32b's
// threads with 16 bytes of a row (4 f32) to a register vector: tcgen05.ld.32x32b moves it
// register for register, and the store writes 16 bytes at a time.
// CHECK-LABEL: func.func @roundtrip_f32
// CHECK: "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
// CHECK: "smalti.vector_load"({{.*}}) {out_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 1], [32, 1]], warp = [-4], lane = [-2], vector = -1>]}
// CHECK: "smalti.tmem_store"({{.*}}) {column = 64 : i64, in_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 1], [32, 1]], warp = [-4], lane = [-2], vector = -1>]}
// CHECK: "smalti.tmem_load"({{.*}}) {column = 64 : i64, out_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 4], [32, 4]], warp = [-4], lane = [-2], vector = -1>]}
// CHECK: "smalti.tmem_dealloc"(%{{.*}}) : (memref<128x128xf32, "tmem">) -> ()
func.func @roundtrip_f32(%a: memref<128x64xf32>, %out: memref<128x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  "smalti.tmem_store"(%v, %t) {column = 64 : i64} : (vector<128x64xf32>, memref<128x128xf32, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) {column = 64 : i64} : (memref<128x128xf32, "tmem">) -> vector<128x64xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
  return
}

// -----

// 16-bit elements: the .32x32b layout packs two adjacent columns to a register (vector of 2);
// the stored value loaded back has 8 (16 bytes) to a vector.
// CHECK-LABEL: func.func @roundtrip_bf16
// CHECK: "smalti.tmem_store"({{.*}}) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 2], [32, 2]], warp = [-4], lane = [-2], vector = -1>]}
// CHECK: "smalti.tmem_load"({{.*}}) {out_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 8], [32, 8]], warp = [-4], lane = [-2], vector = -1>]}
func.func @roundtrip_bf16(%a: memref<128x64xbf16>, %out: memref<128x64xbf16>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x64xbf16, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xbf16>, index, index) -> vector<128x64xbf16>
  "smalti.tmem_store"(%v, %t) : (vector<128x64xbf16>, memref<128x64xbf16, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) : (memref<128x64xbf16, "tmem">) -> vector<128x64xbf16>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xbf16>, memref<128x64xbf16>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xbf16, "tmem">) -> ()
  return
}

// -----

// A layout_cast to the .16x256b layout (the wgmma accumulator's pattern) before the store:
// the store keeps it (tcgen05.st.16x256b moves it), the load (stored) still prefers .32x32b's
// threads, 4 columns to a vector.
// CHECK-LABEL: func.func @stored_16x256b
// CHECK: "smalti.tmem_store"({{.*}}) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 8], [32, 8], [16, 8], [8, 8], [1, 2]], warp = [-10], lane = [-4, -3], vector = -1>]}
// CHECK: "smalti.tmem_load"({{.*}}) {out_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 4], [32, 4]], warp = [-4], lane = [-2], vector = -1>]}
func.func @stored_16x256b(%a: memref<128x64xf32>, %out: memref<128x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %c = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[128, 8], [32, 8], [16, 8], [8, 8], [1, 2]], warp = [-10], lane = [-4, -3], vector = -1>} : (vector<128x64xf32>) -> vector<128x64xf32>
  "smalti.tmem_store"(%c, %t) : (vector<128x64xf32>, memref<128x64xf32, "tmem">) -> ()
  %w = "smalti.tmem_load"(%t) : (memref<128x64xf32, "tmem">) -> vector<128x64xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  "smalti.tmem_relinquish_alloc_permit"() : () -> ()
  return
}

// -----

// A value fixed to a layout no tcgen05.st moves (strided) is relaid out into the preferred
// .32x32b layout before the store: inference inserts the layout_cast.
// CHECK-LABEL: func.func @stored_strided
// CHECK: "smalti.layout_cast"({{.*}}) {in_layouts = [#smalti.strided<vec = 4>], inferred = "smem", new_layout = #smalti.tiled<tiling = {{\[\[}}128, 1], [32, 1]], warp = [-4], lane = [-2], vector = -1>, out_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 1], [32, 1]], warp = [-4], lane = [-2], vector = -1>]}
// CHECK-NEXT: "smalti.tmem_store"({{.*}}) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 1], [32, 1]], warp = [-4], lane = [-2], vector = -1>]}
func.func @stored_strided(%a: memref<128x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %c = "smalti.layout_cast"(%v) {new_layout = #smalti.strided<vec = 4>} : (vector<128x64xf32>) -> vector<128x64xf32>
  "smalti.tmem_store"(%c, %t) : (vector<128x64xf32>, memref<128x64xf32, "tmem">) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  return
}

// -----

// The epilogue's pattern: an f32 accumulator loaded, rounded to bf16 (elementwise: the same
// layout) and stored. The load takes .32x32b's threads with 8 columns (16 bytes of bf16) to
// a register vector, so the store writes 16 bytes at a time; tcgen05.ld.32x32b.x32 moves it
// register for register.
// CHECK-LABEL: func.func @rounded_and_stored
// CHECK: "smalti.tmem_load"({{.*}}) {out_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 8], [32, 8]], warp = [-4], lane = [-2], vector = -1>]}
// CHECK: arith.truncf {{.*}} {in_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 8], [32, 8]], warp = [-4], lane = [-2], vector = -1>]
// CHECK: "smalti.vector_store"({{.*}}) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 8], [32, 8]], warp = [-4], lane = [-2], vector = -1>]}
func.func @rounded_and_stored(%out: memref<128x32xbf16>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  %w = "smalti.tmem_load"(%t) : (memref<128x32xf32, "tmem">) -> vector<128x32xf32>
  %h = arith.truncf %w : vector<128x32xf32> to vector<128x32xbf16>
  "smalti.vector_store"(%h, %out, %c0, %c0) : (vector<128x32xbf16>, memref<128x32xbf16>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x32xf32, "tmem">) -> ()
  return
}

// -----

// A loaded value that is never stored (here: doubled and stored back to TMEM) keeps the
// .32x32b layout itself, a 32-bit column to a register.
// CHECK-LABEL: func.func @not_stored
// CHECK: "smalti.tmem_load"({{.*}}) {out_layouts = [#smalti.tiled<tiling = {{\[\[}}128, 1], [32, 1]], warp = [-4], lane = [-2], vector = -1>]}
func.func @not_stored() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  %w = "smalti.tmem_load"(%t) : (memref<128x32xf32, "tmem">) -> vector<128x32xf32>
  %d = arith.addf %w, %w : vector<128x32xf32>
  "smalti.tmem_store"(%d, %t) : (vector<128x32xf32>, memref<128x32xf32, "tmem">) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x32xf32, "tmem">) -> ()
  return
}
