// RUN: smalti-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Chunks whose expected errors were produced print nothing; the others print their IR.
// CHECK:      // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: // -----
// CHECK-NEXT: module {
// CHECK-NEXT:   func.func @fine()
// CHECK:      // -----
// CHECK-NEXT: // -----
// CHECK-NOT:  module

func.func @undefined(%a: i32) -> i32 {
  // expected-error @+1 {{use of undeclared SSA value name}}
  return %b : i32
}

// -----

func.func @result_type(%a: i32) -> i64 {
  // expected-error @below {{doesn't match function result type ('i64')}}
  return %a : i32
}

// -----

func.func @same_line() {
  %0 = arith.constant 1 : i32 trailing  // expected-error {{custom op 'trailing' is unknown}}
}

// -----

func.func @fine() {
  return
}
// -----

func.func @above() {
  %c = "arith.constant"() {value = 1 : i64} : () -> i32
  // expected-error @above {{'arith.constant' op failed to verify that all of {value, result} have same type}}
  return
}

// -----

func.func @regex() {
  %c = "arith.constant"() {value = 1 : i64} : () -> i32
  // expected-error-re @-1 {{op failed to verify that {{.*}} have same type}}
  return
}
