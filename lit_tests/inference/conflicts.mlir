// RUN: smalti-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(smalti-verify,canonicalize,cse,smalti-infer-layouts)'

// Explanations name a minimal set of conflicting constraints (each needed: without any
// one of them the rest have layouts), at the ops that state them; preferences (hints) are
// never among them. Programs from issue 14 (/work/shared/repros). These are conflicts no
// relayout resolves; those relayouts resolve compile (inferred_relayouts.mlir, where the
// programs of misattributed_transpose_diagnostic.mlir, limitation_broadcast_back_tf32.mlir
// and the row plus column sums went).

// misattributed_slice_diagnostic.mlir: the slice at column 5 cuts through every tile
// layout's tiles (the culprit), while the broadcast_in_dim and the stores have layouts; the
// error names the slice and the load it slices, not the broadcast nor a store's preference.
func.func @kernel(%in1: memref<256x64xi32>, %in3: memref<256xi32>, %out0: memref<256x256xi32>, %out1: memref<64x52xi32>, %out2: memref<256x256xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  // expected-note @+2 {{'smalti.vector_load': vector_load loads a distributed layout, not a splat}}
  // expected-note-re @+1 {{layouts tried: {{.*}}: only tiled and splat layouts can be sliced without moving data; wgmma: the slice [5, 57) of dim 1 cuts through the layout's [64, 8] tiles; {{.*}}wgmma-row: this layout is too dear}}
  %v3 = "smalti.vector_load"(%in1, %c0, %c0) : (memref<256x64xi32>, index, index) -> vector<256x64xi32>
  %v5 = "smalti.vector_load"(%in3, %c0) : (memref<256xi32>, index) -> vector<256xi32>
  %v6 = "smalti.broadcast_in_dim"(%v5) {broadcast_dimensions = array<i64: 0>} : (vector<256xi32>) -> vector<256x256xi32>
  // expected-error-re @+2 {{'vector.extract_strided_slice' op cannot be given a layout: no layout of the result of 'smalti.vector_load' at {{.*}} satisfies these constraints together (2 constraints in conflict)}}
  // expected-note @+1 {{'vector.extract_strided_slice': vector.extract_strided_slice takes whole tiles}}
  %v7 = "vector.extract_strided_slice"(%v3) <{offsets = [128, 5], sizes = [64, 52], strides = [1, 1]}> : (vector<256x64xi32>) -> vector<64x52xi32>
  %v9 = "smalti.layout_cast"(%v6) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<256x256xi32>) -> vector<256x256xi32>
  "smalti.vector_store"(%v9, %out0, %c0, %c0) : (vector<256x256xi32>, memref<256x256xi32>, index, index) -> ()
  "smalti.vector_store"(%v7, %out1, %c0, %c0) : (vector<64x52xi32>, memref<64x52xi32>, index, index) -> ()
  "smalti.vector_store"(%v6, %out2, %c0, %c0) : (vector<256x256xi32>, memref<256x256xi32>, index, index) -> ()
  return
}

// -----

