// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// Tensor memory ops (smalti/dialect/ops_tmem.py): allocation sizes, TMEM refs, and the
// vectors tmem_load / tmem_store move.

// ---- tmem_alloc

func.func @alloc_columns_not_a_power_of_two() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'smalti.tmem_alloc' op 'columns' must be a power of two from 32 to 512, got 96}}
  %t = "smalti.tmem_alloc"() {columns = 96 : i64} : () -> memref<128x96xf32, "tmem">
  return
}

// -----

func.func @alloc_columns_too_few() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'columns' must be a power of two from 32 to 512, got 16}}
  %t = "smalti.tmem_alloc"() {columns = 16 : i64} : () -> memref<128x16xf32, "tmem">
  return
}

// -----

func.func @alloc_columns_too_many() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'columns' must be a power of two from 32 to 512, got 1024}}
  %t = "smalti.tmem_alloc"() {columns = 1024 : i64} : () -> memref<128x1024xf32, "tmem">
  return
}

// -----

func.func @alloc_columns_missing() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'smalti.tmem_alloc' op requires an integer 'columns' attribute}}
  %t = "smalti.tmem_alloc"() : () -> memref<128x32xf32, "tmem">
  return
}

// -----

func.func @alloc_result_not_tmem() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'smalti.tmem_alloc' op expects the result to be a TMEM memref (memref<LANESxCOLUMNSxT, "tmem">), got memref<128x32xf32, #gpu.address_space<workgroup>>}}
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @alloc_result_columns_differ() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{the result memref<128x64xbf16, "tmem"> spans 32 TMEM columns, not the 64 allocated}}
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xbf16, "tmem">
  return
}

// -----

func.func @alloc_result_64_lanes() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{expects the result to span all 128 lanes, got 64}}
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<64x32xf32, "tmem">
  return
}

// -----

func.func @alloc_result_too_wide() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{the result spans 1024 TMEM columns; a CTA has 512}}
  %t = "smalti.tmem_alloc"() {columns = 512 : i64} : () -> memref<128x1024xf32, "tmem">
  return
}

// -----

// ---- tmem_dealloc, tmem_relinquish_alloc_permit

func.func @dealloc_not_tmem(%a: memref<128x32xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'smalti.tmem_dealloc' op expects the ref to be a TMEM memref (memref<LANESxCOLUMNSxT, "tmem">), got memref<128x32xf32>}}
  "smalti.tmem_dealloc"(%a) : (memref<128x32xf32>) -> ()
  return
}

// -----

func.func @dealloc_not_from_alloc(%t: memref<128x32xf32, "tmem">) {
  // expected-error @+1 {{'smalti.tmem_dealloc' op expects the result of a smalti.tmem_alloc (the region to free)}}
  "smalti.tmem_dealloc"(%t) : (memref<128x32xf32, "tmem">) -> ()
  return
}

// -----

func.func @dealloc_two_operands() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_dealloc' op}}
  "smalti.tmem_dealloc"(%t, %t) : (memref<128x32xf32, "tmem">, memref<128x32xf32, "tmem">) -> ()
  return
}

// -----

func.func @relinquish_with_operand() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_relinquish_alloc_permit' op}}
  "smalti.tmem_relinquish_alloc_permit"(%t) : (memref<128x32xf32, "tmem">) -> ()
  return
}

// -----

// ---- tmem_load

func.func @load_from_global(%a: memref<128x32xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'smalti.tmem_load' op expects the ref to load from to be a TMEM memref (memref<LANESxCOLUMNSxT, "tmem">), got memref<128x32xf32>}}
  %v = "smalti.tmem_load"(%a) : (memref<128x32xf32>) -> vector<128x32xf32>
  return
}

// -----

func.func @load_element_type() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_load' op element type i32 of the vector does not match element type f32 of the TMEM ref}}
  %v = "smalti.tmem_load"(%t) : (memref<128x32xf32, "tmem">) -> vector<128x32xi32>
  return
}

// -----

func.func @load_8bit() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x128xi8, "tmem">
  // expected-error @+1 {{'smalti.tmem_load' op moves 32- or 16-bit elements, got i8}}
  %v = "smalti.tmem_load"(%t) : (memref<128x128xi8, "tmem">) -> vector<128x128xi8>
  return
}

// -----

func.func @load_rows() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_load' op expects a vector<128xCxf32> (one row per TMEM lane), got vector<64x32xf32>}}
  %v = "smalti.tmem_load"(%t) : (memref<128x32xf32, "tmem">) -> vector<64x32xf32>
  return
}

// -----

func.func @load_out_of_bounds() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_load' op columns [48, 80) are out of bounds for memref<128x64xf32, "tmem">}}
  %v = "smalti.tmem_load"(%t) {column = 48 : i64} : (memref<128x64xf32, "tmem">) -> vector<128x32xf32>
  return
}

// -----

func.func @load_negative_column() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_load' op 'column' must be at least 0, got -32}}
  %v = "smalti.tmem_load"(%t) {column = -32 : i64} : (memref<128x64xf32, "tmem">) -> vector<128x32xf32>
  return
}

