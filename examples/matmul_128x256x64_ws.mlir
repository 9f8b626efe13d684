// bf16 matmul C = A @ B, f32 accumulation, bf16 out, warp-specialised: per 128x256 tile of C,
// one producer warpgroup (0) issues TMA loads and two consumer warpgroups (1, 2) issue wgmma,
// each on a 64x256 half of the tile. M = N = K = 512, grid (M / 128, N / 256) = (4, 2).
//
// K advances in 64-wide tiles through a 4-stage pipeline. Stage s has a "full" mbarrier
// (the producer's arrive_expect_tx of 48 KiB, completed by TMA) and an "empty" mbarrier (all
// 256 consumer threads arrive once their wgmma has read the stage). Round r = k_tile / 4 uses
// phase r of each barrier: consumers wait on full[s] with parity r, the producer on empty[s]
// with parity r + 1 (odd on a fresh barrier: the wait of round 0 passes at once).
//
// Register budgets (setmaxnreg): producer 40, consumers 232; 40 + 2 * 232 = 504 registers per
// thread slot, x 128 threads = 64512 <= 65536.
//
// Shared memory (bytes): full barriers [0, 32), empty barriers [64, 96);
// consumer c's A halves (64x64, one per stage) [1024 + 32768 c, 33792 + 32768 c);
// B stages (64x256) [66560 + 32768 s, 99328 + 32768 s): 197632 bytes (193 KiB) in all.
// Each consumer's epilogue tile (64x256) reuses its own A halves, which only it reads:
// once its last wgmma has completed, no one touches them again.
func.func @matmul_128x256x64_ws(%a: memref<512x512xbf16>, %b: memref<512x512xbf16>,
                                %c: memref<512x512xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4, 2>, smalti.warpgroups = 3 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c192 = arith.constant 192 : index
  %c256 = arith.constant 256 : index
  %rounds = arith.constant 2 : index
  %o_full = arith.constant 0 : index
  %o_empty = arith.constant 64 : index
  %o_a00 = arith.constant 1024 : index
  %o_a01 = arith.constant 9216 : index
  %o_a02 = arith.constant 17408 : index
  %o_a03 = arith.constant 25600 : index
  %o_a10 = arith.constant 33792 : index
  %o_a11 = arith.constant 41984 : index
  %o_a12 = arith.constant 50176 : index
  %o_a13 = arith.constant 58368 : index
  %o_b0 = arith.constant 66560 : index
  %o_b1 = arith.constant 99328 : index
  %o_b2 = arith.constant 132096 : index
  %o_b3 = arith.constant 164864 : index
  %full = "smalti.slice_smem"(%o_full) : (index) -> memref<4xi64, #gpu.address_space<workgroup>>
  %empty = "smalti.slice_smem"(%o_empty) : (index) -> memref<4xi64, #gpu.address_space<workgroup>>
  %a00 = "smalti.slice_smem"(%o_a00) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a01 = "smalti.slice_smem"(%o_a01) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a02 = "smalti.slice_smem"(%o_a02) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a03 = "smalti.slice_smem"(%o_a03) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a10 = "smalti.slice_smem"(%o_a10) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a11 = "smalti.slice_smem"(%o_a11) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a12 = "smalti.slice_smem"(%o_a12) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %a13 = "smalti.slice_smem"(%o_a13) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b0 = "smalti.slice_smem"(%o_b0) : (index) -> memref<64x256xbf16, #gpu.address_space<workgroup>>
  %b1 = "smalti.slice_smem"(%o_b1) : (index) -> memref<64x256xbf16, #gpu.address_space<workgroup>>
  %b2 = "smalti.slice_smem"(%o_b2) : (index) -> memref<64x256xbf16, #gpu.address_space<workgroup>>
  %b3 = "smalti.slice_smem"(%o_b3) : (index) -> memref<64x256xbf16, #gpu.address_space<workgroup>>
  %c_tile0 = "smalti.slice_smem"(%o_a00) : (index) -> memref<64x256xbf16, #gpu.address_space<workgroup>>
  %c_tile1 = "smalti.slice_smem"(%o_a10) : (index) -> memref<64x256xbf16, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%full) {arrival_count = 1 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.initialize_barrier"(%empty) {arrival_count = 256 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>) -> ()
  %bm = gpu.block_id x
  %bn = gpu.block_id y
  %row0 = arith.muli %bm, %c128 : index
  %row1 = arith.addi %row0, %c64 : index
  %col = arith.muli %bn, %c256 : index
  // Producer: for each K tile, wait until its stage is empty, then load A (two halves) and B.
  "smalti.warpgroup_region"() ({
    scf.for %r = %c0 to %rounds step %c1 {
      %empty_parity = arith.addi %r, %c1 : index
      %k_round = arith.muli %r, %c256 : index
      // Stage 0: K tile 4 r + 0.
      "smalti.wait"(%empty, %c0, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c0) {bytes = 49152 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.async_load"(%a, %a00, %full, %c0, %row0, %k_round) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%a, %a10, %full, %c0, %row1, %k_round) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b0, %full, %c0, %k_round, %col) : (memref<512x512xbf16>, memref<64x256xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      // Stage 1: K tile 4 r + 1.
      "smalti.wait"(%empty, %c1, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c1) {bytes = 49152 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      %k1 = arith.addi %k_round, %c64 : index
      "smalti.async_load"(%a, %a01, %full, %c1, %row0, %k1) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%a, %a11, %full, %c1, %row1, %k1) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b1, %full, %c1, %k1, %col) : (memref<512x512xbf16>, memref<64x256xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      // Stage 2: K tile 4 r + 2.
      "smalti.wait"(%empty, %c2, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c2) {bytes = 49152 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      %k2 = arith.addi %k_round, %c128 : index
      "smalti.async_load"(%a, %a02, %full, %c2, %row0, %k2) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%a, %a12, %full, %c2, %row1, %k2) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b2, %full, %c2, %k2, %col) : (memref<512x512xbf16>, memref<64x256xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      // Stage 3: K tile 4 r + 3.
      "smalti.wait"(%empty, %c3, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c3) {bytes = 49152 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      %k3 = arith.addi %k_round, %c192 : index
      "smalti.async_load"(%a, %a03, %full, %c3, %row0, %k3) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%a, %a13, %full, %c3, %row1, %k3) : (memref<512x512xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b3, %full, %c3, %k3, %col) : (memref<512x512xbf16>, memref<64x256xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
    }
  }) {warpgroup = 0 : i64, max_registers = 40 : i64} : () -> ()
  // Consumer 0 (warpgroup 1): rows [64 0, 64 0 + 64) of the tile.
  "smalti.warpgroup_region"() ({
    %zero = arith.constant dense<0.0> : vector<64x256xf32>
    %acc = scf.for %r = %c0 to %rounds step %c1 iter_args(%acc_in = %zero) -> (vector<64x256xf32>) {
      "smalti.wait"(%full, %c0, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc0 = "smalti.wgmma"(%acc_in, %a00, %b0) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c0) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c1, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc1 = "smalti.wgmma"(%acc0, %a01, %b1) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c1) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c2, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc2 = "smalti.wgmma"(%acc1, %a02, %b2) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c2) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c3, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc3 = "smalti.wgmma"(%acc2, %a03, %b3) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c3) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      scf.yield %acc3 : vector<64x256xf32>
    }
    // Epilogue: every wgmma has completed (wait_group 0), so this consumer's A halves
    // are free for its half of C.
    %out = arith.truncf %acc : vector<64x256xf32> to vector<64x256xbf16>
    "smalti.vector_store"(%out, %c_tile0, %c0, %c0) : (vector<64x256xbf16>, memref<64x256xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
    "smalti.async_store"(%c_tile0, %c, %row0, %col) : (memref<64x256xbf16, #gpu.address_space<workgroup>>, memref<512x512xbf16>, index, index) -> ()
    "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  }) {warpgroup = 1 : i64, max_registers = 232 : i64} : () -> ()
  // Consumer 1 (warpgroup 2): rows [64 1, 64 1 + 64) of the tile.
  "smalti.warpgroup_region"() ({
    %zero = arith.constant dense<0.0> : vector<64x256xf32>
    %acc = scf.for %r = %c0 to %rounds step %c1 iter_args(%acc_in = %zero) -> (vector<64x256xf32>) {
      "smalti.wait"(%full, %c0, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc0 = "smalti.wgmma"(%acc_in, %a10, %b0) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c0) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c1, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc1 = "smalti.wgmma"(%acc0, %a11, %b1) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c1) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c2, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc2 = "smalti.wgmma"(%acc1, %a12, %b2) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c2) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c3, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc3 = "smalti.wgmma"(%acc2, %a13, %b3) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
      "smalti.arrive"(%empty, %c3) : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      scf.yield %acc3 : vector<64x256xf32>
    }
    // Epilogue: every wgmma has completed (wait_group 0), so this consumer's A halves
    // are free for its half of C.
    %out = arith.truncf %acc : vector<64x256xf32> to vector<64x256xbf16>
    "smalti.vector_store"(%out, %c_tile1, %c0, %c0) : (vector<64x256xbf16>, memref<64x256xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
    "smalti.async_store"(%c_tile1, %c, %row1, %col) : (memref<64x256xbf16, #gpu.address_space<workgroup>>, memref<512x512xbf16>, index, index) -> ()
    "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  }) {warpgroup = 2 : i64, max_registers = 232 : i64} : () -> ()
  return
}
