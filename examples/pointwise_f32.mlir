// out = a * b + c on 128x256 f32 arrays: one warpgroup per 128x128 block, grid over blocks.
// Run: smalti-translate examples/pointwise_f32.mlir --to=ptx
func.func @pointwise_f32(%a: memref<128x256xf32>, %b: memref<128x256xf32>,
                         %c: memref<128x256xf32>, %out: memref<128x256xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %block = gpu.block_id x
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %col = arith.muli %block, %c128 : index
  %va = "smalti.vector_load"(%a, %c0, %col) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %vb = "smalti.vector_load"(%b, %c0, %col) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %vc = "smalti.vector_load"(%c, %c0, %col) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  %ab = arith.mulf %va, %vb : vector<128x128xf32>
  %r = arith.addf %ab, %vc : vector<128x128xf32>
  "smalti.vector_store"(%r, %out, %c0, %col) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}
