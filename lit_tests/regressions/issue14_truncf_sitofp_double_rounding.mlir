// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-opt %s --smalti-canonicalize | filecheck %s --check-prefix=IR
// Regression (issue 14): i32 -> f32 -> bf16 rounds twice. Upstream canonicalize folds
// truncf(sitofp(x)) into one i32 -> bf16 rounding (LLVM PR #139925), which moves bf16 ties
// by one ulp: x = -547356703 has the f32 value -547356672 (a bf16 tie), so numpy's
// x.astype(float32).astype(bfloat16) is -545259520, the single rounding -549453824. The
// default pipeline's canonicalization leaves the pattern out (smalti.passes.canonicalize);
// tests/test_issue14_regressions.py checks the numbers.

// IR: arith.sitofp %{{.*}} : vector<128xi32> to vector<128xf32>
// IR: arith.truncf %{{.*}} : vector<128xf32> to vector<128xbf16>

// CHECK-LABEL: .visible .entry kernel(
// CHECK: cvt.rn.f32.s32 [[F0:%f[0-9]+]], {{%r[0-9]+}};
// CHECK-NEXT: cvt.rn.bf16.f32 {{%rs[0-9]+}}, [[F0]];
// CHECK-NOT: cvt.rn.bf16.s32
func.func @kernel(%a: memref<128xi32>, %out: memref<128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<128xi32>, index) -> vector<128xi32>
  %f = arith.sitofp %x : vector<128xi32> to vector<128xf32>
  %h = arith.truncf %f : vector<128xf32> to vector<128xbf16>
  "smalti.vector_store"(%h, %out, %c0) : (vector<128xbf16>, memref<128xbf16>, index) -> ()
  return
}
