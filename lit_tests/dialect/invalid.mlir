// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

func.func @load_from_scalar(%a: f32) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.vector_load' op expects a memref to load from, got f32}}
  %v = "smalti.vector_load"(%a, %c0) : (f32, index) -> vector<128xf32>
  return
}

// -----

func.func @load_wrong_element_type(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{element type bf16 of the vector does not match element type f32 of the memref}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xbf16>
  return
}

// -----

func.func @load_wrong_index_count(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{expects 2 indices for memref<128x256xf32>, got 1}}
  %v = "smalti.vector_load"(%a, %c0) : (memref<128x256xf32>, index) -> vector<128x128xf32>
  return
}

// -----

func.func @load_out_of_bounds(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %c192 = arith.constant 192 : index
  // expected-error @+1 {{slice [192, 320) of dim 1 is out of bounds for memref<128x256xf32>}}
  %v = "smalti.vector_load"(%a, %c0, %c192) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  return
}

// -----

func.func @load_too_big(%a: memref<128x64xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{vector dim 1 of size 128 exceeds memref dim of size 64}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x128xf32>
  return
}

// -----

func.func @load_index_type(%a: memref<128x256xf32>, %i: i32) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{index #1 must have type index, got i32}}
  %v = "smalti.vector_load"(%a, %c0, %i) : (memref<128x256xf32>, index, i32) -> vector<128x128xf32>
  return
}

// -----

func.func @load_private(%a: memref<128x128xf32, #gpu.address_space<private>>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{memory space #gpu.address_space<private> is not supported}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32, #gpu.address_space<private>>, index, index) -> vector<128x128xf32>
  return
}

// -----

func.func @load_rank(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{vector rank 1 does not match memref rank 2}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128xf32>
  return
}

// -----

func.func @load_results(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.vector_load' op expects 1 results, got 0}}
  "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> ()
  return
}

// -----

func.func @store_to_vector(%v: vector<128x128xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.vector_store' op expects a memref to store to, got vector<128x128xf32>}}
  "smalti.vector_store"(%v, %v, %c0, %c0) : (vector<128x128xf32>, vector<128x128xf32>, index, index) -> ()
  return
}

// -----

func.func @store_scalar(%a: memref<128x256xf32>, %x: f32) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{expects a vector value, got f32}}
  "smalti.vector_store"(%x, %a, %c0, %c0) : (f32, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

func.func @store_missing_operands(%v: vector<128x128xf32>) {
  // expected-error @+1 {{'smalti.vector_store' op expects at least 2 operands, got 1 (its operands: value, destination, indices...)}}
  "smalti.vector_store"(%v) : (vector<128x128xf32>) -> ()
  return
}

// -----

func.func @cast_without_layout(%v: vector<128x128xf32>) {
  // expected-error @+1 {{'smalti.layout_cast' op requires a #smalti layout 'new_layout' attribute: the layout the result has}}
  %w = "smalti.layout_cast"(%v) : (vector<128x128xf32>) -> vector<128x128xf32>
  return
}

// -----

func.func @cast_changes_type(%v: vector<128x128xf32>) {
  // expected-error @+1 {{result type vector<128x128xbf16> differs from operand type vector<128x128xf32>}}
  %w = "smalti.layout_cast"(%v) {new_layout = #smalti.splat} : (vector<128x128xf32>) -> vector<128x128xbf16>
  return
}

// -----

func.func @cast_bad_layout(%v: vector<128x128xf32>) {
  // expected-error @+1 {{'new_layout' unknown layout #smalti.blocked}}
  %w = "smalti.layout_cast"(%v) {new_layout = #smalti.blocked} : (vector<128x128xf32>) -> vector<128x128xf32>
  return
}

// -----

func.func @cast_layout_does_not_fit(%v: vector<64x12xf32>) {
  // expected-error @+1 {{'new_layout' tile [64, 8] does not divide shape [64, 12]}}
  %w = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x12xf32>) -> vector<64x12xf32>
  return
}

// -----

func.func @cast_scalar(%x: f32) {
  // expected-error @+1 {{expects a vector operand, got f32}}
  %w = "smalti.layout_cast"(%x) {new_layout = #smalti.splat} : (f32) -> f32
  return
}

// -----

func.func @unknown_op() {
  // expected-error @+1 {{'smalti.frobnicate' op is not a smalti op}}
  "smalti.frobnicate"() : () -> ()
  return
}

// -----

func.func @in_layouts_count(%v: vector<128x128xf32>) {
  // expected-error @+1 {{'in_layouts' has 2 layouts for 1 vector values}}
  %w = arith.negf %v {in_layouts = [#smalti.splat, #smalti.splat]} : vector<128x128xf32>
  return
}

// -----

func.func @out_layouts_fit(%v: vector<3x5xf32>) {
  // expected-error @+1 {{'out_layouts' #0 does not fit vector<3x5xf32>: strided layout with vec = 4}}
  %w = arith.negf %v {out_layouts = [#smalti.strided<vec = 4>]} : vector<3x5xf32>
  return
}

// -----

// expected-error @+1 {{kernel @no_grid needs a 'smalti.grid' attribute}}
func.func @no_grid() attributes {smalti.kernel} {
  return
}

// -----

// expected-error @+1 {{'smalti.grid' sizes must be positive, got [0]}}
func.func @zero_grid() attributes {smalti.kernel, smalti.grid = array<i64: 0>} {
  return
}

// -----

// expected-error @+1 {{argument #0 of kernel @dynamic must be a global memref of static shape}}
func.func @dynamic(%a: memref<?xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  return
}

// -----

// expected-error @+1 {{kernel @returns must not return values}}
func.func @returns() -> f32 attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %x = arith.constant 1.0 : f32
  return %x : f32
}

// -----

// expected-error @+1 {{argument #0 of kernel @bad_arg has type vector<4xf32>}}
func.func @bad_arg(%a: vector<4xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  return
}

// -----

// expected-error @+1 {{'smalti.cluster' sizes must be positive, got [2, 0]}}
func.func @zero_cluster() attributes {smalti.kernel, smalti.grid = array<i64: 2>,
                                      smalti.cluster = array<i64: 2, 0>} {
  return
}

// -----

// expected-error @+1 {{'smalti.cluster' must be array<i64: X[, Y[, Z]]>, got 2 : i64}}
func.func @scalar_cluster() attributes {smalti.kernel, smalti.grid = array<i64: 2>,
                                        smalti.cluster = 2 : i64} {
  return
}

// -----

// expected-error @+1 {{'smalti.cluster' [4, 4] has 16 CTAs; a portable cluster has at most 8}}
func.func @big_cluster() attributes {smalti.kernel, smalti.grid = array<i64: 4, 4>,
                                     smalti.cluster = array<i64: 4, 4>} {
  return
}

// -----

// expected-error @+1 {{grid [4, 3, 1] is not a whole number of clusters [2, 2, 1]: dim y of size 3 is not a multiple of 2}}
func.func @grid_not_clusters() attributes {smalti.kernel, smalti.grid = array<i64: 4, 3>,
                                           smalti.cluster = array<i64: 2, 2>} {
  return
}
