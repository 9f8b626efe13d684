// RUN: smalti-translate %s --split-input-file --to=ptx | filecheck %s
// RUN: smalti-translate %s --split-input-file --to=sass | filecheck %s --check-prefix=SASS

// layout_cast from the accumulator layout (column pairs, one .b16 of 2 bytes per register)
// to wgmma's 8-bit A layout (column quads, one .b32 of 4 bytes): the 16-bit registers pair
// into words, each of the 4 destination words of a thread arrives by one shfl.sync.bfly of
// a whole source word (which one, and from which lane, chosen by selp on thread-index bits
// 0 and 1: the lane's place in its quad), and one prmt puts two received halves together.
// Selectors: 21520 = 0x5410 and 4180 = 0x1054 (low halves, in either order), 30258 = 0x7632
// and 12918 = 0x3276 (high halves).
// CHECK-LABEL: .entry p_to_a(
// CHECK: mov.b32 [[W0:%r[0-9]+]], {%rs0, %rs1};
// CHECK-NEXT: mov.b32 [[W1:%r[0-9]+]], {%rs2, %rs3};
// CHECK-NEXT: mov.b32 [[W2:%r[0-9]+]], {%rs4, %rs5};
// CHECK-NEXT: mov.b32 [[W3:%r[0-9]+]], {%rs6, %rs7};
// CHECK-NEXT: and.b32 [[B0:%r[0-9]+]], %r0, 1;
// CHECK-NEXT: setp.ne.b32 [[P0:%p[0-9]+]], [[B0]], 0;
// CHECK-NEXT: selp.b32 [[S0:%r[0-9]+]], [[W1]], [[W0]], [[P0]];
// CHECK-NEXT: selp.b32 [[X00:%r[0-9]+]], 3, 0, [[P0]];
// CHECK-NEXT: selp.b32 [[X01:%r[0-9]+]], 0, 3, [[P0]];
// CHECK-NEXT: and.b32 [[B1:%r[0-9]+]], %r0, 2;
// CHECK-NEXT: setp.ne.b32 [[P1:%p[0-9]+]], [[B1]], 0;
// CHECK-NEXT: selp.b32 [[X0:%r[0-9]+]], [[X01]], [[X00]], [[P1]];
// CHECK-NEXT: shfl.sync.bfly.b32 [[R0:%r[0-9]+]], [[S0]], [[X0]], 31, -1;
// CHECK-NEXT: selp.b32 [[S1:%r[0-9]+]], [[W0]], [[W1]], [[P0]];
// CHECK-NEXT: selp.b32 [[X10:%r[0-9]+]], 2, 1, [[P0]];
// CHECK-NEXT: selp.b32 [[X11:%r[0-9]+]], 1, 2, [[P0]];
// CHECK-NEXT: selp.b32 [[X1:%r[0-9]+]], [[X11]], [[X10]], [[P1]];
// CHECK-NEXT: shfl.sync.bfly.b32 [[R1:%r[0-9]+]], [[S1]], [[X1]], 31, -1;
// CHECK-NEXT: selp.b32 [[S2:%r[0-9]+]], [[W3]], [[W2]], [[P0]];
// CHECK-NEXT: shfl.sync.bfly.b32 [[R2:%r[0-9]+]], [[S2]], [[X0]], 31, -1;
// CHECK-NEXT: selp.b32 [[S3:%r[0-9]+]], [[W2]], [[W3]], [[P0]];
// CHECK-NEXT: shfl.sync.bfly.b32 [[R3:%r[0-9]+]], [[S3]], [[X1]], 31, -1;
// CHECK-NEXT: selp.b32 [[LOW:%r[0-9]+]], 4180, 21520, [[P1]];
// CHECK-NEXT: prmt.b32 [[A0:%r[0-9]+]], [[R0]], [[R1]], [[LOW]];
// CHECK-NEXT: selp.b32 [[HIGH:%r[0-9]+]], 12918, 30258, [[P1]];
// CHECK-NEXT: prmt.b32 [[A1:%r[0-9]+]], [[R0]], [[R1]], [[HIGH]];
// CHECK-NEXT: prmt.b32 [[A2:%r[0-9]+]], [[R2]], [[R3]], [[LOW]];
// CHECK-NEXT: prmt.b32 [[A3:%r[0-9]+]], [[R2]], [[R3]], [[HIGH]];
// CHECK-NOT: shfl
// CHECK: st.global.b32 [%rd{{[0-9]+}}], [[A0]];
// CHECK-NEXT: st.global.b32 [%rd{{[0-9]+}}+256], [[A1]];
// CHECK-NEXT: st.global.b32 [%rd{{[0-9]+}}+16], [[A2]];
// CHECK-NEXT: st.global.b32 [%rd{{[0-9]+}}+272], [[A3]];
// SASS-LABEL: .text.p_to_a:
// SASS-COUNT-4: SHFL.BFLY
// SASS-NOT: SHFL
// SASS-NOT: STS
// SASS: EXIT
func.func @p_to_a(%a: memref<64x32xf8E4M3FN>, %out: memref<64x32xf8E4M3FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x32xf8E4M3FN>, index, index) -> vector<64x32xf8E4M3FN>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x32xf8E4M3FN>) -> vector<64x32xf8E4M3FN>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x32xf8E4M3FN>, memref<64x32xf8E4M3FN>, index, index) -> ()
  return
}

// -----

// The same permutation for bf16 (a destination word is 2 elements, one shuffle each: 8 per
// thread for 64 x 32) and for f32 into the tf32 A layout (a word is 1 element: 16).
// CHECK-LABEL: .entry bf16_and_f32(
// CHECK-COUNT-24: shfl.sync.bfly.b32
// CHECK-NOT: shfl
// CHECK-NOT: prmt
// CHECK: ret;
// SASS-LABEL: .text.bf16_and_f32:
// SASS-COUNT-24: SHFL.BFLY
// SASS-NOT: SHFL
func.func @bf16_and_f32(%a: memref<64x32xbf16>, %b: memref<64x32xf32>, %out: memref<64x32xbf16>, %out2: memref<64x32xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x32xbf16>, index, index) -> vector<64x32xbf16>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[64, 16], [16, 16], [8, 16], [4]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x32xbf16>) -> vector<64x32xbf16>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x32xbf16>, memref<64x32xbf16>, index, index) -> ()
  %u = "smalti.vector_load"(%b, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x32xf32>, index, index) -> vector<64x32xf32>
  %v = "smalti.layout_cast"(%u) {new_layout = #smalti.tiled<tiling = [[64, 4], [16, 4], [8, 4], [1]], warp = [-7], lane = [-3, -2], vector = -1>} : (vector<64x32xf32>) -> vector<64x32xf32>
  "smalti.vector_store"(%v, %out2, %c0, %c0) : (vector<64x32xf32>, memref<64x32xf32>, index, index) -> ()
  return
}
