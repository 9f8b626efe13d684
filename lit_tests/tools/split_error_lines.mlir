// RUN: not smalti-opt %s --split-input-file 2>&1 | filecheck %s

// Diagnostics in later chunks keep the line numbers of this file, and every chunk is
// processed even after one fails.
// CHECK: split_error_lines.mlir:[[# @LINE + 3]]:10: error: use of undeclared SSA value name
// CHECK: split_error_lines.mlir:[[# @LINE + 8]]:3: error: type of return operand 0 ('i32') doesn't match function result type ('i64')
func.func @f(%a: i32) -> i32 {
  return %b : i32
}

// -----

func.func @g(%a: i32) -> i64 {
  return %a : i32
}
