// RUN: smalti-opt %s --smalti-explain-layouts --verify-diagnostics

// Every value is explained: the constraints that decided its layout, as notes (the load's
// preference reaches the constant through the mulf).
func.func @explained(%a: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  // expected-remark @+4 {{result #0 of 'smalti.vector_load' has #smalti.strided<vec = 4>}}
  // expected-note @+3 {{'smalti.vector_load': vector_load prefers wide strided accesses: #smalti.strided<vec = 4>}}
  // expected-note @+2 {{'smalti.vector_load': vector_load prefers wide strided accesses: #smalti.strided<vec = 4>}}
  // expected-note @+1 {{'smalti.vector_load': vector_load prefers wide strided accesses: #smalti.strided<vec = 4>}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x256xf32>, index, index) -> vector<128x128xf32>
  // expected-remark @+1 {{result #0 of 'arith.constant' has #smalti.strided<vec = 4>}}
  %two = arith.constant dense<2.0> : vector<128x128xf32>
  // expected-remark @+4 {{result #0 of 'arith.mulf' has #smalti.strided<vec = 4>}}
  // expected-note @+3 {{'arith.mulf': an elementwise op's operands and result share a layout}}
  // expected-note @+2 {{'arith.mulf': an elementwise op's operands and result share a layout}}
  // expected-note @+1 {{'arith.mulf': an elementwise op's operands and result share a layout}}
  %m = arith.mulf %v, %two : vector<128x128xf32>
  "smalti.vector_store"(%m, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x256xf32>, index, index) -> ()
  return
}
