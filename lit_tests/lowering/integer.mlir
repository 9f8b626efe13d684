// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Integer arithmetic (smalti/lowering/integer.py): PTX's own instructions where their
// semantics are MLIR's (div/rem truncate toward zero), a few more where not (floordivsi,
// ceildivsi: the truncated quotient, moved by one when the remainder is nonzero and the
// signs say so; the remainder is a - q * b, cheaper than a second division).

// CHECK-LABEL: .visible .entry i32_division(
// CHECK: ld.global.v4.b32 {[[A:%r[0-9]+]], {{.*}}}
// CHECK: ld.global.v4.b32 {[[B:%r[0-9]+]], {{.*}}}
// CHECK: div.s32 [[D:%r[0-9]+]], [[A]], [[B]];
// CHECK: rem.s32 [[R:%r[0-9]+]], [[D]], [[B]];
// CHECK: div.u32 [[DU:%r[0-9]+]], [[R]], [[B]];
// CHECK: rem.u32 [[RU:%r[0-9]+]], [[DU]], [[B]];
// floordivsi: minus one where the remainder's sign differs from the divisor's
// CHECK: div.s32 [[Q:%r[0-9]+]], [[RU]], [[B]];
// CHECK-NEXT: mul.lo.s32 [[QB:%r[0-9]+]], [[Q]], [[B]];
// CHECK-NEXT: sub.s32 [[REM:%r[0-9]+]], [[RU]], [[QB]];
// CHECK-NEXT: setp.ne.s32 [[INEXACT:%p[0-9]+]], [[REM]], 0;
// CHECK-NEXT: xor.b32 [[SIGNS:%r[0-9]+]], [[REM]], [[B]];
// CHECK-NEXT: setp.lt.s32 [[DIFFER:%p[0-9]+]], [[SIGNS]], 0;
// CHECK-NEXT: and.pred [[DOWN:%p[0-9]+]], [[INEXACT]], [[DIFFER]];
// CHECK-NEXT: add.s32 [[QM1:%r[0-9]+]], [[Q]], -1;
// CHECK-NEXT: selp.b32 [[FLOOR:%r[0-9]+]], [[QM1]], [[Q]], [[DOWN]];
// ceildivsi: plus one where the operands' signs agree
// CHECK: div.s32 [[C:%r[0-9]+]], [[FLOOR]], [[B]];
// CHECK: xor.b32 [[SAME:%r[0-9]+]], [[FLOOR]], [[B]];
// CHECK-NEXT: setp.ge.s32 {{%p[0-9]+}}, [[SAME]], 0;
// CHECK: add.s32 {{%r[0-9]+}}, [[C]], 1;
// ceildivui: plus one where the remainder is nonzero
// CHECK: div.u32
// CHECK: setp.ne.b32
// CHECK: abs.s32
func.func @i32_division(%a: memref<4x128xi32>, %b: memref<4x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi32>, index, index) -> vector<4x128xi32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xi32>, index, index) -> vector<4x128xi32>
  %0 = arith.divsi %x, %y : vector<4x128xi32>
  %1 = arith.remsi %0, %y : vector<4x128xi32>
  %2 = arith.divui %1, %y : vector<4x128xi32>
  %3 = arith.remui %2, %y : vector<4x128xi32>
  %4 = arith.floordivsi %3, %y : vector<4x128xi32>
  %5 = arith.ceildivsi %4, %y : vector<4x128xi32>
  %6 = arith.ceildivui %5, %y : vector<4x128xi32>
  %7 = math.absi %6 : vector<4x128xi32>
  "smalti.vector_store"(%7, %a, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  return
}

// -----

// Shifts take a .u32 amount, which PTX clamps to the width: by the width or more, shl and
// shr.u give 0 and shr.s the sign (MLIR: poison; numpy: the same as PTX). A 16-bit amount
// is zero-extended; a 64-bit one is clamped first, so 2^32 does not shift by 0. (Shifting
// a value by itself would not do: canonicalize folds shrsi(y, y) to 0, or poison.)
// CHECK-LABEL: .visible .entry shifts(
// CHECK: ld.global.v4.b32 {[[X:%r[0-9]+]], {{.*}}}
// CHECK: ld.global.v4.b16 {[[Y:%rs[0-9]+]], {{.*}}}
// CHECK: ld.global.v2.b64 {[[Z:%rd[0-9]+]], {{.*}}}
// CHECK: shl.b32 [[S0:%r[0-9]+]], [[X]], [[X]];
// CHECK: shr.s32 [[S1:%r[0-9]+]], [[S0]], [[X]];
// CHECK: shr.u32 {{%r[0-9]+}}, [[S1]], [[X]];
// CHECK: cvt.u32.u16 [[AMOUNT16:%r[0-9]+]], {{%rs[0-9]+}};
// CHECK-NEXT: shr.s16 {{%rs[0-9]+}}, [[Y]], [[AMOUNT16]];
// CHECK: min.u64 [[CLAMPED:%rd[0-9]+]], [[Z]], 64;
// CHECK-NEXT: cvt.u32.u64 [[AMOUNT64:%r[0-9]+]], [[CLAMPED]];
// CHECK-NEXT: shl.b64 {{%rd[0-9]+}}, [[Z]], [[AMOUNT64]];
func.func @shifts(%a: memref<4x128xi32>, %b: memref<4x128xi16>, %c: memref<4x128xi64>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi32>, index, index) -> vector<4x128xi32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xi16>, index, index) -> vector<4x128xi16>
  %z = "smalti.vector_load"(%c, %c0, %c0) : (memref<4x128xi64>, index, index) -> vector<4x128xi64>
  %0 = arith.shli %x, %x : vector<4x128xi32>
  %1 = arith.shrsi %0, %x : vector<4x128xi32>
  %2 = arith.shrui %1, %x : vector<4x128xi32>
  %t = arith.trunci %x : vector<4x128xi32> to vector<4x128xi16>
  %3 = arith.shrsi %y, %t : vector<4x128xi16>
  %4 = arith.shli %z, %z : vector<4x128xi64>
  "smalti.vector_store"(%2, %a, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  "smalti.vector_store"(%3, %b, %c0, %c0) : (vector<4x128xi16>, memref<4x128xi16>, index, index) -> ()
  "smalti.vector_store"(%4, %c, %c0, %c0) : (vector<4x128xi64>, memref<4x128xi64>, index, index) -> ()
  return
}

