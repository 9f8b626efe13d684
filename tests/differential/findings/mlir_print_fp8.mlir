// FINDING: refusal: error: 'smalti.debug_print' op cannot print element type fNENMNFN: expects a vector or a scalar of iN, iN, fN, bfN, iN, fN, iN, fN, index
//   differential_program.mlir:6:3: error: 'smalti.debug_print' op cannot print element type f8E4M3FN: expects a vector or a scalar of i1, i16, f16, bf16, i32, f32, i64, f64, index
// Replay: python -m tests.differential.findings mlir_print_fp8.mlir
// PROGRAM: {"@":"Program","kind":"mlir","seed":13,"grid":[1],"refs":[{"@":"Ref","name":"in0","shape":[128,128],"dtype":"f8E4M3FN","output":false},{"@":"Ref","name":"out0","shape":[128,128],"dtype":"f8E4M3FN","output":true}],"body":[{"@":"Load","out":"v1","ref":"in0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}],"type":{"@":"VType","shape":[128,128],"dtype":"f8E4M3FN"}},{"@":"Print","value":"v1","label":1},{"@":"Store","value":"v1","ref":"out0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}]}],"dynamic":null}
func.func @kernel(%in0: memref<128x128xf8E4M3FN>, %out0: memref<128x128xf8E4M3FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %n_0 = arith.constant 0 : index
  %block = gpu.block_id x
  %v1 = "smalti.vector_load"(%in0, %n_0, %n_0) : (memref<128x128xf8E4M3FN>, index, index) -> vector<128x128xf8E4M3FN>
  "smalti.debug_print"(%v1) {format = "p1 = {}"} : (vector<128x128xf8E4M3FN>) -> ()
  "smalti.vector_store"(%v1, %out0, %n_0, %n_0) : (vector<128x128xf8E4M3FN>, memref<128x128xf8E4M3FN>, index, index) -> ()
  return
}
