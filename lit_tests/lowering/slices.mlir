// RUN: smalti-translate %s --to=ptx | filecheck %s

// A slice of whole tiles is a choice of registers: no instruction moves data. Columns 8..15
// of a 64x16 wgmma-laid-out tile are the thread's third and fourth register pairs.
// CHECK-LABEL: .visible .entry slice(
// CHECK: ld.global.v2.f32 {{{%f[0-9]+}}, {{%f[0-9]+}}}, [[[A:%rd[0-9]+]]];
// CHECK: ld.global.v2.f32 {{{%f[0-9]+}}, {{%f[0-9]+}}}, [[[A]]+512];
// CHECK: ld.global.v2.f32 {[[C0:%f[0-9]+]], [[C1:%f[0-9]+]]}, [[[A]]+32];
// CHECK: ld.global.v2.f32 {[[D0:%f[0-9]+]], [[D1:%f[0-9]+]]}, [[[A]]+544];
// CHECK-NOT: mov
// CHECK: st.global.v2.f32 [[[B:%rd[0-9]+]]], {[[C0]], [[C1]]};
// CHECK: st.global.v2.f32 [[[B]]+256], {[[D0]], [[D1]]};
func.func @slice(%a: memref<64x16xf32>, %b: memref<64x8xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x16xf32>, index, index) -> vector<64x16xf32>
  %s = "vector.extract_strided_slice"(%v) <{offsets = [0, 8], sizes = [64, 8], strides = [1, 1]}> : (vector<64x16xf32>) -> vector<64x8xf32>
  "smalti.vector_store"(%s, %b, %c0, %c0) : (vector<64x8xf32>, memref<64x8xf32>, index, index) -> ()
  return
}