// A constant that canonicalize made (folding two equal insert_strided_slice ops of splat
// constants into one non-splat constant) has no location of its own: it is reported at
// the op that uses it (unknown_location_folded_constant.mlir reported `<unknown>`, and
// suggested a cast to #smalti.splat that cannot lower: a distributed value never becomes
// a splat, so no cast is suggested here).
func.func @kernel(%out: memref<256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %a = arith.constant dense<1.0> : vector<256xbf16>
  %b = arith.constant dense<0.0> : vector<64xbf16>
  %v = "vector.insert_strided_slice"(%b, %a) <{offsets = [128], strides = [1]}> : (vector<64xbf16>, vector<256xbf16>) -> vector<256xbf16>
  %w = "vector.insert_strided_slice"(%b, %a) <{offsets = [128], strides = [1]}> : (vector<64xbf16>, vector<256xbf16>) -> vector<256xbf16>
  "smalti.vector_store"(%v, %out, %c0) : (vector<256xbf16>, memref<256xbf16>, index) -> ()
  // expected-error-re @+5 {{'smalti.layout_cast' op cannot be given a layout: no layout of the result of 'arith.constant' at {{.*}}:{{[0-9]+}}:8 satisfies these constraints together (3 constraints in conflict)}}
  // expected-note @+4 {{'arith.constant': a non-splat constant cannot be a splat}}
  // expected-note @+3 {{'smalti.layout_cast': layout_cast converts its operand's layout}}
  // expected-note @+2 {{'smalti.layout_cast': layout_cast sets its result's layout: #smalti.splat}}
  // expected-note @+1 {{layouts tried: #smalti.strided<vec = 2>, #smalti.strided<vec = 1>, wgmma-row, wgmma-col: this relayout is not supported}}
  %s = "smalti.layout_cast"(%w) {new_layout = #smalti.splat} : (vector<256xbf16>) -> vector<256xbf16>
  return
}

// -----

// search_gave_up_no_constraints.mlir (not minimised): the search used to run out of budget
// backtracking through independent parts of the kernel and report "0 constraints in
// conflict" at the function. Each part is now solved on its own: every part has layouts
// but one, an iota of shape 64x85 that no layout fits (85 columns: no candidate layout's tiles divide them, and
// 64 x 85 elements do not split evenly over 128 threads).
func.func @kernel(%in0: memref<64x776xf32>, %in1: memref<64x768xf32>, %in2: memref<64x768xf32>, %in3: memref<65x256xi32>, %in4: memref<64x256xi32>, %in5: memref<256x64xf32>, %in6: memref<64x256xf32>, %in7: memref<64x256xf32>, %out0: memref<64x768xf32>, %out1: memref<64x256xf32>, %out2: memref<64x256xi32>, %out3: memref<256x64xi32>, %out4: memref<64x256xi32>, %out5: memref<64x256xf32>, %s0: i32, %s1: i32, %s2: f32)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %bx = gpu.block_id x
  %by = gpu.block_id y
  %c1 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 1 : index
  scf.for %v1 = %c1 to %c2 step %c3 {
    %c4 = arith.constant 0 : index
    %c5 = arith.constant 256 : index
    %i6 = arith.muli %v1, %c5 : index
    %c7 = arith.constant 8 : index
    %i8 = arith.addi %i6, %c7 : index
    %v2 = "smalti.vector_load"(%in0, %c4, %i8) : (memref<64x776xf32>, index, index) -> vector<64x256xf32>
    %c9 = arith.constant 0 : index
    %c10 = arith.constant 256 : index
    %i11 = arith.muli %v1, %c10 : index
    %v3 = "smalti.vector_load"(%in1, %c9, %i11) : (memref<64x768xf32>, index, index) -> vector<64x256xf32>
    %v4 = arith.minimumf %v2, %v3 : vector<64x256xf32>
    %v5 = "vector.extract_strided_slice"(%v4) <{offsets = [0, 0], sizes = [64, 248], strides = [1, 1]}> : (vector<64x256xf32>) -> vector<64x248xf32>
    %v6 = arith.cmpf ult, %v3, %v4 : vector<64x256xf32>
    %c12 = arith.constant 0 : index
    %c13 = arith.constant 256 : index
    %i14 = arith.muli %v1, %c13 : index
    %v7 = "smalti.vector_load"(%in2, %c12, %i14) : (memref<64x768xf32>, index, index) -> vector<64x256xf32>
    %v8 = arith.select %v6, %v3, %v7 : vector<64x256xi1>, vector<64x256xf32>
    %c15 = arith.constant 0 : index
    %c16 = arith.constant 256 : index
    %i17 = arith.muli %v1, %c16 : index
    "smalti.vector_store"(%v8, %out0, %c15, %i17) : (vector<64x256xf32>, memref<64x768xf32>, index, index) -> ()
  }
  %c18 = arith.constant 1 : index
  %c19 = arith.constant 0 : index
  %v9 = "smalti.vector_load"(%in3, %c18, %c19) : (memref<65x256xi32>, index, index) -> vector<64x256xi32>
  %c20 = arith.constant 0 : index
  %c21 = arith.constant 0 : index
  %v10 = "smalti.vector_load"(%in4, %c20, %c21) : (memref<64x256xi32>, index, index) -> vector<64x256xi32>
  %v11 = arith.minui %v9, %v10 : vector<64x256xi32>
  %v12 = "smalti.layout_cast"(%v10) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x256xi32>) -> vector<64x256xi32>
  %v13 = vector.transpose %v12, [1, 0] : vector<64x256xi32> to vector<256x64xi32>
  %c23 = arith.constant 0 : i32
  %p22 = arith.cmpi eq, %s0, %c23 : i32
  %v29 = scf.if %p22 -> (vector<256x64xi32>) {
    %v14 = arith.maxsi %v10, %v12 : vector<64x256xi32>
    %v15 = "smalti.layout_cast"(%v10) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x256xi32>) -> vector<64x256xi32>
    scf.yield %v13 : vector<256x64xi32>
  } else {
    %v16 = arith.sitofp %v13 : vector<256x64xi32> to vector<256x64xf32>
    %v17 = arith.constant dense<0> : vector<64xi32>
    %v18 = vector.multi_reduction <add>, %v12, %v17 [1] : vector<64x256xi32> to vector<64xi32>
    %c25 = arith.constant 0 : index
    %p24 = arith.cmpi sgt, %bx, %c25 : index
    %v28 = scf.if %p24 -> (vector<64x256xi32>) {
      %c26 = arith.constant 0 : index
      %c27 = arith.constant 0 : index
      %v19 = "smalti.vector_load"(%in5, %c26, %c27) : (memref<256x64xf32>, index, index) -> vector<256x64xf32>
      %v20 = arith.cmpf ult, %v16, %v19 : vector<256x64xf32>
      %v21 = arith.select %v20, %v19, %v16 : vector<256x64xi1>, vector<256x64xf32>
      %v22 = vector.transpose %v12, [1, 0] : vector<64x256xi32> to vector<256x64xi32>
      scf.yield %v9 : vector<64x256xi32>
    } else {
      %c28 = arith.constant 0 : index
      %c29 = arith.constant 0 : index
      %v23 = "smalti.vector_load"(%in2, %c28, %c29) : (memref<64x768xf32>, index, index) -> vector<64x256xf32>
      %c30 = arith.constant 0 : index
      %c31 = arith.constant 0 : index
      %v24 = "smalti.vector_load"(%in6, %c30, %c31) : (memref<64x256xf32>, index, index) -> vector<64x256xf32>
      %v25 = arith.minimumf %v23, %v24 : vector<64x256xf32>
      %v26 = arith.cmpf one, %v24, %v25 : vector<64x256xf32>
      %v27 = arith.select %v26, %v23, %v23 : vector<64x256xi1>, vector<64x256xf32>
      scf.yield %v9 : vector<64x256xi32>
    }
    scf.yield %v13 : vector<256x64xi32>
  }
  %c33 = arith.constant 1 : i32
  %p32 = arith.cmpi slt, %s1, %c33 : i32
  %v44 = scf.if %p32 -> (vector<64x256xi32>) {
    %v30 = vector.broadcast %s2 : f32 to vector<64x256xf32>
    %v31 = arith.index_cast %bx : index to i32
    %v32 = vector.broadcast %v31 : i32 to vector<64x256xi32>
    %v33 = arith.sitofp %v32 : vector<64x256xi32> to vector<64x256xf32>
    %v34 = arith.minimumf %v30, %v33 : vector<64x256xf32>
    scf.yield %v12 : vector<64x256xi32>
  } else {
    %c34 = arith.constant 1 : index
    %c35 = arith.constant 2 : index
    %c36 = arith.constant 1 : index
    %v43 = scf.for %v35 = %c34 to %c35 step %c36 iter_args(%v36 = %v11) -> (vector<64x256xi32>) {
      %v37 = arith.constant dense<-4> : vector<64xi32>
      %v38 = vector.multi_reduction <xor>, %v13, %v37 [0] : vector<256x64xi32> to vector<64xi32>
      %v39 = vector.transpose %v11, [1, 0] : vector<64x256xi32> to vector<256x64xi32>
      %v40 = "smalti.layout_cast"(%v13) {new_layout = #smalti.tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>} : (vector<256x64xi32>) -> vector<256x64xi32>
      // expected-error @+2 {{'smalti.iota' op cannot be given a layout: no layout fits a vector of shape [64, 85] over the 128 threads of a warpgroup (1 constraint in conflict)}}
      // expected-note @+1 {{'smalti.iota': iota holds distinct values, not a splat}}
      %v41 = "smalti.iota"() {dimension = 1 : i64} : () -> vector<64x85xi32>
      %v42 = "vector.insert_strided_slice"(%v41, %v10) <{offsets = [0, 37], strides = [1, 1]}> : (vector<64x85xi32>, vector<64x256xi32>) -> vector<64x256xi32>
      scf.yield %v36 : vector<64x256xi32>
    }
    scf.yield %v43 : vector<64x256xi32>
  }
  %v45 = arith.constant dense<1.0> : vector<64x256xf32>
  %c37 = arith.constant 0 : index
  %c38 = arith.constant 0 : index
  %v46 = "smalti.vector_load"(%in7, %c37, %c38) : (memref<64x256xf32>, index, index) -> vector<64x256xf32>
  %v47 = arith.maximumf %v45, %v46 : vector<64x256xf32>
  %v48 = arith.constant dense<1.5> : vector<64x256xf32>
  %v49 = arith.cmpf oge, %v47, %v48 : vector<64x256xf32>
  %v50 = arith.constant dense<false> : vector<64x256xi1>
  %v51 = arith.ori %v49, %v50 : vector<64x256xi1>
  %v52 = arith.index_cast %bx : index to i32
  %v53 = vector.broadcast %v52 : i32 to vector<64x256xi32>
  %v54 = arith.sitofp %v53 : vector<64x256xi32> to vector<64x256xf32>
  %c40 = arith.constant 0 : index
  %p39 = arith.cmpi sgt, %bx, %c40 : index
  %v55 = arith.select %p39, %v48, %v54 : vector<64x256xf32>
  %c41 = arith.constant 0 : index
  %c42 = arith.constant 0 : index
  "smalti.vector_store"(%v55, %out1, %c41, %c42) : (vector<64x256xf32>, memref<64x256xf32>, index, index) -> ()
  %c43 = arith.constant 0 : index
  %c44 = arith.constant 0 : index
  "smalti.vector_store"(%v44, %out2, %c43, %c44) : (vector<64x256xi32>, memref<64x256xi32>, index, index) -> ()
  %c45 = arith.constant 0 : index
  %c46 = arith.constant 0 : index
  "smalti.vector_store"(%v29, %out3, %c45, %c46) : (vector<256x64xi32>, memref<256x64xi32>, index, index) -> ()
  %c47 = arith.constant 0 : index
  %c48 = arith.constant 0 : index
  "smalti.vector_store"(%v53, %out4, %c47, %c48) : (vector<64x256xi32>, memref<64x256xi32>, index, index) -> ()
  %c49 = arith.constant 0 : index
  %c50 = arith.constant 0 : index
  "smalti.vector_store"(%v45, %out5, %c49, %c50) : (vector<64x256xf32>, memref<64x256xf32>, index, index) -> ()
  return
}

