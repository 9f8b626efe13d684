// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Regression (issue 14): a vector_load of an i1 buffer was `ld.global.v16.b1 {%p0, ...}`
// (ptxas: Unknown modifier '.v16'). An i1 is a byte in memory (numpy's bool): the bytes are
// loaded as .b32 words, at most four to an access, and each byte tested against zero.
// out = m ? a : 0 (tests/test_issue14_regressions.py runs it).

// CHECK-LABEL: .visible .entry kernel(
// CHECK: ld.global.v4.b32 {[[W:%r[0-9]+]], {{.*}}}, [{{%rd[0-9]+}}];
// CHECK: and.b32 [[B0:%r[0-9]+]], [[W]], 255;
// CHECK-NEXT: setp.ne.b32 {{%p[0-9]+}}, [[B0]], 0;
// CHECK-NEXT: and.b32 [[B1:%r[0-9]+]], [[W]], 65280;
// CHECK-NEXT: setp.ne.b32 {{%p[0-9]+}}, [[B1]], 0;
// CHECK-NOT: .b1
// CHECK: selp.f32
func.func @kernel(%m: memref<128x128xi1>, %a: memref<128x128xf32>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %p = "smalti.vector_load"(%m, %c0, %c0) : (memref<128x128xi1>, index, index) -> vector<128x128xi1>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %z = arith.constant dense<0.0> : vector<128x128xf32>
  %r = arith.select %p, %x, %z : vector<128x128xi1>, vector<128x128xf32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
