// RUN: smalti-opt %s --cse --canonicalize --mlir-print-ir-after-all 2>&1 >/dev/null | filecheck %s
// RUN: smalti-opt %s --pass-pipeline='builtin.module(cse,canonicalize)' --mlir-print-ir-after-all 2>&1 >/dev/null | filecheck %s

// The IR after each pass goes to stderr, passes in command-line order.
// CHECK:     IR Dump After {{.*}}cse
// CHECK:     arith.addi
// CHECK:     IR Dump After {{.*}}anonicaliz
// CHECK-NOT: IR Dump After
func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.addi %0, %1 : i32
  return %2 : i32
}
