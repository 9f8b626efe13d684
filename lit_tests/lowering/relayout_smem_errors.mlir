// RUN: smalti-translate %s --split-input-file --verify-diagnostics

// A relayout across warps needs static shared memory besides the kernel's dynamic buffer:
// 224 KiB of dynamic shared memory leave less than the 16 KiB scratch of a 64x64 f32
// transpose in the 227 KiB a block has.
func.func @too_much_shared_memory(%a: memref<64x64xf32>, %out: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %big = "smalti.slice_smem"(%c0) : (index) -> memref<224x256xf32, #gpu.address_space<workgroup>>
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  "smalti.vector_store"(%x, %big, %c0, %c0) : (vector<64x64xf32>, memref<224x256xf32, #gpu.address_space<workgroup>>, index, index) -> ()
  // expected-error @+1 {{'smalti.layout_cast' op relayouts through shared memory need 16384 bytes of shared memory besides the kernel's 229376: more than the 232448 a block has}}
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>} : (vector<64x64xf32>) -> vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// Four warpgroups run the relayout at once, so each copy of the scratch may take 8 KiB
// (four copies within the 48 KiB of static shared memory); strided<vec = 1> and
// strided<vec = 32> hold no element bit in registers both, so the 16 KiB value does not
// split into rounds.
func.func @no_rounds_for_four_copies(%a: memref<64x64xf32>, %out: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 4 : i64} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  // expected-error-re @+1 {{'smalti.layout_cast' op relayout from #smalti.strided<vec = 1> to #smalti.strided<vec = 32> cannot be done through shared memory: a relayout through shared memory of 16384 bytes does not split into rounds of at most 8192 bytes (too few element bits both layouts hold in registers); 4 warpgroups run relayouts, and their copies of the scratch must fit 49152 bytes}}
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 32>} : (vector<64x64xf32>) -> vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}
