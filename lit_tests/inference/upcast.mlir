// RUN: smalti-opt %s --split-input-file --smalti-infer-layouts | filecheck %s

// Bitwidth-aware inference (smalti/layout_inference/widening.py): a 4- or 8-bit integer
// widened in registers is laid out with whole .b32 registers of consecutive elements, in
// a conversion ("upcast") layout; where the wide value must be in the WGMMA layout (wgmma's
// A operand) inference inserts the relayout, by shuffles within warps, on the cheapest value
// the lowering moves.

// int4 -> bf16 -> wgmma A: the load in WGMMA_LAYOUT_UPCAST_4X (8 columns per register, the
// converted value too), one relayout of the bf16 value to the WGMMA layout.
// CHECK-LABEL: func.func @int4_to_wgmma_a
// CHECK: "smalti.vector_load"{{.*}}out_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}64, 32], [16, 32], [8, 32], [8]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK-SAME: -> vector<128x128xi4>
// CHECK-NEXT: arith.sitofp {{.*}}out_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}64, 32], [16, 32], [8, 32], [8]], warp = [-7], lane = [-3, -2], vector = -1>]}
// CHECK-NEXT: "smalti.layout_cast"{{.*}}inferred = "shuffles", new_layout = #smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>
// CHECK-NEXT: "smalti.wgmma"
func.func @int4_to_wgmma_a(%w: memref<128x128xi4>, %out: memref<128x64xf32>) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<128x64xf32>
  %b = "smalti.slice_smem"(%c0) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<128x128xi4>, index, index) -> vector<128x128xi4>
  %y = arith.sitofp %x : vector<128x128xi4> to vector<128x128xbf16>
  %d = "smalti.wgmma"(%acc, %y, %b) : (vector<128x64xf32>, vector<128x128xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>) -> vector<128x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  return
}

// -----

// int8 -> f32 -> bf16 -> wgmma A: WGMMA_LAYOUT_UPCAST_2X (4 columns per register: one
// bfly-1 shuffle per register reaches the WGMMA layout), the relayout on the bf16 value,
// not the f32 one (half the words).
// CHECK-LABEL: func.func @int8_to_wgmma_a
// CHECK: "smalti.vector_load"{{.*}}out_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}64, 16], [16, 16], [8, 16], [8], [4]], warp = [-8], lane = [-4, -2, -3], vector = -1>]}
// CHECK-NEXT: arith.sitofp {{.*}}out_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}64, 16], [16, 16], [8, 16], [8], [4]]
// CHECK-NEXT: arith.truncf {{.*}}out_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}64, 16], [16, 16], [8, 16], [8], [4]]
// CHECK-NEXT: "smalti.layout_cast"{{.*}}inferred = "shuffles", new_layout = #smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]]
// CHECK-SAME: (vector<64x64xbf16>) -> vector<64x64xbf16>
func.func @int8_to_wgmma_a(%w: memref<64x64xi8>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %b = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<64x64xi8>, index, index) -> vector<64x64xi8>
  %y = arith.sitofp %x : vector<64x64xi8> to vector<64x64xf32>
  %z = arith.truncf %y : vector<64x64xf32> to vector<64x64xbf16>
  %d = "smalti.wgmma"(%acc, %z, %b) : (vector<64x64xf32>, vector<64x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// Dequantised weights stored to shared memory (smalti.ops.quantized_matmul): the
// conversion layout for row stores (8 columns, one 16-byte bf16 store, per register
// vector); the scales' broadcast reduces it to columns per lane. No relayout.
// CHECK-LABEL: func.func @scaled_int4_to_smem
// CHECK-NOT: layout_cast
// CHECK: "smalti.vector_load"{{.*}}out_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}32, 32], [8, 32], [1, 8]], warp = [-6], lane = [-4, -3], vector = -1>]}
// CHECK-SAME: -> vector<64x128xi4>
// CHECK-NOT: layout_cast
// CHECK: "smalti.vector_store"{{.*}}in_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}32, 32], [8, 32], [1, 8]], warp = [-6], lane = [-4, -3], vector = -1>]
func.func @scaled_int4_to_smem(%w: memref<64x128xi4>, %s: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  %smem = "smalti.slice_smem"(%c0) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<64x128xi4>, index, index) -> vector<64x128xi4>
  %y = arith.sitofp %x : vector<64x128xi4> to vector<64x128xf32>
  %sv = "smalti.vector_load"(%s, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  %sb = vector.broadcast %sv : vector<128xf32> to vector<64x128xf32>
  %z = arith.mulf %y, %sb : vector<64x128xf32>
  %t = arith.truncf %z : vector<64x128xf32> to vector<64x128xbf16>
  "smalti.vector_store"(%t, %smem, %c0, %c0) : (vector<64x128xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
  return
}

// -----

// A user's cast of int8 to the WGMMA layout (vectors of 2 bytes) keeps its meaning; the
// conversion's operand is relayouted before widening, by shuffles of the narrow registers.
// CHECK-LABEL: func.func @narrow_relayout_before_widening
// CHECK: "smalti.layout_cast"{{.*}}new_layout = #smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]]
// CHECK-NEXT: "smalti.layout_cast"{{.*}}inferred = "shuffles", new_layout = #smalti.tiled<tiling = {{\[\[}}64, 16], [16, 16], [8, 16], [8], [4]]
// CHECK-SAME: (vector<64x64xi8>) -> vector<64x64xi8>
// CHECK-NEXT: arith.sitofp
func.func @narrow_relayout_before_widening(%w: memref<64x64xi8>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<64x64xi8>, index, index) -> vector<64x64xi8>
  %c = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x64xi8>) -> vector<64x64xi8>
  %y = arith.sitofp %c : vector<64x64xi8> to vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// Stored at 32 bits straight away: the load's widest strided layout already fills whole
// registers (16 bytes per thread); 8-bit floats convert in pairs and keep the WGMMA layout.
// CHECK-LABEL: func.func @int8_to_f32_store
// CHECK: "smalti.vector_load"{{.*}}out_layouts = {{\[}}#smalti.strided<vec = 16>]
// CHECK-NOT: layout_cast
// CHECK-LABEL: func.func @e4m3_in_wgmma_layout
// CHECK-NOT: inferred
// CHECK: arith.extf {{.*}}in_layouts = {{\[}}#smalti.tiled<tiling = {{\[\[}}64, 8], [16, 8], [8, 8], [2]]
func.func @int8_to_f32_store(%w: memref<64x64xi8>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<64x64xi8>, index, index) -> vector<64x64xi8>
  %y = arith.sitofp %x : vector<64x64xi8> to vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}
func.func @e4m3_in_wgmma_layout(%w: memref<64x64xf8E4M3FN>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%w, %c0, %c0) : (memref<64x64xf8E4M3FN>, index, index) -> vector<64x64xf8E4M3FN>
  %c = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x64xf8E4M3FN>) -> vector<64x64xf8E4M3FN>
  %y = arith.extf %c : vector<64x64xf8E4M3FN> to vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}
