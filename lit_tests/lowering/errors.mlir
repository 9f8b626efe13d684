// RUN: not smalti-translate %s --to=ptx 2>&1 | filecheck %s

// Lowering limits are reported at the op, with nothing written.
// CHECK: errors.mlir:9:8: error: 'smalti.vector_load' op buffers of 2 GiB or more are not supported yet
// CHECK-NOT: .entry
func.func @huge(%a: memref<32768x32768xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<32768x32768xf32>, index, index) -> vector<4x128xf32>
  return
}
