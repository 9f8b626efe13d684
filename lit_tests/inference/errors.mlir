// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-infer-layouts

// Conflicts no relayout resolves (inference inserts relayouts where some do:
// inferred_relayouts.mlir).

// A splat stored is relaid out into the store's layout (register moves); what no relayout
// resolves is the cast of a loaded, distributed value to a splat.
func.func @splat_stored(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  // expected-note @+2 {{vector_load loads a distributed layout, not a splat}}
  // expected-note-re @+1 {{layouts tried: {{.*}}: this relayout is not supported}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  // expected-error-re @+3 {{'smalti.layout_cast' op cannot be given a layout: no layout of the result of 'smalti.vector_load' at {{.*}} satisfies these constraints together (3 constraints in conflict); no relayout resolves it}}
  // expected-note @+2 {{layout_cast converts its operand's layout}}
  // expected-note @+1 {{layout_cast sets its result's layout: #smalti.splat}}
  %p = "smalti.layout_cast"(%v) {new_layout = #smalti.splat} : (vector<128x128xf32>) -> vector<128x128xf32>
  %n = arith.negf %p : vector<128x128xf32>
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

func.func @broadcast_into_strided(%a: memref<128x128xf32>, %row: vector<128xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+3 {{'vector.broadcast' op cannot be given a layout: no layout exists for the operand of the broadcast to [128, 128] along dims [0] of this layout}}
  // expected-note @+2 {{'vector.broadcast': annotated in out_layouts: #smalti.strided<vec = 4>}}
  // expected-note @+1 {{vector.broadcast moves no data: its operand's layout is the reduction of its result's over the new dims}}
  %b = vector.broadcast %row {out_layouts = [#smalti.strided<vec = 4>]} : vector<128xf32> to vector<128x128xf32>
  return
}
