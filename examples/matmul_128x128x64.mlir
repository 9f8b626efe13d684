// bf16 matmul C = A @ B, f32 accumulation, bf16 out; one warpgroup per 128x128 tile of C.
// M = N = K = 512, grid (M / 128, N / 128). K advances in 64-wide tiles through a 2-stage
// TMA pipeline: while wgmma consumes stage s, TMA fills the other stage. Each stage has its
// own mbarrier (parity flips every time the stage is reused). Epilogue: truncf to bf16,
// store to swizzled shared memory, one TMA store.
//
// Shared memory (bytes): barriers [0, 16), A stages [1024, 33792), B stages [33792, 66560);
// the epilogue's C tile (32 KiB) reuses the A stages.
func.func @matmul_128x128x64(%a: memref<512x512xbf16>, %b: memref<512x512xbf16>,
                             %c: memref<512x512xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4, 4>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %k_tiles = arith.constant 8 : index
  %half_tiles = arith.constant 4 : index
  %o_bars = arith.constant 0 : index
  %o_a0 = arith.constant 1024 : index
  %o_a1 = arith.constant 17408 : index
  %o_b0 = arith.constant 33792 : index
  %o_b1 = arith.constant 50176 : index
  %bars = "smalti.slice_smem"(%o_bars) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %a0 = "smalti.slice_smem"(%o_a0) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %a1 = "smalti.slice_smem"(%o_a1) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %b0 = "smalti.slice_smem"(%o_b0) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b1 = "smalti.slice_smem"(%o_b1) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %c_tile = "smalti.slice_smem"(%o_a0) : (index) -> memref<128x128xbf16, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  %bm = gpu.block_id x
  %bn = gpu.block_id y
  %row = arith.muli %bm, %c128 : index
  %col = arith.muli %bn, %c128 : index
  // Prologue: K tile 0 into stage 0.
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 32768 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %a0, %bars, %c0, %row, %c0) : (memref<512x512xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%b, %b0, %bars, %c0, %c0, %col) : (memref<512x512xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %zero = arith.constant dense<0.0> : vector<128x128xf32>
  // Two K tiles per iteration: stage 0 then stage 1, each prefetching the next K tile.
  // Iteration it consumes K tiles 2 it and 2 it + 1; the barriers' phase parity is it's low bit.
  %acc = scf.for %it = %c0 to %half_tiles step %c1 iter_args(%acc_in = %zero) -> (vector<128x128xf32>) {
    %kk = arith.muli %it, %c2 : index
    // Prefetch K tile kk + 1 into stage 1.
    %k1 = arith.addi %kk, %c1 : index
    %k1_off = arith.muli %k1, %c64 : index
    "smalti.arrive_expect_tx"(%bars, %c1) {bytes = 32768 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
    "smalti.async_load"(%a, %a1, %bars, %c1, %row, %k1_off) : (memref<512x512xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
    "smalti.async_load"(%b, %b1, %bars, %c1, %k1_off, %col) : (memref<512x512xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
    // Consume stage 0.
    "smalti.wait"(%bars, %c0, %it) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
    %acc0 = "smalti.wgmma"(%acc_in, %a0, %b0) : (vector<128x128xf32>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>
    // Prefetch K tile kk + 2 into stage 0, unless past the end.
    %k2 = arith.addi %kk, %c2 : index
    %more = arith.cmpi ult, %k2, %k_tiles : index
    scf.if %more {
      %k2_off = arith.muli %k2, %c64 : index
      "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 32768 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.async_load"(%a, %a0, %bars, %c0, %row, %k2_off) : (memref<512x512xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b0, %bars, %c0, %k2_off, %col) : (memref<512x512xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
    }
    // Consume stage 1.
    "smalti.wait"(%bars, %c1, %it) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
    %acc1 = "smalti.wgmma"(%acc0, %a1, %b1) : (vector<128x128xf32>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>
    scf.yield %acc1 : vector<128x128xf32>
  }
  // Epilogue: every wgmma has completed (wait_group 0), so stage A may be reused for C.
  %out = arith.truncf %acc : vector<128x128xf32> to vector<128x128xbf16>
  "smalti.vector_store"(%out, %c_tile, %c0, %c0) : (vector<128x128xbf16>, memref<128x128xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.async_store"(%c_tile, %c, %row, %col) : (memref<128x128xbf16, #gpu.address_space<workgroup>>, memref<512x512xbf16>, index, index) -> ()
  "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  return
}
