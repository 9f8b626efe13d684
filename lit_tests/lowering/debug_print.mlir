// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// One block of one warpgroup: the hidden debug buffer is the last parameter; thread 0
// counts the execution in the record's 16-byte header, then every thread stores its 32
// registers of the strided (vec 4) array at tid * 128 bytes, in register order. The index
// scalar's record starts after the first (16 + 128 * 32 * 4 = 16400 bytes); thread 0
// stores it.
// CHECK-LABEL: .visible .entry strided(
// CHECK: .param .u64 strided_param_arg1,
// CHECK-NEXT: .param .u64 strided_param_debug
// CHECK-NEXT: )
// CHECK: ld.param.u64 [[P:%rd[0-9]+]], [strided_param_debug];
// CHECK-NEXT: cvta.to.global.u64 [[BUF:%rd[0-9]+]], [[P]];
// CHECK: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK: ld.global.v4.f32 {[[X0:%f[0-9]+]], [[X1:%f[0-9]+]], {{%f[0-9]+}}, {{%f[0-9]+}}}
// CHECK: setp.eq.u32 [[LEAD:%p[0-9]+]], [[TID]], 0;
// CHECK-NEXT: @[[LEAD]] ld.global.u32 [[N:%r[0-9]+]], [[[BUF]]];
// CHECK-NEXT: @[[LEAD]] add.u32 [[N1:%r[0-9]+]], [[N]], 1;
// CHECK-NEXT: @[[LEAD]] st.global.u32 [[[BUF]]], [[N1]];
// CHECK-NEXT: mul.lo.u32 [[T:%r[0-9]+]], [[TID]], 128;
// CHECK-NEXT: cvt.u64.u32 [[T64:%rd[0-9]+]], [[T]];
// CHECK-NEXT: add.s64 [[D:%rd[0-9]+]], [[BUF]], [[T64]];
// CHECK-NEXT: st.global.f32 [[[D]]+16], [[X0]];
// CHECK-NEXT: st.global.f32 [[[D]]+20], [[X1]];
// CHECK-COUNT-30: st.global.f32 [[[D]]+{{[0-9]+}}], {{%f[0-9]+}};
// CHECK-NEXT: @[[LEAD]] ld.global.u32 {{%r[0-9]+}}, [[[BUF]]+16400];
// CHECK: @[[LEAD]] st.global.u32 [[[BUF]]+16400], {{%r[0-9]+}};
// CHECK-NEXT: mov.s64 [[I:%rd[0-9]+]], 7;
// CHECK-NEXT: @[[LEAD]] st.global.b64 [[[BUF]]+16416], [[I]];
// CHECK: st.global.v4.f32
// CHECK: ret;
func.func @strided(%a: memref<64x64xf32>, %b: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c7 = arith.constant 7 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  "smalti.debug_print"(%v) {format = "v = {}"} : (vector<64x64xf32>) -> ()
  "smalti.debug_print"(%c7) {format = "i = {}"} : (index) -> ()
  "smalti.vector_store"(%v, %b, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// A 2x3 grid of two warpgroups: instance = (ctaid.y * 2 + ctaid.x) * 2 + tid.x / 128;
// each record's instance is at record offset + instance * instance bytes. bf16 pairs are
// stored packed (st.global.b32); scalars by thread 0 of each warpgroup; an i1 as one byte.
// CHECK-LABEL: .visible .entry grid(
// CHECK: .param .u8 grid_param_arg3,
// CHECK-NEXT: .param .u64 grid_param_debug
// CHECK: ld.param.f32 [[X:%f[0-9]+]], [grid_param_arg1];
// CHECK: ld.param.s32 [[NN:%r[0-9]+]], [grid_param_arg2];
// CHECK: setp.ne.u16 [[FLAG:%p[0-9]+]],
// CHECK: cvta.to.global.u64 [[BUF:%rd[0-9]+]],
// CHECK-NEXT: mov.u32 [[CY:%r[0-9]+]], %ctaid.y;
// CHECK-NEXT: mul.lo.u32 [[ROW:%r[0-9]+]], [[CY]], 2;
// CHECK-NEXT: mov.u32 [[CX:%r[0-9]+]], %ctaid.x;
// CHECK-NEXT: add.u32 [[BLOCK:%r[0-9]+]], [[CX]], [[ROW]];
// CHECK-NEXT: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT: shr.u32 [[WG:%r[0-9]+]], [[TID]], 7;
// CHECK-NEXT: mad.lo.u32 [[INST:%r[0-9]+]], [[BLOCK]], 2, [[WG]];
// CHECK: ld.global.v4.b32 {[[V0:%r[0-9]+]], [[V1:%r[0-9]+]], [[V2:%r[0-9]+]], [[V3:%r[0-9]+]]}
// CHECK: mul.lo.u32 [[O0:%r[0-9]+]], [[INST]], 2064;
// CHECK-NEXT: cvt.u64.u32 [[O0W:%rd[0-9]+]], [[O0]];
// CHECK-NEXT: add.s64 [[H0:%rd[0-9]+]], [[BUF]], [[O0W]];
// CHECK: mul.lo.u32 [[T:%r[0-9]+]], {{%r[0-9]+}}, 16;
// CHECK: add.s64 [[D:%rd[0-9]+]], [[H0]],
// CHECK-NEXT: st.global.b32 [[[D]]+16], [[V0]];
// CHECK-NEXT: st.global.b32 [[[D]]+20], [[V1]];
// CHECK-NEXT: st.global.b32 [[[D]]+24], [[V2]];
// CHECK-NEXT: st.global.b32 [[[D]]+28], [[V3]];
// CHECK-NEXT: mad.lo.u32 [[O1:%r[0-9]+]], [[INST]], 32, 24768;
// CHECK-NEXT: cvt.u64.u32 [[O1W:%rd[0-9]+]], [[O1]];
// CHECK-NEXT: add.s64 [[H1:%rd[0-9]+]], [[BUF]], [[O1W]];
// CHECK: @[[LEAD:%p[0-9]+]] st.global.f32 [[[H1]]+16], [[X]];
// CHECK: @[[LEAD]] st.global.b32 [{{%rd[0-9]+}}+16], [[NN]];
// CHECK: selp.u16 [[BYTE:%rs[0-9]+]], 1, 0, [[FLAG]];
// CHECK-NEXT: @[[LEAD]] st.global.u8 [{{%rd[0-9]+}}+16], [[BYTE]];
// CHECK: ret;
func.func @grid(%a: memref<2x8x128xbf16>, %x: f32, %n: i32, %flag: i1)
    attributes {smalti.kernel, smalti.grid = array<i64: 2, 3>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %bx = gpu.block_id x
  %v = "smalti.vector_load"(%a, %bx, %c0, %c0) : (memref<2x8x128xbf16>, index, index, index) -> vector<1x8x128xbf16>
  "smalti.debug_print"(%v) {format = "v = {}"} : (vector<1x8x128xbf16>) -> ()
  "smalti.debug_print"(%x) {format = "x = {}"} : (f32) -> ()
  "smalti.debug_print"(%n) {format = "n = {}"} : (i32) -> ()
  "smalti.debug_print"(%flag) {format = "flag = {}"} : (i1) -> ()
  return
}

// -----

// 8-bit vectors: four fp8 in a .b32 stored whole; one i8 in a .b16 stored as its low byte.
// CHECK-LABEL: .visible .entry bytes(
// CHECK: ld.global.b32 [[X:%r[0-9]+]],
// CHECK: st.global.b32 [{{%rd[0-9]+}}+16], [[X]];
// CHECK: ld.global.b8 [[Y:%rs[0-9]+]],
// CHECK: st.global.b8 [{{%rd[0-9]+}}+544], [[Y]];
func.func @bytes(%a: memref<4x128xf8E4M3FN>, %b: memref<128xi8>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 4>]} : (memref<4x128xf8E4M3FN>, index, index) -> vector<4x128xf8E4M3FN>
  "smalti.debug_print"(%x) {format = "x = {}"} : (vector<4x128xf8E4M3FN>) -> ()
  %y = "smalti.vector_load"(%b, %c0) {out_layouts = [#smalti.strided<vec = 1>]} : (memref<128xi8>, index) -> vector<128xi8>
  "smalti.debug_print"(%y) {format = "y = {}"} : (vector<128xi8>) -> ()
  return
}
