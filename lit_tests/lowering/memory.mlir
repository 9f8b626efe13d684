// RUN: smalti-translate %s --split-input-file --to=ptx | filecheck %s

// f32, 16-byte aligned rows: one ld.global.v4.f32 per thread-vector, thread offset computed
// once ((tid / 32) * row bytes + (tid % 32) * 16), registers at static offsets.
// CHECK-LABEL: .visible .entry load_store_f32(
// CHECK: .maxntid 128, 1, 1
// CHECK: ld.param.u64 [[P0:%rd[0-9]+]], [load_store_f32_param_arg0];
// CHECK: cvta.to.global.u64 [[A:%rd[0-9]+]], [[P0]];
// CHECK: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK: shr.u32 [[ROW:%r[0-9]+]], [[TID]], 5;
// CHECK: mul.lo.u32 [[ROWB:%r[0-9]+]], [[ROW]], 1024;
// CHECK: and.b32 [[COL:%r[0-9]+]], [[TID]], 31;
// CHECK: mad.lo.u32 [[OFF:%r[0-9]+]], [[COL]], 16, [[ROWB]];
// CHECK: cvt.u64.u32 [[OFF64:%rd[0-9]+]], [[OFF]];
// CHECK: add.s64 [[ADDR:%rd[0-9]+]], [[A]], [[OFF64]];
// CHECK-NOT: cvt.u64.u32
// CHECK: ld.global.v4.f32 {[[X0:%f[0-9]+]], [[X1:%f[0-9]+]], [[X2:%f[0-9]+]], [[X3:%f[0-9]+]]}, [[[ADDR]]];
// CHECK: ld.global.v4.f32 {{{.*}}}, [[[ADDR]]+4096];
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}], {[[X0]], [[X1]], [[X2]], [[X3]]};
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}+4096],
// CHECK: ret;
func.func @load_store_f32(%a: memref<8x256xf32>, %b: memref<8x256xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x256xf32>, index, index) -> vector<8x128xf32>
  "smalti.vector_store"(%v, %b, %c0, %c0) : (vector<8x128xf32>, memref<8x256xf32>, index, index) -> ()
  return
}

// -----

// bf16 pairs travel packed in .b32 registers: 8 elements per 16-byte access.
// CHECK-LABEL: .visible .entry load_store_bf16(
// CHECK: ld.global.v4.b32 {[[Y0:%r[0-9]+]], [[Y1:%r[0-9]+]], [[Y2:%r[0-9]+]], [[Y3:%r[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK-NOT: ld.global
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[Y0]], [[Y1]], [[Y2]], [[Y3]]};
func.func @load_store_bf16(%a: memref<8x128xbf16>, %b: memref<8x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xbf16>, index, index) -> vector<8x128xbf16>
  "smalti.vector_store"(%v, %b, %c0, %c0) : (vector<8x128xbf16>, memref<8x128xbf16>, index, index) -> ()
  return
}

// -----

// A dynamic index whose alignment is only known to be 4 bytes narrows the accesses to
// scalars; the block index scales by the row stride.
// CHECK-LABEL: .visible .entry unaligned_rows(
// CHECK: mov.u32 [[B:%r[0-9]+]], %ctaid.x;
// CHECK: cvt.u64.u32 [[BW:%rd[0-9]+]], [[B]];
// CHECK: add.s64 [[I:%rd[0-9]+]], [[BW]], 1;
// CHECK: mul.lo.s64 {{%rd[0-9]+}}, [[I]], 4;
// CHECK: mov.u32 [[T:%r[0-9]+]], %tid.x;
// CHECK-NEXT: mul.lo.u32 {{%r[0-9]+}}, [[T]], 16;
// CHECK: ld.global.f32 {{%f[0-9]+}}, [{{%rd[0-9]+}}];
// CHECK-NEXT: ld.global.f32 {{%f[0-9]+}}, [{{%rd[0-9]+}}+4];
// CHECK-NEXT: ld.global.f32 {{%f[0-9]+}}, [{{%rd[0-9]+}}+8];
// CHECK-NEXT: ld.global.f32 {{%f[0-9]+}}, [{{%rd[0-9]+}}+12];
func.func @unaligned_rows(%a: memref<4x1024xf32>, %b: memref<4x512xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bid = gpu.block_id x
  %i = arith.addi %bid, %c1 : index
  %v = "smalti.vector_load"(%a, %c0, %i) : (memref<4x1024xf32>, index, index) -> vector<4x512xf32>
  "smalti.vector_store"(%v, %b, %c0, %c0) : (vector<4x512xf32>, memref<4x512xf32>, index, index) -> ()
  return
}

// -----

// A tiled (wgmma accumulator) layout loads row pairs as 8-byte vectors: lane % 4 picks the
// column pair, lane / 4 the row, the warp a 16-row band.
// CHECK-LABEL: .visible .entry load_tiled(
// CHECK: and.b32 [[C:%r[0-9]+]], [[T:%r[0-9]+]], 3;
// CHECK: mul.lo.u32 [[CB:%r[0-9]+]], [[C]], 8;
// CHECK: shr.u32 [[R:%r[0-9]+]], [[T]], 2;
// CHECK: and.b32 [[R8:%r[0-9]+]], [[R]], 7;
// CHECK: mad.lo.u32 [[RB:%r[0-9]+]], [[R8]], 32, [[CB]];
// CHECK: shr.u32 [[W:%r[0-9]+]], [[T]], 5;
// CHECK: mad.lo.u32 {{%r[0-9]+}}, [[W]], 512, [[RB]];
// CHECK: ld.global.v2.f32 {{{%f[0-9]+}}, {{%f[0-9]+}}}, [{{%rd[0-9]+}}];
// CHECK: ld.global.v2.f32 {{{%f[0-9]+}}, {{%f[0-9]+}}}, [{{%rd[0-9]+}}+256];
// CHECK-NOT: ld.global
func.func @load_tiled(%a: memref<64x8xf32>, %b: memref<64x8xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x8xf32>, index, index) -> vector<64x8xf32>
  "smalti.vector_store"(%v, %b, %c0, %c0) : (vector<64x8xf32>, memref<64x8xf32>, index, index) -> ()
  return
}

// -----

// One element loads as a splat: every thread reads it with one scalar load (no thread
// offset), here at the constant byte offset of element (1, 0) of a 64x2 f32 ref.
// CHECK-LABEL: .visible .entry splat_load(
// CHECK: ld.param.u64 [[P:%rd[0-9]+]], [splat_load_param_arg0];
// CHECK-NEXT: cvta.to.global.u64 [[S:%rd[0-9]+]], [[P]];
// CHECK-NOT: %tid.x
// CHECK: ld.global.f32 [[V:%f[0-9]+]], [[[S]]+8];
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}], {[[V]], [[V]], [[V]], [[V]]};
func.func @splat_load(%s: memref<64x2xf32>, %out: memref<128x128xf32>) attributes {
    smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = "smalti.vector_load"(%s, %c1, %c0) : (memref<64x2xf32>, index, index) -> vector<1x1xf32>
  %all = vector.broadcast %one : vector<1x1xf32> to vector<128x128xf32>
  "smalti.vector_store"(%all, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
