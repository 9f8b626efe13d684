// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// f32 arithmetic rounds each op to nearest even (.rn keeps ptxas from contracting mul+add).
// CHECK-LABEL: .visible .entry f32_ops(
// CHECK: ld.global.v4.f32 {[[A0:%f[0-9]+]], {{.*}}}
// CHECK: ld.global.v4.f32 {[[B0:%f[0-9]+]], {{.*}}}
// CHECK: mul.rn.f32 [[M0:%f[0-9]+]], [[A0]], [[B0]];
// CHECK: add.rn.f32 [[S0:%f[0-9]+]], [[M0]], [[A0]];
// CHECK: sub.rn.f32 [[D0:%f[0-9]+]], [[S0]], [[B0]];
// CHECK: div.rn.f32 [[Q0:%f[0-9]+]], [[D0]], [[B0]];
// CHECK: neg.f32 [[N0:%f[0-9]+]], [[Q0]];
// CHECK: max.NaN.f32 [[X0:%f[0-9]+]], [[N0]], [[A0]];
// CHECK: min.NaN.f32 [[Y0:%f[0-9]+]], [[X0]], [[B0]];
// CHECK: max.f32 [[Z0:%f[0-9]+]], [[Y0]], [[A0]];
// CHECK: min.f32 [[W0:%f[0-9]+]], [[Z0]], [[B0]];
// CHECK: abs.f32 [[V0:%f[0-9]+]], [[W0]];
// CHECK: fma.rn.f32 [[F0:%f[0-9]+]], [[V0]], [[A0]], [[B0]];
// CHECK: sqrt.rn.f32 [[R0:%f[0-9]+]], [[F0]];
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}], {[[R0]], {{.*}}};
func.func @f32_ops(%a: memref<4x128xf32>, %b: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %0 = arith.mulf %x, %y : vector<4x128xf32>
  %1 = arith.addf %0, %x : vector<4x128xf32>
  %2 = arith.subf %1, %y : vector<4x128xf32>
  %3 = arith.divf %2, %y : vector<4x128xf32>
  %4 = arith.negf %3 : vector<4x128xf32>
  %5 = arith.maximumf %4, %x : vector<4x128xf32>
  %6 = arith.minimumf %5, %y : vector<4x128xf32>
  %7 = arith.maxnumf %6, %x : vector<4x128xf32>
  %8 = arith.minnumf %7, %y : vector<4x128xf32>
  %9 = math.absf %8 : vector<4x128xf32>
  %10 = math.fma %9, %x, %y : vector<4x128xf32>
  %11 = math.sqrt %10 : vector<4x128xf32>
  "smalti.vector_store"(%11, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}

// -----

// bf16 uses the packed x2 instructions; division widens to f32 and rounds once back.
// CHECK-LABEL: .visible .entry bf16_ops(
// CHECK: ld.global.v4.b32 {[[A0:%r[0-9]+]], {{.*}}}
// CHECK: ld.global.v4.b32 {[[B0:%r[0-9]+]], {{.*}}}
// CHECK: mul.rn.bf16x2 [[M0:%r[0-9]+]], [[A0]], [[B0]];
// CHECK: add.rn.bf16x2 [[S0:%r[0-9]+]], [[M0]], [[A0]];
// CHECK: fma.rn.bf16x2 [[F0:%r[0-9]+]], [[S0]], [[A0]], [[B0]];
// CHECK: max.NaN.bf16x2 [[X0:%r[0-9]+]], [[F0]], [[B0]];
// CHECK: mov.b32 {[[LO:%rs[0-9]+]], [[HI:%rs[0-9]+]]}, [[X0]];
// CHECK: mov.b32 {[[BLO:%rs[0-9]+]], [[BHI:%rs[0-9]+]]}, [[B0]];
// CHECK: cvt.f32.bf16 [[XL:%f[0-9]+]], [[LO]];
// CHECK: cvt.f32.bf16 [[BL:%f[0-9]+]], [[BLO]];
// CHECK: div.rn.f32 [[QL:%f[0-9]+]], [[XL]], [[BL]];
// CHECK: cvt.f32.bf16 [[XH:%f[0-9]+]], [[HI]];
// CHECK: cvt.f32.bf16 [[BH:%f[0-9]+]], [[BHI]];
// CHECK: div.rn.f32 [[QH:%f[0-9]+]], [[XH]], [[BH]];
// CHECK: cvt.rn.bf16x2.f32 [[Q0:%r[0-9]+]], [[QH]], [[QL]];
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[Q0]], {{.*}}};
func.func @bf16_ops(%a: memref<8x128xbf16>, %b: memref<8x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xbf16>, index, index) -> vector<8x128xbf16>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<8x128xbf16>, index, index) -> vector<8x128xbf16>
  %0 = arith.mulf %x, %y : vector<8x128xbf16>
  %1 = arith.addf %0, %x : vector<8x128xbf16>
  %2 = math.fma %1, %x, %y : vector<8x128xbf16>
  %3 = arith.maximumf %2, %y : vector<8x128xbf16>
  %4 = arith.divf %3, %y : vector<8x128xbf16>
  "smalti.vector_store"(%4, %a, %c0, %c0) : (vector<8x128xbf16>, memref<8x128xbf16>, index, index) -> ()
  return
}

