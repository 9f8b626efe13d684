// RUN: smalti-translate %s --split-input-file --to=ptx | filecheck %s

// A scalar read at run time: every thread loads the same address (ld.global.s32) and
// sign-extends it into an index; a constant position is the address's offset.
// CHECK-LABEL: .visible .entry page_row(
// CHECK: cvta.to.global.u64 [[TABLE:%rd[0-9]+]], {{%rd[0-9]+}};
// CHECK: cvta.to.global.u64 [[X:%rd[0-9]+]], {{%rd[0-9]+}};
// CHECK: mov.u32 [[B:%r[0-9]+]], %ctaid.x;
// CHECK: cvt.u64.u32 [[B64:%rd[0-9]+]], [[B]];
// CHECK: mul.lo.s64 [[ROWB:%rd[0-9]+]], [[B64]], 8;
// CHECK: add.s64 [[OFF:%rd[0-9]+]], [[ROWB]], 4;
// CHECK: add.s64 [[AT:%rd[0-9]+]], [[TABLE]], [[OFF]];
// CHECK: ld.global.s32 [[E:%r[0-9]+]], [[[AT]]];
// CHECK: cvt.s64.s32 [[PAGE:%rd[0-9]+]], [[E]];
// CHECK: ld.global.s32 [[F:%r[0-9]+]], [[[TABLE]]+8];
// CHECK: cvt.s64.s32 [[SHIFT:%rd[0-9]+]], [[F]];
// CHECK: add.s64 [[ROW:%rd[0-9]+]], [[PAGE]], [[SHIFT]];
// CHECK: mul.lo.s64 [[XOFF:%rd[0-9]+]], [[ROW]], 512;
// CHECK: add.s64 {{%rd[0-9]+}}, [[X]], [[XOFF]];
// CHECK: ld.global.f32
func.func @page_row(%table: memref<4x2xi32>, %x: memref<8x128xf32>, %out: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = gpu.block_id x
  %e = "smalti.load_scalar"(%table, %b, %c1) : (memref<4x2xi32>, index, index) -> i32
  %page = arith.index_cast %e : i32 to index
  %f = "smalti.load_scalar"(%table, %c1, %c0) : (memref<4x2xi32>, index, index) -> i32
  %shift = arith.index_cast %f : i32 to index
  %row = arith.addi %page, %shift : index
  %v = "smalti.vector_load"(%x, %row, %c0) : (memref<8x128xf32>, index, index) -> vector<1x128xf32>
  "smalti.vector_store"(%v, %out, %b, %c0) : (vector<1x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}

// -----

// i64 entries load whole (ld.global.s64): the index needs no conversion.
// CHECK-LABEL: .visible .entry wide_entry(
// CHECK: ld.global.s64 [[E:%rd[0-9]+]], [{{%rd[0-9]+}}+16];
// CHECK-NOT: cvt
// CHECK: mul.lo.s64 {{%rd[0-9]+}}, [[E]], 512;
func.func @wide_entry(%table: memref<4xi64>, %x: memref<8x128xf32>, %out: memref<1x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %e = "smalti.load_scalar"(%table, %c2) : (memref<4xi64>, index) -> i64
  %row = arith.index_cast %e : i64 to index
  %v = "smalti.vector_load"(%x, %row, %c0) : (memref<8x128xf32>, index, index) -> vector<1x128xf32>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<1x128xf32>, memref<1x128xf32>, index, index) -> ()
  return
}

// -----

