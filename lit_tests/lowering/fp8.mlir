// RUN: smalti-translate %s --split-input-file --to=ptx | filecheck %s
// RUN: smalti-translate %s --split-input-file --to=sass | filecheck %s --check-prefix=SASS

// fp8 vectors in registers: 4 values per .b32 where the layout's vector has a multiple of 4
// (lowest column in the lowest byte), 2 per .b16 where it has 2, one in a .b16's low byte
// otherwise. PTX converts fp8 in pairs: `cvt.rn.satfinite.e4m3x2.f32 d, a, b` puts a in the
// upper byte of d; `cvt.rn.f16x2.e5m2x2 d, a` widens both bytes of a (exactly).

// truncf: two pair conversions (odd element first) and one mov.b32 per 4 values; the f32
// values load strided 4 per thread, so the f8 ones store as one .b32 each.
// CHECK-LABEL: .visible .entry truncf_e4m3_quads(
// CHECK: ld.global.v4.f32 {[[F0:%f[0-9]+]], [[F1:%f[0-9]+]], [[F2:%f[0-9]+]], [[F3:%f[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK: cvt.rn.satfinite.e4m3x2.f32 [[P0:%rs[0-9]+]], [[F1]], [[F0]];
// CHECK-NEXT: cvt.rn.satfinite.e4m3x2.f32 [[P1:%rs[0-9]+]], [[F3]], [[F2]];
// CHECK-NEXT: mov.b32 [[Q:%r[0-9]+]], {[[P0]], [[P1]]};
// CHECK: st.global.b32 [{{%rd[0-9]+}}], [[Q]];
// CHECK-COUNT-7: st.global.b32
// CHECK-NOT: st.global
// SASS-LABEL: .text.truncf_e4m3_quads:
// SASS-COUNT-16: F2FP.SATFINITE.E4M3.F32.PACK_AB
func.func @truncf_e4m3_quads(%a: memref<64x64xf32>, %out: memref<64x64xf8E4M3FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %y = arith.truncf %x : vector<64x64xf32> to vector<64x64xf8E4M3FN>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf8E4M3FN>, memref<64x64xf8E4M3FN>, index, index) -> ()
  return
}

// -----

// extf: each .b32 splits into its two byte pairs, each pair widens to f16x2 and each half
// to f32.
// CHECK-LABEL: .visible .entry extf_e5m2_quads(
// CHECK: ld.global.v4.b32 {[[R0:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, [{{%rd[0-9]+}}];
// CHECK: mov.b32 {[[LO:%rs[0-9]+]], [[HI:%rs[0-9]+]]}, [[R0]];
// CHECK-NEXT: cvt.rn.f16x2.e5m2x2 [[H0:%r[0-9]+]], [[LO]];
// CHECK-NEXT: mov.b32 {[[E0:%rs[0-9]+]], [[E1:%rs[0-9]+]]}, [[H0]];
// CHECK-NEXT: cvt.f32.f16 [[X0:%f[0-9]+]], [[E0]];
// CHECK-NEXT: cvt.f32.f16 [[X1:%f[0-9]+]], [[E1]];
// CHECK-NEXT: cvt.rn.f16x2.e5m2x2 [[H1:%r[0-9]+]], [[HI]];
// CHECK-NEXT: mov.b32 {[[E2:%rs[0-9]+]], [[E3:%rs[0-9]+]]}, [[H1]];
// CHECK-NEXT: cvt.f32.f16 [[X2:%f[0-9]+]], [[E2]];
// CHECK-NEXT: cvt.f32.f16 [[X3:%f[0-9]+]], [[E3]];
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}], {[[X0]], [[X1]], [[X2]], [[X3]]};
// SASS-LABEL: .text.extf_e5m2_quads:
// SASS: F2FP.F16.E5M2.UNPACK_B
func.func @extf_e5m2_quads(%a: memref<64x64xf8E5M2>, %out: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf8E5M2>, index, index) -> vector<64x64xf8E5M2>
  %y = arith.extf %x : vector<64x64xf8E5M2> to vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// In the WGMMA layout (vectors of 2) a pair is one .b16: the conversion's result is the
