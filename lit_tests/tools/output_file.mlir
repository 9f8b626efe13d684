// RUN: rm -f %t.mlir
// RUN: smalti-opt %s --canonicalize -o %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: smalti-opt %t.mlir | filecheck %s

// -o writes the output file (here: canonicalized, so the add of zero is gone).
// CHECK:     func.func @add_zero(%[[A:.*]]: i32) -> i32 {
// CHECK-NOT:   arith.addi
// CHECK:       return %[[A]] : i32
func.func @add_zero(%a: i32) -> i32 {
  %zero = arith.constant 0 : i32
  %0 = arith.addi %a, %zero : i32
  return %0 : i32
}
