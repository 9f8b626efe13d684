// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// i16, i8 and i1 vectors in memory (smalti/lowering/transfer.py) and the conversions and
// comparisons PTX lacks for them.

// Eight i16 (16 bytes) move as .v4.b32, each word split into its halves: PTX vectors have
// at most four units, and ptxas 13.5 crashes on ld.global.v8.b16.
// CHECK-LABEL: .visible .entry i16_copy(
// CHECK: ld.global.v4.b32 {[[W0:%r[0-9]+]], {{.*}}}, [{{%rd[0-9]+}}];
// CHECK-NEXT: mov.b32 {[[H0:%rs[0-9]+]], [[H1:%rs[0-9]+]]}, [[W0]];
// CHECK: mov.b32 [[J0:%r[0-9]+]], {[[H0]], [[H1]]};
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[J0]], {{.*}}};
// CHECK-NOT: .v8
func.func @i16_copy(%a: memref<8x128xi16>, %b: memref<8x128xi16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xi16>, index, index) -> vector<8x128xi16>
  "smalti.vector_store"(%x, %b, %c0, %c0) : (vector<8x128xi16>, memref<8x128xi16>, index, index) -> ()
  return
}

// -----

// i8 packs four to a .b32, so sixteen bytes are one .v4.b32, moved as they are.
// CHECK-LABEL: .visible .entry i8_copy(
// CHECK: ld.global.v4.b32 {[[A:%r[0-9]+]], [[B:%r[0-9]+]], [[C:%r[0-9]+]], [[D:%r[0-9]+]]}
// CHECK-NEXT: add.s64
// CHECK-NEXT: st.global.v4.b32 [{{%rd[0-9]+}}], {[[A]], [[B]], [[C]], [[D]]};
func.func @i8_copy(%a: memref<16x128xi8>, %b: memref<16x128xi8>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<16x128xi8>, index, index) -> vector<16x128xi8>
  "smalti.vector_store"(%x, %b, %c0, %c0) : (vector<16x128xi8>, memref<16x128xi8>, index, index) -> ()
  return
}

// -----

// An i1 is a byte in memory: bytes load in one unit and each is tested against zero;
// predicates store as the bytes 1 and 0 gathered into the unit.
// CHECK-LABEL: .visible .entry i1_bytes(
// CHECK: ld.global.b16 [[U:%rs[0-9]+]],
// CHECK-NEXT: and.b16 [[LOW:%rs[0-9]+]], [[U]], 255;
// CHECK-NEXT: setp.ne.b16 [[P0:%p[0-9]+]], [[LOW]], 0;
// CHECK-NEXT: and.b16 [[HIGH:%rs[0-9]+]], [[U]], 65280;
// CHECK-NEXT: setp.ne.b16 [[P1:%p[0-9]+]], [[HIGH]], 0;
// CHECK: selp.b16 [[B0:%rs[0-9]+]], 1, 0, [[P0]];
// CHECK-NEXT: selp.b16 [[B1:%rs[0-9]+]], 256, 0, [[P1]];
// CHECK-NEXT: or.b16 [[V:%rs[0-9]+]], [[B0]], [[B1]];
// CHECK: st.global.b16 [{{%rd[0-9]+}}], [[V]];
func.func @i1_bytes(%a: memref<256xi1>, %b: memref<256xi1>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<256xi1>, index) -> vector<256xi1>
  "smalti.vector_store"(%x, %b, %c0) : (vector<256xi1>, memref<256xi1>, index) -> ()
  return
}

// -----

