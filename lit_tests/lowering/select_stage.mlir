// RUN: smalti-translate %s --to=ptx | filecheck %s

// Stage %k (the block index) of three 128-byte swizzled 64x64 bf16 stages, 8192 bytes apart
// from byte 1024: the chosen stage's address is the first stage's plus k * 8192, computed
// once; the stores and loads through it add their (swizzled) offsets to it.
// CHECK-LABEL: .visible .entry dynamic_stage(
// CHECK: mov.u32 {{%r[0-9]+}}, %ctaid.x;
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: cvt.u32.u64 [[K:%r[0-9]+]], {{%rd[0-9]+}};
// CHECK: mul.lo.u32 [[STRIDE:%r[0-9]+]], [[K]], 8192;
// CHECK: add.u32 [[FIRST:%r[0-9]+]], [[BASE]], 1024;
// CHECK: add.u32 [[STAGE:%r[0-9]+]], [[FIRST]], [[STRIDE]];
// CHECK: xor.b32 [[SWZ:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK: add.u32 [[ADDR:%r[0-9]+]], [[STAGE]], [[SWZ]];
// CHECK: st.shared.v4.b32 [[[ADDR]]]
// CHECK: bar.sync 1, 128;
// CHECK: add.u32 [[READ:%r[0-9]+]], [[STAGE]], {{%r[0-9]+}};
// CHECK: ld.shared.b32 {{%r[0-9]+}}, [[[READ]]];
func.func @dynamic_stage(%a: memref<64x64xbf16>, %out: memref<64x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 3>} {
  %c0 = arith.constant 0 : index
  %o0 = arith.constant 1024 : index
  %o1 = arith.constant 9216 : index
  %o2 = arith.constant 17408 : index
  %k = gpu.block_id x
  %s0 = "smalti.slice_smem"(%o0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %s1 = "smalti.slice_smem"(%o1) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %s2 = "smalti.slice_smem"(%o2) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %t0 = "smalti.with_transforms"(%s0) {transforms = [#smalti.tile<[8, 64]>, #smalti.swizzle<128>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %s = "smalti.select_stage"(%k, %t0, %s1, %s2) : (index, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xbf16>, index, index) -> vector<64x64xbf16>
  "smalti.vector_store"(%v, %s, %c0, %c0) : (vector<64x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
  %w = "smalti.vector_load"(%s, %c0, %c0) {out_layouts = [#smalti.strided<vec = 2>]} : (memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> vector<64x64xbf16>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<64x64xbf16>, memref<64x64xbf16>, index, index) -> ()
  return
}

// A constant index chooses that stage at compile time: its offset, no multiplication.
// CHECK-LABEL: .visible .entry constant_stage(
// CHECK-NOT: mul.lo.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 1536;
// CHECK: add.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 1536;
// CHECK: st.shared
func.func @constant_stage(%a: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o1 = arith.constant 1536 : index
  %s0 = "smalti.slice_smem"(%c0) : (index) -> memref<128xf32, #gpu.address_space<workgroup>>
  %s1 = "smalti.slice_smem"(%o1) : (index) -> memref<128xf32, #gpu.address_space<workgroup>>
  %s = "smalti.select_stage"(%c1, %s0, %s1) : (index, memref<128xf32, #gpu.address_space<workgroup>>, memref<128xf32, #gpu.address_space<workgroup>>) -> memref<128xf32, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  "smalti.vector_store"(%v, %s, %c0) : (vector<128xf32>, memref<128xf32, #gpu.address_space<workgroup>>, index) -> ()
  return
}
