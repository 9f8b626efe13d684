// RUN: smalti-opt %s --split-input-file --smalti-infer-layouts | filecheck %s

// Loads, elementwise ops and stores of f32 share the widest strided layout (16-byte vectors).
// CHECK-LABEL: func.func @pointwise_f32
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.strided<vec = 4>]}
// CHECK: arith.mulf {{.*}} {in_layouts = [#smalti.strided<vec = 4>, #smalti.strided<vec = 4>], out_layouts = [#smalti.strided<vec = 4>]}
// CHECK: math.exp {{.*}} {in_layouts = [#smalti.strided<vec = 4>], out_layouts = [#smalti.strided<vec = 4>]}
// CHECK: "smalti.vector_store"{{.*}} {in_layouts = [#smalti.strided<vec = 4>]}
func.func @pointwise_f32(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %m = arith.mulf %v, %v : vector<128x128xf32>
  %e = math.exp %m : vector<128x128xf32>
  "smalti.vector_store"(%e, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

// 16-bit elements take 8 per thread-vector.
// CHECK-LABEL: func.func @pointwise_bf16
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.strided<vec = 8>]}
// CHECK: arith.addf {{.*}} out_layouts = [#smalti.strided<vec = 8>]
func.func @pointwise_bf16(%a: memref<256x256xbf16>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<256x256xbf16>, index, index) -> vector<128x128xbf16>
  %s = arith.addf %v, %v : vector<128x128xbf16>
  "smalti.vector_store"(%s, %a, %c0, %c0) : (vector<128x128xbf16>, memref<256x256xbf16>, index, index) -> ()
  return
}

// -----

// A splat constant takes the layout of what it is combined with...
// CHECK-LABEL: func.func @splat_operand
// CHECK: arith.constant {out_layouts = [#smalti.strided<vec = 4>]} dense<2.000000e+00>
// CHECK: arith.mulf {{.*}} {in_layouts = [#smalti.strided<vec = 4>, #smalti.strided<vec = 4>]
func.func @splat_operand(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %two = arith.constant dense<2.0> : vector<128x128xf32>
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %m = arith.mulf %v, %two : vector<128x128xf32>
  "smalti.vector_store"(%m, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

// ... stays a splat when nothing needs more, and is never one where a store needs registers.
// CHECK-LABEL: func.func @splat_alone
// CHECK: %[[A:.*]] = arith.constant {out_layouts = [#smalti.splat]} dense<1.000000e+00>
// CHECK: arith.negf %[[A]] {in_layouts = [#smalti.splat], out_layouts = [#smalti.splat]}
// CHECK: %[[B:.*]] = arith.constant {out_layouts = [#smalti.strided<vec = 4>]} dense<3.000000e+00>
// CHECK: "smalti.vector_store"(%[[B]]{{.*}} {in_layouts = [#smalti.strided<vec = 4>]}
func.func @splat_alone(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant dense<1.0> : vector<128x128xf32>
  %neg = arith.negf %one : vector<128x128xf32>
  %three = arith.constant dense<3.0> : vector<128x128xf32>
  "smalti.vector_store"(%three, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

// A layout_cast fixes its result. The lowering cannot convert strided to tiled layouts, so
// the cast's operand takes the cast's layout too, and the equations carry it to %u.
// CHECK-LABEL: func.func @cast_propagates
// CHECK: "smalti.vector_load"(%arg0{{.*}} {out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: "smalti.layout_cast"{{.*}} {in_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>], new_layout = #smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>, out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: "smalti.vector_load"(%arg1{{.*}} {out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: arith.addf {{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]
func.func @cast_propagates(%a: memref<128x256xf32>, %b: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %w = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<128x128xf32>) -> vector<128x128xf32>
  %u = "smalti.vector_load"(%b, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %s = arith.addf %w, %u : vector<128x128xf32>
  "smalti.vector_store"(%s, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

// Mixed widths in one class: hints tie on priority, so the first op's wins (the bf16 load's
// 16-byte vectors; the f32 store then writes each vector with two 16-byte accesses).
// CHECK-LABEL: func.func @extf
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.strided<vec = 8>]}
// CHECK: arith.extf {{.*}} {in_layouts = [#smalti.strided<vec = 8>], out_layouts = [#smalti.strided<vec = 8>]}
func.func @extf(%a: memref<128x128xbf16>, %b: memref<128x128xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xbf16>, index, index) -> vector<128x128xbf16>
  %w = arith.extf %v : vector<128x128xbf16> to vector<128x128xf32>
  "smalti.vector_store"(%w, %b, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}

// -----

// Inference is idempotent: a second run keeps the first run's answer.
// CHECK-LABEL: func.func @rerun
// CHECK: out_layouts = [#smalti.strided<vec = 2>]
func.func @rerun(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 2>]} : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  "smalti.vector_store"(%v, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

// A column read from memory as (64, 1), squeezed to (64,) and broadcast over the rows of a
// wgmma-laid-out product: the load takes the row layout through the unit dim (the reshape
// keeps every element in its thread), so no relayout is needed. One element loads as a
// splat: every thread reads it.
// CHECK-LABEL: func.func @row_scale
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.splat]} : {{.*}} -> vector<1x1xf32>
// CHECK: "smalti.vector_load"{{.*}} {out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 1], [16, 1], [8, 1], [1, 1]], warp = [-8], lane = [-4, r4], vector = -2>]} : {{.*}} -> vector<64x1xf32>
// CHECK: vector.shape_cast {{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>]}
func.func @row_scale(%s: memref<64x2xf32>, %out: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %acc = arith.constant dense<1.0> : vector<64x128xf32>
  %one = "smalti.vector_load"(%s, %c1, %c0) : (memref<64x2xf32>, index, index) -> vector<1x1xf32>
  %col = "smalti.vector_load"(%s, %c0, %c1) : (memref<64x2xf32>, index, index) -> vector<64x1xf32>
  %row = vector.shape_cast %col : vector<64x1xf32> to vector<64xf32>
  %b = "smalti.broadcast_in_dim"(%row) {broadcast_dimensions = array<i64: 0>} : (vector<64xf32>) -> vector<64x128xf32>
  %all = vector.broadcast %one : vector<1x1xf32> to vector<64x128xf32>
  %w = "smalti.layout_cast"(%acc) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x128xf32>) -> vector<64x128xf32>
  %p = arith.mulf %w, %b : vector<64x128xf32>
  %q = arith.mulf %p, %all : vector<64x128xf32>
  "smalti.vector_store"(%q, %out, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}
