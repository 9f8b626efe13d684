// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// wgmma input types: bf16 x bf16, f16 x f16, f32 x f32 (as tf32), f8 x f8 (E4M3FN/E5M2 mixed
// freely); f32 and f8 operands must be K-major (wgmma transposes only 16-bit ones).

func.func @wgmma_f64(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x16xf64, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<16x64xf64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{supports A of bf16, f16, f32, f8E4M3FN, f8E5M2, got f64}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x16xf64, #gpu.address_space<workgroup>>, memref<16x64xf64, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

func.func @wgmma_f8_by_bf16(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{cannot multiply f8E4M3FN A by bf16 B: wgmma pairs bf16 with bf16, f16 with f16, f32 (as tf32) with f32, and f8 (f8E4M3FN or f8E5M2) with f8}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

func.func @wgmma_bf16_by_f16(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<64x64xf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{cannot multiply bf16 A by f16 B}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

func.func @wgmma_f32_by_f8(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x32xf32, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<32x64xf8E5M2, #gpu.address_space<workgroup>>
  // expected-error @+1 {{cannot multiply f32 A by f8E5M2 B}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x32xf32, #gpu.address_space<workgroup>>, memref<32x64xf8E5M2, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

func.func @wgmma_f8_k(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x16xf8E4M3FN, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<16x64xf8E4M3FN, #gpu.address_space<workgroup>>
  // expected-error @+1 {{K (16) must be a multiple of 32 for f8E4M3FN (32 bytes per wgmma instruction)}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x16xf8E4M3FN, #gpu.address_space<workgroup>>, memref<16x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

func.func @wgmma_tf32_k(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x12xf32, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<12x64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{K (12) must be a multiple of 8 for f32}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x12xf32, #gpu.address_space<workgroup>>, memref<12x64xf32, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

// A from registers takes the same K granularity as from shared memory: 32 bytes.
func.func @wgmma_f8_register_a_k(%acc: vector<64x64xf32>, %a: vector<64x16xf8E4M3FN>) {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<16x64xf8E4M3FN, #gpu.address_space<workgroup>>
  // expected-error @+1 {{K (16) must be a multiple of 32 for f8E4M3FN (32 bytes per wgmma instruction)}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, vector<64x16xf8E4M3FN>, memref<16x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

// With A in registers, B is the only SMEM operand: in_transforms has its one entry.
func.func @wgmma_tf32_register_a_b_mn_major(%acc: vector<64x64xf32>, %a: vector<64x32xf32>) {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<32x64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{reads B (f32) MN-major, but wgmma transposes only bf16/f16 operands}}
  %d = "smalti.wgmma"(%acc, %a, %b) {in_transforms = [[#smalti.tile<[32, 32]>, #smalti.swizzle<128>]]} : (vector<64x64xf32>, vector<64x32xf32>, memref<32x64xf32, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

// f8 (mixed formats) and f32 (as tf32) A from registers, K-major B.
func.func @wgmma_register_a_ok(%acc: vector<64x64xf32>, %a8: vector<64x64xf8E5M2>, %a32: vector<64x32xf32>) {
  %o = arith.constant 0 : index
  %b0 = "smalti.slice_smem"(%o) : (index) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %b = "smalti.with_transforms"(%b0) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 64]>, #smalti.swizzle<64>]} : (memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %d = "smalti.wgmma"(%acc, %a8, %b) : (vector<64x64xf32>, vector<64x64xf8E5M2>, memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  %b32 = "smalti.slice_smem"(%o) : (index) -> memref<32x64xf32, #gpu.address_space<workgroup>>
  %e = "smalti.wgmma"(%d, %a32, %b32) {in_transforms = [[#smalti.transpose<[1, 0]>, #smalti.tile<[64, 32]>, #smalti.swizzle<128>]]} : (vector<64x64xf32>, vector<64x32xf32>, memref<32x64xf32, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

// B stored K x N (N contiguous) is MN-major: only 16-bit B may be.
func.func @wgmma_f8_b_mn_major(%acc: vector<64x128xf32>) {
  %o = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %b0 = "smalti.slice_smem"(%o_b) : (index) -> memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %b = "smalti.with_transforms"(%b0) {transforms = [#smalti.tile<[128, 128]>, #smalti.swizzle<128>]} : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
  // expected-error @+1 {{reads B (f8E4M3FN) MN-major, but wgmma transposes only bf16/f16 operands; store B as N x K (K contiguous) and view it as K x N through smalti.with_transforms whose transforms start with #smalti.transpose<[1, 0]>}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x128xf32>, memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<64x128xf32>
  return
}

// -----

func.func @wgmma_tf32_a_mn_major(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %a0 = "smalti.slice_smem"(%o) : (index) -> memref<64x32xf32, #gpu.address_space<workgroup>>
  %a = "smalti.with_transforms"(%a0) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[32, 32]>, #smalti.swizzle<128>]} : (memref<64x32xf32, #gpu.address_space<workgroup>>) -> memref<64x32xf32, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<32x64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{reads A (f32) MN-major, but wgmma transposes only bf16/f16 operands; store A as M x K (K contiguous): drop the leading #smalti.transpose}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x32xf32, #gpu.address_space<workgroup>>, memref<32x64xf32, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

// After inference the op's in_transforms say how each SMEM operand is stored.
func.func @wgmma_tf32_b_in_transforms(%acc: vector<64x64xf32>) {
  %o = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x32xf32, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<32x64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{reads B (f32) MN-major}}
  %d = "smalti.wgmma"(%acc, %a, %b) {in_transforms = [[#smalti.tile<[64, 32]>, #smalti.swizzle<128>], [#smalti.tile<[32, 32]>, #smalti.swizzle<128>]]} : (vector<64x64xf32>, memref<64x32xf32, #gpu.address_space<workgroup>>, memref<32x64xf32, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  return
}

// -----

// 16-bit operands may be MN-major; f8 operands stored K-major (B transposed) are fine, and
// e4m3 and e5m2 mix.
func.func @wgmma_ok(%acc: vector<64x128xf32>) {
  %o = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x128xf8E5M2, #gpu.address_space<workgroup>>
  %b0 = "smalti.slice_smem"(%o_b) : (index) -> memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %b = "smalti.with_transforms"(%b0) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[128, 128]>, #smalti.swizzle<128>]} : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x128xf32>, memref<64x128xf8E5M2, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<64x128xf32>
  %a16 = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b16 = "smalti.slice_smem"(%o_b) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %e = "smalti.wgmma"(%d, %a16, %b16) : (vector<64x128xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<64x128xf32>
  return
}
