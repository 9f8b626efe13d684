// RUN: smalti-translate %s | filecheck %s
// RUN: smalti-translate %s --to=ptx --kernel double -o %t.ptx
// RUN: filecheck %s < %t.ptx
// RUN: smalti-translate %s --to=cubin -o %t.cubin
// RUN: smalti-translate %s --to=sass | filecheck %s --check-prefix=SASS
// RUN: not smalti-translate %s --to=cubin 2>&1 | filecheck %s --check-prefix=NOOUT
// RUN: not smalti-translate %s --kernel nope 2>&1 | filecheck %s --check-prefix=NOKERNEL

// CHECK:      .target sm_90a
// CHECK:      .entry double(
// CHECK:      .maxntid 128, 1, 1
// CHECK:      ret;

// SASS:       .text.double
// SASS:       EXIT

// NOOUT:      smalti-translate: error: --to=cubin writes a binary file: give it with -o OUT
// NOKERNEL:   smalti-translate: error: no kernel named 'nope' in the PTX module (kernels: double)

func.func @double(%a: memref<128x128xf32>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %w = arith.addf %v, %v : vector<128x128xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  return
}
