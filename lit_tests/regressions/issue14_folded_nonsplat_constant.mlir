// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Regression (issue 14): canonicalize constant-folds an insert_strided_slice of two splat
// constants into a non-splat constant, which smalti refused ("non-splat vector constants are
// not supported yet"). Such a constant is now a read-only table in global memory, loaded in
// the constant's layout (here strided<vec = 2>: thread t holds elements 2t, 2t + 1).
// out = [inf] * 192 + [0] * 64 (tests/test_issue14_regressions.py runs it). The slice op is
// in generic form, which both jaxlib releases parse.

// CHECK: .global .align 16 .b8 __smalti_kernel_constant_0[512] = {128, 127, 128, 127,
// CHECK-SAME: 0, 0, 0, 0};
// CHECK-LABEL: .visible .entry kernel(
// CHECK: mov.u64 [[TABLE:%rd[0-9]+]], __smalti_kernel_constant_0;
// CHECK: add.s64 [[AT:%rd[0-9]+]], [[TABLE]], {{%rd[0-9]+}};
// CHECK: ld.global.b32 [[V:%r[0-9]+]], [[[AT]]];
// CHECK: st.global.b32 [{{%rd[0-9]+}}], [[V]];
func.func @kernel(%out1: memref<256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %bx = gpu.block_id x
  %by = gpu.block_id y
  %v4 = arith.constant dense<0x7F80> : vector<256xbf16>
  %v7 = arith.constant dense<0.0> : vector<64xbf16>
  %v13 = "vector.insert_strided_slice"(%v7, %v4) <{offsets = [192], strides = [1]}> : (vector<64xbf16>, vector<256xbf16>) -> vector<256xbf16>
  %c1 = arith.constant 0 : index
  "smalti.vector_store"(%v13, %out1, %c1) : (vector<256xbf16>, memref<256xbf16>, index) -> ()
  return
}
