// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

func.func @broadcast_rank(%v: vector<128xf32>) {
  // expected-error @+1 {{'broadcast_dimensions' has 2 entries for an operand of rank 1}}
  %b = "smalti.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 0, 1>} : (vector<128xf32>) -> vector<128x64xf32>
  return
}

// -----

func.func @broadcast_order(%v: vector<128x64xf32>) {
  // expected-error @+1 {{'broadcast_dimensions' [2, 0] must increase (use vector.transpose to permute)}}
  %b = "smalti.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 2, 0>} : (vector<128x64xf32>) -> vector<128x4x64xf32>
  return
}

// -----

func.func @broadcast_range(%v: vector<128xf32>) {
  // expected-error @+1 {{'broadcast_dimensions' [2] are not dims of a rank-2 result}}
  %b = "smalti.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 2>} : (vector<128xf32>) -> vector<128x64xf32>
  return
}

// -----

func.func @broadcast_size(%v: vector<64xf32>) {
  // expected-error @+1 {{operand dim 0 of size 64 cannot broadcast to result dim 0 of size 128}}
  %b = "smalti.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 0>} : (vector<64xf32>) -> vector<128x64xf32>
  return
}

// -----

func.func @broadcast_element(%v: vector<128xf32>) {
  // expected-error @+1 {{result element type bf16 differs from operand element type f32}}
  %b = "smalti.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 0>} : (vector<128xf32>) -> vector<128x64xbf16>
  return
}

// -----

func.func @broadcast_attribute(%v: vector<128xf32>) {
  // expected-error @+1 {{requires an array<i64: ...> 'broadcast_dimensions' attribute: the result dim of each operand dim}}
  %b = "smalti.broadcast_in_dim"(%v) : (vector<128xf32>) -> vector<128x64xf32>
  return
}

// -----

func.func @broadcast_scalar(%s: f32) {
  // expected-error @+1 {{expects the operand to be a vector, got f32}}
  %b = "smalti.broadcast_in_dim"(%s) {broadcast_dimensions = array<i64>} : (f32) -> vector<128xf32>
  return
}

// -----

func.func @iota_type() {
  // expected-error @+1 {{'smalti.iota' op expects an i32 result, got f32}}
  %i = "smalti.iota"() {dimension = 0 : i64} : () -> vector<128xf32>
  return
}

// -----

func.func @iota_dimension() {
  // expected-error @+1 {{'dimension' 2 is not a dim of a rank-2 result}}
  %i = "smalti.iota"() {dimension = 2 : i64} : () -> vector<128x64xi32>
  return
}

// -----

func.func @iota_attribute() {
  // expected-error @+1 {{requires an integer 'dimension' attribute}}
  %i = "smalti.iota"() : () -> vector<128x64xi32>
  return
}

// -----

func.func @iota_operands(%x: i32) {
  // expected-error @+1 {{expects 0 operands, got 1}}
  %i = "smalti.iota"(%x) {dimension = 0 : i64} : (i32) -> vector<128xi32>
  return
}

// -----

func.func @barrier_count(%v: vector<128xf32>) {
  // expected-error @+1 {{'smalti.optimization_barrier' op expects as many results as operands, got 2 for 1}}
  %a, %b = "smalti.optimization_barrier"(%v) : (vector<128xf32>) -> (vector<128xf32>, vector<128xf32>)
  return
}

// -----

func.func @barrier_type(%v: vector<128xf32>, %s: f32) {
  // expected-error @+1 {{result #1 has type i32 but operand #1 has f32}}
  %a, %b = "smalti.optimization_barrier"(%v, %s) : (vector<128xf32>, f32) -> (vector<128xf32>, i32)
  return
}
