// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// smalti.inline_ptx (smalti/lowering/inline_ptx.py): the text, its $i replaced by register
// names, once per register group in its own { } scope.

// bf16 pairs, two to a .b32 already: the registers go in as they are.
// CHECK-LABEL: .visible .entry max_bf16x2(
// CHECK: ld.global.b32 [[X:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK: ld.global.b32 [[Y:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: {
// CHECK-NEXT: max.bf16x2 [[R:%r[0-9]+]], [[X]], [[Y]];
// CHECK-NEXT: }
// CHECK: st.global.b32 [{{%rd[0-9]+}}], [[R]];
func.func @max_bf16x2(%a: memref<1x256xbf16>, %b: memref<1x256xbf16>, %out: memref<1x256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<1x256xbf16>, index, index) -> vector<1x256xbf16>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<1x256xbf16>, index, index) -> vector<1x256xbf16>
  %r = "smalti.inline_ptx"(%x, %y) {ptx = "max.bf16x2 $0, $1, $2;", constraints = "=r,r,r", pack = 2 : i64} : (vector<1x256xbf16>, vector<1x256xbf16>) -> vector<1x256xbf16>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<1x256xbf16>, memref<1x256xbf16>, index, index) -> ()
  return
}

// -----

// An f32 under an 'r' constraint moves to a .b32 register and its result back; two results,
// a two-line text.
// CHECK-LABEL: .visible .entry lop3_two_results(
// CHECK: ld.global.f32 [[X:%f[0-9]+]], [{{%rd[0-9]+}}];
// CHECK: ld.global.b32 [[Y:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: mov.b32 [[XB:%r[0-9]+]], [[X]];
// CHECK-NEXT: {
// CHECK-NEXT: lop3.b32 [[R:%r[0-9]+]], [[XB]], [[Y]], [[Y]], 0xC0;
// CHECK-NEXT: shl.b32 [[S:%r[0-9]+]], [[Y]], 1;
// CHECK-NEXT: }
// CHECK-NEXT: mov.b32 [[RF:%f[0-9]+]], [[R]];
// CHECK: st.global.f32 [{{%rd[0-9]+}}], [[RF]];
// CHECK: st.global.b32 [{{%rd[0-9]+}}], [[S]];
func.func @lop3_two_results(%a: memref<1x128xf32>, %b: memref<1x128xi32>, %out: memref<1x128xf32>, %out2: memref<1x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<1x128xf32>, index, index) -> vector<1x128xf32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<1x128xi32>, index, index) -> vector<1x128xi32>
  %r, %s = "smalti.inline_ptx"(%x, %y) {ptx = "lop3.b32 $0, $2, $3, $3, 0xC0;\n shl.b32 $1, $3, 1;", constraints = "=r,=r,r,r"} : (vector<1x128xf32>, vector<1x128xi32>) -> (vector<1x128xf32>, vector<1x128xi32>)
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<1x128xf32>, memref<1x128xf32>, index, index) -> ()
  "smalti.vector_store"(%s, %out2, %c0, %c0) : (vector<1x128xi32>, memref<1x128xi32>, index, index) -> ()
  return
}

// -----

// One bf16 per register (strided vec = 1) with pack = 2: two registers join into a pair,
// the result splits back.
// CHECK-LABEL: .visible .entry pairs_joined(
// CHECK: ld.global.b16 [[LO:%rs[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: ld.global.b16 [[HI:%rs[0-9]+]], [{{%rd[0-9]+}}+256];
// CHECK-NEXT: mov.b32 [[PAIR:%r[0-9]+]], {[[LO]], [[HI]]};
// CHECK-NEXT: {
// CHECK-NEXT: neg.bf16x2 [[R:%r[0-9]+]], [[PAIR]];
// CHECK-NEXT: }
// CHECK-NEXT: mov.b32 {[[RLO:%rs[0-9]+]], [[RHI:%rs[0-9]+]]}, [[R]];
// CHECK: st.global.b16 [{{%rd[0-9]+}}], [[RLO]];
// CHECK-NEXT: st.global.b16 [{{%rd[0-9]+}}+256], [[RHI]];
func.func @pairs_joined(%a: memref<1x256xbf16>, %out: memref<1x256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<1x256xbf16>, index, index) -> vector<1x256xbf16>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 1>} : (vector<1x256xbf16>) -> vector<1x256xbf16>
  %r = "smalti.inline_ptx"(%y) {ptx = "neg.bf16x2 $0, $1;", constraints = "=r,r", pack = 2 : i64} : (vector<1x256xbf16>) -> vector<1x256xbf16>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<1x256xbf16>, memref<1x256xbf16>, index, index) -> ()
  return
}

// -----

