// RUN: smalti-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(smalti-verify,canonicalize,cse,smalti-infer-layouts)' | filecheck %s

// A value is never given a layout that replicates it in every warp (wgmma-col, wgmma-row
// on 2-D values) to satisfy the layouts asked of it: those took thousands of registers
// per thread, and ptxas spilled, failed register allocation or timed out
// (smalti.tiling.cost: a replicated layout may take at most the 255 registers a thread
// has). Programs from issue 14 (/work/shared/repros): they used to be refused, and now
// that casts across warps go through shared memory (smalti.lowering.relayout_smem) they
// get distributed layouts and compile (tests/test_lowering_relayout_smem.py runs them).

// replicated_layout_blowup.mlir: one value cast to strided<vec = 1> and strided<vec = 4>
// (no layout converts to both within warps) used to get wgmma-col: 2048 registers per
// thread, 26,500 lines of PTX for a 64x128 copy. The load takes strided<vec = 4>; the cast
// to strided<vec = 1> crosses warps.
// CHECK-LABEL: func.func @kernel
// CHECK: "smalti.vector_load"{{.*}}out_layouts = [#smalti.strided<vec = 4>]
// CHECK: "smalti.layout_cast"{{.*}}in_layouts = [#smalti.strided<vec = 4>]{{.*}}out_layouts = [#smalti.strided<vec = 1>]
// CHECK: "smalti.layout_cast"{{.*}}in_layouts = [#smalti.strided<vec = 4>]{{.*}}out_layouts = [#smalti.strided<vec = 4>]
func.func @kernel(%a: memref<64x128xf32>, %o1: memref<64x128xf32>, %o2: memref<64x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x128xf32>, index, index) -> vector<64x128xf32>
  %p = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 1>} : (vector<64x128xf32>) -> vector<64x128xf32>
  %q = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 4>} : (vector<64x128xf32>) -> vector<64x128xf32>
  "smalti.vector_store"(%p, %o1, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  "smalti.vector_store"(%q, %o2, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}

// -----

// A replicated layout asked for explicitly is refused the same way.
func.func @kernel(%a: memref<64x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x128xf32>, index, index) -> vector<64x128xf32>
  // expected-error @+2 {{'smalti.layout_cast' op cannot be given a layout: this layout is too dear: 32 copies of each element take 2048 registers per thread (a replicated layout may take 255, one without copies 64) (1 constraint in conflict)}}
  // expected-note @+1 {{'smalti.layout_cast': layout_cast sets its result's layout: #smalti.tiled<tiling = [[8], [2]], warp = [r4], lane = [r8, -2], vector = -1>}}
  %p = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[8], [2]], warp = [r4], lane = [r8, -2], vector = -1>} : (vector<64x128xf32>) -> vector<64x128xf32>
  return
}

// -----

