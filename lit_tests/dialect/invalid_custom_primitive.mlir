// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// smalti.custom_primitive and smalti.custom_yield (smalti/dialect/ops_custom.py): declared
// layouts and transforms against the operands, block arguments and yielded values against
// the per-thread element counts the layouts give, a scalar-only body.

func.func @no_in_layouts(%a: vector<256xf32>) {
  // expected-error @+1 {{'smalti.custom_primitive' op 'in_layouts' has 0 layouts for 1 vector operands}}
  %r = "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f32, %x1: f32):
    "smalti.custom_yield"(%x0, %x1) : (f32, f32) -> ()
  }) {out_layouts = [#smalti.strided<vec = 2>]} : (vector<256xf32>) -> vector<256xf32>
  return
}

// -----

func.func @layout_misfit(%a: vector<256xf32>) {
  // expected-error @+1 {{'smalti.custom_primitive' op 'out_layouts' #0 does not fit vector<100xf32>}}
  %r = "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f32, %x1: f32):
    "smalti.custom_yield"(%x0, %x1) : (f32, f32) -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], out_layouts = [#smalti.strided<vec = 2>]} : (vector<256xf32>) -> vector<100xf32>
  return
}

// -----

func.func @argument_count(%a: vector<256xf32>) {
  // expected-error @+1 {{'smalti.custom_primitive' op expects 2 block arguments (per-thread elements [2] of the vector operands, then 0 shared-memory addresses), got 1}}
  %r = "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f32):
    "smalti.custom_yield"(%x0, %x0) : (f32, f32) -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], out_layouts = [#smalti.strided<vec = 2>]} : (vector<256xf32>) -> vector<256xf32>
  return
}

// -----

func.func @argument_type(%a: vector<256xbf16>) {
  // expected-error @+1 {{'smalti.custom_primitive' op block argument #1 has type f32, expected bf16}}
  %r = "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: bf16, %x1: f32):
    "smalti.custom_yield"(%x0, %x0) : (bf16, bf16) -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], out_layouts = [#smalti.strided<vec = 2>]} : (vector<256xbf16>) -> vector<256xbf16>
  return
}

// -----

func.func @yield_count(%a: vector<256xf32>) {
  %r = "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f32, %x1: f32):
    // expected-error @+1 {{'smalti.custom_yield' op yields 1 values; the results' layouts give each thread [2] elements}}
    "smalti.custom_yield"(%x0) : (f32) -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], out_layouts = [#smalti.strided<vec = 2>]} : (vector<256xf32>) -> vector<256xf32>
  return
}

// -----

func.func @yield_type(%a: vector<256xf32>, %i: i32) {
  %r = "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f32, %x1: f32):
    // expected-error @+1 {{'smalti.custom_yield' op value #1 has type i32, expected f32}}
    "smalti.custom_yield"(%x0, %i) : (f32, i32) -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], out_layouts = [#smalti.strided<vec = 2>]} : (vector<256xf32>) -> vector<256xf32>
  return
}

// -----

func.func @no_yield(%a: vector<256xf32>) {
  // expected-error @+1 {{'smalti.custom_primitive' op expects its body to end with 'smalti.custom_yield'}}
  "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f32, %x1: f32):
    %y = arith.addf %x0, %x1 : f32
  }) {in_layouts = [#smalti.strided<vec = 2>]} : (vector<256xf32>) -> ()
  return
}

// -----

func.func @vector_in_body(%a: vector<256xf32>) {
  %r = "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f32, %x1: f32):
    // expected-error @+1 {{'arith.addf' op is not allowed in a custom_primitive body: the body computes on scalars (the thread's registers)}}
    %v = arith.addf %a, %a : vector<256xf32>
    "smalti.custom_yield"(%x0, %x1) : (f32, f32) -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], out_layouts = [#smalti.strided<vec = 2>]} : (vector<256xf32>) -> vector<256xf32>
  return
}

// -----

func.func @global_ref(%g: memref<256xf32>) {
  // expected-error @+1 {{'smalti.custom_primitive' op operand #0 must be a vector or a shared-memory ref, got memref<256xf32>}}
  "smalti.custom_primitive"(%g) ({
  ^bb0(%p: i32):
    "smalti.custom_yield"() : () -> ()
  }) : (memref<256xf32>) -> ()
  return
}

// -----

func.func @ref_before_vector(%s: memref<256xf32, #gpu.address_space<workgroup>>, %a: vector<256xf32>) {
  // expected-error @+1 {{'smalti.custom_primitive' op operand #1: vectors must come before the shared-memory refs}}
  "smalti.custom_primitive"(%s, %a) ({
  ^bb0(%p: i32, %x0: f32, %x1: f32):
    "smalti.custom_yield"() : () -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], in_transforms = [[]]} : (memref<256xf32, #gpu.address_space<workgroup>>, vector<256xf32>) -> ()
  return
}

// -----

func.func @transforms_count(%s: memref<256xf32, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'smalti.custom_primitive' op 'in_transforms' has 0 entries for 1 shared-memory refs}}
  "smalti.custom_primitive"(%s) ({
  ^bb0(%p: i32):
    "smalti.custom_yield"() : () -> ()
  }) : (memref<256xf32, #gpu.address_space<workgroup>>) -> ()
  return
}

// -----

func.func @fp8_elements(%a: vector<512xf8E4M3FN>) {
  // expected-error @+1 {{'smalti.custom_primitive' op operand #0 has element type f8E4M3FN; a custom_primitive holds one of bf16, f16, f32, i16, i32 per register}}
  "smalti.custom_primitive"(%a) ({
  ^bb0(%x0: f8E4M3FN, %x1: f8E4M3FN, %x2: f8E4M3FN, %x3: f8E4M3FN):
    "smalti.custom_yield"() : () -> ()
  }) {in_layouts = [#smalti.strided<vec = 4>]} : (vector<512xf8E4M3FN>) -> ()
  return
}

// -----

func.func @yield_outside(%x: f32) {
  // expected-error @+1 {{'smalti.custom_yield' op expects to end a 'smalti.custom_primitive' body}}
  "smalti.custom_yield"(%x) : (f32) -> ()
  return
}
