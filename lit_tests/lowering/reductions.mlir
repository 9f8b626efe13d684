// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// Row max of a wgmma-laid-out tile: each thread folds its 4 registers of a row (a tree),
// then the 4 lanes of its quad butterfly over lane bits 0 and 1; no shared memory.
// CHECK-LABEL: .visible .entry row_max(
// CHECK-NOT: .shared
// CHECK: max.NaN.f32 [[A:%f[0-9]+]], %f0, %f1;
// CHECK: max.NaN.f32 [[B:%f[0-9]+]], %f4, %f5;
// CHECK: max.NaN.f32 [[R0:%f[0-9]+]], [[A]], [[B]];
// CHECK: shfl.sync.bfly.b32 [[S1:%f[0-9]+]], [[R0]], 1, 31, -1;
// CHECK: max.NaN.f32 [[M1:%f[0-9]+]], [[R0]], [[S1]];
// CHECK: shfl.sync.bfly.b32 [[S2:%f[0-9]+]], [[M1]], 2, 31, -1;
// CHECK: max.NaN.f32 [[M2:%f[0-9]+]], [[M1]], [[S2]];
// CHECK: max.NaN.f32 [[OUT:%f[0-9]+]], [[M2]], %f8;
// CHECK-NOT: bar.sync
// CHECK: st.global.f32 [{{%rd[0-9]+}}], [[OUT]];
func.func @row_max(%a: memref<64x16xf32>, %acc: memref<64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x16xf32>, index, index) -> vector<64x16xf32>
  %z = "smalti.vector_load"(%acc, %c0) : (memref<64xf32>, index) -> vector<64xf32>
  %r = vector.multi_reduction <maximumf>, %x, %z [1] : vector<64x16xf32> to vector<64xf32>
  "smalti.vector_store"(%r, %acc, %c0) : (vector<64xf32>, memref<64xf32>, index) -> ()
  return
}

// -----

// Column sum: lane bits 2..4 by butterfly, then the 4 warps through scratch SMEM. One lane
// per group writes (lane bits 2..4 zero), every thread reads the 4 warps' partials in warp
// order, and a second barrier protects the scratch for the next use.
// CHECK-LABEL: .visible .entry col_sum(
// CHECK: .shared .align 16 .b8 __smalti_reduce_0[128];
// CHECK: add.rn.f32 [[P:%f[0-9]+]], %f0, %f2;
// CHECK: shfl.sync.bfly.b32 [[S4:%f[0-9]+]], [[P]], 4, 31, -1;
// CHECK: shfl.sync.bfly.b32 {{%f[0-9]+}}, {{%f[0-9]+}}, 8, 31, -1;
// CHECK: shfl.sync.bfly.b32 {{%f[0-9]+}}, {{%f[0-9]+}}, 16, 31, -1;
// CHECK: add.rn.f32 [[W:%f[0-9]+]], {{%f[0-9]+}}, {{%f[0-9]+}};
// CHECK: mov.u32 [[BASE:%r[0-9]+]], __smalti_reduce_0;
// CHECK: and.b32 [[LANES:%r[0-9]+]], %r0, 28;
// CHECK-NEXT: setp.eq.u32 [[WRITER:%p[0-9]+]], [[LANES]], 0;
// CHECK-NEXT: @[[WRITER]] st.shared.b32 [[[SLOT:%r[0-9]+]]], [[W]];
// CHECK-NEXT: @[[WRITER]] st.shared.b32 [[[SLOT]]+64], {{%f[0-9]+}};
// CHECK-NEXT: bar.sync 0;
// CHECK: mad.lo.u32 [[READ:%r[0-9]+]], {{%r[0-9]+}}, 4, [[BASE]];
// CHECK-NEXT: ld.shared.b32 [[W0:%f[0-9]+]], [[[READ]]];
// CHECK-NEXT: ld.shared.b32 [[W1:%f[0-9]+]], [[[READ]]+16];
// CHECK-NEXT: ld.shared.b32 [[W2:%f[0-9]+]], [[[READ]]+32];
// CHECK-NEXT: ld.shared.b32 [[W3:%f[0-9]+]], [[[READ]]+48];
// CHECK-NEXT: add.rn.f32 [[X1:%f[0-9]+]], [[W0]], [[W1]];
// CHECK-NEXT: add.rn.f32 [[X2:%f[0-9]+]], [[X1]], [[W2]];
// CHECK-NEXT: add.rn.f32 [[X3:%f[0-9]+]], [[X2]], [[W3]];
// CHECK: bar.sync 0;
// CHECK-NEXT: add.rn.f32 [[OUT:%f[0-9]+]], [[X3]], %f4;
// CHECK: st.global.v2.f32 [{{%rd[0-9]+}}], {[[OUT]], {{%f[0-9]+}}};
func.func @col_sum(%a: memref<64x8xf32>, %acc: memref<8xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x8xf32>, index, index) -> vector<64x8xf32>
  %z = "smalti.vector_load"(%acc, %c0) : (memref<8xf32>, index) -> vector<8xf32>
  %r = vector.multi_reduction <add>, %x, %z [0] : vector<64x8xf32> to vector<8xf32>
  "smalti.vector_store"(%r, %acc, %c0) : (vector<8xf32>, memref<8xf32>, index) -> ()
  return
}

