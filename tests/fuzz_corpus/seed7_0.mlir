// ARGS: translate --to=ptx --split-input-file
// PROBLEM: rejection without a located diagnostic: <unknown>: error: no kernel to lower: mark a func.func with 'smalti.kernel'
// -----
// RUN: not smalti-translate %s --split-input-file 2>&1 | filecheck %s --check-prefix=ERR

// Each chunk is translated on its own; a chunk whose expected error was produced prints
// nothing, and the PTX of the others is joined by the marker.
// CHECK:      .entry first(
// CHECK:      // -----
// CHECK-NEXT: // -----
// CHECK:      .entry third(

// Without --verify-diagnostics the lowering error is printed with this file's line.
// ERR: translate_split.mlir:[[# @LINE + 12]]:1: error: no kernel to lower

func.func @first(%a: memref<128x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  "smalti.vector_store"(%v, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
// WHOLE:       func.func @second()
  return
}

// RUN: smalti-translate %s --split-input-file --verify-diagnostics | filecheck %s

// expected-error @below {{no kernel to lower}}
func.func @not_a_kernel() {
  return
}

// -----

func.func @third(%a: memref<128x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  return
}