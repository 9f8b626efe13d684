// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

func.func @no_format(%v: vector<128xf32>) {
  // expected-error @+1 {{'smalti.debug_print' op requires a string 'format' attribute}}
  "smalti.debug_print"(%v) : (vector<128xf32>) -> ()
  return
}

// -----

func.func @format_not_string(%v: vector<128xf32>) {
  // expected-error @+1 {{'format' must be a string, got 3 : i64}}
  "smalti.debug_print"(%v) {format = 3 : i64} : (vector<128xf32>) -> ()
  return
}

// -----

func.func @no_placeholder(%v: vector<128xf32>) {
  // expected-error @+1 {{'format' must contain exactly one '{}' (where the value goes), found 0}}
  "smalti.debug_print"(%v) {format = "v = "} : (vector<128xf32>) -> ()
  return
}

// -----

func.func @two_placeholders(%v: vector<128xf32>) {
  // expected-error @+1 {{'format' must contain exactly one '{}' (where the value goes), found 2}}
  "smalti.debug_print"(%v) {format = "{} and {}"} : (vector<128xf32>) -> ()
  return
}

// -----

func.func @no_operand() {
  // expected-error @+1 {{'smalti.debug_print' op expects 1 operands, got 0}}
  "smalti.debug_print"() {format = "{}"} : () -> ()
  return
}

// -----

func.func @two_operands(%v: vector<128xf32>, %s: f32) {
  // expected-error @+1 {{expects 1 operands, got 2}}
  "smalti.debug_print"(%v, %s) {format = "{}"} : (vector<128xf32>, f32) -> ()
  return
}

// -----

func.func @result(%v: vector<128xf32>) {
  // expected-error @+1 {{expects 0 results, got 1}}
  %r = "smalti.debug_print"(%v) {format = "{}"} : (vector<128xf32>) -> vector<128xf32>
  return
}

// -----

func.func @memref_operand(%m: memref<128xf32>) {
  // expected-error @+1 {{cannot print operand type memref<128xf32>: expects a vector or a scalar of i1, i8, f8E4M3FN, f8E5M2, i16, f16, bf16, i32, f32, i64, f64, index}}
  "smalti.debug_print"(%m) {format = "{}"} : (memref<128xf32>) -> ()
  return
}

// -----

func.func @i4_vector(%v: vector<128xi4>) {
  // expected-error @+1 {{cannot print element type i4: expects a vector or a scalar of}}
  "smalti.debug_print"(%v) {format = "{}"} : (vector<128xi4>) -> ()
  return
}

// -----

func.func @i8_scalar(%s: i8) {
  // expected-error @+1 {{cannot print operand type i8: 8-bit values print as vectors only}}
  "smalti.debug_print"(%s) {format = "s = {}"} : (i8) -> ()
  return
}
