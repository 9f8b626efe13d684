// RUN: not smalti-translate %s -o %t.ptx 2>&1 | filecheck %s
// RUN: not smalti-translate %s -o %t.ptx
// RUN: test ! -e %t.ptx

// A located error from the pipeline, and no output file.
// CHECK:     translate_errors.mlir:[[# @LINE + 4]]:{{[0-9]+}}: error:
// CHECK-NOT: Traceback
func.func @k(%a: memref<128x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %undefined) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  return
}
