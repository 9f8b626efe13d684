// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Regression (issue 14, was limitation_int_div_shift.mlir): arith.divsi had no lowering
// ("'arith.divsi' op has no PTX lowering rule"). It is PTX's div.s32 (truncating toward
// zero, as MLIR's divsi). out = trunc(a / b) (tests/test_issue14_regressions.py runs it;
// tests/test_lowering_integer.py covers every integer op and width).

// CHECK-LABEL: .visible .entry kernel(
// CHECK: ld.global.v4.b32 {[[A:%r[0-9]+]], {{.*}}}
// CHECK: div.s32 [[Q:%r[0-9]+]], [[A]], {{%r[0-9]+}};
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[Q]],
func.func @kernel(%a: memref<128x128xi32>, %b: memref<128x128xi32>, %out: memref<128x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xi32>, index, index) -> vector<128x128xi32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<128x128xi32>, index, index) -> vector<128x128xi32>
  %r = arith.divsi %x, %y : vector<128x128xi32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<128x128xi32>, memref<128x128xi32>, index, index) -> ()
  return
}
