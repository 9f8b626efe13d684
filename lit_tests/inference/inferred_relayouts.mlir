// RUN: smalti-opt %s --split-input-file --pass-pipeline='builtin.module(smalti-verify,canonicalize,cse,smalti-infer-layouts)' | filecheck %s
// RUN: smalti-opt %s --split-input-file --pass-pipeline='builtin.module(smalti-verify,canonicalize,cse,smalti-infer-layouts,smalti-infer-layouts)' | filecheck %s

// Programs without a single layout assignment: inference inserts a smalti.layout_cast
// before the cheapest uses that make them solvable, marked `inferred` with the kind of its
// relayout ("registers", "shuffles": within warps; "smem": through shared memory).
// Relayouts within warps are chosen whenever some set of them suffices. Inference run
// again on its own output changes nothing (the second RUN line).

// Row sums plus column sums of one tile: the column sums (one column pair per lane quad,
// in every warp) reach the row sums' layout with shuffles within each warp; the row sums
// would reach the column layout only through shared memory.
// CHECK-LABEL: func.func @row_plus_column_sums
// CHECK: %[[COLS:.*]] = vector.multi_reduction <add>, {{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}8], [2]], warp = [r4], lane = [r8, -2], vector = -1>]} [0]
// CHECK: %[[ROWS:.*]] = vector.multi_reduction <add>, {{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>]} [1]
// CHECK: %[[CAST:.*]] = "smalti.layout_cast"(%[[COLS]]) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}8], [2]], warp = [r4], lane = [r8, -2], vector = -1>], inferred = "shuffles", new_layout = #smalti.tiled<tiling = {{\[\[}}64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>
// CHECK-NEXT: arith.addf %[[CAST]], %[[ROWS]]
// CHECK-NOT: smalti.layout_cast
func.func @row_plus_column_sums(%ref: memref<128x128xf32>, %o: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%ref, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %z = arith.constant dense<0.0> : vector<128xf32>
  %r = vector.multi_reduction <add>, %x, %z [0] : vector<128x128xf32> to vector<128xf32>
  %s = vector.multi_reduction <add>, %x, %z [1] : vector<128x128xf32> to vector<128xf32>
  %t = arith.addf %r, %s : vector<128xf32>
  "smalti.vector_store"(%t, %o, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

// A value in the tf32 A fragment layout added to one in the accumulator layout: the same
// rows in the same warps, columns q, q + 4 against 2q, 2q + 1: shuffles.
// CHECK-LABEL: func.func @tf32_a_plus_accumulator
// CHECK: %[[X:.*]] = "smalti.vector_load"{{.*}}tiling = {{\[\[}}64, 4]
// CHECK: %[[Y:.*]] = "smalti.vector_load"{{.*}}tiling = {{\[\[}}64, 8]
// CHECK: %[[CAST:.*]] = "smalti.layout_cast"(%[[X]]) {{{.*}}inferred = "shuffles", new_layout = #smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>
// CHECK-NEXT: arith.addf %[[CAST]], %[[Y]]
func.func @tf32_a_plus_accumulator(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %o: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %y = "smalti.vector_load"(%b, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %s = arith.addf %x, %y : vector<64x64xf32>
  "smalti.vector_store"(%s, %o, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// limitation_transpose_and_reshape.mlir: a shape_cast keeps only strided layouts and a
// transpose only tiled ones. The tile is loaded in the accumulator layout (the transpose is
// free) and relaid out, within warps, to the strided layout its shape_cast takes.
// CHECK-LABEL: func.func @transpose_and_reshape
// CHECK: %[[V:.*]] = "smalti.vector_load"{{.*}}out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]]
// CHECK: %[[CAST:.*]] = "smalti.layout_cast"(%[[V]]) {{{.*}}inferred = "shuffles", new_layout = #smalti.strided<vec = 16>
// CHECK-NEXT: vector.shape_cast %[[CAST]]
// CHECK: vector.transpose %[[V]]
func.func @transpose_and_reshape(%in4: memref<128x32xf16>, %out0: memref<32x128xf16>, %out1: memref<4096xf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v8 = "smalti.vector_load"(%in4, %c0, %c0) : (memref<128x32xf16>, index, index) -> vector<128x32xf16>
  %v9 = vector.shape_cast %v8 : vector<128x32xf16> to vector<4096xf16>
  %v10 = vector.transpose %v8, [1, 0] : vector<128x32xf16> to vector<32x128xf16>
  "smalti.vector_store"(%v10, %out0, %c0, %c0) : (vector<32x128xf16>, memref<32x128xf16>, index, index) -> ()
  "smalti.vector_store"(%v9, %out1, %c0) : (vector<4096xf16>, memref<4096xf16>, index) -> ()
  return
}

// -----

// limitation_x_plus_xT.mlir and misattributed_transpose_diagnostic.mlir: part A (a row max)
// has layouts as it is; in part B, %y against its own transpose needs the tile in two
// layouts that differ across warps: %y is relaid out through shared memory into the
// transposed layout, whose transpose is the layout the add shares with %y.
// CHECK-LABEL: func.func @x_plus_x_transposed
// CHECK: vector.multi_reduction <maximumf>
// CHECK: %[[Y:.*]] = "smalti.vector_load"(%arg2{{.*}}out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: %[[CAST:.*]] = "smalti.layout_cast"(%[[Y]]) {{{.*}}inferred = "smem", new_layout = #smalti.tiled<tiling = {{\[\[}}8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>
// CHECK-NEXT: %[[T:.*]] = vector.transpose %[[CAST]], [1, 0] {{{.*}}out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]]
// CHECK-NEXT: arith.addf %[[Y]], %[[T]]
// CHECK-NOT: smalti.layout_cast
func.func @x_plus_x_transposed(%a: memref<64x64xf32>, %acc: memref<64xf32>, %b: memref<64x64xf32>,
                               %out0: memref<64xf32>, %out1: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %z = "smalti.vector_load"(%acc, %c0) : (memref<64xf32>, index) -> vector<64xf32>
  %m = vector.multi_reduction <maximumf>, %x, %z [1] : vector<64x64xf32> to vector<64xf32>
  "smalti.vector_store"(%m, %out0, %c0) : (vector<64xf32>, memref<64xf32>, index) -> ()
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %t = vector.transpose %y, [1, 0] : vector<64x64xf32> to vector<64x64xf32>
  %s = arith.addf %y, %t : vector<64x64xf32>
  "smalti.vector_store"(%s, %out1, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// A value held as a splat (the user's cast says so) is stored: every thread makes the
// store's elements from its one register (register moves).
// CHECK-LABEL: func.func @splat_stored
// CHECK: %[[N:.*]] = arith.negf {{.*}}out_layouts = [#smalti.splat]
// CHECK: %[[CAST:.*]] = "smalti.layout_cast"(%[[N]]) {in_layouts = [#smalti.splat], inferred = "registers", new_layout = #smalti.strided<vec = 4>
// CHECK-NEXT: "smalti.vector_store"(%[[CAST]]
func.func @splat_stored(%a: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %k = arith.constant dense<1.5> : vector<128x128xf32>
  %p = "smalti.layout_cast"(%k) {new_layout = #smalti.splat} : (vector<128x128xf32>) -> vector<128x128xf32>
  %n = arith.negf %p : vector<128x128xf32>
  "smalti.vector_store"(%n, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}

// -----

// A cast the user wrote keeps its meaning (one relayout, where it is written): inference
// neither moves it nor marks it.
// CHECK-LABEL: func.func @users_cast_stays
// CHECK: "smalti.layout_cast"(%[[R:.*]]) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}8], [2]], warp = [r4], lane = [r8, -2], vector = -1>], new_layout = #smalti.tiled<tiling = {{\[\[}}64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>
// CHECK-NOT: inferred
func.func @users_cast_stays(%ref: memref<128x128xf32>, %o: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%ref, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %z = arith.constant dense<0.0> : vector<128xf32>
  %r = vector.multi_reduction <add>, %x, %z [0] : vector<128x128xf32> to vector<128xf32>
  %c = "smalti.layout_cast"(%r) {new_layout = #smalti.tiled<tiling = [[64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>} : (vector<128xf32>) -> vector<128xf32>
  %s = vector.multi_reduction <add>, %x, %z [1] : vector<128x128xf32> to vector<128xf32>
  %t = arith.addf %c, %s : vector<128xf32>
  "smalti.vector_store"(%t, %o, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

// Rule gaps where no data moves, so no cast is inserted.
// limitation_broadcast_back_tf32.mlir: the row sums broadcast back into the tf32 A layout
// (the broadcast's operand layout is the reduction of its result's: the row layout).
// CHECK-LABEL: func.func @broadcast_back_tf32
// CHECK-NOT: smalti.layout_cast
// CHECK: "smalti.broadcast_in_dim"{{.*}}in_layouts = [#smalti.tiled<tiling = {{\[\[}}64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>], out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 4], [16, 4], [8, 4], [1]]
// CHECK: arith.subf {{.*}}out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 4], [16, 4], [8, 4], [1]]
func.func @broadcast_back_tf32(%a: memref<64x64xf32>, %o: memref<64x64xf32>, %o2: memref<64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %z = arith.constant dense<0.0> : vector<64xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %r = vector.multi_reduction <add>, %x, %z [1] : vector<64x64xf32> to vector<64xf32>
  %b = "smalti.broadcast_in_dim"(%r) {broadcast_dimensions = array<i64: 0>} : (vector<64xf32>) -> vector<64x64xf32>
  %d = arith.subf %x, %b : vector<64x64xf32>
  "smalti.vector_store"(%d, %o, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  "smalti.vector_store"(%r, %o2, %c0) : (vector<64xf32>, memref<64xf32>, index) -> ()
  return
}

// -----

// The same in the 8-bit A layout (16 columns per tile, 4 to a thread's vector).
// CHECK-LABEL: func.func @broadcast_back_8bit
// CHECK-NOT: smalti.layout_cast
// CHECK: "smalti.broadcast_in_dim"{{.*}}out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 16], [16, 16], [8, 16], [4]]
func.func @broadcast_back_8bit(%a: memref<64x64xf32>, %o: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %z = arith.constant dense<0xFF800000> : vector<64xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %r = vector.multi_reduction <maximumf>, %x, %z [1] : vector<64x64xf32> to vector<64xf32>
  %b = "smalti.broadcast_in_dim"(%r) {broadcast_dimensions = array<i64: 0>} : (vector<64xf32>) -> vector<64x64xf32>
  %d = arith.subf %x, %b : vector<64x64xf32>
  "smalti.vector_store"(%d, %o, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// tests/differential/findings/mlir_slice_by_4_columns.mlir (limitation_slice_through_tiles
// .mlir): x[:, 4:12] of a 64x16 f32 tile is whole [64, 4] tiles of the tf32 A layout.
// CHECK-LABEL: func.func @slice_by_4_columns
// CHECK-NOT: smalti.layout_cast
// CHECK: "smalti.vector_load"{{.*}}out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>]}
func.func @slice_by_4_columns(%a: memref<64x16xf32>, %b: memref<64x8xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x16xf32>, index, index) -> vector<64x16xf32>
  %s = "vector.extract_strided_slice"(%v) <{offsets = [0, 4], sizes = [64, 8], strides = [1, 1]}> : (vector<64x16xf32>) -> vector<64x8xf32>
  "smalti.vector_store"(%s, %b, %c0, %c0) : (vector<64x8xf32>, memref<64x8xf32>, index, index) -> ()
  return
}

// -----

// tests/differential/findings/mlir_insert_into_splat.mlir: one splat inserted into another
// is not uniform, so neither they nor the result are given the splat layout.
// CHECK-LABEL: func.func @insert_into_splat
// CHECK: insert_strided_slice{{.*}}out_layouts = [#smalti.tiled<
// CHECK: "smalti.debug_print"{{.*}}in_layouts = [#smalti.tiled<
func.func @insert_into_splat(%out0: memref<128x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %k1 = arith.constant dense<2> : vector<128x128xi32>
  %k2 = arith.constant dense<4096> : vector<64x128xi32>
  %v3 = "vector.insert_strided_slice"(%k2, %k1) <{offsets = [0, 0], strides = [1, 1]}> : (vector<64x128xi32>, vector<128x128xi32>) -> vector<128x128xi32>
  "smalti.debug_print"(%v3) {format = "p1 = {}"} : (vector<128x128xi32>) -> ()
  "smalti.vector_store"(%k1, %out0, %c0, %c0) : (vector<128x128xi32>, memref<128x128xi32>, index, index) -> ()
  return
}

// -----

// Two casts the user wrote meet at an add: each keeps its meaning, and the add's strided
// operand is relaid out (through shared memory: the layouts differ across warps) into the
// wgmma layout of the other.
// CHECK-LABEL: func.func @two_casts_meet
// CHECK: %[[P:.*]] = "smalti.layout_cast"(%{{.*}}) {{{.*}}new_layout = #smalti.strided<vec = 4>
// CHECK-NEXT: %[[Q:.*]] = "smalti.layout_cast"
// CHECK-NEXT: %[[CAST:.*]] = "smalti.layout_cast"(%[[P]]) {in_layouts = [#smalti.strided<vec = 4>], inferred = "smem", new_layout = #smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>
// CHECK-NEXT: arith.addf %[[CAST]], %[[Q]]
func.func @two_casts_meet(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %p = "smalti.layout_cast"(%v) {new_layout = #smalti.strided<vec = 4>} : (vector<128x128xf32>) -> vector<128x128xf32>
  %q = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<128x128xf32>) -> vector<128x128xf32>
  %s = arith.addf %p, %q : vector<128x128xf32>
  "smalti.vector_store"(%s, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

// Rows [32, 96) cut through the 64-row tiles of the layout the load is annotated with: the
// slice's operand is relaid out into the transposed wgmma layout, whose tiles are 8 rows.
// CHECK-LABEL: func.func @slice_through_annotated_tiles
// CHECK: %[[CAST:.*]] = "smalti.layout_cast"(%{{.*}}) {{{.*}}inferred = "smem", new_layout = #smalti.tiled<tiling = {{\[\[}}8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>
// CHECK-NEXT: vector.extract_strided_slice %[[CAST]]
func.func @slice_through_annotated_tiles(%a: memref<128x128xf32>, %o: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = "vector.extract_strided_slice"(%v) <{offsets = [32, 0], sizes = [64, 128], strides = [1, 1]}> : (vector<128x128xf32>) -> vector<64x128xf32>
  "smalti.vector_store"(%s, %o, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}

// -----

// A row reduction of a value annotated strided (which reduces along no axis): the
// reduction's operand is relaid out into the wgmma layout.
// CHECK-LABEL: func.func @reduce_annotated_strided
// CHECK: %[[CAST:.*]] = "smalti.layout_cast"(%{{.*}}) {in_layouts = [#smalti.strided<vec = 4>], inferred = "smem", new_layout = #smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>
// CHECK-NEXT: vector.multi_reduction <add>, %[[CAST]]
func.func @reduce_annotated_strided(%a: memref<128x128xf32>, %o: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  %z = arith.constant dense<0.0> : vector<128xf32>
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 4>]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %r = vector.multi_reduction <add>, %v, %z [1] : vector<128x128xf32> to vector<128xf32>
  "smalti.vector_store"(%r, %o, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}
