// FINDING: refusal: error: 'vector.insert_strided_slice' op inserting into a splat changes its elements: give the destination a distributed layout
//   differential_program.mlir:7:9: error: 'vector.insert_strided_slice' op inserting into a splat changes its elements: give the destination a distributed layout
// Replay: python -m tests.differential.findings mlir_insert_into_splat.mlir
// PROGRAM: {"@":"Program","kind":"mlir","seed":17,"grid":[1],"refs":[{"@":"Ref","name":"out0","shape":[128,128],"dtype":"i32","output":true}],"body":[{"@":"Const","out":"k1","type":{"@":"VType","shape":[128,128],"dtype":"i32"},"value":2,"literal":false},{"@":"Const","out":"k2","type":{"@":"VType","shape":[64,128],"dtype":"i32"},"value":4096,"literal":false},{"@":"Insert","out":"v3","small":"k2","big":"k1","offsets":[0,0]},{"@":"Print","value":"v3","label":1},{"@":"Store","value":"k1","ref":"out0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}]}],"dynamic":null}
func.func @kernel(%out0: memref<128x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %n_0 = arith.constant 0 : index
  %block = gpu.block_id x
  %k1 = arith.constant dense<2> : vector<128x128xi32>
  %k2 = arith.constant dense<4096> : vector<64x128xi32>
  %v3 = "vector.insert_strided_slice"(%k2, %k1) <{offsets = [0, 0], strides = [1, 1]}> : (vector<64x128xi32>, vector<128x128xi32>) -> vector<128x128xi32>
  "smalti.debug_print"(%v3) {format = "p1 = {}"} : (vector<128x128xi32>) -> ()
  "smalti.vector_store"(%k1, %out0, %n_0, %n_0) : (vector<128x128xi32>, memref<128x128xi32>, index, index) -> ()
  return
}