// -----

func.func @load_half_column() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x64xbf16, "tmem">
  // expected-error @+1 {{'smalti.tmem_load' op 'column' 1 does not start a 32-bit TMEM column (2 elements of bf16 each)}}
  %v = "smalti.tmem_load"(%t) {column = 1 : i64} : (memref<128x64xbf16, "tmem">) -> vector<128x32xbf16>
  return
}

// -----

// ---- tmem_store

func.func @store_to_shared() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %v = arith.constant dense<1.0> : vector<128x32xf32>
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<128x32xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.tmem_store' op expects the ref to store to to be a TMEM memref}}
  "smalti.tmem_store"(%v, %s) : (vector<128x32xf32>, memref<128x32xf32, #gpu.address_space<workgroup>>) -> ()
  return
}

// -----

func.func @store_not_a_vector(%x: f32) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_store' op expects the value to be a vector, got f32}}
  "smalti.tmem_store"(%x, %t) : (f32, memref<128x32xf32, "tmem">) -> ()
  return
}

// -----

func.func @store_out_of_bounds() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %v = arith.constant dense<1.0> : vector<128x64xf32>
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x32xf32, "tmem">
  // expected-error @+1 {{'smalti.tmem_store' op columns [0, 64) are out of bounds for memref<128x32xf32, "tmem">}}
  "smalti.tmem_store"(%v, %t) : (vector<128x64xf32>, memref<128x32xf32, "tmem">) -> ()
  return
}

// -----

// ---- unpacked 16-bit refs: strided<[2C, 2]>, one element per 32-bit column

func.func @unpacked_f32() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{expects the result to have the identity layout (packed) or, for 16-bit elements, strided<[128, 2]> (one per 32-bit column), got memref<128x64xf32, strided<[128, 2]>, "tmem">}}
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, strided<[128, 2]>, "tmem">
  return
}

// -----

func.func @unpacked_wrong_row_stride() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{expects the result to have the identity layout (packed) or, for 16-bit elements, strided<[128, 2]> (one per 32-bit column), got memref<128x64xf16, strided<[64, 2]>, "tmem">}}
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf16, strided<[64, 2]>, "tmem">
  return
}

// -----

// 64 unpacked f16 elements span 64 columns, not the 32 64 packed ones would.
func.func @unpacked_columns() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{the result memref<128x64xf16, strided<[128, 2]>, "tmem"> spans 64 TMEM columns, not the 32 allocated}}
  %t = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x64xf16, strided<[128, 2]>, "tmem">
  return
}

// -----

// ---- tmem_stage: equal stages, each starting a 32-bit column, of the source's type

func.func @stage_unequal(%t: memref<128x96xf32, "tmem">, %k: index) {
  // expected-error @+1 {{'smalti.tmem_stage' op the source's 96 columns do not split into 5 equal stages}}
  %s = "smalti.tmem_stage"(%t, %k) {stages = 5 : i64} : (memref<128x96xf32, "tmem">, index) -> memref<128x19xf32, "tmem">
  return
}

// -----

func.func @stage_result_type(%t: memref<128x128xf32, "tmem">, %k: index) {
  // expected-error @+1 {{expects the result memref<128x64xf32, "tmem"> (a stage of memref<128x128xf32, "tmem">), got memref<128x64xbf16, "tmem">}}
  %s = "smalti.tmem_stage"(%t, %k) {stages = 2 : i64} : (memref<128x128xf32, "tmem">, index) -> memref<128x64xbf16, "tmem">
  return
}

// -----

func.func @stage_unpacked_layout(%t: memref<128x128xf16, strided<[256, 2]>, "tmem">, %k: index) {
  // expected-error @+1 {{expects the result memref<128x64xf16, strided<[128, 2]>, "tmem"> (a stage of memref<128x128xf16, strided<[256, 2]>, "tmem">), got memref<128x64xf16, "tmem">}}
  %s = "smalti.tmem_stage"(%t, %k) {stages = 2 : i64} : (memref<128x128xf16, strided<[256, 2]>, "tmem">, index) -> memref<128x64xf16, "tmem">
  return
}

// -----

func.func @stage_splits_a_column(%t: memref<128x6xbf16, "tmem">, %k: index) {
  // expected-error @+1 {{a stage of 3 columns of bf16 does not start a 32-bit TMEM column (2 elements each)}}
  %s = "smalti.tmem_stage"(%t, %k) {stages = 2 : i64} : (memref<128x6xbf16, "tmem">, index) -> memref<128x3xbf16, "tmem">
  return
}

// -----

func.func @stage_out_of_range(%t: memref<128x128xf32, "tmem">) {
  %c2 = arith.constant 2 : index
  // expected-error @+1 {{stage 2 is out of range for 2 stages}}
  %s = "smalti.tmem_stage"(%t, %c2) {stages = 2 : i64} : (memref<128x128xf32, "tmem">, index) -> memref<128x64xf32, "tmem">
  return
}
