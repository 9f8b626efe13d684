// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Regression (issue 14): canonicalize folds arith.sitofp(arith.extsi(i1 vector)) into an
// arith.sitofp from i1 (exact, so smalti keeps the pattern), which was lowered to
// `cvt.rn.f32.s1` (ptxas: Unknown modifier '.s1'; simulator: unsupported instruction).
// A signed i1 that is set is -1: the conversion is a selp of -1.0 and 0.0. out = (a < 0) ? -1.0 : 0.0 (tests/test_issue14_regressions.py runs it).

// CHECK-LABEL: .visible .entry kernel(
// CHECK-NOT: arith
// CHECK: setp.lt.s32 [[P:%p[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK: selp.f32 {{%f[0-9]+}}, 0fBF800000, 0f00000000, [[P]];
// CHECK-NOT: .s1
// CHECK: st.global.v4.f32
func.func @kernel(%a: memref<128x128xi32>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %zero = arith.constant dense<0> : vector<128x128xi32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xi32>, index, index) -> vector<128x128xi32>
  %p = arith.cmpi slt, %x, %zero : vector<128x128xi32>
  %i = arith.extsi %p : vector<128x128xi1> to vector<128x128xi32>
  %f = arith.sitofp %i : vector<128x128xi32> to vector<128x128xf32>
  "smalti.vector_store"(%f, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
