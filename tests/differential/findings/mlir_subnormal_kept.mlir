// FINDING: none: the control of dsl_subnormal_flush.py: the same program as .mlir, through run_simulated (outside JAX), keeps the subnormals
// Replay: python -m tests.differential.findings mlir_subnormal_kept.mlir
// PROGRAM: {"@":"Program","kind":"mlir","seed":7,"grid":[1],"refs":[{"@":"Ref","name":"in0","shape":[128,128],"dtype":"f32","output":false},{"@":"Ref","name":"out0","shape":[128,128],"dtype":"f32","output":true}],"body":[{"@":"Load","out":"v1","ref":"in0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}],"type":{"@":"VType","shape":[128,128],"dtype":"f32"}},{"@":"Const","out":"k2","type":{"@":"VType","shape":[128,128],"dtype":"f32"},"value":7.52316384526264e-37,"literal":true},{"@":"Apply","out":"v3","op":"mulf","args":["v1","k2"]},{"@":"Store","value":"v3","ref":"out0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}]}],"dynamic":null}
func.func @kernel(%in0: memref<128x128xf32>, %out0: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %n_0 = arith.constant 0 : index
  %block = gpu.block_id x
  %v1 = "smalti.vector_load"(%in0, %n_0, %n_0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %k2 = arith.constant dense<7.523163845e-37> : vector<128x128xf32>
  %v3 = arith.mulf %v1, %k2 : vector<128x128xf32>
  "smalti.vector_store"(%v3, %out0, %n_0, %n_0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
