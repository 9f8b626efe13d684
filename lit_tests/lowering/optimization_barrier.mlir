// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// optimization_barrier moves no data: its results are its operands' registers (the vector's
// four loaded registers feed the addf; the i32 parameter is stored as it was loaded).
// CHECK-LABEL: .visible .entry pass_through(
// CHECK: ld.param.s32 [[N:%r[0-9]+]], [pass_through_param_arg1];
// CHECK: ld.global.v4.f32 {[[X0:%f[0-9]+]], [[X1:%f[0-9]+]], [[X2:%f[0-9]+]], [[X3:%f[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK-NOT: mov
// CHECK-NEXT: add.rn.f32 {{%f[0-9]+}}, [[X0]], [[X0]];
// CHECK-NEXT: add.rn.f32 {{%f[0-9]+}}, [[X1]], [[X1]];
// CHECK-NEXT: add.rn.f32 {{%f[0-9]+}}, [[X2]], [[X2]];
// CHECK-NEXT: add.rn.f32 {{%f[0-9]+}}, [[X3]], [[X3]];
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[N]], [[N]], [[N]], [[N]]};
func.func @pass_through(%a: memref<4x128xf32>, %n: i32, %out: memref<4x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y, %m = "smalti.optimization_barrier"(%x, %n) : (vector<4x128xf32>, i32) -> (vector<4x128xf32>, i32)
  %z = arith.addf %y, %y : vector<4x128xf32>
  %mb = vector.broadcast %m : i32 to vector<4x128xi32>
  "smalti.vector_store"(%z, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  "smalti.vector_store"(%mb, %out, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  return
}
