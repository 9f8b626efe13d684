// RUN: smalti-opt %s --split-input-file --pass-pipeline='builtin.module(smalti-verify,canonicalize,cse,smalti-infer-layouts)' | filecheck %s

// Constants (and broadcast scalars, and iotas) are free to make in any layout: each user
// gets a copy in the layout it needs, and copies that end up in one layout are one op again.

// One zero accumulator for a row and a column reduction of one 128x128 tile (CSE makes one
// constant of two, so the default pipeline needs this even when the user wrote two).
// CHECK-LABEL: func.func @row_and_column_sums
// CHECK-DAG: arith.constant {out_layouts = [#smalti.tiled<tiling = [[64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>]} dense<0.000000e+00> : vector<128xf32>
// CHECK-DAG: arith.constant {out_layouts = [#smalti.tiled<tiling = [[8], [2]], warp = [r4], lane = [r8, -2], vector = -1>]} dense<0.000000e+00> : vector<128xf32>
// CHECK: vector.multi_reduction <add>
// CHECK-SAME: [1]
// CHECK: vector.multi_reduction <add>
// CHECK-SAME: [0]
func.func @row_and_column_sums(%a: memref<128x128xf32>, %rows: memref<128xf32>, %cols: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %z = arith.constant dense<0.0> : vector<128xf32>
  %r = vector.multi_reduction <add>, %x, %z [1] : vector<128x128xf32> to vector<128xf32>
  %z2 = arith.constant dense<0.0> : vector<128xf32>
  %c = vector.multi_reduction <add>, %x, %z2 [0] : vector<128x128xf32> to vector<128xf32>
  "smalti.vector_store"(%r, %rows, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  "smalti.vector_store"(%c, %cols, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

// Copies that get one layout are folded back: one constant for the two adds.
// CHECK-LABEL: func.func @one_layout_one_constant
// CHECK: arith.constant {out_layouts = [#smalti.strided<vec = 4>]} dense<2.000000e+00>
// CHECK-NOT: arith.constant {{.*}}dense<2.000000e+00>
// CHECK: return
func.func @one_layout_one_constant(%a: memref<128x128xf32>, %b: memref<128x128xf32>) {
  %c0 = arith.constant 0 : index
  %two = arith.constant dense<2.0> : vector<128x128xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = arith.addf %x, %two : vector<128x128xf32>
  %t = arith.mulf %y, %two : vector<128x128xf32>
  "smalti.vector_store"(%s, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  "smalti.vector_store"(%t, %b, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}

// -----

// A broadcast scalar and an iota, each used in the wgmma layout and in its transpose.
// CHECK-LABEL: func.func @scalar_and_iota
// CHECK-DAG: vector.broadcast %{{.*}} {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK-DAG: vector.broadcast %{{.*}} {out_layouts = [#smalti.tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>]}
// CHECK-DAG: "smalti.iota"() {dimension = 0 : i64, out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK-DAG: "smalti.iota"() {dimension = 0 : i64, out_layouts = [#smalti.tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>]}
func.func @scalar_and_iota(%a: memref<64x64xf32>, %b: memref<64x64xi32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %xt = vector.transpose %x, [1, 0] : vector<64x64xf32> to vector<64x64xf32>
  %v = vector.broadcast %s : f32 to vector<64x64xf32>
  %p = arith.addf %x, %v : vector<64x64xf32>
  %q = arith.addf %xt, %v : vector<64x64xf32>
  "smalti.vector_store"(%p, %a, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  "smalti.vector_store"(%q, %a, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  %i = "smalti.iota"() {dimension = 0 : i64} : () -> vector<64x64xi32>
  %y = "smalti.vector_load"(%b, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xi32>, index, index) -> vector<64x64xi32>
  %yt = vector.transpose %y, [1, 0] : vector<64x64xi32> to vector<64x64xi32>
  %j = arith.addi %y, %i : vector<64x64xi32>
  %k = arith.addi %yt, %i : vector<64x64xi32>
  "smalti.vector_store"(%j, %b, %c0, %c0) : (vector<64x64xi32>, memref<64x64xi32>, index, index) -> ()
  "smalti.vector_store"(%k, %b, %c0, %c0) : (vector<64x64xi32>, memref<64x64xi32>, index, index) -> ()
  return
}

// -----

// unknown_location_folded_constant.mlir: canonicalize folds minnumf(0.125, 0.5) into the
// constant 0.125, which CSE merges with %v1; the one constant is then cast to the wgmma
// layout and used by an fma whose result is reduced over dim 0 into the per-row layout.
// With a copy per user both have layouts (the program used to be refused).
// CHECK-LABEL: func.func @folded
// CHECK-DAG: %[[SPLAT:.*]] = arith.constant {out_layouts = [#smalti.splat]} dense<1.250000e-01> : vector<64x256xf16>
// CHECK-DAG: %[[T:.*]] = arith.constant {out_layouts = [#smalti.tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>]} dense<1.250000e-01> : vector<64x256xf16>
// CHECK: "smalti.layout_cast"(%[[SPLAT]])
// CHECK: math.fma %[[T]], %[[T]], %[[T]]
func.func @folded(%in1: memref<256xf16>, %in2: memref<256xf16>, %out0: memref<256xf16>, %out4: memref<64x256xf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v1 = arith.constant dense<0.125> : vector<64x256xf16>
  %v2 = arith.constant dense<0.5> : vector<64x256xf16>
  %v3 = arith.minnumf %v1, %v2 : vector<64x256xf16>
  %v4 = "smalti.layout_cast"(%v1) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x256xf16>) -> vector<64x256xf16>
  "smalti.vector_store"(%v4, %out4, %c0, %c0) : (vector<64x256xf16>, memref<64x256xf16>, index, index) -> ()
  %v11 = math.fma %v3, %v3, %v1 : vector<64x256xf16>
  %v12 = "smalti.vector_load"(%in2, %c0) : (memref<256xf16>, index) -> vector<256xf16>
  %v13 = vector.multi_reduction <minnumf>, %v11, %v12 [0] : vector<64x256xf16> to vector<256xf16>
  %v17 = "smalti.layout_cast"(%v13) {new_layout = #smalti.tiled<tiling = [[64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>} : (vector<256xf16>) -> vector<256xf16>
  %v19 = "smalti.vector_load"(%in1, %c0) : (memref<256xf16>, index) -> vector<256xf16>
  %v20 = math.fma %v17, %v19, %v13 : vector<256xf16>
  "smalti.vector_store"(%v20, %out0, %c0) : (vector<256xf16>, memref<256xf16>, index) -> ()
  return
}
