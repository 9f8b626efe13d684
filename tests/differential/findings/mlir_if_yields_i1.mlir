// FINDING: refusal: error: 'scf.if' op cannot yield vectors of iN
//   differential_program.mlir:9:9: error: 'scf.if' op cannot yield vectors of i1
// Replay: python -m tests.differential.findings mlir_if_yields_i1.mlir
// PROGRAM: {"@":"Program","kind":"mlir","seed":11,"grid":[2],"refs":[{"@":"Ref","name":"in0","shape":[128,128],"dtype":"i1","output":false},{"@":"Ref","name":"in1","shape":[128,128],"dtype":"i1","output":false},{"@":"Ref","name":"out0","shape":[256,128],"dtype":"i1","output":true}],"body":[{"@":"Load","out":"v1","ref":"in0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}],"type":{"@":"VType","shape":[128,128],"dtype":"i1"}},{"@":"When","cutoff":1,"then":[{"@":"Load","out":"v2","ref":"in1","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}],"type":{"@":"VType","shape":[128,128],"dtype":"i1"}}],"otherwise":[],"outs":["v3"],"then_yields":["v2"],"otherwise_yields":["v1"]},{"@":"Store","value":"v3","ref":"out0","starts":[{"@":"Affine","const":0,"block":128,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}]}],"dynamic":null}
func.func @kernel(%in0: memref<128x128xi1>, %in1: memref<128x128xi1>, %out0: memref<256x128xi1>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %n_0 = arith.constant 0 : index
  %n_1 = arith.constant 1 : index
  %n_128 = arith.constant 128 : index
  %block = gpu.block_id x
  %v1 = "smalti.vector_load"(%in0, %n_0, %n_0) : (memref<128x128xi1>, index, index) -> vector<128x128xi1>
  %w_1 = arith.cmpi slt, %block, %n_1 : index
  %v3 = scf.if %w_1 -> (vector<128x128xi1>) {
    %v2 = "smalti.vector_load"(%in1, %n_0, %n_0) : (memref<128x128xi1>, index, index) -> vector<128x128xi1>
    scf.yield %v2 : vector<128x128xi1>
  } else {
    scf.yield %v1 : vector<128x128xi1>
  }
  %i_2 = arith.muli %block, %n_128 : index
  "smalti.vector_store"(%v3, %out0, %i_2, %n_0) : (vector<128x128xi1>, memref<256x128xi1>, index, index) -> ()
  return
}