// -----

// i8 elements are packed four to a .b32; PTX has no 8-bit arithmetic, so each byte is
// widened to 16 bits as the op reads it (sign-extended for divsi; as it is for addi, whose
// low byte does not depend on the upper ones) and the low bytes are packed again.
// CHECK-LABEL: .visible .entry i8_ops(
// CHECK: ld.global.b32 [[A:%r[0-9]+]],
// CHECK: ld.global.b32 [[B:%r[0-9]+]],
// CHECK: mov.b32 {[[A0:%rs[0-9]+]], [[A2:%rs[0-9]+]]}, [[A]];
// CHECK-NEXT: shr.b16 [[A1:%rs[0-9]+]], [[A0]], 8;
// CHECK: mov.b32 {[[B0:%rs[0-9]+]], [[B2:%rs[0-9]+]]}, [[B]];
// CHECK: cvt.s16.s8 [[WA:%rs[0-9]+]], [[A0]];
// CHECK-NEXT: cvt.s16.s8 [[WB:%rs[0-9]+]], [[B0]];
// CHECK-NEXT: div.s16 [[Q0:%rs[0-9]+]], [[WA]], [[WB]];
// CHECK: and.b16 [[LOW:%rs[0-9]+]], [[Q0]], 255;
// CHECK-NEXT: shl.b16 [[HIGH:%rs[0-9]+]], {{%rs[0-9]+}}, 8;
// CHECK-NEXT: or.b16 [[PAIR:%rs[0-9]+]], [[LOW]], [[HIGH]];
// CHECK: mov.b32 {{%r[0-9]+}}, {[[PAIR]], {{%rs[0-9]+}}};
// CHECK-NOT: cvt.s16.s8
// CHECK: add.s16
// CHECK: st.global.b32
func.func @i8_ops(%a: memref<4x128xi8>, %b: memref<4x128xi8>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi8>, index, index) -> vector<4x128xi8>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xi8>, index, index) -> vector<4x128xi8>
  %0 = arith.divsi %x, %y : vector<4x128xi8>
  %1 = arith.addi %0, %y : vector<4x128xi8>
  "smalti.vector_store"(%1, %a, %c0, %c0) : (vector<4x128xi8>, memref<4x128xi8>, index, index) -> ()
  return
}

// -----

// i1 vectors compute in predicates: addi is xor, muli and, maxsi (true is -1) and.
// CHECK-LABEL: .visible .entry i1_ops(
// CHECK: setp.ne.b16 [[P:%p[0-9]+]],
// CHECK: setp.ne.b16 [[Q:%p[0-9]+]],
// CHECK: xor.pred [[SUM:%p[0-9]+]], [[P]], [[Q]];
// CHECK-NEXT: and.pred [[PRODUCT:%p[0-9]+]], [[SUM]], [[Q]];
// CHECK-NEXT: and.pred {{%p[0-9]+}}, [[PRODUCT]], [[P]];
func.func @i1_ops(%a: memref<128xi1>, %b: memref<128xi1>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<128xi1>, index) -> vector<128xi1>
  %y = "smalti.vector_load"(%b, %c0) : (memref<128xi1>, index) -> vector<128xi1>
  %0 = arith.addi %x, %y : vector<128xi1>
  %1 = arith.muli %0, %y : vector<128xi1>
  %2 = arith.maxsi %1, %x : vector<128xi1>
  "smalti.vector_store"(%2, %a, %c0) : (vector<128xi1>, memref<128xi1>, index) -> ()
  return
}

// -----

// Uniform index arithmetic: the same instructions on .s64 scalars, an immediate second
// operand where PTX takes one (a shift by a constant needs no clamping). Division by a
// constant power of two is a shift (floor: arithmetic) and its remainder a mask: ptxas
// would keep `div`/`rem` a call to a division routine.
// CHECK-LABEL: .visible .entry scalars(
// CHECK: mov.u32 [[CTA:%r[0-9]+]], %ctaid.x;
// CHECK-NEXT: cvt.u64.u32 [[B:%rd[0-9]+]], [[CTA]];
// CHECK-NEXT: shr.s64 [[FLOOR:%rd[0-9]+]], [[B]], 1;
// CHECK-NEXT: and.b64 [[R:%rd[0-9]+]], [[B]], 1;
// CHECK-NEXT: shl.b64 [[S:%rd[0-9]+]], [[R]], 3;
// CHECK-NEXT: add.s64 {{%rd[0-9]+}}, [[FLOOR]], [[S]];
func.func @scalars(%a: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %c2 = arith.constant 2 : index
  %b = gpu.block_id x
  %q = arith.floordivsi %b, %c2 : index
  %r = arith.remui %b, %c2 : index
  %s = arith.shli %r, %c3 : index
  %row = arith.addi %q, %s : index
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<1x128xf32>
  "smalti.vector_store"(%v, %a, %row, %c0) : (vector<1x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}
