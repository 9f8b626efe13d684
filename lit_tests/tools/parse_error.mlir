// RUN: not smalti-opt %s 2>&1 | filecheck %s
// RUN: not smalti-opt %s -o %t.out
// RUN: test ! -e %t.out
// RUN: not smalti-opt %s 2>/dev/null > %t.stdout
// RUN: test ! -s %t.stdout

// A use of an undefined value: located error, exit 1, no traceback, no output.
// CHECK:     parse_error.mlir:[[# @LINE + 4]]:23: error: use of undeclared SSA value name
// CHECK-NOT: Traceback
func.func @bad(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %0, %missing : i32
  return %1 : i32
}