// register, stored with st.global.b16 and widened again without unpacking.
// CHECK-LABEL: .visible .entry pairs_in_the_wgmma_layout(
// CHECK: ld.global.v2.f32 {[[F0:%f[0-9]+]], [[F1:%f[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK: cvt.rn.satfinite.e4m3x2.f32 [[P0:%rs[0-9]+]], [[F1]], [[F0]];
// CHECK: st.global.b16 [{{%rd[0-9]+}}], [[P0]];
// CHECK-COUNT-15: st.global.b16
// CHECK: cvt.rn.f16x2.e4m3x2 {{%r[0-9]+}}, [[P0]];
func.func @pairs_in_the_wgmma_layout(%a: memref<64x64xf32>, %out: memref<64x64xf8E4M3FN>, %back: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %w = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x64xf32>) -> vector<64x64xf32>
  %y = arith.truncf %w : vector<64x64xf32> to vector<64x64xf8E4M3FN>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf8E4M3FN>, memref<64x64xf8E4M3FN>, index, index) -> ()
  %z = arith.extf %y : vector<64x64xf8E4M3FN> to vector<64x64xf32>
  "smalti.vector_store"(%z, %back, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// A column offset known only at run time proves single bytes aligned: each .b32 of 4 bytes
// is loaded byte by byte and joined (the low byte masked, the high one shifted in), and
// stored byte by byte (the high byte of each half shifted down).
// CHECK-LABEL: .visible .entry bytes_at_a_dynamic_column(
// CHECK: ld.global.b8 [[B0:%rs[0-9]+]], [[[A:%rd[0-9]+]]];
// CHECK-NEXT: ld.global.b8 [[B1:%rs[0-9]+]], [[[A]]+1];
// CHECK-NEXT: ld.global.b8 [[B2:%rs[0-9]+]], [[[A]]+2];
// CHECK-NEXT: ld.global.b8 [[B3:%rs[0-9]+]], [[[A]]+3];
// CHECK-NEXT: and.b16 [[M0:%rs[0-9]+]], [[B0]], 255;
// CHECK-NEXT: shl.b16 [[S1:%rs[0-9]+]], [[B1]], 8;
// CHECK-NEXT: or.b16 [[LO:%rs[0-9]+]], [[M0]], [[S1]];
// CHECK-NEXT: and.b16 [[M2:%rs[0-9]+]], [[B2]], 255;
// CHECK-NEXT: shl.b16 [[S3:%rs[0-9]+]], [[B3]], 8;
// CHECK-NEXT: or.b16 [[HI:%rs[0-9]+]], [[M2]], [[S3]];
// CHECK-NEXT: mov.b32 [[R:%r[0-9]+]], {[[LO]], [[HI]]};
// CHECK: mov.b32 {[[L:%rs[0-9]+]], [[H:%rs[0-9]+]]}, [[R]];
// CHECK-NEXT: shr.b16 [[L1:%rs[0-9]+]], [[L]], 8;
// CHECK-NEXT: shr.b16 [[H1:%rs[0-9]+]], [[H]], 8;
// CHECK-NEXT: st.global.b8 [[[D:%rd[0-9]+]]], [[L]];
// CHECK-NEXT: st.global.b8 [[[D]]+1], [[L1]];
// CHECK-NEXT: st.global.b8 [[[D]]+2], [[H]];
// CHECK-NEXT: st.global.b8 [[[D]]+3], [[H1]];
func.func @bytes_at_a_dynamic_column(%a: memref<64x128xf8E4M3FN>, %j32: i32, %out: memref<64x128xf8E4M3FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %j = arith.index_cast %j32 : i32 to index
  %x = "smalti.vector_load"(%a, %c0, %j) : (memref<64x128xf8E4M3FN>, index, index) -> vector<64x64xf8E4M3FN>
  "smalti.vector_store"(%x, %out, %c0, %j) : (vector<64x64xf8E4M3FN>, memref<64x128xf8E4M3FN>, index, index) -> ()
  return
}

// -----

// A splat constant: the byte of 1.5 (e4m3 0x3C) four times in one register.
// CHECK-LABEL: .visible .entry splat(
// CHECK: mov.b32 [[C:%r[0-9]+]], 1010580540;
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[C]], [[C]], [[C]], [[C]]};
func.func @splat(%out: memref<64x64xf8E4M3FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = arith.constant dense<1.5> : vector<64x64xf8E4M3FN>
  "smalti.vector_store"(%x, %out, %c0, %c0) : (vector<64x64xf8E4M3FN>, memref<64x64xf8E4M3FN>, index, index) -> ()
  return
}

// -----

// Shared memory, 128-byte swizzled: quads stored as .b32 at their swizzled addresses, and
// loaded back as .b32 in the 8-bit A layout (4 adjacent columns per register), which widen
// pair by pair.
// CHECK-LABEL: .visible .entry shared_quads(
// CHECK: mov.b32 [[Q:%r[0-9]+]], {{{%rs[0-9]+}}, {{%rs[0-9]+}}};
// CHECK: xor.b32 [[X:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT: add.u32 [[S:%r[0-9]+]], {{%r[0-9]+}}, [[X]];
// CHECK-NEXT: st.shared.b32 [[[S]]], [[Q]];
// CHECK-COUNT-15: st.shared.b32
// CHECK-NOT: st.shared
// CHECK: bar.sync 1, 128;
// CHECK: ld.shared.b32 [[L:%r[0-9]+]], [{{%r[0-9]+}}];
// CHECK: mov.b32 {[[LO:%rs[0-9]+]], {{%rs[0-9]+}}}, [[L]];
// CHECK-NEXT: cvt.rn.f16x2.e4m3x2 {{%r[0-9]+}}, [[LO]];
func.func @shared_quads(%a: memref<64x128xf32>, %out: memref<64x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x128xf32>, index, index) -> vector<64x128xf32>
  %y = arith.truncf %x : vector<64x128xf32> to vector<64x128xf8E4M3FN>
  %s0 = "smalti.slice_smem"(%c0) : (index) -> memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %s = "smalti.with_transforms"(%s0) {transforms = [#smalti.tile<[64, 128]>, #smalti.swizzle<128>]} : (memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
  "smalti.vector_store"(%y, %s, %c0, %c0) : (vector<64x128xf8E4M3FN>, memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %z = "smalti.vector_load"(%s, %c0, %c0) : (memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, index, index) -> vector<64x128xf8E4M3FN>
  %w = "smalti.layout_cast"(%z) {new_layout = #smalti.tiled<tiling = [[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x128xf8E4M3FN>) -> vector<64x128xf8E4M3FN>
  %v = arith.extf %w : vector<64x128xf8E4M3FN> to vector<64x128xf32>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}
