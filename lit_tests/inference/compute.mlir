// RUN: smalti-opt %s --split-input-file --smalti-infer-layouts | filecheck %s

// A row vector broadcast along the columns lands back on the wgmma layout, so the
// subtraction needs no relayout.
// CHECK-LABEL: func.func @row_broadcast
// CHECK: vector.multi_reduction {{.*}} out_layouts = [[[ROW:#smalti.tiled<[^>]*>]]]}
// CHECK: "smalti.broadcast_in_dim"({{.*}}) {broadcast_dimensions = array<i64: 0>, in_layouts = [[[ROW]]], out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: arith.subf {{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]
func.func @row_broadcast(%a: memref<128x64xf32>, %m: vector<128xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %r = vector.multi_reduction <maximumf>, %v, %m [1] : vector<128x64xf32> to vector<128xf32>
  %b = "smalti.broadcast_in_dim"(%r) {broadcast_dimensions = array<i64: 0>} : (vector<128xf32>) -> vector<128x64xf32>
  %d = arith.subf %v, %b : vector<128x64xf32>
  "smalti.vector_store"(%d, %a, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  return
}

// -----

// iota takes any distributed layout and is cheapest strided; an optimization_barrier's
// results share their operands' layouts, whatever fixes them.
// CHECK-LABEL: func.func @iota_barrier
// CHECK: "smalti.iota"() {dimension = 1 : i64, out_layouts = [#smalti.strided<vec = 4>]}
// CHECK: "smalti.optimization_barrier"({{.*}}) {in_layouts = [#smalti.strided<vec = 4>, [[W:#smalti.tiled<[^>]*>]]], out_layouts = [#smalti.strided<vec = 4>, [[W]]]}
func.func @iota_barrier(%a: memref<128x64xi32>, %s: i32) {
  %c0 = arith.constant 0 : index
  %i = "smalti.iota"() {dimension = 1 : i64} : () -> vector<128x64xi32>
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<128x64xi32>, index, index) -> vector<128x64xi32>
  %j, %w, %t = "smalti.optimization_barrier"(%i, %v, %s) : (vector<128x64xi32>, vector<128x64xi32>, i32) -> (vector<128x64xi32>, vector<128x64xi32>, i32)
  "smalti.vector_store"(%j, %a, %c0, %c0) : (vector<128x64xi32>, memref<128x64xi32>, index, index) -> ()
  "smalti.vector_store"(%w, %a, %c0, %c0) : (vector<128x64xi32>, memref<128x64xi32>, index, index) -> ()
  return
}
