// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Regression (issue 14): a vector_store of an i1 vector into an i1 buffer was
// `st.global.v4.b1 [..], {%p0, ..}` (ptxas: Unexpected instruction types specified for
// 'st'). Each predicate becomes the byte 1 or 0 in its place of a .b32 word, stored whole.
// out = a < b (tests/test_issue14_regressions.py runs it).

// CHECK-LABEL: .visible .entry kernel(
// CHECK: setp.lt.s32 [[P0:%p[0-9]+]],
// CHECK-NEXT: setp.lt.s32 [[P1:%p[0-9]+]],
// CHECK: selp.b32 [[B0:%r[0-9]+]], 1, 0, [[P0]];
// CHECK-NEXT: selp.b32 [[B1:%r[0-9]+]], 256, 0, [[P1]];
// CHECK-NEXT: or.b32 [[W01:%r[0-9]+]], [[B0]], [[B1]];
// CHECK-NEXT: selp.b32 [[B2:%r[0-9]+]], 65536, 0,
// CHECK-NEXT: or.b32 [[W012:%r[0-9]+]], [[W01]], [[B2]];
// CHECK-NEXT: selp.b32 [[B3:%r[0-9]+]], 16777216, 0,
// CHECK-NEXT: or.b32 [[W:%r[0-9]+]], [[W012]], [[B3]];
// CHECK-NEXT: st.global.b32 [{{%rd[0-9]+}}], [[W]];
// CHECK-NOT: .b1
func.func @kernel(%a: memref<128x128xi32>, %b: memref<128x128xi32>, %out: memref<128x128xi1>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xi32>, index, index) -> vector<128x128xi32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<128x128xi32>, index, index) -> vector<128x128xi32>
  %r = arith.cmpi slt, %x, %y : vector<128x128xi32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<128x128xi1>, memref<128x128xi1>, index, index) -> ()
  return
}
