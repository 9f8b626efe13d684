// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// smalti.inline_ptx (smalti/dialect/ops_inline.py): shapes, constraints against element
// types and pack, placeholders.

func.func @no_results(%a: vector<16x128xf32>) {
  // expected-error @+1 {{'smalti.inline_ptx' op expects at least one result}}
  "smalti.inline_ptx"(%a) {ptx = "", constraints = "f"} : (vector<16x128xf32>) -> ()
  return
}

// -----

func.func @scalar_result(%a: f32) {
  // expected-error @+1 {{'smalti.inline_ptx' op expects vector results (scalar results, per thread, only in a custom_primitive body), got f32}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.f32 $0, $1;", constraints = "=f,f"} : (f32) -> f32
  return
}

// -----

func.func @scalars_only_outside_a_body(%a: f32) {
  // expected-error @+1 {{'smalti.inline_ptx' op expects a vector operand or result outside a custom_primitive body (it runs once per register group)}}
  "smalti.inline_ptx"(%a) {ptx = "st.global.f32 [0], $0;", constraints = "f", has_side_effects = true} : (f32) -> ()
  return
}

// -----

func.func @pure_without_results(%a: f32) {
  // expected-error @+1 {{'smalti.inline_ptx' op expects at least one result unless it has side effects (has_side_effects = true)}}
  "smalti.inline_ptx"(%a) {ptx = "", constraints = "f"} : (f32) -> ()
  return
}

// -----

func.func @index_as_half(%a: vector<16x128xf16>, %i: index) {
  // expected-error @+1 {{'smalti.inline_ptx' op operand #1 ($2) has a scalar index (64 bits), which constraint 'h' (b16) cannot hold}}
  %r = "smalti.inline_ptx"(%a, %i) {ptx = "add.f16 $0, $1, $2;", constraints = "=h,h,h"} : (vector<16x128xf16>, index) -> vector<16x128xf16>
  return
}

// -----

func.func @scalar_f16_as_f32(%a: vector<16x128xf32>, %h: f16) {
  // expected-error @+1 {{'smalti.inline_ptx' op operand #1 ($2) has a scalar f16 (16 bits), which constraint 'f' (f32) cannot hold}}
  %r = "smalti.inline_ptx"(%a, %h) {ptx = "add.f32 $0, $1, $2;", constraints = "=f,f,f"} : (vector<16x128xf32>, f16) -> vector<16x128xf32>
  return
}

// -----

func.func @two_shapes(%a: vector<16x128xf32>) {
  // expected-error @+1 {{'smalti.inline_ptx' op operands and results must have one shape, got [16, 64], [16, 128]}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.f32 $0, $1;", constraints = "=f,f"} : (vector<16x128xf32>) -> vector<16x64xf32>
  return
}

// -----

func.func @pack_three(%a: vector<16x128xbf16>) {
  // expected-error @+1 {{'smalti.inline_ptx' op 'pack' must be 1, 2 or 4, got 3}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.b32 $0, $1;", constraints = "=r,r", pack = 3 : i64} : (vector<16x128xbf16>) -> vector<16x128xbf16>
  return
}

// -----

func.func @unknown_constraint(%a: vector<16x128xf32>) {
  // expected-error @+1 {{'smalti.inline_ptx' op constraint 'x' is not one of 'r', 'h', 'l', 'f' (optionally '=' for a result)}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.f32 $0, $1;", constraints = "=f,x"} : (vector<16x128xf32>) -> vector<16x128xf32>
  return
}

// -----

func.func @constraint_count(%a: vector<16x128xf32>, %b: vector<16x128xf32>) {
  // expected-error @+1 {{'smalti.inline_ptx' op 1 result and 1 operand constraints for 1 results and 2 operands}}
  %r = "smalti.inline_ptx"(%a, %b) {ptx = "mov.f32 $0, $1;", constraints = "=f,f"} : (vector<16x128xf32>, vector<16x128xf32>) -> vector<16x128xf32>
  return
}

// -----

func.func @outputs_first(%a: vector<16x128xf32>) {
  // expected-error @+1 {{'smalti.inline_ptx' op result constraints ('=') must come before operand constraints}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.f32 $1, $0;", constraints = "f,=f"} : (vector<16x128xf32>) -> vector<16x128xf32>
  return
}

// -----

func.func @bf16_without_pack(%a: vector<16x128xbf16>) {
  // expected-error @+1 {{'smalti.inline_ptx' op operand #0 ($1) has 1 x bf16 per register (16 bits), which constraint 'r' (b32) cannot hold}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.b16 $0, $1;", constraints = "=h,r"} : (vector<16x128xbf16>) -> vector<16x128xbf16>
  return
}

// -----

func.func @f_needs_f32(%a: vector<16x128xi32>) {
  // expected-error @+1 {{'smalti.inline_ptx' op result #0 ($0) has 1 x i32 per register (32 bits), which constraint 'f' (f32) cannot hold}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.b32 $0, $1;", constraints = "=f,r"} : (vector<16x128xi32>) -> vector<16x128xi32>
  return
}

// -----

func.func @unsupported_element(%a: vector<16x128xi1>) {
  // expected-error @+1 {{'smalti.inline_ptx' op operand #0 has element type i1; expects one of}}
  %r = "smalti.inline_ptx"(%a) {ptx = "mov.b32 $0, $1;", constraints = "=r,r"} : (vector<16x128xi1>) -> vector<16x128xi32>
  return
}

// -----

func.func @placeholder_out_of_range(%a: vector<16x128xi32>) {
  // expected-error @+1 {{'smalti.inline_ptx' op placeholder $2 is out of range: there are 2 registers ($0..$1)}}
  %r = "smalti.inline_ptx"(%a) {ptx = "add.s32 $0, $1, $2;", constraints = "=r,r"} : (vector<16x128xi32>) -> vector<16x128xi32>
  return
}
