// RUN: not smalti-translate %s --to=ptx 2>&1 | filecheck %s

// Each CTA of a collective load copies a part of the SMEM ref: here 1 row of 64 bytes, which
// cannot start on the 128 bytes a TMA destination needs. Reported at the op, nothing written.
// CHECK: tma_errors.mlir:16:3: error: 'smalti.async_load' op TMA cannot copy a collective part ([1, 32] of [4, 32]): each part must be a contiguous run of shared memory whose size (64 bytes) is a multiple of 128
// CHECK-NOT: .entry
func.func @small_parts(%a: memref<4x32xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.cluster = array<i64: 4>} {
  %c0 = arith.constant 0 : index
  %o = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %t = "smalti.slice_smem"(%o) : (index) -> memref<4x32xbf16, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.cluster_barrier"() : () -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 256 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %t, %bars, %c0, %c0, %c0) {collective = array<i64: 0>} : (memref<4x32xbf16>, memref<4x32xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}
