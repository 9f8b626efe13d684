// RUN: smalti-translate %s --to=ptx | filecheck %s

// smalti's PTX carries line info pointing at the input: one .file for the .mlir file, and a
// .loc (file, line, column of the op) before the instructions each op lowers to, so
// profilers and the simulator map PTX back to the user's lines. The parameter loads come
// from the kernel's signature and carry none.
// CHECK: .file 1 "{{.*}}line_info.mlir"
// CHECK-LABEL: .visible .entry scale(
// CHECK: ld.param.u64 {{%rd[0-9]+}}, [scale_param_arg1];
// CHECK-NEXT: cvta.to.global.u64
// CHECK-NEXT: .loc 1 [[# @LINE + 14]] 10
// CHECK-NEXT: mov.b32 {{%f[0-9]+}}, 1073741824;
// CHECK-NEXT: .loc 1 [[# @LINE + 13]] 8
// CHECK-NEXT: mov.u32 {{%r[0-9]+}}, %tid.x;
// CHECK: ld.global.v4.f32 {{.*}}+63488];
// CHECK-NEXT: .loc 1 [[# @LINE + 11]] 8
// CHECK-NEXT: mul.rn.f32
// CHECK: .loc 1 [[# @LINE + 10]] 3
// CHECK-NEXT: add.s64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, {{%rd[0-9]+}};
// CHECK: .loc 1 [[# @LINE + 9]] 3
// CHECK-NEXT: ret;
func.func @scale(%a: memref<128x128xf32>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %two = arith.constant dense<2.0> : vector<128x128xf32>
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %w = arith.mulf %v, %two : vector<128x128xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}