// replicated_layout_ptxas_timeout.mlir: %v3 is cast to strided<vec = 1> and %v5 = %v4 * %v3
// to strided<vec = 8>; the 2x64x128 bf16 values used to get wgmma-col (79,752 lines of PTX,
// ptxas timed out after 120 s). Now strided<vec = 8>, and the cast to strided<vec = 1>
// crosses warps (32 KiB: two rounds of 16 KiB).
// CHECK-LABEL: func.func @kernel
// CHECK: "smalti.vector_load"{{.*}}out_layouts = [#smalti.strided<vec = 8>]
// CHECK: "smalti.layout_cast"{{.*}}in_layouts = [#smalti.strided<vec = 8>]{{.*}}out_layouts = [#smalti.strided<vec = 1>]
func.func @kernel(%in0: memref<2x64x128xbf16>, %in1: memref<2x64x128xbf16>, %out0: memref<2x64x128xbf16>, %out1: memref<2x64x128xbf16>, %out2: memref<2x64x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %bx = gpu.block_id x
  %by = gpu.block_id y
  %c1 = arith.constant 0 : index
  %c2 = arith.constant 0 : index
  %c3 = arith.constant 0 : index
  %v1 = "smalti.vector_load"(%in0, %c1, %c2, %c3) : (memref<2x64x128xbf16>, index, index, index) -> vector<2x64x128xbf16>
  %v2 = math.absf %v1 : vector<2x64x128xbf16>
  %v3 = math.log2 %v2 : vector<2x64x128xbf16>
  %c4 = arith.constant 0 : index
  %c5 = arith.constant 0 : index
  %c6 = arith.constant 0 : index
  %v4 = "smalti.vector_load"(%in1, %c4, %c5, %c6) : (memref<2x64x128xbf16>, index, index, index) -> vector<2x64x128xbf16>
  %v5 = arith.mulf %v4, %v3 : vector<2x64x128xbf16>
  %v6 = "smalti.layout_cast"(%v5) {new_layout = #smalti.strided<vec = 8>} : (vector<2x64x128xbf16>) -> vector<2x64x128xbf16>
  %v7 = math.absf %v2 : vector<2x64x128xbf16>
  %v8 = math.sqrt %v7 : vector<2x64x128xbf16>
  %v9 = arith.maximumf %v5, %v7 : vector<2x64x128xbf16>
  %v10 = "smalti.layout_cast"(%v3) {new_layout = #smalti.strided<vec = 1>} : (vector<2x64x128xbf16>) -> vector<2x64x128xbf16>
  %c7 = arith.constant 0 : index
  %c8 = arith.constant 0 : index
  %c9 = arith.constant 0 : index
  "smalti.vector_store"(%v10, %out0, %c7, %c8, %c9) : (vector<2x64x128xbf16>, memref<2x64x128xbf16>, index, index, index) -> ()
  %c10 = arith.constant 0 : index
  %c11 = arith.constant 0 : index
  %c12 = arith.constant 0 : index
  "smalti.vector_store"(%v9, %out1, %c10, %c11, %c12) : (vector<2x64x128xbf16>, memref<2x64x128xbf16>, index, index, index) -> ()
  %c13 = arith.constant 0 : index
  %c14 = arith.constant 0 : index
  %c15 = arith.constant 0 : index
  "smalti.vector_store"(%v8, %out2, %c13, %c14, %c15) : (vector<2x64x128xbf16>, memref<2x64x128xbf16>, index, index, index) -> ()
  return
}

// -----

// replicated_layout_ptxas_c7600.mlir: %v1 (128x256 f32) must be tiled (it is transposed) and
// is cast to strided<vec = 8> in a branch (across warps); it used to get wgmma-col (8192
// registers per thread: ptxas failed register allocation, C7600). Now the wgmma layout,
// and the cast goes through shared memory (128 KiB: eight rounds of 16 KiB).
// CHECK-LABEL: func.func @kernel
// CHECK: "smalti.vector_load"{{.*}}out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]
// CHECK: "smalti.layout_cast"{{.*}}in_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]{{.*}}out_layouts = [#smalti.strided<vec = 8>]
func.func @kernel(%in0: memref<257x256xf32>, %in1: memref<256x512xf32>, %in2: memref<128x512xi32>, %out0: memref<256x256xf32>, %out1: memref<256x256xf32>, %out2: memref<65536xi32>, %out3: memref<256x256xi32>, %out4: memref<128x512xf32>, %s0: i32)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.warpgroups = 2 : i64} {
  %bx = gpu.block_id x
  %by = gpu.block_id y
  "smalti.warpgroup_region"() ({
    %c1 = arith.constant 128 : index
    %i2 = arith.muli %bx, %c1 : index
    %c3 = arith.constant 1 : index
    %i4 = arith.addi %i2, %c3 : index
    %c5 = arith.constant 0 : index
    %v1 = "smalti.vector_load"(%in0, %i4, %c5) : (memref<257x256xf32>, index, index) -> vector<128x256xf32>
    %v2 = math.fma %v1, %v1, %v1 : vector<128x256xf32>
    %c7 = arith.constant 0 : index
    %p6 = arith.cmpi ne, %bx, %c7 : index
    %v8 = scf.if %p6 -> (vector<128x256xf32>) {
      %v3 = vector.shape_cast %v1 : vector<128x256xf32> to vector<32768xf32>
      scf.yield %v1 : vector<128x256xf32>
    } else {
      %v4 = "smalti.layout_cast"(%v1) {new_layout = #smalti.strided<vec = 8>} : (vector<128x256xf32>) -> vector<128x256xf32>
      %v5 = arith.mulf %v2, %v4 : vector<128x256xf32>
      %v6 = math.absf %v4 : vector<128x256xf32>
      %v7 = math.sqrt %v6 : vector<128x256xf32>
      scf.yield %v1 : vector<128x256xf32>
    }
    %c9 = arith.constant 1 : i32
    %p8 = arith.cmpi eq, %s0, %c9 : i32
    %v11, %v12 = scf.if %p8 -> (vector<128x256xf32>, vector<128x256xf32>) {
      %v9 = math.tanh %v1 : vector<128x256xf32>
      scf.yield %v9, %v9 : vector<128x256xf32>, vector<128x256xf32>
    } else {
      %v10 = math.absf %v1 : vector<128x256xf32>
      scf.yield %v10, %v10 : vector<128x256xf32>, vector<128x256xf32>
    }
    %v13 = vector.transpose %v12, [1, 0] : vector<128x256xf32> to vector<256x128xf32>
    %c10 = arith.constant 0 : index
    %c11 = arith.constant 128 : index
    %i12 = arith.muli %bx, %c11 : index
    "smalti.vector_store"(%v13, %out0, %c10, %i12) : (vector<256x128xf32>, memref<256x256xf32>, index, index) -> ()
    %c13 = arith.constant 128 : index
    %i14 = arith.muli %bx, %c13 : index
    %c15 = arith.constant 0 : index
    "smalti.vector_store"(%v12, %out1, %i14, %c15) : (vector<128x256xf32>, memref<256x256xf32>, index, index) -> ()
  }) {warpgroup = 0 : i64} : () -> ()
  "smalti.warpgroup_region"() ({
    %c16 = arith.constant 128 : index
    %i17 = arith.muli %bx, %c16 : index
    %c18 = arith.constant 0 : index
    %v14 = "smalti.vector_load"(%in1, %i17, %c18) : (memref<256x512xf32>, index, index) -> vector<128x256xf32>
    %c19 = arith.constant 0 : index
    %c20 = arith.constant 256 : index
    %i21 = arith.muli %bx, %c20 : index
    %v15 = "smalti.vector_load"(%in1, %c19, %i21) : (memref<256x512xf32>, index, index) -> vector<128x256xf32>
    %v16 = arith.maximumf %v14, %v15 : vector<128x256xf32>
    %c23 = arith.constant 0 : index
    %sm22 = "smalti.slice_smem"(%c23) : (index) -> memref<128x256xf32, #gpu.address_space<workgroup>>
    %sm24 = "smalti.with_transforms"(%sm22) {transforms = [#smalti.tile<[8, 32]>, #smalti.swizzle<128>]} : (memref<128x256xf32, #gpu.address_space<workgroup>>) -> memref<128x256xf32, #gpu.address_space<workgroup>>
    %c25 = arith.constant 0 : index
    %c26 = arith.constant 0 : index
    "smalti.vector_store"(%v14, %sm24, %c25, %c26) : (vector<128x256xf32>, memref<128x256xf32, #gpu.address_space<workgroup>>, index, index) -> ()
    "smalti.warpgroup_barrier"() : () -> ()
    %c27 = arith.constant 0 : index
    %c28 = arith.constant 40 : index
    %v17 = "smalti.vector_load"(%sm24, %c27, %c28) : (memref<128x256xf32, #gpu.address_space<workgroup>>, index, index) -> vector<128x88xf32>
    "smalti.warpgroup_barrier"() : () -> ()
    %v18 = "smalti.iota"() {dimension = 1 : i64} : () -> vector<128x256xi32>
    %c29 = arith.constant 0 : index
    %c30 = arith.constant 256 : index
    %i31 = arith.muli %bx, %c30 : index
    %v19 = "smalti.vector_load"(%in2, %c29, %i31) : (memref<128x512xi32>, index, index) -> vector<128x256xi32>
    %v20 = arith.minsi %v18, %v19 : vector<128x256xi32>
    %v21 = vector.shape_cast %v18 : vector<128x256xi32> to vector<32768xi32>
    %c32 = arith.constant 32768 : index
    %i33 = arith.muli %bx, %c32 : index
    "smalti.vector_store"(%v21, %out2, %i33) : (vector<32768xi32>, memref<65536xi32>, index) -> ()
    %c34 = arith.constant 128 : index
    %i35 = arith.muli %bx, %c34 : index
    %c36 = arith.constant 0 : index
    "smalti.vector_store"(%v19, %out3, %i35, %c36) : (vector<128x256xi32>, memref<256x256xi32>, index, index) -> ()
    %c37 = arith.constant 0 : index
    %c38 = arith.constant 256 : index
    %i39 = arith.muli %bx, %c38 : index
    "smalti.vector_store"(%v16, %out4, %c37, %i39) : (vector<128x256xf32>, memref<128x512xf32>, index, index) -> ()
  }) {warpgroup = 1 : i64} : () -> ()
  return
}
