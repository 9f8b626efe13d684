// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-infer-layouts | filecheck %s

// TMA-loaded wgmma operands get 128-byte swizzled tiles as tall as the operand (64 rows:
// one TMA box each); barriers none; the accumulator the WGMMA layout.
// CHECK-LABEL: func.func @operands
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[]]}
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.async_load"{{.*}}in_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>], []]
// CHECK: "smalti.wgmma"(%{{.*}}) {in_layouts = [#smalti.tiled<tiling = {{\[}}[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]
// CHECK-SAME: in_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>], [#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]
func.func @operands(%ga: memref<128x64xbf16>, %out: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<64x128xf32>
  %o1 = arith.constant 1024 : index
  %o2 = arith.constant 9216 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %a = "smalti.slice_smem"(%o1) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o2) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  "smalti.async_load"(%ga, %a, %bars, %c0, %c0, %c0) : (memref<128x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x128xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<64x128xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}

// -----

// with_transforms wins over hints and flows back to the slice it views.
// CHECK-LABEL: func.func @fixed
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[8, 32]>, #smalti.swizzle<64>]]}
// CHECK: "smalti.vector_load"{{.*}}in_transforms = {{\[}}[#smalti.tile<[8, 32]>, #smalti.swizzle<64>]]
func.func @fixed(%out: memref<64x64xbf16>) {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[8, 32]>, #smalti.swizzle<64>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%t, %c0, %c0) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> vector<64x64xbf16>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<64x64xbf16>, memref<64x64xbf16>, index, index) -> ()
  return
}

// -----

// TMA cannot write a transposed ref: the requirement names the conflict.
func.func @tma_transposed(%g: memref<64x64xbf16>) {
  %c0 = arith.constant 0 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-note @+1 {{with_transforms sets the transforms}}
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[8, 64]>, #smalti.swizzle<128>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+2 {{TMA cannot move the innermost dim (its global stride must be 1)}}
  // expected-note @+1 {{TMA writes this shared-memory ref}}
  "smalti.async_load"(%g, %t, %bars, %c0, %c0, %c0) : (memref<64x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

// A stage chosen at run time: TMA writes the chosen stage and wgmma reads it, so every stage
// (and the choice) takes the operand's swizzled tiles.
// CHECK-LABEL: func.func @chosen_stage
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.select_stage"{{.*}}out_transforms = {{\[}}[#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]
func.func @chosen_stage(%ga: memref<64x64xbf16>, %k: index, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %o1 = arith.constant 1024 : index
  %o2 = arith.constant 9216 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s0 = "smalti.slice_smem"(%o1) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %s1 = "smalti.slice_smem"(%o2) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a = "smalti.select_stage"(%k, %s0, %s1) : (index, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  "smalti.async_load"(%ga, %a, %bars, %c0, %c0, %c0) : (memref<64x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %r = "smalti.wgmma"(%acc, %a, %a) : (vector<64x64xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// Stages pinned to different transforms cannot be chosen between.
func.func @stages_disagree(%k: index, %out: memref<64x64xbf16>) {
  %c0 = arith.constant 0 : index
  %o1 = arith.constant 8192 : index
  %s0 = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %s1 = "smalti.slice_smem"(%o1) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-note @+1 {{with_transforms sets the transforms}}
  %t0 = "smalti.with_transforms"(%s0) {transforms = [#smalti.tile<[8, 64]>, #smalti.swizzle<128>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+2 {{'smalti.with_transforms' op cannot be given transforms: conflicting layouts required for one value (4 constraints in conflict)}}
  // expected-note @+1 {{with_transforms sets the transforms: [#smalti.tile<[8, 32]>, #smalti.swizzle<64>]}}
  %t1 = "smalti.with_transforms"(%s1) {transforms = [#smalti.tile<[8, 32]>, #smalti.swizzle<64>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-note @+2 {{the stages of a staged array share their transforms}}
  // expected-note @+1 {{the stages of a staged array share their transforms}}
  %s = "smalti.select_stage"(%k, %t0, %t1) : (index, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%s, %c0, %c0) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> vector<64x64xbf16>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<64x64xbf16>, memref<64x64xbf16>, index, index) -> ()
  return
}
