// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// tcgen05 ops (smalti/dialect/ops_tcgen05.py): tcgen05_mma's operand memory spaces, type
// pairings (the kind), shapes (M, N, K per kind, CTA pairs), D columns, scale factor refs and
// the shared-memory layouts its descriptors express; tcgen05_commit's barriers;
// tcgen05_cp's shapes, types and columns.

func.func @mma_accumulator_in_smem(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, #gpu.address_space<workgroup>>, %p: i1) {
  // expected-error @+1 {{'smalti.tcgen05_mma' op expects the accumulator to be a TMEM memref}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, #gpu.address_space<workgroup>>, i1) -> ()
  return
}

// -----

func.func @mma_accumulator_64_lanes(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<64x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{expects the accumulator to span all 128 TMEM lanes, got memref<64x128xf32, "tmem">}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<64x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_accumulate_not_i1(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i32) {
  // expected-error @+1 {{expects 'accumulate' to be an i1, got i32}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i32) -> ()
  return
}

// -----

func.func @mma_a_in_global_memory(%a: memref<128x64xbf16>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{expects A to be a memref in #gpu.address_space<workgroup>, got memref<128x64xbf16>}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_b_in_tmem(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, "tmem">, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{expects B to be a memref in #gpu.address_space<workgroup>}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, "tmem">, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_a_in_tmem_64_lanes(%a: memref<64x64xbf16, "tmem">, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{A in tensor memory spans all 128 lanes (M = 128)}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<64x64xbf16, "tmem">, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_one_scale_ref(%a: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{takes no scale factor refs or two (a_scale, b_scale), got 1}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @mma_scale_in_smem(%a: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %sb: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{expects a_scale to be a TMEM memref}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @mma_scale_types_differ(%a: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E8M0FNU, "tmem">, %sb: memref<128x16xf8E4M3FN, "tmem">) {
  // expected-error @+1 {{a_scale holds f8E8M0FNU but b_scale f8E4M3FN: both take one scale type}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, "tmem">, memref<128x16xf8E4M3FN, "tmem">) -> ()
  return
}

// -----

func.func @mma_bf16_by_f16(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{cannot multiply bf16 A by f16 B: tcgen05_mma pairs f16 with f16, bf16 with bf16}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_f4_unscaled(%a: memref<128x64xf4E2M1FN, #gpu.address_space<workgroup>>, %b: memref<64x128xf4E2M1FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{cannot multiply f4E2M1FN A by f4E2M1FN B: 6- and 4-bit inputs are block scaled here (give a_scale and b_scale)}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xf4E2M1FN, #gpu.address_space<workgroup>>, memref<64x128xf4E2M1FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_i8_scales(%a: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xi8, "tmem">, %sb: memref<128x16xi8, "tmem">) {
  // expected-error @+1 {{scale factors are f8E8M0FNU (UE8M0) or f8E4M3FN (UE4M3), got i8}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xi8, "tmem">, memref<128x16xi8, "tmem">) -> ()
  return
}

// -----

func.func @mma_f8_with_ue4m3_scales(%a: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E4M3FN, "tmem">, %sb: memref<128x16xf8E4M3FN, "tmem">) {
  // expected-error @+1 {{f8 inputs take f8E8M0FNU scale factors (.kind::mxf8f6f4), got f8E4M3FN}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xf8E4M3FN, "tmem">, memref<128x16xf8E4M3FN, "tmem">) -> ()
  return
}

// -----

func.func @mma_f6_scaled(%a: memref<128x128xf6E2M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E8M0FNU, "tmem">, %sb: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{6- and 4-bit inputs of .kind::mxf8f6f4 need the padded shared-memory formats}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<128x128xf6E2M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, "tmem">, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @mma_bf16_into_f16(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf16, "tmem">, %p: i1) {
  // expected-error @+1 {{.kind::f16 accumulates bf16 products in f32, not f16}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf16, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_tf32_into_f16(%a: memref<128x32xf32, #gpu.address_space<workgroup>>, %b: memref<32x128xf32, #gpu.address_space<workgroup>>, %d: memref<128x128xf16, "tmem">, %p: i1) {
  // expected-error @+1 {{.kind::tf32 accumulates f32 products in f32, not f16}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x32xf32, #gpu.address_space<workgroup>>, memref<32x128xf32, #gpu.address_space<workgroup>>, memref<128x128xf16, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_k_differs(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<32x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{the K dims of A (64) and B (32) differ}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_m_32(%a: memref<32x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{M (32) must be 64 or 128}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<32x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_block_scaled_m_64(%a: memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E8M0FNU, "tmem">, %sb: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{M (64) must be 64 or 128 (128 when block scaled)}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, "tmem">, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @mma_n_24(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x24xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{N (24) must be a multiple of 16 in [16, 256] for M = 128}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x24xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_n_12_m_64(%a: memref<64x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x12xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{N (12) must be a multiple of 8 in [8, 256] for M = 64}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x12xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_n_512(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x512xbf16, #gpu.address_space<workgroup>>, %d: memref<128x512xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{N (512) must be a multiple of 16 in [16, 256] for M = 128}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x512xbf16, #gpu.address_space<workgroup>>, memref<128x512xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_k_24(%a: memref<128x24xbf16, #gpu.address_space<workgroup>>, %b: memref<24x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{K (24) must be a multiple of 16 for .kind::f16 (16 elements per instruction)}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x24xbf16, #gpu.address_space<workgroup>>, memref<24x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_f8_k_16(%a: memref<128x16xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<16x128xf8E5M2, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{K (16) must be a multiple of 32 for .kind::f8f6f4 (32 elements per instruction)}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x16xf8E4M3FN, #gpu.address_space<workgroup>>, memref<16x128xf8E5M2, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

// A 16-bit D takes one element per 32-bit column: a packed f16 ref is refused.
func.func @mma_f16_accumulator_packed(%a: memref<128x64xf16, #gpu.address_space<workgroup>>, %b: memref<64x64xf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf16, "tmem">, %p: i1) {
  // expected-error @+1 {{writes a f16 D one element per 32-bit TMEM column: the accumulator must be an unpacked ref, memref<128xCxf16, strided<[2C, 2]>, "tmem">, got memref<128x128xf16, "tmem">}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xf16, #gpu.address_space<workgroup>>, memref<64x64xf16, #gpu.address_space<workgroup>>, memref<128x128xf16, "tmem">, i1) -> ()
  return
}

// -----

// The unpacked form holds D only: A in tensor memory is read packed.
func.func @mma_a_unpacked(%a: memref<128x64xf16, strided<[128, 2]>, "tmem">, %b: memref<64x128xf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{reads A packed: it cannot be an unpacked TMEM ref, got memref<128x64xf16, strided<[128, 2]>, "tmem">}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) : (memref<128x64xf16, strided<[128, 2]>, "tmem">, memref<64x128xf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @cp_into_unpacked(%s: memref<128x8xf16, #gpu.address_space<workgroup>>, %t: memref<128x64xf16, strided<[128, 2]>, "tmem">) {
  // expected-error @+1 {{writes packed 16-byte rows: the destination cannot be an unpacked TMEM ref}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "128x128b"} : (memref<128x8xf16, #gpu.address_space<workgroup>>, memref<128x64xf16, strided<[128, 2]>, "tmem">) -> ()
  return
}

// -----

func.func @mma_columns_out_of_bounds(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{D's columns [64, 192) are out of bounds for memref<128x128xf32, "tmem">}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) {column = 64 : i64} : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_scale_ref_too_small(%a: memref<128x256xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<256x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E8M0FNU, "tmem">, %sb: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{expects a_scale to span 128 lanes and at least 8 32-bit columns (2 group(s) of 4 scale factors per row), got memref<128x16xf8E8M0FNU, "tmem">}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<128x256xf8E4M3FN, #gpu.address_space<workgroup>>, memref<256x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, "tmem">, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @mma_b_scale_ref_too_small(%a: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x256xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x256xf32, "tmem">, %p: i1, %sa: memref<128x16xf8E8M0FNU, "tmem">, %sb: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{expects b_scale to span 128 lanes and at least 8 32-bit columns (1 group(s) of 4 scale factors per row, N = 256)}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p, %sa, %sb) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x256xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x256xf32, "tmem">, i1, memref<128x16xf8E8M0FNU, "tmem">, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @mma_collective_without_cluster() attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %o = arith.constant 0 : index
  %p = arith.constant true
  %a = "smalti.slice_smem"(%o) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %d = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  // expected-error @+1 {{'collective' (.cta_group::2) needs a cluster of an even number of CTAs (smalti.cluster), got 1x1x1}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) {collective = true} : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_collective_m_64() attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2, 1, 1>} {
  %o = arith.constant 0 : index
  %p = arith.constant true
  %a = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %d = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  // expected-error @+1 {{'collective' (.cta_group::2) takes 128 rows of A in each CTA's shared memory (M = 256), not block scaled}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) {collective = true} : (memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_collective_n_16() attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2, 1, 1>} {
  %o = arith.constant 0 : index
  %p = arith.constant true
  %a = "smalti.slice_smem"(%o) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<64x8xbf16, #gpu.address_space<workgroup>>
  %d = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  // expected-error @+1 {{N (16) must be a multiple of 16 in [32, 256] for M = 256 (B holds N / 2 columns in each CTA)}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) {collective = true} : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x8xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @commit_not_collective_after_collective_mma() attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2, 1, 1>} {
  %o = arith.constant 0 : index
  %p = arith.constant true
  %a = "smalti.slice_smem"(%o) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %d = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  %bars = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  "smalti.tcgen05_mma"(%a, %b, %d, %p) {collective = true} : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  // expected-error @+1 {{'smalti.tcgen05_commit' op is not 'collective', but other tcgen05 MMAs or commits of the kernel are (.cta_group::2): ptxas takes one CTA granularity per kernel}}
  "smalti.tcgen05_commit"(%bars, %o) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @mma_collective_not_bool(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{'collective' must be a bool, got 1 : i64}}
  "smalti.tcgen05_mma"(%a, %b, %d, %p) {collective = 1 : i64} : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_too_few_operands(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  // expected-error @+1 {{expects at least 4 operands, got 3}}
  "smalti.tcgen05_mma"(%a, %b, %d) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">) -> ()
  return
}

// -----

func.func @mma_f8_b_mn_major(%a: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %b: memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  %bt = "smalti.with_transforms"(%b) {transforms = [#smalti.tile<[8, 128]>, #smalti.swizzle<128>]} : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
  // expected-error @+1 {{reads B (f8E4M3FN) MN-major, but tcgen05_mma transposes only bf16/f16 operands; store B as N x K}}
  "smalti.tcgen05_mma"(%a, %bt, %d, %p) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_tile_not_a_span(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  %bt = "smalti.with_transforms"(%b) {transforms = [#smalti.tile<[4, 64]>, #smalti.swizzle<128>]} : (memref<64x128xbf16, #gpu.address_space<workgroup>>) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{the matrix descriptor reads tiles of 8k rows and one 128-byte swizzle span, not 4x64}}
  "smalti.tcgen05_mma"(%a, %bt, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_untiled_swizzle(%a: memref<128x64xbf16, #gpu.address_space<workgroup>>, %b: memref<64x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  %bt = "smalti.with_transforms"(%b) {transforms = [#smalti.tile<[8, 64]>]} : (memref<64x128xbf16, #gpu.address_space<workgroup>>) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{the matrix descriptor reads shared memory as 2-D tiles then a swizzle, optionally transposed first}}
  "smalti.tcgen05_mma"(%a, %bt, %d, %p) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @mma_rows_unevenly_spaced(%a: memref<128x128xbf16, #gpu.address_space<workgroup>>, %b: memref<128x128xbf16, #gpu.address_space<workgroup>>, %d: memref<128x128xf32, "tmem">, %p: i1) {
  %at = "smalti.with_transforms"(%a) {transforms = [#smalti.tile<[16, 64]>, #smalti.swizzle<128>]} : (memref<128x128xbf16, #gpu.address_space<workgroup>>) -> memref<128x128xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{this A's 8-row groups are not evenly spaced in shared memory: use tiles of 8 rows, or tiles covering 128 rows of A}}
  "smalti.tcgen05_mma"(%at, %b, %d, %p) : (memref<128x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  return
}

// -----

func.func @commit_barriers_not_i64(%bars: memref<2xi32, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{expects barriers as memref<Nxi64, #gpu.address_space<workgroup>>}}
  "smalti.tcgen05_commit"(%bars, %i) : (memref<2xi32, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @commit_index_out_of_bounds(%bars: memref<2xi64, #gpu.address_space<workgroup>>) {
  %i = arith.constant 2 : index
  // expected-error @+1 {{'smalti.tcgen05_commit' op barrier index 2 is out of bounds for 2 barriers}}
  "smalti.tcgen05_commit"(%bars, %i) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @commit_index_not_index(%bars: memref<2xi64, #gpu.address_space<workgroup>>, %i: i32) {
  // expected-error @+1 {{the barrier index must have type index, got i32}}
  "smalti.tcgen05_commit"(%bars, %i) : (memref<2xi64, #gpu.address_space<workgroup>>, i32) -> ()
  return
}

// -----

func.func @commit_collective_odd_cluster() attributes {smalti.kernel, smalti.grid = array<i64: 3>, smalti.cluster = array<i64: 3, 1, 1>} {
  %i = arith.constant 0 : index
  %bars = "smalti.slice_smem"(%i) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'collective' (.cta_group::2) needs a cluster of an even number of CTAs (smalti.cluster), got 3x1x1}}
  "smalti.tcgen05_commit"(%bars, %i) {collective = true} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @cp_source_in_tmem(%s: memref<32x16xf8E8M0FNU, "tmem">, %t: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{'smalti.tcgen05_cp' op expects the source to be a memref in #gpu.address_space<workgroup>}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "32x128b.warpx4"} : (memref<32x16xf8E8M0FNU, "tmem">, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @cp_destination_in_smem(%s: memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<128x16xf8E8M0FNU, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{expects the destination to be a TMEM memref}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "32x128b.warpx4"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x16xf8E8M0FNU, #gpu.address_space<workgroup>>) -> ()
  return
}

// -----

func.func @cp_unknown_shape(%s: memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{'shape' must be one of 128x128b, 32x128b.warpx4, 64x128b.warpx2::02_13, 64x128b.warpx2::01_23, got '4x256b'}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "4x256b"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @cp_shape_missing(%s: memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{requires a string 'shape' attribute}}
  "smalti.tcgen05_cp"(%s, %t) {column = 0 : i64} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @cp_types_differ(%s: memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<128x16xi8, "tmem">) {
  // expected-error @+1 {{copies f8E8M0FNU into a TMEM ref of i8: the element types must match}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "32x128b.warpx4"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x16xi8, "tmem">) -> ()
  return
}

// -----

func.func @cp_rows_wrong(%s: memref<64x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{expects the source as memref<[G x ]32x16xf8E8M0FNU> (rows of 128 bits for .32x128b.warpx4), got memref<64x16xf8E8M0FNU}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "32x128b.warpx4"} : (memref<64x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @cp_destination_64_lanes(%s: memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<64x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{expects a TMEM ref of 128 lanes, got memref<64x16xf8E8M0FNU, "tmem">}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "32x128b.warpx4"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<64x16xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @cp_column_not_a_cell(%s: memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<128x32xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{'column' 2 does not start a 32-bit TMEM column}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "32x128b.warpx4", column = 2 : i64} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x32xf8E8M0FNU, "tmem">) -> ()
  return
}

// -----

func.func @cp_out_of_bounds(%s: memref<2x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, %t: memref<128x16xf8E8M0FNU, "tmem">) {
  // expected-error @+1 {{the copies write 32-bit columns [0, 8), out of bounds for memref<128x16xf8E8M0FNU, "tmem">}}
  "smalti.tcgen05_cp"(%s, %t) {shape = "32x128b.warpx4"} : (memref<2x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x16xf8E8M0FNU, "tmem">) -> ()
  return
}
