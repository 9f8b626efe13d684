// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-infer-layouts | filecheck %s

// wgmma transposes only 16-bit operands: f8 and f32 (tf32) ones get K-major swizzled tiles,
// A as stored (M x K), B transposed first (N x K in memory).
// CHECK-LABEL: func.func @k_major
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[64, 128]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.transpose<[1, 0]>, #smalti.tile<[64, 128]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.wgmma"{{.*}}in_transforms = {{\[}}[#smalti.tile<[64, 128]>, #smalti.swizzle<128>], [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 128]>, #smalti.swizzle<128>]]
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[64, 32]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.transpose<[1, 0]>, #smalti.tile<[64, 32]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.wgmma"{{.*}}in_transforms = {{\[}}[#smalti.tile<[64, 32]>, #smalti.swizzle<128>], [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 32]>, #smalti.swizzle<128>]]
// A bf16 B keeps its MN-major (untransposed) tiles.
// CHECK: "smalti.wgmma"{{.*}}in_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>], [#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]
func.func @k_major(%out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %o_b = arith.constant 8192 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<128x64xf8E5M2, #gpu.address_space<workgroup>>
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x64xf8E5M2, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  %a32 = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xf32, #gpu.address_space<workgroup>>
  %b32 = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xf32, #gpu.address_space<workgroup>>
  %e = "smalti.wgmma"(%d, %a32, %b32) : (vector<64x64xf32>, memref<64x64xf32, #gpu.address_space<workgroup>>, memref<64x64xf32, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  %a16 = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b16 = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %f = "smalti.wgmma"(%e, %a16, %b16) : (vector<64x64xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%f, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// TMA cannot write the transposed (K-major) tiles an f8 B needs: load B^T (N x K) into its
// own slice and view it as K x N (see lit_tests/lowering/wgmma_types.mlir).
func.func @tma_into_f8_b(%g: memref<128x64xf8E4M3FN>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %a = "smalti.slice_smem"(%o_a) : (index) -> memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
  // expected-note @+1 {{transforms tried: [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 128]>, #smalti.swizzle<128>]: TMA cannot move the innermost dim (its global stride must be 1); [#smalti.tile<[128, 64]>, #smalti.swizzle<64>], []: wgmma reads this B only K-major}}
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>
  // expected-error @+2 {{'smalti.async_load' op cannot be given transforms: no transforms of the result of 'smalti.slice_smem' at}}
  // expected-note @+1 {{TMA writes this shared-memory ref}}
  "smalti.async_load"(%g, %b, %bars, %c0, %c0, %c0) : (memref<128x64xf8E4M3FN>, memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  // expected-note @+1 {{wgmma reads this operand from shared memory}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// A from registers gets the A fragment layout of its bit width, and the values it is
// computed from get it too: the f32 load and scale before an arith.truncf to f8 take the
// 8-bit layout (vectors of 4), an f32 (tf32) A the tf32 layout (one column per register, q
// and q + 4 of each 8); a bf16 A the WGMMA layout.
// CHECK-LABEL: func.func @register_a
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.tiled<tiling = {{\[}}[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>]} : {{.*}} -> vector<64x64xf32>
// CHECK: arith.mulf {{.*}} {in_layouts = [#smalti.tiled<tiling = {{\[}}[64, 16], [16, 16], [8, 16], [4]]
// CHECK: arith.truncf {{.*}} {in_layouts = [#smalti.tiled<tiling = {{\[}}[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>], out_layouts = [#smalti.tiled<tiling = {{\[}}[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: "smalti.wgmma"{{.*}}in_layouts = [#smalti.tiled<tiling = {{\[}}[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>, #smalti.tiled<tiling = {{\[}}[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>]
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.tiled<tiling = {{\[}}[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>]} : {{.*}} -> vector<64x32xf32>
// CHECK: "smalti.wgmma"{{.*}}in_layouts = [#smalti.tiled<tiling = {{\[}}[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>, #smalti.tiled<tiling = {{\[}}[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>]
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.tiled<tiling = {{\[}}[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : {{.*}} -> vector<64x16xbf16>
func.func @register_a(%x: memref<64x64xf32>, %x32: memref<64x32xf32>, %x16: memref<64x16xbf16>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %scale = arith.constant dense<2.0> : vector<64x64xf32>
  %v = "smalti.vector_load"(%x, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %s = arith.mulf %v, %scale : vector<64x64xf32>
  %a = arith.truncf %s : vector<64x64xf32> to vector<64x64xf8E4M3FN>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x64xf32>, vector<64x64xf8E4M3FN>, memref<64x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  %a32 = "smalti.vector_load"(%x32, %c0, %c0) : (memref<64x32xf32>, index, index) -> vector<64x32xf32>
  %b32 = "smalti.slice_smem"(%o_b) : (index) -> memref<32x64xf32, #gpu.address_space<workgroup>>
  %e = "smalti.wgmma"(%d, %a32, %b32) : (vector<64x64xf32>, vector<64x32xf32>, memref<32x64xf32, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  %a16 = "smalti.vector_load"(%x16, %c0, %c0) : (memref<64x16xbf16>, index, index) -> vector<64x16xbf16>
  %b16 = "smalti.slice_smem"(%o_b) : (index) -> memref<16x64xbf16, #gpu.address_space<workgroup>>
  %f = "smalti.wgmma"(%e, %a16, %b16) : (vector<64x64xf32>, vector<64x16xbf16>, memref<16x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%f, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}
