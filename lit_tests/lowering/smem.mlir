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
