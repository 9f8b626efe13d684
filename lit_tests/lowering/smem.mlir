// RUN: smalti-translate %s --to=ptx | filecheck %s

// A 128-byte swizzled ref at byte 1024 of the dynamic buffer: row-major 128 B rows (one
// 8x64 tile column), the 16-byte chunk XORed with the row bits: (off >> 7) & 7, << 4.
// CHECK: .extern .shared .align 1024 .b8 smalti_smem[];
// CHECK-LABEL: .visible .entry smem(
// CHECK-NOT: .shared
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: add.u32 [[REF:%r[0-9]+]], [[BASE]], 1024;
// CHECK: shr.u32 [[ROW:%r[0-9]+]], [[OFF:%r[0-9]+]], 7;
// CHECK: and.b32 [[ROW3:%r[0-9]+]], [[ROW]], 7;
// CHECK: shl.b32 [[CHUNK:%r[0-9]+]], [[ROW3]], 4;
// CHECK: xor.b32 [[SWZ:%r[0-9]+]], [[OFF]], [[CHUNK]];
// CHECK: add.u32 [[ADDR:%r[0-9]+]], [[REF]], [[SWZ]];
// CHECK: st.shared.v4.b32 [[[ADDR]]], {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}};
// CHECK: bar.sync 1, 128;
// CHECK: ld.shared.v4.b32 {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, [{{%r[0-9]+}}];
func.func @smem(%a: memref<64x64xbf16>, %out: memref<64x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %off = arith.constant 1024 : index
  %s = "smalti.slice_smem"(%off) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[8, 64]>, #smalti.swizzle<128>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xbf16>, index, index) -> vector<64x64xbf16>
  "smalti.vector_store"(%v, %t, %c0, %c0) : (vector<64x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.warpgroup_barrier"() : () -> ()
  %w = "smalti.vector_load"(%t, %c0, %c0) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> vector<64x64xbf16>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<64x64xbf16>, memref<64x64xbf16>, index, index) -> ()
  return
}

// A 16-bit array in the WGMMA layout goes to rows that are 16-byte contiguous through
// stmatrix: per warp and 16x16 block, one .x4 whose registers are the four 8x8 fragments
// (rows r and r + 8, columns c and c + 8) and whose lane l addresses row l % 8 of matrix
// l / 8: row 16 warp + (l & 15), column (l & 16) / 2.
// CHECK-LABEL: .visible .entry matrices(
// CHECK: and.b32 [[LANE:%r[0-9]+]], [[TID:%r[0-9]+]], 31;
// CHECK: shr.u32 [[WARP:%r[0-9]+]], [[TID]], 5;
// CHECK: and.b32 [[LOW:%r[0-9]+]], [[LANE]], 15;
// CHECK: mad.lo.u32 [[ROW:%r[0-9]+]], [[WARP]], 16, [[LOW]];
// CHECK: and.b32 [[HIGH:%r[0-9]+]], [[LANE]], 16;
// CHECK: shr.u32 {{%r[0-9]+}}, [[HIGH]], 1;
// CHECK-COUNT-2: stmatrix.sync.aligned.m8n8.x4.shared.b16 [{{%r[0-9]+}}], {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}};
// CHECK-NOT: st.shared
// CHECK: ret;
func.func @matrices(%a: memref<64x32xbf16>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %off = arith.constant 1024 : index
  %s = "smalti.slice_smem"(%off) : (index) -> memref<64x32xbf16, #gpu.address_space<workgroup>>
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[8, 32]>, #smalti.swizzle<64>]} : (memref<64x32xbf16, #gpu.address_space<workgroup>>) -> memref<64x32xbf16, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x32xbf16>, index, index) -> vector<64x32xbf16>
  "smalti.vector_store"(%v, %t, %c0, %c0) : (vector<64x32xbf16>, memref<64x32xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
  return
}
