// RUN: smalti-translate %s --arch=sm_100a | filecheck %s --check-prefix=BLACKWELL
// RUN: smalti-translate %s --arch=sm_90a | filecheck %s --check-prefix=HOPPER
// RUN: smalti-translate %s | filecheck %s --check-prefix=HOPPER
// RUN: smalti-translate %s --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS
// RUN: not smalti-translate %s --arch=sm_80 2>&1 | filecheck %s --check-prefix=UNKNOWN

// sm_100a needs PTX ISA 8.6 (ptxas: "PTX .version 8.5 does not support .target sm_100a").
// BLACKWELL:      .version 8.6
// BLACKWELL-NEXT: .target sm_100a
// BLACKWELL:      .entry scale(
// HOPPER:         .version 8.0
// HOPPER-NEXT:    .target sm_90a
// SASS:           .target{{[[:space:]]+}}sm_100a
// SASS:           EXIT
// UNKNOWN:        smalti-translate: error: argument --arch: invalid choice: 'sm_80' (choose from 'sm_90a', 'sm_100a')

func.func @scale(%a: memref<128x64xf32>, %out: memref<128x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xf32>, index, index) -> vector<128x64xf32>
  %w = arith.mulf %v, %v : vector<128x64xf32>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  return
}
