// FINDING: refusal: refused a satisfiable program: error: 'vector.extract_strided_slice' op cannot be given a layout: no layout of the result of 'smalti.vector_load' at LOC satisfies these constraints together (N constraints in conflict)
//   differential_program.mlir:6:9: error: 'vector.extract_strided_slice' op cannot be given a layout: no layout of the result of 'smalti.vector_load' at differential_program.mlir:5:9 satisfies these constraints together (2 constraints in conflict)
//   differential_program.mlir:5:9: note: 'smalti.vector_load': vector_load loads a distributed layout, not a splat
//   differential_program.mlir:6:9: note: 'vector.extract_strided_slice': vector.extract_strided_slice takes whole tiles
//   differential_program.mlir:5:9: note: layouts tried: #smalti.strided<vec = 4>, #smalti.strided<vec = 8>, #smalti.strided<vec = 2>, #smalti.strided<vec = 1>: only tiled and splat layouts can be sliced without moving data; wgmma: the slice [4, 12) of dim 1 cuts through the layout's [64, 8] tiles; wgmma-8bit: the slice [4, 12) of dim 1 cuts through the layout's [64, 16] tiles; wgmma-col: this layout is too dear: 32 copies of each element take 256 registers per thread (a replicated layout may take 255, one without copies 8)
//   an assignment: smalti.vector_load at loc("differential_program.mlir":5:9): #smalti.tiled<tiling = [[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>; vector.extract_strided_slice at loc("differential_program.mlir":6:9): #smalti.tiled<tiling = [[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>
// Replay: python -m tests.differential.findings mlir_slice_by_4_columns.mlir
// PROGRAM: {"@":"Program","kind":"mlir","seed":19,"grid":[1],"refs":[{"@":"Ref","name":"in0","shape":[64,16],"dtype":"f32","output":false},{"@":"Ref","name":"out0","shape":[64,8],"dtype":"f32","output":true}],"body":[{"@":"Load","out":"v1","ref":"in0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}],"type":{"@":"VType","shape":[64,16],"dtype":"f32"}},{"@":"Slice","out":"v2","value":"v1","offsets":[0,4],"sizes":[64,8]},{"@":"Store","value":"v2","ref":"out0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}]}],"dynamic":null,"batch":0}
func.func @kernel(%in0: memref<64x16xf32>, %out0: memref<64x8xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %n_0 = arith.constant 0 : index
  %block = gpu.block_id x
  %v1 = "smalti.vector_load"(%in0, %n_0, %n_0) : (memref<64x16xf32>, index, index) -> vector<64x16xf32>
  %v2 = "vector.extract_strided_slice"(%v1) <{offsets = [0, 4], sizes = [64, 8], strides = [1, 1]}> : (vector<64x16xf32>) -> vector<64x8xf32>
  "smalti.vector_store"(%v2, %out0, %n_0, %n_0) : (vector<64x8xf32>, memref<64x8xf32>, index, index) -> ()
  return
}