// Effects: the two identical pure texts are one (smalti-cse), the unused pure one is gone;
// the two identical side-effecting ones both stay, and so does an unused one.
// CHECK-LABEL: .visible .entry effects(
// CHECK: ld.global.f32 [[X:%f[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: {
// CHECK-NEXT: mul.rn.f32 [[P:%f[0-9]+]], [[X]], 0f40000000;
// CHECK-NEXT: }
// CHECK-NEXT: {
// CHECK-NEXT: add.rn.f32 [[S:%f[0-9]+]], [[X]], 0f3F800000;
// CHECK-NEXT: }
// CHECK-NEXT: {
// CHECK-NEXT: add.rn.f32 [[T:%f[0-9]+]], [[X]], 0f3F800000;
// CHECK-NEXT: }
// CHECK-NEXT: {
// CHECK-NEXT: neg.f32 {{%f[0-9]+}}, [[X]];
// CHECK-NEXT: }
// CHECK-NOT: sub.rn.f32
// CHECK: st.global.f32 [{{%rd[0-9]+}}], [[P]];
// CHECK: st.global.f32 [{{%rd[0-9]+}}], [[P]];
// CHECK: st.global.f32 [{{%rd[0-9]+}}], [[S]];
// CHECK: st.global.f32 [{{%rd[0-9]+}}], [[T]];
func.func @effects(%a: memref<1x128xf32>, %o0: memref<1x128xf32>, %o1: memref<1x128xf32>, %o2: memref<1x128xf32>, %o3: memref<1x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<1x128xf32>, index, index) -> vector<1x128xf32>
  %p = "smalti.inline_ptx"(%x) {ptx = "mul.rn.f32 $0, $1, 0f40000000;", constraints = "=f,f"} : (vector<1x128xf32>) -> vector<1x128xf32>
  %q = "smalti.inline_ptx"(%x) {ptx = "mul.rn.f32 $0, $1, 0f40000000;", constraints = "=f,f"} : (vector<1x128xf32>) -> vector<1x128xf32>
  %s = "smalti.inline_ptx"(%x) {ptx = "add.rn.f32 $0, $1, 0f3F800000;", constraints = "=f,f", has_side_effects = true} : (vector<1x128xf32>) -> vector<1x128xf32>
  %t = "smalti.inline_ptx"(%x) {ptx = "add.rn.f32 $0, $1, 0f3F800000;", constraints = "=f,f", has_side_effects = true} : (vector<1x128xf32>) -> vector<1x128xf32>
  %unused = "smalti.inline_ptx"(%x) {ptx = "sub.rn.f32 $0, $1, $1;", constraints = "=f,f"} : (vector<1x128xf32>) -> vector<1x128xf32>
  %kept = "smalti.inline_ptx"(%x) {ptx = "neg.f32 $0, $1;", constraints = "=f,f", has_side_effects = true} : (vector<1x128xf32>) -> vector<1x128xf32>
  "smalti.vector_store"(%p, %o0, %c0, %c0) : (vector<1x128xf32>, memref<1x128xf32>, index, index) -> ()
  "smalti.vector_store"(%q, %o1, %c0, %c0) : (vector<1x128xf32>, memref<1x128xf32>, index, index) -> ()
  "smalti.vector_store"(%s, %o2, %c0, %c0) : (vector<1x128xf32>, memref<1x128xf32>, index, index) -> ()
  "smalti.vector_store"(%t, %o3, %c0, %c0) : (vector<1x128xf32>, memref<1x128xf32>, index, index) -> ()
  return
}

// -----

// Scalar operands: an index register read as its low 32 bits ('r'), an index constant moved
// into a .b32; both the same register in every group.
// CHECK-LABEL: .visible .entry scaled_by_block(
// CHECK: mov.u32 [[CTA:%r[0-9]+]], %ctaid.x;
// CHECK-NEXT: cvt.u64.u32 [[B:%rd[0-9]+]], [[CTA]];
// CHECK: ld.global.b32 [[X:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: cvt.u32.u64 [[B32:%r[0-9]+]], [[B]];
// CHECK-NEXT: mov.b32 [[THREE:%r[0-9]+]], 3;
// CHECK-NEXT: {
// CHECK-NEXT: mad.lo.s32 [[R:%r[0-9]+]], [[X]], [[B32]], [[THREE]];
// CHECK-NEXT: }
// CHECK: st.global.b32 [{{%rd[0-9]+}}], [[R]];
func.func @scaled_by_block(%a: memref<2x128xi32>, %out: memref<2x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %b = gpu.block_id x
  %x = "smalti.vector_load"(%a, %b, %c0) : (memref<2x128xi32>, index, index) -> vector<1x128xi32>
  %c3 = arith.constant 3 : index
  %r = "smalti.inline_ptx"(%x, %b, %c3) {ptx = "mad.lo.s32 $0, $1, $2, $3;", constraints = "=r,r,r,r"} : (vector<1x128xi32>, index, index) -> vector<1x128xi32>
  "smalti.vector_store"(%r, %out, %b, %c0) : (vector<1x128xi32>, memref<2x128xi32>, index, index) -> ()
  return
}
