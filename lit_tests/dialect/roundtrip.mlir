// RUN: smalti-opt %s --smalti-verify | filecheck %s
// RUN: smalti-opt %s --smalti-verify | smalti-opt --smalti-verify | filecheck %s

// CHECK-LABEL: func.func @ops
// CHECK: %[[V:.*]] = "smalti.vector_load"(%arg0, %{{.*}}, %{{.*}}) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
// CHECK: %[[W:.*]] = "smalti.layout_cast"(%[[V]]) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<128x128xf32>) -> vector<128x128xf32>
// CHECK: "smalti.vector_store"(%[[W]], %arg0, %{{.*}}, %{{.*}}) {in_layouts = [#smalti.strided<vec = 4>]} : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
func.func @ops(%a: memref<128x256xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %v = "smalti.vector_load"(%a, %c0, %c128) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %w = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<128x128xf32>) -> vector<128x128xf32>
  "smalti.vector_store"(%w, %a, %c0, %c0) {in_layouts = [#smalti.strided<vec = 4>]} : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// CHECK-LABEL: func.func @layouts
// CHECK-SAME: smalti.a = #smalti.splat
// CHECK-SAME: smalti.b = #smalti.strided<vec = 8>
// CHECK-SAME: smalti.c = #smalti.tiled<tiling = [[8, 16], [1, 4]], warp = [r4], lane = [-4, -3], vector = -1>
func.func @layouts() attributes {smalti.a = #smalti.splat, smalti.b = #smalti.strided<vec = 8>, smalti.c = #smalti.tiled<tiling = [[8, 16], [1, 4]], warp = [r4], lane = [-4, -3], vector = -1>} {
  return
}
