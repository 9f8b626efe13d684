// bf16 matmul C = A @ B, f32 accumulation, bf16 out, with TMA multicast: CTAs are grouped in
// clusters of 2 along x, the M dimension, so the two CTAs of a cluster compute the 128x128
// tiles of C at rows 128 m and 128 (m + 1) of the same 128 columns: a 256x128 tile per
// cluster. They need the same B tiles; each CTA loads half of every 64x128 B tile (K rows
// 32 p to 32 p + 32, p its x position in the cluster) and multicasts it to both CTAs
// (`collective = array<i64: 0>`), while its A tile is its own. M = N = K = 512, grid
// (M / 128, N / 128) = (4, 4), clusters (2, 1, 1).
//
// Warp-specialised, 2 warpgroups per CTA: warpgroup 0 produces (TMA), warpgroup 1 consumes
// (wgmma). A slot may be refilled only when the consumers of *both* CTAs are done with it,
// because the refill writes into the peer's shared memory too; a producer warpgroup waits
// for that on its own "empty" barrier while the consumer keeps issuing wgmma on the slots
// already full. (With one warpgroup doing both, the wgmma loop would itself stall on the
// slower CTA of the pair before every refill.) No register budgets: with 2 warpgroups every
// thread may have 255 registers, and ptxas takes them all (no spills); the consumer's
// 128x128 f32 accumulator needs 64.
//
// K advances in 64-wide tiles through a 4-stage pipeline; round r = k_tile / 4 uses phase r
// of each barrier. Stage s has
// - full[s]: the producer's arrive_expect_tx of 32 KiB (A 16 KiB + both halves of B), one
//   arrival; TMA completes the bytes, half of B's from the peer's multicast. Consumers wait
//   on it with parity r.
// - empty[s]: released by the consumer warpgroups of both CTAs with a collective arrive
//   (`collective = array<i64: 0>`: its warpgroup meets, then one thread arrives on empty[s]
//   of each CTA of the pair), so it counts 2 arrivals. The producer waits on it with parity
//   r + 1 (odd on a fresh barrier: the wait of round 0 passes at once). Waits on both kinds
//   of barrier acquire at cluster scope, since peers signal them.
// The cluster meets after the barrier inits (peers arrive on and multicast to this CTA's
// barriers) and before exiting (a peer's last release may still be on its way to this CTA).
//
// B's slices are tiled 32x64 (then 128-byte swizzled) instead of wgmma's preferred 64x64, so
// that each half of B (32 K rows x 128 columns) is one contiguous 8 KiB run of shared memory,
// which a multicast part must be; wgmma reads 32-row tiles as well.
//
// Shared memory (bytes): full barriers [0, 32), empty barriers [64, 96);
// A stages (128x64) [1024 + 16384 s, 17408 + 16384 s); B stages (64x128)
// [66560 + 16384 s, 82944 + 16384 s): 132096 bytes (129 KiB) in all. The epilogue's C tile
// (32 KiB) reuses A stages 0 and 1, which only this CTA writes (B stages are the peer's
// multicast targets too): once the consumer's last wgmma has completed, no one touches them.
func.func @matmul_256x128x64_multicast(%a: memref<512x512xbf16>, %b: memref<512x512xbf16>,
                                        %c: memref<512x512xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4, 4>, smalti.warpgroups = 2 : i64,
                smalti.cluster = array<i64: 2, 1, 1>} {
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
  %o_a0 = arith.constant 1024 : index
  %o_a1 = arith.constant 17408 : index
  %o_a2 = arith.constant 33792 : index
  %o_a3 = arith.constant 50176 : index
  %o_b0 = arith.constant 66560 : index
  %o_b1 = arith.constant 82944 : index
  %o_b2 = arith.constant 99328 : index
  %o_b3 = arith.constant 115712 : index
  %full = "smalti.slice_smem"(%o_full) : (index) -> memref<4xi64, #gpu.address_space<workgroup>>
  %empty = "smalti.slice_smem"(%o_empty) : (index) -> memref<4xi64, #gpu.address_space<workgroup>>
  %a0 = "smalti.slice_smem"(%o_a0) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %a1 = "smalti.slice_smem"(%o_a1) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %a2 = "smalti.slice_smem"(%o_a2) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %a3 = "smalti.slice_smem"(%o_a3) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %b0_raw = "smalti.slice_smem"(%o_b0) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b0 = "smalti.with_transforms"(%b0_raw) {transforms = [#smalti.tile<[32, 64]>, #smalti.swizzle<128>]} : (memref<64x128xbf16, #gpu.address_space<workgroup>>) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b1_raw = "smalti.slice_smem"(%o_b1) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b1 = "smalti.with_transforms"(%b1_raw) {transforms = [#smalti.tile<[32, 64]>, #smalti.swizzle<128>]} : (memref<64x128xbf16, #gpu.address_space<workgroup>>) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b2_raw = "smalti.slice_smem"(%o_b2) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b2 = "smalti.with_transforms"(%b2_raw) {transforms = [#smalti.tile<[32, 64]>, #smalti.swizzle<128>]} : (memref<64x128xbf16, #gpu.address_space<workgroup>>) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b3_raw = "smalti.slice_smem"(%o_b3) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %b3 = "smalti.with_transforms"(%b3_raw) {transforms = [#smalti.tile<[32, 64]>, #smalti.swizzle<128>]} : (memref<64x128xbf16, #gpu.address_space<workgroup>>) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %c_tile = "smalti.slice_smem"(%o_a0) : (index) -> memref<128x128xbf16, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%full) {arrival_count = 1 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.initialize_barrier"(%empty) {arrival_count = 2 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>) -> ()
  // The peer arrives on and multicasts to this CTA's barriers: they must be initialised first.
  "smalti.cluster_barrier"() : () -> ()
  %bm = gpu.block_id x
  %bn = gpu.block_id y
  %row = arith.muli %bm, %c128 : index
  %col = arith.muli %bn, %c128 : index
  // Producer: for each K tile, wait until both CTAs have released its stage, then load this
  // CTA's A tile and its half of B (multicast to the pair).
  "smalti.warpgroup_region"() ({
    scf.for %r = %c0 to %rounds step %c1 {
      %empty_parity = arith.addi %r, %c1 : index
      %k_round = arith.muli %r, %c256 : index
      // Stage 0: K tile 4 r + 0.
      "smalti.wait"(%empty, %c0, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c0) {bytes = 32768 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.async_load"(%a, %a0, %full, %c0, %row, %k_round) : (memref<512x512xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b0, %full, %c0, %k_round, %col) {collective = array<i64: 0>} : (memref<512x512xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      // Stage 1: K tile 4 r + 1.
      "smalti.wait"(%empty, %c1, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c1) {bytes = 32768 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      %k1 = arith.addi %k_round, %c64 : index
      "smalti.async_load"(%a, %a1, %full, %c1, %row, %k1) : (memref<512x512xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b1, %full, %c1, %k1, %col) {collective = array<i64: 0>} : (memref<512x512xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      // Stage 2: K tile 4 r + 2.
      "smalti.wait"(%empty, %c2, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c2) {bytes = 32768 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      %k2 = arith.addi %k_round, %c128 : index
      "smalti.async_load"(%a, %a2, %full, %c2, %row, %k2) : (memref<512x512xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b2, %full, %c2, %k2, %col) {collective = array<i64: 0>} : (memref<512x512xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      // Stage 3: K tile 4 r + 3.
      "smalti.wait"(%empty, %c3, %empty_parity) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      "smalti.arrive_expect_tx"(%full, %c3) {bytes = 32768 : i64} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      %k3 = arith.addi %k_round, %c192 : index
      "smalti.async_load"(%a, %a3, %full, %c3, %row, %k3) : (memref<512x512xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
      "smalti.async_load"(%b, %b3, %full, %c3, %k3, %col) {collective = array<i64: 0>} : (memref<512x512xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<4xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
    }
  }) {warpgroup = 0 : i64} : () -> ()
  // Consumer: wgmma on each full stage, then release it to both CTAs' producers.
  "smalti.warpgroup_region"() ({
    %zero = arith.constant dense<0.0> : vector<128x128xf32>
    %acc = scf.for %r = %c0 to %rounds step %c1 iter_args(%acc_in = %zero) -> (vector<128x128xf32>) {
      "smalti.wait"(%full, %c0, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc0 = "smalti.wgmma"(%acc_in, %a0, %b0) : (vector<128x128xf32>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>
      "smalti.arrive"(%empty, %c0) {collective = array<i64: 0>} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c1, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc1 = "smalti.wgmma"(%acc0, %a1, %b1) : (vector<128x128xf32>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>
      "smalti.arrive"(%empty, %c1) {collective = array<i64: 0>} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c2, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc2 = "smalti.wgmma"(%acc1, %a2, %b2) : (vector<128x128xf32>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>
      "smalti.arrive"(%empty, %c2) {collective = array<i64: 0>} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      "smalti.wait"(%full, %c3, %r) : (memref<4xi64, #gpu.address_space<workgroup>>, index, index) -> ()
      %acc3 = "smalti.wgmma"(%acc2, %a3, %b3) : (vector<128x128xf32>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<128x128xf32>
      "smalti.arrive"(%empty, %c3) {collective = array<i64: 0>} : (memref<4xi64, #gpu.address_space<workgroup>>, index) -> ()
      scf.yield %acc3 : vector<128x128xf32>
    }
    // Epilogue: every wgmma has completed (wait_group 0), so A stages 0 and 1 are free.
    %out = arith.truncf %acc : vector<128x128xf32> to vector<128x128xbf16>
    "smalti.vector_store"(%out, %c_tile, %c0, %c0) : (vector<128x128xbf16>, memref<128x128xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
    "smalti.async_store"(%c_tile, %c, %row, %col) : (memref<128x128xbf16, #gpu.address_space<workgroup>>, memref<512x512xbf16>, index, index) -> ()
    "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  }) {warpgroup = 1 : i64} : () -> ()
  // The peer's last releases arrive on this CTA's empty barriers: it must not exit before.
  "smalti.cluster_barrier"() : () -> ()
  return
}
