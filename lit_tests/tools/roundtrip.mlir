// RUN: smalti-opt %s | filecheck %s
// RUN: smalti-opt %s --cse --canonicalize | filecheck %s --check-prefix=CSE
// RUN: smalti-opt %s --mlir-print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: cat %s | smalti-opt - | filecheck %s

// Upstream ops print back in their custom form, wrapped in the implicit module.
// CHECK: module {
// CHECK-NEXT: func.func @twice(%[[A:.*]]: i32) -> i32 {
// CHECK-NEXT:   %[[S:.*]] = arith.addi %[[A]], %[[A]] : i32
// CHECK-NEXT:   %{{.*}} = arith.addi %[[A]], %[[A]] : i32
// CHECK:        return %[[S]] : i32

// CSE:      arith.addi
// CSE-NOT:  arith.addi
// CSE:      return

// The locations are those of this file (the return below is 4 lines below).
// LOC: func.func @twice
// LOC: loc("{{.*}}roundtrip.mlir":[[# @LINE + 4]]:3)
func.func @twice(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  return %0 : i32
}
