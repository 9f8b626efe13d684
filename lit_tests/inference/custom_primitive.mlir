// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-infer-layouts | filecheck %s

// smalti.custom_primitive (smalti/layout_inference/custom_rules.py): the declared layouts and
// transforms are fixed; the kernel around adapts. The load (which prefers a wide strided
// layout) takes the WGMMA layout, the store its result's strided one; the shared-memory
// slice (and the store that fills it) takes the declared 8x8 tiles.
// CHECK-LABEL: func.func @adapts
// CHECK: "smalti.slice_smem"{{.*}} {out_transforms = {{\[}}[#smalti.tile<[8, 8]>]]}
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.tiled<tiling = {{\[}}[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: "smalti.vector_store"{{.*}} in_transforms = {{\[}}[#smalti.tile<[8, 8]>]]
// CHECK: "smalti.custom_primitive"
// CHECK: in_layouts = [#smalti.tiled<tiling = {{\[}}[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]
// CHECK-SAME: in_transforms = {{\[}}[#smalti.tile<[8, 8]>]]
// CHECK-SAME: out_layouts = [#smalti.strided<vec = 2>]
// CHECK-NOT: smalti.layout_cast
// CHECK: "smalti.vector_store"{{.*}} {in_layouts = [#smalti.strided<vec = 2>]}
func.func @adapts(%a: memref<64x8xf32>, %b: memref<16x16xf32>, %out: memref<64x8xf32>) {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<16x16xf32, #gpu.address_space<workgroup>>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x8xf32>, index, index) -> vector<64x8xf32>
  %z = "smalti.vector_load"(%b, %c0, %c0) : (memref<16x16xf32>, index, index) -> vector<16x16xf32>
  "smalti.vector_store"(%z, %s, %c0, %c0) : (vector<16x16xf32>, memref<16x16xf32, #gpu.address_space<workgroup>>, index, index) -> ()
  %y = "smalti.custom_primitive"(%x, %s) ({
  ^bb0(%x0: f32, %x1: f32, %x2: f32, %x3: f32, %p: i32):
    "smalti.custom_yield"(%x3, %x2, %x1, %x0) : (f32, f32, f32, f32) -> ()
  }) {in_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>],
      out_layouts = [#smalti.strided<vec = 2>], in_transforms = [[#smalti.tile<[8, 8]>]]}
      : (vector<64x8xf32>, memref<16x16xf32, #gpu.address_space<workgroup>>) -> vector<64x8xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x8xf32>, memref<64x8xf32>, index, index) -> ()
  return
}

// -----

// Declared transforms another op contradicts (with_transforms fixes other tiles): no
// relayout resolves a ref's transforms, so inference reports both ops.
func.func @conflicting_transforms() {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<16x16xf32, #gpu.address_space<workgroup>>
  // expected-note @+1 {{'smalti.with_transforms': with_transforms sets the transforms: [#smalti.tile<[16, 16]>]}}
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[16, 16]>]} : (memref<16x16xf32, #gpu.address_space<workgroup>>) -> memref<16x16xf32, #gpu.address_space<workgroup>>
  // expected-error @+2 {{'smalti.custom_primitive' op cannot be given transforms: conflicting layouts required for one value (2 constraints in conflict)}}
  // expected-note @+1 {{'smalti.custom_primitive': custom_primitive declares its shared-memory transforms: [#smalti.tile<[8, 8]>]}}
  "smalti.custom_primitive"(%t) ({
  ^bb0(%p: i32):
    "smalti.custom_yield"() : () -> ()
  }) {in_transforms = [[#smalti.tile<[8, 8]>]]} : (memref<16x16xf32, #gpu.address_space<workgroup>>) -> ()
  return
}
