// RUN: smalti-opt %s --split-input-file --smalti-infer-layouts | filecheck %s

// tcgen05 ops (smalti/dialect/ops_tcgen05.py). tcgen05_mma's shared-memory operands take the
// canonical swizzled tiles its descriptors read (wgmma's: the widest swizzle, tiles as tall
// as the operand), 8-bit and f32 B K-major (stored N x K, viewed through a leading transpose);
// TMEM refs and the i1 take nothing. tcgen05_cp's source stays row-major (no transforms), and
// tcgen05_commit's barriers are a plain array.

// bf16: A 128 x 32 in one 64-byte swizzle span, B 32 x 128 MN-major in 128-byte spans.
// CHECK-LABEL: func.func @mma_bf16
// CHECK: "smalti.slice_smem"(%{{.*}}) {out_transforms = {{\[\[}}#smalti.tile<[128, 32]>, #smalti.swizzle<64>]]}
// CHECK: "smalti.slice_smem"(%{{.*}}) {out_transforms = {{\[\[}}#smalti.tile<[32, 64]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.tcgen05_mma"(%{{.*}}) {in_transforms = {{\[\[}}#smalti.tile<[128, 32]>, #smalti.swizzle<64>], [#smalti.tile<[32, 64]>, #smalti.swizzle<128>]]}
// CHECK: "smalti.tcgen05_commit"(%{{.*}}) {in_transforms = {{\[\[}}]]}
func.func @mma_bf16() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 9216 : index
  %false = arith.constant false
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x32xbf16, #gpu.address_space<workgroup>>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<32x128xbf16, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false) : (memref<128x32xbf16, #gpu.address_space<workgroup>>, memref<32x128xbf16, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
  return
}

// -----

// e4m3 with E8M0 scales: A and B K-major in 128-byte spans (B transposed: stored N x K); the
// scale factor sources of tcgen05_cp get no transforms.
// CHECK-LABEL: func.func @mma_block_scaled
// CHECK: "smalti.tcgen05_cp"(%{{.*}}) {in_transforms = {{\[\[}}]], shape = "32x128b.warpx4"}
// CHECK: "smalti.tcgen05_cp"(%{{.*}}) {in_transforms = {{\[\[}}]], shape = "32x128b.warpx4"}
// CHECK: "smalti.tcgen05_mma"(%{{.*}}) {in_transforms = {{\[\[}}#smalti.tile<[128, 128]>, #smalti.swizzle<128>], [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 128]>, #smalti.swizzle<128>]]}
func.func @mma_block_scaled() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 17408 : index
  %o_sfa = arith.constant 25600 : index
  %o_sfb = arith.constant 26112 : index
  %true = arith.constant true
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %sb = "smalti.slice_smem"(%o_b) : (index) -> memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %ssfa = "smalti.slice_smem"(%o_sfa) : (index) -> memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>
  %ssfb = "smalti.slice_smem"(%o_sfb) : (index) -> memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 64 : i64} : () -> memref<128x64xf32, "tmem">
  %tsfa = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x128xf8E8M0FNU, "tmem">
  %tsfb = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x128xf8E8M0FNU, "tmem">
  "smalti.tcgen05_cp"(%ssfa, %tsfa) {shape = "32x128b.warpx4"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tcgen05_cp"(%ssfb, %tsfb) {shape = "32x128b.warpx4"} : (memref<1x32x16xf8E8M0FNU, #gpu.address_space<workgroup>>, memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %true, %tsfa, %tsfb) : (memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x64xf32, "tmem">, i1, memref<128x128xf8E8M0FNU, "tmem">, memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tmem_dealloc"(%tsfb) : (memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tmem_dealloc"(%tsfa) : (memref<128x128xf8E8M0FNU, "tmem">) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x64xf32, "tmem">) -> ()
  return
}
