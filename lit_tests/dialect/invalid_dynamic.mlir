// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

func.func @scalar_of_float(%t: memref<4xf32>, %i: index) {
  // expected-error @+1 {{'smalti.load_scalar' op loads scalars of i32 or i64 (indices), not f32}}
  %e = "smalti.load_scalar"(%t, %i) : (memref<4xf32>, index) -> f32
  return
}

// -----

func.func @scalar_from_smem(%t: memref<4xi32, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'smalti.load_scalar' op expects the source to be a global memref (a kernel argument), got memref<4xi32, #gpu.address_space<workgroup>>}}
  %e = "smalti.load_scalar"(%t, %i) : (memref<4xi32, #gpu.address_space<workgroup>>, index) -> i32
  return
}

// -----

func.func @scalar_result_type(%t: memref<4xi32>, %i: index) {
  // expected-error @+1 {{'smalti.load_scalar' op result type index differs from the element type i32 of the memref}}
  %e = "smalti.load_scalar"(%t, %i) : (memref<4xi32>, index) -> index
  return
}

// -----

func.func @scalar_index_count(%t: memref<4x2xi32>, %i: index) {
  // expected-error @+1 {{'smalti.load_scalar' op expects 2 indices for memref<4x2xi32>, got 1}}
  %e = "smalti.load_scalar"(%t, %i) : (memref<4x2xi32>, index) -> i32
  return
}

// -----

func.func @scalar_index_type(%t: memref<4xi32>, %i: i32) {
  // expected-error @+1 {{'smalti.load_scalar' op index #0 must have type index, got i32}}
  %e = "smalti.load_scalar"(%t, %i) : (memref<4xi32>, i32) -> i32
  return
}

// -----

func.func @scalar_out_of_bounds(%t: memref<4x2xi32>, %i: index) {
  %c2 = arith.constant 2 : index
  // expected-error @+1 {{'smalti.load_scalar' op index 2 of dim 1 is out of bounds for memref<4x2xi32>}}
  %e = "smalti.load_scalar"(%t, %i, %c2) : (memref<4x2xi32>, index, index) -> i32
  return
}

// -----

func.func @masked_mask_shape(%a: memref<100x64xf32>, %m: vector<128x32xi1>, %o: vector<128x64xf32>, %i: index) {
  // expected-error @+1 {{'smalti.masked_load' op the mask must be a vector of i1 of the value's shape [128, 64], got vector<128x32xi1>}}
  %v = "smalti.masked_load"(%a, %m, %o, %i, %i) : (memref<100x64xf32>, vector<128x32xi1>, vector<128x64xf32>, index, index) -> vector<128x64xf32>
  return
}

// -----

func.func @masked_mask_type(%a: memref<100x64xf32>, %m: vector<128x64xi8>, %o: vector<128x64xf32>, %i: index) {
  // expected-error @+1 {{'smalti.masked_load' op the mask must be a vector of i1 of the value's shape [128, 64], got vector<128x64xi8>}}
  %v = "smalti.masked_load"(%a, %m, %o, %i, %i) : (memref<100x64xf32>, vector<128x64xi8>, vector<128x64xf32>, index, index) -> vector<128x64xf32>
  return
}

// -----

func.func @masked_other_type(%a: memref<100x64xf32>, %m: vector<128x64xi1>, %o: vector<128x64xi32>, %i: index) {
  // expected-error @+1 {{'smalti.masked_load' op 'other' has type vector<128x64xi32>, not the result's vector<128x64xf32>}}
  %v = "smalti.masked_load"(%a, %m, %o, %i, %i) : (memref<100x64xf32>, vector<128x64xi1>, vector<128x64xi32>, index, index) -> vector<128x64xf32>
  return
}

// -----

func.func @masked_from_smem(%a: memref<100x64xf32, #gpu.address_space<workgroup>>, %m: vector<128x64xi1>, %o: vector<128x64xf32>, %i: index) {
  // expected-error @+1 {{'smalti.masked_load' op expects the ref to be a global memref (a kernel argument), got memref<100x64xf32, #gpu.address_space<workgroup>>}}
  %v = "smalti.masked_load"(%a, %m, %o, %i, %i) : (memref<100x64xf32, #gpu.address_space<workgroup>>, vector<128x64xi1>, vector<128x64xf32>, index, index) -> vector<128x64xf32>
  return
}

// -----

func.func @masked_start_outside(%a: memref<100x64xf32>, %m: vector<128x64xi1>, %o: vector<128x64xf32>, %i: index) {
  %c100 = arith.constant 100 : index
  // expected-error @+1 {{'smalti.masked_load' op the window of dim 0 starts at 100, outside [0, 100) of memref<100x64xf32>}}
  %v = "smalti.masked_load"(%a, %m, %o, %c100, %i) : (memref<100x64xf32>, vector<128x64xi1>, vector<128x64xf32>, index, index) -> vector<128x64xf32>
  return
}

// -----

func.func @masked_store_element_type(%v: vector<128x64xf16>, %a: memref<100x64xf32>, %m: vector<128x64xi1>, %i: index) {
  // expected-error @+1 {{'smalti.masked_store' op element type f16 of the vector does not match element type f32 of the memref}}
  "smalti.masked_store"(%v, %a, %m, %i, %i) : (vector<128x64xf16>, memref<100x64xf32>, vector<128x64xi1>, index, index) -> ()
  return
}

// -----

func.func @masked_store_rank(%v: vector<64xf32>, %a: memref<100x64xf32>, %m: vector<64xi1>, %i: index) {
  // expected-error @+1 {{'smalti.masked_store' op vector rank 1 does not match memref rank 2}}
  "smalti.masked_store"(%v, %a, %m, %i, %i) : (vector<64xf32>, memref<100x64xf32>, vector<64xi1>, index, index) -> ()
  return
}

// -----

func.func @masked_store_not_vector(%v: f32, %a: memref<100x64xf32>, %m: vector<64xi1>, %i: index) {
  // expected-error @+1 {{'smalti.masked_store' op expects the value to be a vector, got f32}}
  "smalti.masked_store"(%v, %a, %m, %i, %i) : (f32, memref<100x64xf32>, vector<64xi1>, index, index) -> ()
  return
}
