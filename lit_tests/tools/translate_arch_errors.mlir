// RUN: smalti-translate %s --arch=sm_100a --split-input-file --verify-diagnostics
// RUN: not smalti-translate %s --arch=sm_100a --split-input-file 2>&1 | filecheck %s
// RUN: smalti-translate %s --arch=sm_90a --split-input-file | filecheck %s --check-prefix=HOPPER

// wgmma exists on sm_90a only (PTX ISA: "wgmma.mma_async requires sm_90a"): compiled for
// sm_100a it is an error at the op, not a ptxas failure.
// CHECK:      translate_arch_errors.mlir:[[# @LINE + 11]]:8: error: 'smalti.wgmma' op needs sm_90a: sm_100a has no wgmma
// CHECK-NOT:  Traceback
// HOPPER:     .target sm_90a
// HOPPER:     wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
func.func @wgmma_on_blackwell(%out: memref<64x64xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  // expected-error @+1 {{needs sm_90a: sm_100a has no wgmma}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}