// i8 -> bf16 goes through f32 by the magic number 2^23 (smalti/lowering/int8_floats.py):
// XOR 0x80808080 (2155905152) biases the bytes, prmt puts each under 0x4B (1258291200 =
// 0x4B000000), sub.f32 of 2^23 + 128 leaves the value; i1 -> float selects the value's bits
// (bf16 1.0 is 0x3F80 = 16256); float -> i1 takes the integer's lowest bit.
// CHECK-LABEL: .visible .entry conversions(
// CHECK: ld.global.b32 [[Q:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: xor.b32 [[X:%r[0-9]+]], [[Q]], 2155905152;
// CHECK-NEXT: mov.b32 [[M:%r[0-9]+]], 1258291200;
// CHECK-NEXT: prmt.b32 [[E0:%f[0-9]+]], [[X]], [[M]], 29760;
// CHECK-NEXT: sub.rn.f32 [[F0:%f[0-9]+]], [[E0]], 0f4B000080;
// CHECK-NEXT: prmt.b32 [[E1:%f[0-9]+]], [[X]], [[M]], 29761;
// CHECK-NEXT: sub.rn.f32 [[F1:%f[0-9]+]], [[E1]], 0f4B000080;
// CHECK-COUNT-2: sub.rn.f32
// CHECK-NEXT: cvt.rn.bf16x2.f32 {{%r[0-9]+}}, [[F1]], [[F0]];
// CHECK: selp.b16 {{%rs[0-9]+}}, 16256, 0, {{%p[0-9]+}};
// CHECK: add.rn.bf16x2
// CHECK: cvt.rzi.s32.bf16 [[I:%r[0-9]+]], {{%rs[0-9]+}};
// CHECK-NEXT: and.b32 [[BIT:%r[0-9]+]], [[I]], 1;
// CHECK-NEXT: setp.ne.b32 {{%p[0-9]+}}, [[BIT]], 0;
// CHECK-NOT: .s1
// CHECK-NOT: .u1
func.func @conversions(%a: memref<4x128xi8>, %b: memref<4x128xbf16>, %c: memref<4x128xi1>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi8>, index, index) -> vector<4x128xi8>
  %f = arith.sitofp %x : vector<4x128xi8> to vector<4x128xbf16>
  %p = "smalti.vector_load"(%c, %c0, %c0) : (memref<4x128xi1>, index, index) -> vector<4x128xi1>
  %g = arith.uitofp %p : vector<4x128xi1> to vector<4x128xbf16>
  %h = arith.addf %f, %g : vector<4x128xbf16>
  %q = arith.fptosi %h : vector<4x128xbf16> to vector<4x128xi1>
  "smalti.vector_store"(%q, %c, %c0, %c0) : (vector<4x128xi1>, memref<4x128xi1>, index, index) -> ()
  "smalti.vector_store"(%h, %b, %c0, %c0) : (vector<4x128xbf16>, memref<4x128xbf16>, index, index) -> ()
  return
}

// -----

// There is no 8-bit setp (bytes compare widened to 16 bits) and no selp.pred or i1 setp:
// i1 compares and selects are predicate logic (x <u y is !x & y; select is (c & a) | (!c & b)).
// CHECK-LABEL: .visible .entry compare_narrow(
// CHECK: cvt.s16.s8 [[X:%rs[0-9]+]],
// CHECK-NEXT: cvt.s16.s8 [[Y:%rs[0-9]+]],
// CHECK-NEXT: setp.lt.s16 [[LESS:%p[0-9]+]], [[X]], [[Y]];
// CHECK: not.pred [[NOTP:%p[0-9]+]], [[P:%p[0-9]+]];
// CHECK-NEXT: and.pred [[ULT:%p[0-9]+]], [[NOTP]], [[Q:%p[0-9]+]];
// CHECK: and.pred [[CHOSEN:%p[0-9]+]], [[LESS]], [[ULT]];
// CHECK-NEXT: not.pred [[NOTC:%p[0-9]+]], [[LESS]];
// CHECK-NEXT: and.pred [[OTHER:%p[0-9]+]], [[NOTC]], [[Q]];
// CHECK-NEXT: or.pred {{%p[0-9]+}}, [[CHOSEN]], [[OTHER]];
func.func @compare_narrow(%a: memref<4x128xi8>, %b: memref<4x128xi8>, %c: memref<4x128xi1>, %d: memref<4x128xi1>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xi8>, index, index) -> vector<4x128xi8>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xi8>, index, index) -> vector<4x128xi8>
  %p = "smalti.vector_load"(%c, %c0, %c0) : (memref<4x128xi1>, index, index) -> vector<4x128xi1>
  %q = "smalti.vector_load"(%d, %c0, %c0) : (memref<4x128xi1>, index, index) -> vector<4x128xi1>
  %t = arith.cmpi slt, %x, %y : vector<4x128xi8>
  %u = arith.cmpi ult, %p, %q : vector<4x128xi1>
  %s = arith.select %t, %u, %q : vector<4x128xi1>, vector<4x128xi1>
  "smalti.vector_store"(%s, %c, %c0, %c0) : (vector<4x128xi1>, memref<4x128xi1>, index, index) -> ()
  return
}

// -----

// Shared memory moves narrow types the same way.
// CHECK-LABEL: .visible .entry smem_i16(
// CHECK: st.shared.v4.b32
// CHECK: ld.shared.v4.b32
// CHECK-NOT: .v8
func.func @smem_i16(%a: memref<8x128xi16>, %out: memref<8x128xi16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<8x128xi16, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xi16>, index, index) -> vector<8x128xi16>
  "smalti.vector_store"(%v, %s, %c0, %c0) : (vector<8x128xi16>, memref<8x128xi16, #gpu.address_space<workgroup>>, index, index) -> ()
  %w = "smalti.vector_load"(%s, %c0, %c0) : (memref<8x128xi16, #gpu.address_space<workgroup>>, index, index) -> vector<8x128xi16>
  "smalti.vector_store"(%w, %out, %c0, %c0) : (vector<8x128xi16>, memref<8x128xi16>, index, index) -> ()
  return
}