// -----

// i32 arithmetic and bitwise ops.
// CHECK-LABEL: .visible .entry i32_ops(
// CHECK: ld.global.v4.b32 {[[A0:%r[0-9]+]], {{.*}}}
// CHECK: ld.global.v4.b32 {[[B0:%r[0-9]+]], {{.*}}}
// CHECK: add.s32 [[S0:%r[0-9]+]], [[A0]], [[B0]];
// CHECK: mul.lo.s32 [[M0:%r[0-9]+]], [[S0]], [[B0]];
// CHECK: sub.s32 [[D0:%r[0-9]+]], [[M0]], [[A0]];
// CHECK: xor.b32 [[X0:%r[0-9]+]], [[D0]], [[B0]];
// CHECK: max.s32 [[Y0:%r[0-9]+]], [[X0]], [[A0]];
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[Y0]], {{.*}}};
func.func @i32_ops(%a: memref<4x128xi32>, %b: memref<4x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi32>, index, index) -> vector<4x128xi32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xi32>, index, index) -> vector<4x128xi32>
  %0 = arith.addi %x, %y : vector<4x128xi32>
  %1 = arith.muli %0, %y : vector<4x128xi32>
  %2 = arith.subi %1, %x : vector<4x128xi32>
  %3 = arith.xori %2, %y : vector<4x128xi32>
  %4 = arith.maxsi %3, %x : vector<4x128xi32>
  "smalti.vector_store"(%4, %a, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  return
}

// -----

// Splat constants are one register, packed for 16-bit types; extf/truncf convert.
// CHECK-LABEL: .visible .entry constants_and_casts(
// CHECK-DAG: mov.b32 [[TWO:%f[0-9]+]], 1073741824;
// CHECK-DAG: mov.b32 [[HALF:%r[0-9]+]], 1056980736;
// CHECK: ld.global.v2.b32 {[[P0:%r[0-9]+]], [[P1:%r[0-9]+]]}
// CHECK: mul.rn.bf16x2 [[H0:%r[0-9]+]], [[P0]], [[HALF]];
// CHECK: mov.b32 {[[L:%rs[0-9]+]], [[H:%rs[0-9]+]]}, [[H0]];
// CHECK: cvt.f32.bf16 [[FL:%f[0-9]+]], [[L]];
// CHECK: cvt.f32.bf16 [[FH:%f[0-9]+]], [[H]];
// CHECK: mul.rn.f32 [[GL:%f[0-9]+]], [[FL]], [[TWO]];
// CHECK: mul.rn.f32 [[GH:%f[0-9]+]], [[FH]], [[TWO]];
// CHECK: cvt.rn.bf16x2.f32 {{%r[0-9]+}}, [[GH]], [[GL]];
func.func @constants_and_casts(%a: memref<4x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %half = arith.constant dense<0.5> : vector<4x128xbf16>
  %two = arith.constant dense<2.0> : vector<4x128xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xbf16>, index, index) -> vector<4x128xbf16>
  %h = arith.mulf %x, %half : vector<4x128xbf16>
  %w = arith.extf %h : vector<4x128xbf16> to vector<4x128xf32>
  %g = arith.mulf %w, %two : vector<4x128xf32>
  %n = arith.truncf %g : vector<4x128xf32> to vector<4x128xbf16>
  "smalti.vector_store"(%n, %a, %c0, %c0) : (vector<4x128xbf16>, memref<4x128xbf16>, index, index) -> ()
  return
}

// -----

