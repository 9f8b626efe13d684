// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --to=sass | filecheck %s --check-prefix=SASS
// 4-bit vectors (smalti/lowering/subbyte.py; i8, last, in int8_floats.py): two elements per
// byte in memory, eight per .b32 in registers (element j in bits 4j..4j+3); converted to
// 16-bit float pairs by one prmt per pair (selector 0x4400 + 0x1111 k: byte k of the first
// source into the low lane, of the second into the high lane) and a few bit operations,
// never one cvt per element.
// Immediates print in decimal: 2290649224 = 0x88888888, 983055 = 0x000F000F,
// 1124090624 = 0x43004300 (bf16 128.0 twice), 1124614920 = 0x43084308 (136.0),
// 1677747200 = 0x64006400 (f16 1024.0), 2147516416 = 0x80008000 (the signs),
// 234884608 = 0x0E000E00, 29360576 = 0x01C001C0 (e2m1's exponent and mantissa in f16, bf16),
// 1946186752 = 0x74007400 (f16 2^14), 2122350208 = 0x7E807E80 (bf16 2^126).

// int4 -> bf16: XOR 8 makes each nibble v + 8; ORed into 128.0 it reads 136 + v; one
// sub.bf16x2 of 136.0 leaves v (exact). 32 bits of memory, 14 instructions for 8 values.
// CHECK-LABEL: .visible .entry i4_to_bf16(
// CHECK: ld.global.b32 [[R:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: xor.b32 [[X:%r[0-9]+]], [[R]], 2290649224;
// CHECK-NEXT: shr.b32 [[S:%r[0-9]+]], [[X]], 4;
// CHECK-NEXT: mov.b32 [[B:%r[0-9]+]], 1124614920;
// CHECK-NEXT: prmt.b32 [[P0:%r[0-9]+]], [[X]], [[S]], 17408;
// CHECK-NEXT: lop3.b32 [[M0:%r[0-9]+]], [[P0]], 983055, 1124090624, 234;
// CHECK-NEXT: sub.rn.bf16x2 [[O0:%r[0-9]+]], [[M0]], [[B]];
// CHECK-NEXT: prmt.b32 [[P1:%r[0-9]+]], [[X]], [[S]], 21777;
// CHECK-NEXT: lop3.b32 [[M1:%r[0-9]+]], [[P1]], 983055, 1124090624, 234;
// CHECK-NEXT: sub.rn.bf16x2 [[O1:%r[0-9]+]], [[M1]], [[B]];
// CHECK-NEXT: prmt.b32 [[P2:%r[0-9]+]], [[X]], [[S]], 26146;
// CHECK-NEXT: lop3.b32 [[M2:%r[0-9]+]], [[P2]], 983055, 1124090624, 234;
// CHECK-NEXT: sub.rn.bf16x2 [[O2:%r[0-9]+]], [[M2]], [[B]];
// CHECK-NEXT: prmt.b32 [[P3:%r[0-9]+]], [[X]], [[S]], 30515;
// CHECK-NEXT: lop3.b32 [[M3:%r[0-9]+]], [[P3]], 983055, 1124090624, 234;
// CHECK-NEXT: sub.rn.bf16x2 [[O3:%r[0-9]+]], [[M3]], [[B]];
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[O0]], [[O1]], [[O2]], [[O3]]};
// SASS-LABEL: .text.i4_to_bf16:
// SASS-COUNT-4: PRMT
// SASS-COUNT-4: HADD2.BF16_V2 {{R[0-9]+}}, {{R[0-9]+}}, -136, -136
// SASS-NOT: I2F
func.func @i4_to_bf16(%a: memref<8x128xi4>, %b: memref<8x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xi4>, index, index) -> vector<8x128xi4>
  %y = arith.sitofp %x : vector<8x128xi4> to vector<8x128xbf16>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x128xbf16>, memref<8x128xbf16>, index, index) -> ()
  return
}

// -----

// uitofp: no XOR, and 1024.0 subtracted in f16.
// CHECK-LABEL: .visible .entry u4_to_f16(
// CHECK: ld.global.b32 [[R:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: shr.b32 [[S:%r[0-9]+]], [[R]], 4;
// CHECK-NEXT: mov.b32 [[B:%r[0-9]+]], 1677747200;
// CHECK-NEXT: prmt.b32 [[P0:%r[0-9]+]], [[R]], [[S]], 17408;
// CHECK-NEXT: lop3.b32 [[M0:%r[0-9]+]], [[P0]], 983055, 1677747200, 234;
// CHECK-NEXT: sub.rn.f16x2 {{%r[0-9]+}}, [[M0]], [[B]];
// CHECK-NOT: xor
func.func @u4_to_f16(%a: memref<8x128xi4>, %b: memref<8x128xf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xi4>, index, index) -> vector<8x128xi4>
  %y = arith.uitofp %x : vector<8x128xi4> to vector<8x128xf16>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x128xf16>, memref<8x128xf16>, index, index) -> ()
  return
}

// -----

// int4 -> f32: the bf16 pairs, each bf16 the upper half of its f32 (shl, and: exact).
// CHECK-LABEL: .visible .entry i4_to_f32(
// CHECK: sub.rn.bf16x2 [[O0:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK: shl.b32 [[F0:%f[0-9]+]], [[O0]], 16;
// CHECK-NEXT: and.b32 [[F1:%f[0-9]+]], [[O0]], 4294901760;
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}], {[[F0]], [[F1]], {{%f[0-9]+}}, {{%f[0-9]+}}};
func.func @i4_to_f32(%a: memref<8x128xi4>, %b: memref<8x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xi4>, index, index) -> vector<8x128xi4>
  %y = arith.sitofp %x : vector<8x128xi4> to vector<8x128xf32>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x128xf32>, memref<8x128xf32>, index, index) -> ()
  return
}

