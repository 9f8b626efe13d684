// RUN: smalti-opt %s --split-input-file --smalti-infer-layouts | filecheck %s

// Collective ops. The multimem ops access memory as vector_load / vector_store do: any
// distributed layout, the widest strided one preferred. The scalar ops (slice_symmetric,
// device_index, device_count, remote_ref, the semaphores) constrain nothing and get no
// layout attributes.

// A plain 2-D f32 vector: 16-byte vectors (vec = 4), through load_reduce, an elementwise op,
// store and red alike.
// CHECK-LABEL: func.func @multimem_strided
// CHECK: "smalti.slice_symmetric"(%{{.*}}) : (index) -> memref<128x256xf32, "symmetric">
// CHECK: "smalti.multimem_load_reduce"({{.*}}) {out_layouts = [#smalti.strided<vec = 4>], reduction = "add"}
// CHECK: arith.mulf {{.*}} {in_layouts = [#smalti.strided<vec = 4>, #smalti.strided<vec = 4>], out_layouts = [#smalti.strided<vec = 4>]}
// CHECK: "smalti.multimem_store"({{.*}}) {in_layouts = [#smalti.strided<vec = 4>]}
// CHECK: "smalti.multimem_red"({{.*}}) {in_layouts = [#smalti.strided<vec = 4>], reduction = "add"}
func.func @multimem_strided() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                          smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %buf = "smalti.slice_symmetric"(%c0) : (index) -> memref<128x256xf32, "symmetric">
  %r = "smalti.multimem_load_reduce"(%buf, %c0, %c0) {reduction = "add"} : (memref<128x256xf32, "symmetric">, index, index) -> vector<128x128xf32>
  %m = arith.mulf %r, %r : vector<128x128xf32>
  "smalti.multimem_store"(%m, %buf, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32, "symmetric">, index, index) -> ()
  "smalti.multimem_red"(%m, %buf, %c0, %c0) {reduction = "add"} : (vector<128x128xf32>, memref<128x256xf32, "symmetric">, index, index) -> ()
  return
}

// -----

// 16-bit elements take 8 per thread-vector.
// CHECK-LABEL: func.func @multimem_bf16
// CHECK: "smalti.multimem_load_reduce"({{.*}}) {out_layouts = [#smalti.strided<vec = 8>], reduction = "max"}
// CHECK: "smalti.multimem_store"({{.*}}) {in_layouts = [#smalti.strided<vec = 8>]}
func.func @multimem_bf16() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                       smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %buf = "smalti.slice_symmetric"(%c0) : (index) -> memref<128x128xbf16, "symmetric">
  %r = "smalti.multimem_load_reduce"(%buf, %c0, %c0) {reduction = "max"} : (memref<128x128xbf16, "symmetric">, index, index) -> vector<128x128xbf16>
  "smalti.multimem_store"(%r, %buf, %c0, %c0) : (vector<128x128xbf16>, memref<128x128xbf16, "symmetric">, index, index) -> ()
  return
}

// -----

// A fixed (wgmma accumulator) layout from a layout_cast flows through the elementwise op to
// the multimem ops: their preference for strided layouts is only a hint, and the
// load_reduce joined with the cast's value takes the tiled layout too.
// CHECK-LABEL: func.func @multimem_from_cast
// CHECK: "smalti.layout_cast"{{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: "smalti.multimem_load_reduce"({{.*}}) {out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>], reduction = "add"}
// CHECK: arith.addf {{.*}} out_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK: "smalti.multimem_red"({{.*}}) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>], reduction = "add"}
// CHECK: "smalti.multimem_store"({{.*}}) {in_layouts = [#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
func.func @multimem_from_cast(%a: memref<128x256xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %buf = "smalti.slice_symmetric"(%c0) : (index) -> memref<128x256xf32, "symmetric">
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %w = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<128x128xf32>) -> vector<128x128xf32>
  %r = "smalti.multimem_load_reduce"(%buf, %c0, %c128) {reduction = "add"} : (memref<128x256xf32, "symmetric">, index, index) -> vector<128x128xf32>
  %s = arith.addf %w, %r : vector<128x128xf32>
  "smalti.multimem_red"(%s, %buf, %c0, %c0) {reduction = "add"} : (vector<128x128xf32>, memref<128x256xf32, "symmetric">, index, index) -> ()
  "smalti.multimem_store"(%s, %buf, %c0, %c128) : (vector<128x128xf32>, memref<128x256xf32, "symmetric">, index, index) -> ()
  return
}

// -----

// A splat constant reduced in is never a splat (memory needs each thread's own elements);
// the scalar collective ops are left as they are.
// CHECK-LABEL: func.func @multimem_constant
// CHECK: arith.constant {out_layouts = [#smalti.strided<vec = 2>]} dense<1.000000e+00> : vector<256xf32>
// CHECK: "smalti.multimem_red"({{.*}}) {in_layouts = [#smalti.strided<vec = 2>], reduction = "add"}
// CHECK: "smalti.remote_ref"({{.*}}) : (memref<256xf32, "symmetric">, index) -> memref<256xf32, "symmetric">
// CHECK: "smalti.device_index"() : () -> index
// CHECK: "smalti.device_count"() : () -> index
// CHECK: "smalti.semaphore_signal"({{.*}}) : (memref<4xi32, "symmetric">, index, index) -> ()
// CHECK: "smalti.semaphore_wait"({{.*}}) {value = 2 : i64} : (memref<4xi32, "symmetric">, index) -> ()
func.func @multimem_constant() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                           smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  %buf = "smalti.slice_symmetric"(%c0) : (index) -> memref<256xf32, "symmetric">
  %one = arith.constant dense<1.0> : vector<256xf32>
  "smalti.multimem_red"(%one, %buf, %c0) {reduction = "add"} : (vector<256xf32>, memref<256xf32, "symmetric">, index) -> ()
  %peer = "smalti.remote_ref"(%buf, %c1) : (memref<256xf32, "symmetric">, index) -> memref<256xf32, "symmetric">
  %sems = "smalti.slice_symmetric"(%c1024) : (index) -> memref<4xi32, "symmetric">
  %me = "smalti.device_index"() : () -> index
  %n = "smalti.device_count"() : () -> index
  "smalti.semaphore_signal"(%sems, %c0, %me) : (memref<4xi32, "symmetric">, index, index) -> ()
  "smalti.semaphore_wait"(%sems, %c0) {value = 2 : i64} : (memref<4xi32, "symmetric">, index) -> ()
  return
}
