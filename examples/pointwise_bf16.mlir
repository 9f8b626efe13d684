// out = a * b + c on 256x256 bf16 arrays: one warpgroup per 128x128 block, a 2x2 grid.
// Run: smalti-translate examples/pointwise_bf16.mlir --to=ptx
func.func @pointwise_bf16(%a: memref<256x256xbf16>, %b: memref<256x256xbf16>,
                          %c: memref<256x256xbf16>, %out: memref<256x256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2, 2>} {
  %bx = gpu.block_id x
  %by = gpu.block_id y
  %c128 = arith.constant 128 : index
  %row = arith.muli %by, %c128 : index
  %col = arith.muli %bx, %c128 : index
  %va = "smalti.vector_load"(%a, %row, %col) : (memref<256x256xbf16>, index, index) -> vector<128x128xbf16>
  %vb = "smalti.vector_load"(%b, %row, %col) : (memref<256x256xbf16>, index, index) -> vector<128x128xbf16>
  %vc = "smalti.vector_load"(%c, %row, %col) : (memref<256x256xbf16>, index, index) -> vector<128x128xbf16>
  %ab = arith.mulf %va, %vb : vector<128x128xbf16>
  %r = arith.addf %ab, %vc : vector<128x128xbf16>
  "smalti.vector_store"(%r, %out, %row, %col) : (vector<128x128xbf16>, memref<256x256xbf16>, index, index) -> ()
  return
}