// -----

// e2m1 -> f16: each lane's element in its top nibble (shl 4 gives the even elements the
// high nibble of their byte), its 3 low bits moved to f16 bits 9..11, the sign kept; times
// 2^14 that is the value, subnormal 0.5 included.
// CHECK-LABEL: .visible .entry e2m1_to_f16(
// CHECK: ld.global.b32 [[R:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: shl.b32 [[E:%r[0-9]+]], [[R]], 4;
// CHECK-NEXT: mov.b32 [[K:%r[0-9]+]], 1946186752;
// CHECK-NEXT: prmt.b32 [[P0:%r[0-9]+]], [[E]], [[R]], 17408;
// CHECK-NEXT: shr.b32 [[H0:%r[0-9]+]], [[P0]], 3;
// CHECK-NEXT: and.b32 [[G0:%r[0-9]+]], [[P0]], 2147516416;
// CHECK-NEXT: lop3.b32 [[M0:%r[0-9]+]], [[G0]], [[H0]], 234884608, 248;
// CHECK-NEXT: mul.rn.f16x2 [[O0:%r[0-9]+]], [[M0]], [[K]];
// CHECK-COUNT-3: mul.rn.f16x2
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[O0]], {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}};
func.func @e2m1_to_f16(%a: memref<8x128xf4E2M1FN>, %b: memref<8x128xf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xf4E2M1FN>, index, index) -> vector<8x128xf4E2M1FN>
  %y = arith.extf %x : vector<8x128xf4E2M1FN> to vector<8x128xf16>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x128xf16>, memref<8x128xf16>, index, index) -> ()
  return
}

// -----

// e2m1 -> bf16: the same with bf16's 7 mantissa bits (shift 6) and 2^126.
// CHECK-LABEL: .visible .entry e2m1_to_bf16(
// CHECK: shr.b32 [[H0:%r[0-9]+]], {{%r[0-9]+}}, 6;
// CHECK-NEXT: and.b32 [[G0:%r[0-9]+]], {{%r[0-9]+}}, 2147516416;
// CHECK-NEXT: lop3.b32 [[M0:%r[0-9]+]], [[G0]], [[H0]], 29360576, 248;
// CHECK-NEXT: mul.rn.bf16x2 {{%r[0-9]+}}, [[M0]], {{%r[0-9]+}};
func.func @e2m1_to_bf16(%a: memref<8x128xf4E2M1FN>, %b: memref<8x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xf4E2M1FN>, index, index) -> vector<8x128xf4E2M1FN>
  %y = arith.extf %x : vector<8x128xf4E2M1FN> to vector<8x128xbf16>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x128xbf16>, memref<8x128xbf16>, index, index) -> ()
  return
}

// -----

// e2m1 -> f32: the f16 pairs, each half widened (exact).
// CHECK-LABEL: .visible .entry e2m1_to_f32(
// CHECK: mul.rn.f16x2 [[O0:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-COUNT-3: mul.rn.f16x2
// CHECK-NEXT: mov.b32 {[[L:%rs[0-9]+]], [[H:%rs[0-9]+]]}, [[O0]];
// CHECK-NEXT: cvt.f32.f16 {{%f[0-9]+}}, [[L]];
// CHECK-NEXT: cvt.f32.f16 {{%f[0-9]+}}, [[H]];
func.func @e2m1_to_f32(%a: memref<8x128xf4E2M1FN>, %b: memref<8x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xf4E2M1FN>, index, index) -> vector<8x128xf4E2M1FN>
  %y = arith.extf %x : vector<8x128xf4E2M1FN> to vector<8x128xf32>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x128xf32>, memref<8x128xf32>, index, index) -> ()
  return
}

// -----

// i8 -> f16 (smalti/lowering/int8_floats.py): XOR 0x80808080 biases each byte to v + 128;
// prmt puts bytes 0 and 1 (selector 0x5150 = 20816) under the 0x64 of 1024.0 (25600 =
// 0x6400: prmt index 5); one sub.f16x2 of 1152.0 (1686135936 = 0x64806480) per pair.
// CHECK-LABEL: .visible .entry i8_to_f16(
// CHECK: ld.global.b32 [[R:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: xor.b32 [[X:%r[0-9]+]], [[R]], 2155905152;
// CHECK-NEXT: mov.b32 [[M:%r[0-9]+]], 25600;
// CHECK-NEXT: mov.b32 [[B:%r[0-9]+]], 1686135936;
// CHECK-NEXT: prmt.b32 [[P0:%r[0-9]+]], [[X]], [[M]], 20816;
// CHECK-NEXT: sub.rn.f16x2 {{%r[0-9]+}}, [[P0]], [[B]];
// CHECK-NEXT: prmt.b32 [[P1:%r[0-9]+]], [[X]], [[M]], 21330;
// CHECK-NEXT: sub.rn.f16x2 {{%r[0-9]+}}, [[P1]], [[B]];
func.func @i8_to_f16(%a: memref<4x128xi8>, %b: memref<4x128xf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi8>, index, index) -> vector<4x128xi8>
  %y = arith.sitofp %x : vector<4x128xi8> to vector<4x128xf16>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<4x128xf16>, memref<4x128xf16>, index, index) -> ()
  return
}
