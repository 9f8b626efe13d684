// RUN: not smalti-translate %s --to=ptx 2>&1 | filecheck %s

// Lowering limits are reported at the op, with nothing written.
// CHECK: errors.mlir:10:8: error: 'smalti.layout_cast' op relayout from #smalti.strided<vec = 4> to #smalti.strided<vec = 2> is not supported yet
// CHECK-NOT: .entry
func.func @relayout(%a: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 2>} : (vector<4x128xf32>) -> vector<4x128xf32>
  "smalti.vector_store"(%y, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}