// -----

// bf16 row sum: the two halves of a packed register hold one row, so they are added as
// scalars; a lone 16-bit value travels through the shuffle in both halves of a .b32.
// CHECK-LABEL: .visible .entry bf16_row_sum(
// CHECK: mov.b32 {[[LO:%rs[0-9]+]], [[HI:%rs[0-9]+]]}, %r8;
// CHECK-NEXT: add.rn.bf16 [[H:%rs[0-9]+]], [[LO]], [[HI]];
// CHECK: mov.b32 [[WORD:%r[0-9]+]], {[[H]], [[H]]};
// CHECK-NEXT: shfl.sync.bfly.b32 [[MOVED:%r[0-9]+]], [[WORD]], 1, 31, -1;
// CHECK-NEXT: mov.b32 {[[OTHER:%rs[0-9]+]], {{%rs[0-9]+}}}, [[MOVED]];
// CHECK-NEXT: add.rn.bf16 {{%rs[0-9]+}}, [[H]], [[OTHER]];
// CHECK: st.global.b16
func.func @bf16_row_sum(%a: memref<64x8xbf16>, %acc: memref<64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x8xbf16>, index, index) -> vector<64x8xbf16>
  %z = "smalti.vector_load"(%acc, %c0) : (memref<64xbf16>, index) -> vector<64xbf16>
  %r = vector.multi_reduction <add>, %x, %z [1] : vector<64x8xbf16> to vector<64xbf16>
  "smalti.vector_store"(%r, %acc, %c0) : (vector<64xbf16>, memref<64xbf16>, index) -> ()
  return
}

// -----

// iota computes each thread's indices from the layout's thread terms (column 2*(t%4) + slot
// here); broadcast_in_dim of a row vector into the wgmma layout reuses its registers.
// CHECK-LABEL: .visible .entry iota_broadcast(
// CHECK: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT: and.b32 [[Q:%r[0-9]+]], [[TID]], 3;
// CHECK-NEXT: mul.lo.u32 [[C0:%r[0-9]+]], [[Q]], 2;
// CHECK-NEXT: add.s32 [[C1:%r[0-9]+]], [[C0]], 1;
// CHECK: ld.global.b32 [[ROW0:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: ld.global.b32 [[ROW1:%r[0-9]+]], [{{%rd[0-9]+}}+32];
// CHECK-NEXT: add.s32 [[S0:%r[0-9]+]], [[C0]], [[ROW0]];
// CHECK-NEXT: add.s32 [[S1:%r[0-9]+]], [[C1]], [[ROW0]];
// CHECK-NEXT: add.s32 [[S2:%r[0-9]+]], [[C0]], [[ROW1]];
// CHECK-NEXT: add.s32 [[S3:%r[0-9]+]], [[C1]], [[ROW1]];
// CHECK: st.global.v2.b32 [{{%rd[0-9]+}}], {[[S0]], [[S1]]};
// CHECK-NEXT: st.global.v2.b32 [{{%rd[0-9]+}}+256], {[[S2]], [[S3]]};
func.func @iota_broadcast(%a: memref<64x8xi32>, %r: memref<64xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %i = "smalti.iota"() {dimension = 1 : i64, out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : () -> vector<64x8xi32>
  %row = "smalti.vector_load"(%r, %c0) {out_layouts = [#smalti.tiled<tiling = [[64], [16], [8], [1]], warp = [-4], lane = [-2, r4], vector = -1>]} : (memref<64xi32>, index) -> vector<64xi32>
  %b = "smalti.broadcast_in_dim"(%row) {broadcast_dimensions = array<i64: 0>} : (vector<64xi32>) -> vector<64x8xi32>
  %s = arith.addi %i, %b : vector<64x8xi32>
  "smalti.vector_store"(%s, %a, %c0, %c0) : (vector<64x8xi32>, memref<64x8xi32>, index, index) -> ()
  return
}
