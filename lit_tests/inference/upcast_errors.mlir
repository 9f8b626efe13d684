// RUN: smalti-opt %s --verify-diagnostics --smalti-infer-layouts

// A 4-bit value converts eight to a .b32 register, and no relayout moves 4-bit elements:
// a cast of int4 to the WGMMA layout (two per vector) before a conversion is refused at
// the conversion, naming the cast (bitwidth-aware inference: upcast.mlir).
func.func @int4_cast_to_pairs(%w: memref<64x64xi4>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<64x64xi4>, index, index) -> vector<64x64xi4>
  // expected-note @+1 {{layout_cast sets its result's layout: #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>}}
  %c = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x64xi4>) -> vector<64x64xi4>
  // expected-error @+2 {{'arith.sitofp' op cannot be given a layout: a 4-bit value converts a .b32 register at a time: its layout's vector of 2 elements (8 bits) does not fill whole registers (2 constraints in conflict); no relayout resolves it}}
  // expected-note @+1 {{arith.sitofp converts 4-bit elements a .b32 register at a time}}
  %y = arith.sitofp %c : vector<64x64xi4> to vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}