// A row mask broadcast along the columns: the elements of each register vector share one
// predicate, so each access is one predicated ld/st of the whole vector; the load's
// registers first hold `other` (-1.0), which the ld overwrites where the mask holds. The
// window starts at a row read at run time (its 512-byte multiple keeps the accesses wide).
// CHECK-LABEL: .visible .entry row_masked(
// CHECK: mov.b32 [[OTHER:%f[0-9]+]], 3212836864;
// CHECK: ld.global.s32 [[START:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK: setp.lt.s32 [[P0:%p[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK: setp.lt.s32 [[P1:%p[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK: cvt.u64.u32 [[THREAD:%rd[0-9]+]], {{%r[0-9]+}};
// CHECK-NEXT: add.s64 [[AT:%rd[0-9]+]], {{%rd[0-9]+}}, [[THREAD]];
// CHECK-NEXT: mov.b32 [[A0:%f[0-9]+]], [[OTHER]];
// CHECK-NEXT: mov.b32 [[A1:%f[0-9]+]], [[OTHER]];
// CHECK-NEXT: @[[P0]] ld.global.v2.f32 {[[A0]], [[A1]]}, [[[AT]]];
// CHECK: mov.b32 [[B0:%f[0-9]+]], [[OTHER]];
// CHECK-NEXT: mov.b32 [[B1:%f[0-9]+]], [[OTHER]];
// CHECK-NEXT: @[[P1]] ld.global.v2.f32 {[[B0]], [[B1]]}, [[[AT]]+4096];
// CHECK: add.s64 [[TO:%rd[0-9]+]], {{%rd[0-9]+}}, [[THREAD]];
// CHECK-NEXT: @[[P0]] st.global.v2.f32 [[[TO]]], {[[A0]], [[A1]]};
// CHECK-NEXT: @[[P1]] st.global.v2.f32 [[[TO]]+4096], {[[B0]], [[B1]]};
func.func @row_masked(%x: memref<100x128xf32>, %starts: memref<1xi32>, %out: memref<100x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %e = "smalti.load_scalar"(%starts, %c0) : (memref<1xi32>, index) -> i32
  %start = arith.index_cast %e : i32 to index
  %rows = "smalti.iota"() {dimension = 0 : i64} : () -> vector<64xi32>
  %first = vector.broadcast %e : i32 to vector<64xi32>
  %at = arith.addi %rows, %first : vector<64xi32>
  %end = arith.constant dense<100> : vector<64xi32>
  %inside = arith.cmpi slt, %at, %end : vector<64xi32>
  %mask = "smalti.broadcast_in_dim"(%inside) {broadcast_dimensions = array<i64: 0>} : (vector<64xi1>) -> vector<64x128xi1>
  %other = arith.constant dense<-1.0> : vector<64x128xf32>
  %v = "smalti.masked_load"(%x, %mask, %other, %start, %c0) : (memref<100x128xf32>, vector<64x128xi1>, vector<64x128xf32>, index, index) -> vector<64x128xf32>
  "smalti.masked_store"(%v, %out, %mask, %start, %c0) : (vector<64x128xf32>, memref<100x128xf32>, vector<64x128xi1>, index, index) -> ()
  return
}

// -----

// A column mask of bf16 pairs: the two elements of a register have their own predicates,
// so each is a predicated ld.global.b16 into a half that first holds `other`'s half; the
// halves are joined again.
// CHECK-LABEL: .visible .entry column_masked(
// CHECK: mov.b32 [[ZERO:%r[0-9]+]], 0;
// CHECK: setp.lt.s32 [[P0:%p[0-9]+]], {{%r[0-9]+}}, [[N:%r[0-9]+]];
// CHECK-NEXT: setp.lt.s32 [[P1:%p[0-9]+]], {{%r[0-9]+}}, [[N]];
// CHECK: add.s64 [[AT:%rd[0-9]+]], {{%rd[0-9]+}}, {{%rd[0-9]+}};
// CHECK-NEXT: mov.b32 {[[LO:%rs[0-9]+]], [[HI:%rs[0-9]+]]}, [[ZERO]];
// CHECK-NEXT: mov.b16 [[X0:%rs[0-9]+]], [[LO]];
// CHECK-NEXT: @[[P0]] ld.global.b16 [[X0]], [[[AT]]];
// CHECK-NEXT: mov.b16 [[X1:%rs[0-9]+]], [[HI]];
// CHECK-NEXT: @[[P1]] ld.global.b16 [[X1]], [[[AT]]+2];
// CHECK-NEXT: mov.b32 [[R0:%r[0-9]+]], {[[X0]], [[X1]]};
// CHECK: st.global.v4.b32 [{{%rd[0-9]+}}], {[[R0]], {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}};
func.func @column_masked(%x: memref<8x128xbf16>, %lengths: memref<1xi32>, %out: memref<8x128xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %n = "smalti.load_scalar"(%lengths, %c0) : (memref<1xi32>, index) -> i32
  %cols = "smalti.iota"() {dimension = 1 : i64} : () -> vector<8x128xi32>
  %limit = vector.broadcast %n : i32 to vector<8x128xi32>
  %mask = arith.cmpi slt, %cols, %limit : vector<8x128xi32>
  %zero = arith.constant dense<0.0> : vector<8x128xbf16>
  %v = "smalti.masked_load"(%x, %mask, %zero, %c0, %c0) : (memref<8x128xbf16>, vector<8x128xi1>, vector<8x128xbf16>, index, index) -> vector<8x128xbf16>
  "smalti.vector_store"(%v, %out, %c0, %c0) : (vector<8x128xbf16>, memref<8x128xbf16>, index, index) -> ()
  return
}
