// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-infer-layouts

func.func @two_casts_meet(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  // expected-note @+1 {{'smalti.layout_cast': layout_cast sets its result's layout: #smalti.strided<vec = 4>}}
  %p = "smalti.layout_cast"(%v) {new_layout = #smalti.strided<vec = 4>} : (vector<128x128xf32>) -> vector<128x128xf32>
  // expected-error @+2 {{'smalti.layout_cast' op cannot be given a layout: conflicting layouts required for one value (4 constraints in conflict)}}
  // expected-note @+1 {{'smalti.layout_cast': layout_cast sets its result's layout: #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>}}
  %q = "smalti.layout_cast"(%v) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<128x128xf32>) -> vector<128x128xf32>
  // strided<vec = 4> and the wgmma layout differ across warps: the suggested layout_cast
  // goes through shared memory.
  // expected-note @+3 {{'arith.addf': an elementwise op's operands and result share a layout}}
  // expected-note @+2 {{'arith.addf': an elementwise op's operands and result share a layout}}
  // expected-note-re @+1 {{a smalti.layout_cast of the result of 'smalti.layout_cast' at {{.*}}:10:8 to #smalti.strided<vec = 4> before its use here would resolve the conflict}}
  %s = arith.addf %p, %q : vector<128x128xf32>
  "smalti.vector_store"(%s, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

func.func @splat_stored(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  // expected-note @+1 {{layout_cast sets its result's layout: #smalti.splat}}
  %p = "smalti.layout_cast"(%v) {new_layout = #smalti.splat} : (vector<128x128xf32>) -> vector<128x128xf32>
  // expected-note @+1 {{an elementwise op's operands and result share a layout}}
  %n = arith.negf %p : vector<128x128xf32>
  // expected-error @+2 {{'smalti.vector_store' op cannot be given a layout: a splat layout is not allowed here (3 constraints in conflict)}}
  // expected-note @+1 {{vector_store stores a distributed layout, not a splat}}
  "smalti.vector_store"(%n, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}

// -----

func.func @nothing_fits(%a: memref<3x5xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+2 {{no layout fits a vector of shape [3, 5] over the 128 threads of a warpgroup (1 constraint in conflict)}}
  // expected-note @+1 {{vector_load loads a distributed layout, not a splat}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<3x5xf32>, index, index) -> vector<3x5xf32>
  return
}

// -----

func.func @no_rule(%v: vector<128x64xf32>) {
  // expected-error @+1 {{'vector.interleave' op has no layout inference rule}}
  %t = vector.interleave %v, %v : vector<128x64xf32> -> vector<128x128xf32>
  return
}

// -----

// 64-bit elements relayout neither within warps nor through shared memory.
func.func @unsupported_relayout(%a: memref<128x256xi64>) {
  %c0 = arith.constant 0 : index
  // expected-note @+1 {{'smalti.vector_load': annotated in out_layouts: #smalti.strided<vec = 4>}}
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 4>]} : (memref<128x256xi64>, index, index) -> vector<128x128xi64>
  // expected-error @+3 {{'smalti.layout_cast' op cannot be given a layout: this relayout is not supported (only splat broadcasts, no-op casts and relayouts of 8-, 16- and 32-bit elements between distributed layouts are) (3 constraints in conflict)}}
  // expected-note @+2 {{'smalti.layout_cast': layout_cast converts its operand's layout}}
  // expected-note @+1 {{'smalti.layout_cast': layout_cast sets its result's layout: #smalti.strided<vec = 2>}}
  %w = "smalti.layout_cast"(%v) {new_layout = #smalti.strided<vec = 2>} : (vector<128x128xi64>) -> vector<128x128xi64>
  return
}

// -----

func.func @slice_through_tiles(%a: memref<128x128xf32>) {
  %c0 = arith.constant 0 : index
  // expected-note @+1 {{annotated in out_layouts}}
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  // expected-error @+2 {{'vector.extract_strided_slice' op cannot be given a layout: the slice [32, 96) of dim 0 cuts through the layout's [64, 8] tiles}}
  // expected-note @+1 {{vector.extract_strided_slice takes whole tiles}}
  %s = "vector.extract_strided_slice"(%v) <{offsets = [32, 0], sizes = [64, 128], strides = [1, 1]}> : (vector<128x128xf32>) -> vector<64x128xf32>
  return
}

// -----

func.func @reduce_strided(%a: memref<128x128xf32>, %acc: vector<128xf32>) {
  %c0 = arith.constant 0 : index
  // expected-note @+1 {{'smalti.vector_load': annotated in out_layouts: #smalti.strided<vec = 4>}}
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 4>]} : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  // expected-error @+2 {{'vector.multi_reduction' op cannot be given a layout: no layout exists for the reduction of dims [1] of [128, 128] of this layout}}
  // expected-note @+1 {{a reduction's result takes the reduced layout of its source}}
  %r = vector.multi_reduction <add>, %v, %acc [1] : vector<128x128xf32> to vector<128xf32>
  return
}

// -----

func.func @broadcast_into_strided(%a: memref<128x128xf32>, %row: vector<128xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+3 {{'vector.broadcast' op cannot be given a layout: no source layout makes the broadcast of [128] to [128, 128] have this layout}}
  // expected-note @+2 {{'vector.broadcast': annotated in out_layouts: #smalti.strided<vec = 4>}}
  // expected-note @+1 {{vector.broadcast replicates its operand's layout along the new dims}}
  %b = vector.broadcast %row {out_layouts = [#smalti.strided<vec = 4>]} : vector<128xf32> to vector<128x128xf32>
  return
}
