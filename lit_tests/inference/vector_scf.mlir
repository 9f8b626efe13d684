// RUN: smalti-opt %s --split-input-file --smalti-infer-layouts | filecheck %s

// Reducing the columns of a wgmma-laid-out tile gives the row layout: each row lives in the
// four lanes of a quad. Broadcasting a row vector back lands on the wgmma layout again.
// CHECK-LABEL: func.func @row_max
// CHECK: vector.multi_reduction <maximumf>, {{.*}} {in_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>, #smalti.tiled<tiling = {{\[\[}}64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>], out_layouts = [#smalti.tiled<tiling = {{\[\[}}64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>]}
func.func @row_max(%a: memref<128x128xf32>, %m: vector<128xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %r = vector.multi_reduction <maximumf>, %v, %m [1] : vector<128x128xf32> to vector<128xf32>
  return
}

// -----

// A column reduction broadcast back along the rows: vector.broadcast adds the leading dim.
// CHECK-LABEL: func.func @column_sum_broadcast
// CHECK: vector.multi_reduction <add>, {{.*}} out_layouts = [[[COL:#smalti.tiled<[^>]*>]]]}
// CHECK: vector.broadcast {{.*}} {in_layouts = [[[COL]]], out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: arith.subf {{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]
func.func @column_sum_broadcast(%a: memref<128x128xf32>, %zero: vector<128xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = vector.multi_reduction <add>, %v, %zero [0] : vector<128x128xf32> to vector<128xf32>
  %b = vector.broadcast %s : vector<128xf32> to vector<128x128xf32>
  %d = arith.subf %v, %b : vector<128x128xf32>
  "smalti.vector_store"(%d, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}

// -----

// Known results flow backwards through invertible expressions: the transpose's operand gets
// the layout that transposes into the stored value's.
// CHECK-LABEL: func.func @transpose_backwards
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [[[T:#smalti.tiled<[^>]*>]]]}
// CHECK: vector.transpose {{.*}} {in_layouts = [[[T]]], out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
func.func @transpose_backwards(%a: memref<128x64xf32>, %b: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %t = vector.transpose %v, [1, 0] : vector<128x64xf32> to vector<64x128xf32>
  %w = "smalti.layout_cast"(%t) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x128xf32>) -> vector<64x128xf32>
  "smalti.vector_store"(%w, %b, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}

// -----

// Strided layouts survive a shape_cast that keeps them fitting.
// CHECK-LABEL: func.func @shape_cast
// CHECK: vector.shape_cast {{.*}} {in_layouts = [#smalti.strided<vec = 4>], out_layouts = [#smalti.strided<vec = 4>]}
func.func @shape_cast(%a: memref<128x128xf32>, %b: memref<64x256xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = vector.shape_cast %v : vector<128x128xf32> to vector<64x256xf32>
  "smalti.vector_store"(%s, %b, %c0, %c0) : (vector<64x256xf32>, memref<64x256xf32>, index, index) -> ()
  return
}

// -----

// A loop-carried accumulator, its initial value, its iteration argument and what the body
// yields share a layout; so do both branches of an scf.if.
// CHECK-LABEL: func.func @loop
// CHECK: %[[INIT:.*]] = arith.constant {out_layouts = [#smalti.strided<vec = 4>]} dense<0.000000e+00>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[INIT]]) -> (vector<128x128xf32>)
// CHECK: arith.addf {{.*}} out_layouts = [#smalti.strided<vec = 4>]
// CHECK: scf.if {{.*}} -> (vector<128x128xf32>)
// CHECK: scf.yield {in_layouts = [#smalti.strided<vec = 4>]}
// CHECK: arith.negf {{.*}} out_layouts = [#smalti.strided<vec = 4>]
// CHECK: scf.yield {in_layouts = [#smalti.strided<vec = 4>]}
// CHECK: } {in_layouts = [#smalti.strided<vec = 4>], out_layouts = [#smalti.strided<vec = 4>]}
// CHECK: "smalti.vector_store"{{.*}} {in_layouts = [#smalti.strided<vec = 4>]}
func.func @loop(%a: memref<128x512xf32>, %flag: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant dense<0.0> : vector<128x128xf32>
  %sum = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (vector<128x128xf32>) {
    %col = arith.muli %i, %c128 : index
    %v = "smalti.vector_load"(%a, %c0, %col) : (memref<128x512xf32>, index, index) -> vector<128x128xf32>
    %s = arith.addf %acc, %v : vector<128x128xf32>
    %r = scf.if %flag -> (vector<128x128xf32>) {
      scf.yield %s : vector<128x128xf32>
    } else {
      %n = arith.negf %s : vector<128x128xf32>
      scf.yield %n : vector<128x128xf32>
    }
    scf.yield %r : vector<128x128xf32>
  }
  "smalti.vector_store"(%sum, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x512xf32>, index, index) -> ()
  return
}

// -----

// A strided slice keeps its source's layout.
// CHECK-LABEL: func.func @slice
// (The printed form of the op differs between jaxlib releases: check its parts.)
// CHECK: vector.extract_strided_slice {{.*}}in_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]{{.*}}out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]
// CHECK-SAME: vector<128x128xf32> to vector<64x128xf32>
func.func @slice(%a: memref<128x128xf32>, %b: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = "vector.extract_strided_slice"(%v) <{offsets = [64, 0], sizes = [64, 128], strides = [1, 1]}> : (vector<128x128xf32>) -> vector<64x128xf32>
  "smalti.vector_store"(%s, %b, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}
