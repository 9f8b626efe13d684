// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

func.func @slice_not_constant(%o: index) {
  // expected-error @+1 {{expects a constant offset}}
  %s = "smalti.slice_smem"(%o) : (index) -> memref<128xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @slice_misaligned() {
  %o = arith.constant 8 : index
  // expected-error @+1 {{offset 8 must be a non-negative multiple of 16 bytes}}
  %s = "smalti.slice_smem"(%o) : (index) -> memref<128xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @slice_global() {
  %o = arith.constant 0 : index
  // expected-error @+1 {{expects the result to be a memref in #gpu.address_space<workgroup>}}
  %s = "smalti.slice_smem"(%o) : (index) -> memref<128xf32>
  return
}

// -----

func.func @slice_too_big() {
  %o = arith.constant 0 : index
  // expected-error @+1 {{slice ends at byte 262144}}
  %s = "smalti.slice_smem"(%o) : (index) -> memref<65536xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @transforms_do_not_apply() {
  %o = arith.constant 0 : index
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'transforms' a 128-byte swizzle needs the innermost dim to span exactly 128 bytes}}
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[8, 32]>, #smalti.swizzle<128>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @barriers_not_i64() {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{expects barriers as memref<Nxi64, #gpu.address_space<workgroup>>}}
  "smalti.initialize_barrier"(%b) {arrival_count = 1 : i64} : (memref<2xi32, #gpu.address_space<workgroup>>) -> ()
  return
}

// -----

func.func @barrier_index_out_of_bounds() {
  %o = arith.constant 0 : index
  %i = arith.constant 2 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{barrier index 2 is out of bounds for 2 barriers}}
  "smalti.arrive"(%b, %i) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @expect_tx_without_bytes() {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{requires an integer 'bytes' attribute}}
  "smalti.arrive_expect_tx"(%b, %o) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @wait_parity_type(%p: f32) {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{parity must be an i1, i32 or index, got f32}}
  "smalti.wait"(%b, %o, %p) : (memref<2xi64, #gpu.address_space<workgroup>>, index, f32) -> ()
  return
}

// -----

func.func @async_load_element_types(%g: memref<256x64xf32>) {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{element types differ: f32 in global memory, bf16 in shared memory}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) : (memref<256x64xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @async_load_from_shared_memory() {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %g = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{expects a global or symmetric memref, got memref<64x64xbf16, #gpu.address_space<workgroup>>}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @async_load_slice_lengths(%g: memref<256x64xbf16>) {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'slice_lengths' [32, 64] do not match the shared-memory shape [64, 64]}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {slice_lengths = array<i64: 32, 64>} : (memref<256x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @async_store_index_count(%g: memref<256x64xbf16>) {
  %o = arith.constant 0 : index
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{expects 2 indices for memref<256x64xbf16>, got 1}}
  "smalti.async_store"(%s, %g, %o) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<256x64xbf16>, index) -> ()
  return
}

// -----

func.func @async_store_wait_pending() {
  // expected-error @+1 {{'pending' must be at least 0, got -1}}
  "smalti.async_store_wait"() {pending = -1 : i64} : () -> ()
  return
}

// -----

func.func @wgmma_k_mismatch(%acc: vector<64x128xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<32x128xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{the K dims of A (64) and B (32) differ}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x128xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<32x128xbf16, #gpu.address_space<workgroup>>) -> vector<64x128xf32>
  return
}

// -----

func.func @wgmma_m(%acc: vector<32x128xf32>) {
  %o = arith.constant 0 : index
  %a = "smalti.slice_smem"(%o) : (index) -> memref<32x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{M (32) must be a multiple of 64}}
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<32x128xf32>, memref<32x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<32x128xf32>
  return
}

// -----

func.func @collective_repeats(%g: memref<128x64xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'collective' [0, 0] repeats a cluster dim}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {collective = array<i64: 0, 0>} : (memref<128x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @collective_not_a_dim(%g: memref<128x64xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'collective' dim 3 is not a cluster dim (0 = x, 1 = y, 2 = z)}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {collective = array<i64: 3>} : (memref<128x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @collective_size_one(%g: memref<128x64xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 2, 2>, smalti.cluster = array<i64: 2, 1>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'collective' dim 1 has size 1 in the kernel's 'smalti.cluster' [2, 1, 1]: nothing to share along it}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {collective = array<i64: 0, 1>} : (memref<128x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @collective_without_cluster(%g: memref<128x64xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'collective' dim 0 has size 1 in the kernel's 'smalti.cluster' [1, 1, 1]}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {collective = array<i64: 0>} : (memref<128x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @collective_outside_a_kernel(%g: memref<128x64xbf16>) {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'collective' needs an enclosing kernel (a func.func marked 'smalti.kernel') with a 'smalti.cluster'}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {collective = array<i64: 0>} : (memref<128x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @collective_indivisible(%g: memref<128x64xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 4>, smalti.cluster = array<i64: 4>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<6x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{the shared-memory ref memref<6x64xbf16, #gpu.address_space<workgroup>> cannot be split into 4 collective parts along its leading dim}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {collective = array<i64: 0>} : (memref<128x64xbf16>, memref<6x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @collective_not_an_array(%g: memref<128x64xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'collective' must be an array<i64: ...>, got 0 : i64}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {collective = 0 : i64} : (memref<128x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @cluster_barrier_operands(%i: index) {
  // expected-error @+1 {{'smalti.cluster_barrier' op expects 0 operands, got 1}}
  "smalti.cluster_barrier"(%i) : (index) -> ()
  return
}

// -----

func.func @select_stage_no_stages(%k: index) {
  // expected-error @+1 {{'smalti.select_stage' op expects at least one stage}}
  %s = "smalti.select_stage"(%k) : (index) -> memref<64xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @select_stage_two_types(%k: index) {
  %c0 = arith.constant 0 : index
  %c1024 = arith.constant 1024 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64xf32, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%c1024) : (index) -> memref<32xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.select_stage' op stage #1 has type memref<32xf32, #gpu.address_space<workgroup>>, stage #0 has memref<64xf32, #gpu.address_space<workgroup>>: the stages must have one type}}
  %s = "smalti.select_stage"(%k, %a, %b) : (index, memref<64xf32, #gpu.address_space<workgroup>>, memref<32xf32, #gpu.address_space<workgroup>>) -> memref<64xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @select_stage_global(%k: index, %g: memref<64xf32>) {
  // expected-error @+1 {{'smalti.select_stage' op expects stage #0 to be a memref in #gpu.address_space<workgroup>, got memref<64xf32>}}
  %s = "smalti.select_stage"(%k, %g) : (index, memref<64xf32>) -> memref<64xf32>
  return
}

// -----

func.func @select_stage_result_type(%k: index) {
  %c0 = arith.constant 0 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.select_stage' op result type memref<64xf16, #gpu.address_space<workgroup>> differs from the stages' type memref<64xf32, #gpu.address_space<workgroup>>}}
  %s = "smalti.select_stage"(%k, %a) : (index, memref<64xf32, #gpu.address_space<workgroup>>) -> memref<64xf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @select_stage_index_type(%k: i32) {
  %c0 = arith.constant 0 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.select_stage' op the stage index must have type index, got i32}}
  %s = "smalti.select_stage"(%k, %a) : (i32, memref<64xf32, #gpu.address_space<workgroup>>) -> memref<64xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @select_stage_out_of_range() {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.select_stage' op stage 2 is out of range for 1 stages}}
  %s = "smalti.select_stage"(%c2, %a) : (index, memref<64xf32, #gpu.address_space<workgroup>>) -> memref<64xf32, #gpu.address_space<workgroup>>
  return
}