// A cast to the layout a value already has costs nothing; a splat broadcasts into any layout.
// CHECK-LABEL: .visible .entry casts(
// CHECK: mov.b32 [[ONE:%f[0-9]+]], 1065353216;
// CHECK: ld.global.v4.f32 {[[A0:%f[0-9]+]], {{.*}}}
// CHECK-NEXT: add.rn.f32 {{%f[0-9]+}}, [[A0]], [[ONE]];
func.func @casts(%a: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %one = arith.constant dense<1.0> : vector<4x128xf32>
  %s = "smalti.layout_cast"(%one) {new_layout = #smalti.splat} : (vector<4x128xf32>) -> vector<4x128xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 4>} : (vector<4x128xf32>) -> vector<4x128xf32>
  %t = "smalti.layout_cast"(%s) {new_layout = #smalti.strided<vec = 4>} : (vector<4x128xf32>) -> vector<4x128xf32>
  %z = arith.addf %y, %t : vector<4x128xf32>
  "smalti.vector_store"(%z, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}

// -----

// exp and log go through the f32 .approx units: exp(x) = 2^(x log2 e), log(x) = log2(x) ln 2.
// CHECK-LABEL: .visible .entry transcendental(
// CHECK: ld.global.v4.f32 {[[X:%f[0-9]+]], {{.*}}}
// CHECK: mul.rn.f32 [[S:%f[0-9]+]], [[X]], 0f3FB8AA3B;
// CHECK: ex2.approx.ftz.f32 [[E:%f[0-9]+]], [[S]];
// CHECK: lg2.approx.f32 [[L:%f[0-9]+]], [[E]];
// CHECK: mul.rn.f32 [[N:%f[0-9]+]], [[L]], 0f3F317218;
// CHECK: tanh.approx.f32 [[T:%f[0-9]+]], [[N]];
// CHECK: rsqrt.approx.f32 {{%f[0-9]+}}, [[T]];
func.func @transcendental(%a: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %e = math.exp %x : vector<4x128xf32>
  %l = math.log %e : vector<4x128xf32>
  %t = math.tanh %l : vector<4x128xf32>
  %r = math.rsqrt %t : vector<4x128xf32>
  "smalti.vector_store"(%r, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}

// -----

// Vector comparisons land in predicates (one per element); select and int<->float
// conversions go element by element. bf16 compares after an exact widening to f32.
// CHECK-LABEL: .visible .entry compare_select(
// CHECK: ld.global.v2.b32 {[[A0:%r[0-9]+]], {{.*}}}
// CHECK: ld.global.v2.b32 {[[B0:%r[0-9]+]], {{.*}}}
// CHECK: mov.b32 {[[AL:%rs[0-9]+]], [[AH:%rs[0-9]+]]}, [[A0]];
// CHECK: mov.b32 {[[BL:%rs[0-9]+]], [[BH:%rs[0-9]+]]}, [[B0]];
// CHECK: cvt.f32.bf16 [[FA:%f[0-9]+]], [[AL]];
// CHECK: cvt.f32.bf16 [[FB:%f[0-9]+]], [[BL]];
// CHECK: setp.gtu.f32 [[P:%p[0-9]+]], [[FA]], [[FB]];
// CHECK: selp.b16 {{%rs[0-9]+}}, {{%rs[0-9]+}}, {{%rs[0-9]+}}, [[P]];
// CHECK: cvt.rzi.s32.f32 {{%r[0-9]+}}, {{%f[0-9]+}};
func.func @compare_select(%a: memref<4x128xbf16>, %b: memref<4x128xbf16>, %out: memref<4x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xbf16>, index, index) -> vector<4x128xbf16>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xbf16>, index, index) -> vector<4x128xbf16>
  %p = arith.cmpf ugt, %x, %y : vector<4x128xbf16>
  %m = arith.select %p, %x, %y : vector<4x128xi1>, vector<4x128xbf16>
  %w = arith.extf %m : vector<4x128xbf16> to vector<4x128xf32>
  %i = arith.fptosi %w : vector<4x128xf32> to vector<4x128xi32>
  "smalti.vector_store"(%i, %out, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  return
}

// -----

// i1 vectors combine with and/or/xor on predicates (a splat true is mov.pred); integer
// widths convert with cvt (sign- or zero-extending, truncating), i1 widens through selp
// (canonicalize folds the two extui into one).
// CHECK-LABEL: .visible .entry masks_and_widths(
// CHECK: mov.pred [[TRUE:%p[0-9]+]], 1;
// CHECK: setp.gt.s32 [[POS:%p[0-9]+]], [[N:%r[0-9]+]], {{%r[0-9]+}};
// CHECK: setp.lt.s32 [[NEG:%p[0-9]+]], [[N]], {{%r[0-9]+}};
// CHECK: or.pred [[EITHER:%p[0-9]+]], [[POS]], [[NEG]];
// CHECK: xor.pred [[NOT:%p[0-9]+]], [[EITHER]], [[TRUE]];
// CHECK: and.pred [[BOTH:%p[0-9]+]], [[NOT]], [[POS]];
// CHECK: cvt.u16.u32 [[LOW:%rs[0-9]+]], [[N]];
// CHECK: cvt.s32.s16 {{%r[0-9]+}}, [[LOW]];
// CHECK: selp.b32 {{%r[0-9]+}}, 1, 0, [[BOTH]];
func.func @masks_and_widths(%a: memref<4x128xi32>, %out: memref<4x128xi32>, %flag: memref<4x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %n = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi32>, index, index) -> vector<4x128xi32>
  %zero = arith.constant dense<0> : vector<4x128xi32>
  %true = arith.constant dense<true> : vector<4x128xi1>
  %pos = arith.cmpi sgt, %n, %zero : vector<4x128xi32>
  %neg = arith.cmpi slt, %n, %zero : vector<4x128xi32>
  %either = arith.ori %pos, %neg : vector<4x128xi1>
  %not = arith.xori %either, %true : vector<4x128xi1>
  %both = arith.andi %not, %pos : vector<4x128xi1>
  %one = arith.extui %both : vector<4x128xi1> to vector<4x128xi16>
  %low = arith.trunci %n : vector<4x128xi32> to vector<4x128xi16>
  %back = arith.extsi %low : vector<4x128xi16> to vector<4x128xi32>
  %wide = arith.extui %one : vector<4x128xi16> to vector<4x128xi32>
  "smalti.vector_store"(%back, %out, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  "smalti.vector_store"(%wide, %flag, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  return
}
