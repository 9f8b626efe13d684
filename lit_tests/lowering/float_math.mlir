// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Float ops without one PTX instruction (smalti/lowering/float_math.py).

// Rounding to integers is one cvt each (exact); round (half away from zero) moves trunc(x)
// one away from zero when the dropped fraction is at least 1/2; copysign takes the sign
// first in PTX.
// CHECK-LABEL: .visible .entry rounding(
// CHECK: ld.global.v4.f32 {[[X:%f[0-9]+]], {{.*}}}
// CHECK: ld.global.v4.f32 {[[Y:%f[0-9]+]], {{.*}}}
// CHECK: cvt.rmi.f32.f32 [[FLOOR:%f[0-9]+]], [[X]];
// CHECK: cvt.rpi.f32.f32 [[CEIL:%f[0-9]+]], [[FLOOR]];
// CHECK: cvt.rzi.f32.f32 [[TRUNC:%f[0-9]+]], [[CEIL]];
// CHECK: cvt.rni.f32.f32 [[EVEN:%f[0-9]+]], [[TRUNC]];
// CHECK: cvt.rzi.f32.f32 [[WHOLE:%f[0-9]+]], [[EVEN]];
// CHECK-NEXT: sub.rn.f32 [[FRACTION:%f[0-9]+]], [[EVEN]], [[WHOLE]];
// CHECK-NEXT: abs.f32 [[ABS:%f[0-9]+]], [[FRACTION]];
// CHECK-NEXT: setp.ge.f32 [[UP:%p[0-9]+]], [[ABS]], 0f3F000000;
// CHECK-NEXT: copysign.f32 [[STEP:%f[0-9]+]], [[EVEN]], 0f3F800000;
// CHECK-NEXT: add.rn.f32 [[AWAY:%f[0-9]+]], [[WHOLE]], [[STEP]];
// CHECK-NEXT: selp.f32 [[ROUND:%f[0-9]+]], [[AWAY]], [[WHOLE]], [[UP]];
// CHECK: copysign.f32 {{%f[0-9]+}}, [[Y]], [[ROUND]];
func.func @rounding(%a: memref<4x128xf32>, %b: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %0 = math.floor %x : vector<4x128xf32>
  %1 = math.ceil %0 : vector<4x128xf32>
  %2 = math.trunc %1 : vector<4x128xf32>
  %3 = math.roundeven %2 : vector<4x128xf32>
  %4 = math.round %3 : vector<4x128xf32>
  %5 = math.copysign %4, %y : vector<4x128xf32>
  "smalti.vector_store"(%5, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}

// -----

// sin and cos reduce the argument modulo 2π (k = rni(x / 2π); x - k C1 - k C2 by fma; x
// itself when k is 0) for the .approx units; powf is ex2(y lg2|x|) with C's sign, NaN
// and one rules.
// CHECK-LABEL: .visible .entry transcendental(
// CHECK: ld.global.f32 [[X:%f[0-9]+]],
// CHECK: ld.global.f32 [[Y:%f[0-9]+]],
// CHECK: mul.rn.f32 [[TURNS:%f[0-9]+]], [[X]], 0f3E22F983;
// CHECK-NEXT: cvt.rni.f32.f32 [[K:%f[0-9]+]], [[TURNS]];
// CHECK-NEXT: fma.rn.f32 [[HIGH:%f[0-9]+]], [[K]], 0fC0C90FDB, [[X]];
// CHECK-NEXT: fma.rn.f32 [[LOW:%f[0-9]+]], [[K]], 0f343BBD2E, [[HIGH]];
// CHECK-NEXT: setp.eq.f32 [[WITHIN:%p[0-9]+]], [[K]], 0f00000000;
// CHECK-NEXT: selp.f32 [[R:%f[0-9]+]], [[X]], [[LOW]], [[WITHIN]];
// CHECK-NEXT: sin.approx.f32 [[SIN:%f[0-9]+]], [[R]];
// CHECK: cos.approx.f32 [[COS:%f[0-9]+]],
// CHECK-NEXT: abs.f32 [[ABS:%f[0-9]+]], [[COS]];
// CHECK-NEXT: lg2.approx.f32 [[LOG:%f[0-9]+]], [[ABS]];
// CHECK-NEXT: mul.rn.f32 [[T:%f[0-9]+]], [[Y]], [[LOG]];
// CHECK-NEXT: ex2.approx.f32 [[POW:%f[0-9]+]], [[T]];
// odd integer powers keep the base's sign
// CHECK: cvt.rzi.s32.f32 {{%r[0-9]+}}, [[Y]];
// CHECK: neg.f32 [[NEG:%f[0-9]+]], [[POW]];
// CHECK: selp.f32 {{%f[0-9]+}}, 0f7FC00000,
// CHECK: selp.f32 {{%f[0-9]+}}, 0f3F800000,
func.func @transcendental(%a: memref<128xf32>, %b: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  %y = "smalti.vector_load"(%b, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  %0 = math.sin %x : vector<128xf32>
  %1 = math.cos %0 : vector<128xf32>
  %2 = math.powf %1, %y : vector<128xf32>
  "smalti.vector_store"(%2, %a, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

// remf is C's fmod, exact: the integer significands' remainder after the exponent
// difference (seven 40-bit steps of a 64-bit remainder), scaled by the divisor's exponent.
// A bf16 remainder is computed in f32 and rounds exactly.
// CHECK-LABEL: .visible .entry remf(
// CHECK: cvt.f32.bf16 [[X:%f[0-9]+]],
// CHECK: cvt.f32.bf16 [[Y:%f[0-9]+]],
// CHECK: rem.u64 [[R0:%rd[0-9]+]], {{%rd[0-9]+}}, [[M:%rd[0-9]+]];
// CHECK: min.s32 [[S:%r[0-9]+]], {{%r[0-9]+}}, 40;
// CHECK-NEXT: max.s32 [[STEP:%r[0-9]+]], [[S]], 0;
// CHECK-NEXT: shl.b64 [[SHIFTED:%rd[0-9]+]], [[R0]], [[STEP]];
// CHECK-NEXT: rem.u64 {{%rd[0-9]+}}, [[SHIFTED]], [[M]];
// CHECK-COUNT-6: rem.u64
// CHECK: cvt.rn.f32.u64 [[VALUE:%f[0-9]+]],
// CHECK: mul.rn.f32 [[SCALED:%f[0-9]+]], [[VALUE]],
// CHECK-NEXT: copysign.f32 {{%f[0-9]+}}, [[X]], [[SCALED]];
// CHECK: setp.equ.f32 {{%p[0-9]+}}, {{%f[0-9]+}}, 0f00000000;
// CHECK: selp.f32 [[RESULT:%f[0-9]+]], 0f7FC00000,
// CHECK-NEXT: cvt.rn.bf16.f32 {{%rs[0-9]+}}, [[RESULT]];
func.func @remf(%a: memref<128xbf16>, %b: memref<128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<128xbf16>, index) -> vector<128xbf16>
  %y = "smalti.vector_load"(%b, %c0) : (memref<128xbf16>, index) -> vector<128xbf16>
  %0 = arith.remf %x, %y : vector<128xbf16>
  "smalti.vector_store"(%0, %a, %c0) : (vector<128xbf16>, memref<128xbf16>, index) -> ()
  return
}

// -----

// bitcast: bf16 pairs (one .b32) split into i16 halves (mov.b32 {lo, hi}); f32 <-> i32 is
// a mov between register classes.
// CHECK-LABEL: .visible .entry bitcasts(
// CHECK: ld.global.v2.b32 {[[PAIR:%r[0-9]+]], {{%r[0-9]+}}}
// CHECK-NEXT: mov.b32 {[[LO:%rs[0-9]+]], [[HI:%rs[0-9]+]]}, [[PAIR]];
// CHECK: ld.global.f32 [[F:%f[0-9]+]],
// CHECK-NEXT: mov.b32 [[I:%r[0-9]+]], [[F]];
// CHECK-NEXT: add.s32 [[J:%r[0-9]+]], [[I]], [[I]];
// CHECK-NEXT: mov.b32 {{%f[0-9]+}}, [[J]];
// CHECK: st.global.v4.b16 [{{%rd[0-9]+}}], {[[LO]], [[HI]], {{.*}}};
func.func @bitcasts(%a: memref<4x128xbf16>, %b: memref<128xf32>, %c: memref<4x128xi16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xbf16>, index, index) -> vector<4x128xbf16>
  %i = arith.bitcast %x : vector<4x128xbf16> to vector<4x128xi16>
  %y = "smalti.vector_load"(%b, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  %j = arith.bitcast %y : vector<128xf32> to vector<128xi32>
  %k = arith.addi %j, %j : vector<128xi32>
  %f = arith.bitcast %k : vector<128xi32> to vector<128xf32>
  "smalti.vector_store"(%f, %b, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  "smalti.vector_store"(%i, %c, %c0, %c0) : (vector<4x128xi16>, memref<4x128xi16>, index, index) -> ()
  return
}
