// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --to=sass | filecheck %s --check-prefix=SASS

// layout_cast across warps goes through shared memory (smalti/lowering/relayout_smem.py):
// every thread stores its elements to the kernel's relayout scratch (one static .shared
// buffer, 128-byte aligned), the warpgroup meets at its named barrier (bar.sync 1, 128),
// every thread loads the target layout's elements. Addresses are [base + immediate]: a
// base per thread computed once from thread-index bits (and, where a register's bits and
// the thread's share address bits, one xor of it per distinct value), the rest immediate.

// The 64x64 f32 transpose (wgmma accumulator -> its transposed layout): row 8 and column 8
// of a thread's elements are in registers on both sides, so each access is 16 bytes (4
// elements) on both sides: 8 st.shared.v4 and 8 ld.shared.v4, no prmt. The swizzle: the
// store's 8 lanes of a phase (t & 7: the quad's column pair and row bit 0) pick the
// 16-byte chunk within 128 bytes (shl 4); rows 2 and 4 of the 8-row group ((t >> 3) & 3)
// sit at byte 1024 and are XORed onto chunk bits 4-5 (mul 1040 = 1024 + 16: the copies
// do not overlap, so the product is the XOR); warps at 4096 (shl 12). Odd columns are
// the base XOR 64 (the scratch is 128-byte aligned, so the XOR stays within it). The load
// side's 8 lanes of a phase reach 8 distinct chunks the same way.
// CHECK-LABEL: .visible .entry transpose_f32(
// CHECK: .shared .align 128 .b8 __smalti_relayout_0[16384];
// CHECK: mov.u32 [[S:%r[0-9]+]], __smalti_relayout_0;
// CHECK-NEXT: and.b32 [[L:%r[0-9]+]], %r0, 7;
// CHECK-NEXT: shl.b32 [[C:%r[0-9]+]], [[L]], 4;
// CHECK-NEXT: bfe.u32 [[G:%r[0-9]+]], %r0, 3, 2;
// CHECK-NEXT: mul.lo.u32 [[GX:%r[0-9]+]], [[G]], 1040;
// CHECK-NEXT: xor.b32 [[X0:%r[0-9]+]], [[C]], [[GX]];
// CHECK-NEXT: shr.u32 [[W:%r[0-9]+]], %r0, 5;
// CHECK-NEXT: shl.b32 [[WX:%r[0-9]+]], [[W]], 12;
// CHECK-NEXT: xor.b32 [[X:%r[0-9]+]], [[X0]], [[WX]];
// CHECK-NEXT: add.u32 [[B0:%r[0-9]+]], [[S]], [[X]];
// CHECK-NEXT: xor.b32 [[B1:%r[0-9]+]], [[B0]], 64;
// CHECK-NEXT: st.shared.v4.b32 [[[B0]]], {%f0, %f2, %f4, %f6};
// CHECK-NEXT: st.shared.v4.b32 [[[B1]]+128], {%f1, %f3, %f5, %f7};
// CHECK-NEXT: st.shared.v4.b32 [[[B0]]+256], {%f8, %f10, %f12, %f14};
// CHECK-NEXT: st.shared.v4.b32 [[[B1]]+384], {%f9, %f11, %f13, %f15};
// CHECK-NEXT: st.shared.v4.b32 [[[B0]]+512], {%f16, %f18, %f20, %f22};
// CHECK-NEXT: st.shared.v4.b32 [[[B1]]+640], {%f17, %f19, %f21, %f23};
// CHECK-NEXT: st.shared.v4.b32 [[[B0]]+768], {%f24, %f26, %f28, %f30};
// CHECK-NEXT: st.shared.v4.b32 [[[B1]]+896], {%f25, %f27, %f29, %f31};
// CHECK-NEXT: bar.sync 1, 128;
// CHECK-NEXT: and.b32 [[Q:%r[0-9]+]], %r0, 3;
// CHECK-NEXT: mul.lo.u32 [[QX:%r[0-9]+]], [[Q]], 1040;
// CHECK-NEXT: bfe.u32 [[G0:%r[0-9]+]], %r0, 2, 1;
// CHECK-NEXT: mul.lo.u32 [[G0X:%r[0-9]+]], [[G0]], 192;
// CHECK-NEXT: xor.b32 [[Y0:%r[0-9]+]], [[QX]], [[G0X]];
// CHECK-NEXT: bfe.u32 [[G1:%r[0-9]+]], %r0, 3, 2;
// CHECK-NEXT: shl.b32 [[G1X:%r[0-9]+]], [[G1]], 4;
// CHECK-NEXT: xor.b32 [[Y1:%r[0-9]+]], [[Y0]], [[G1X]];
// CHECK-NEXT: shr.u32 [[W2:%r[0-9]+]], %r0, 5;
// CHECK-NEXT: shl.b32 [[W2X:%r[0-9]+]], [[W2]], 8;
// CHECK-NEXT: xor.b32 [[Y:%r[0-9]+]], [[Y1]], [[W2X]];
// CHECK-NEXT: add.u32 [[D0:%r[0-9]+]], [[S]], [[Y]];
// CHECK-NEXT: xor.b32 [[D1:%r[0-9]+]], [[D0]], 64;
// CHECK-NEXT: ld.shared.v4.b32 {%f32, %f33, %f34, %f35}, [[[D0]]];
// CHECK-NEXT: ld.shared.v4.b32 {%f36, %f37, %f38, %f39}, [[[D1]]];
// CHECK-NEXT: ld.shared.v4.b32 {%f40, %f41, %f42, %f43}, [[[D0]]+4096];
// CHECK-NEXT: ld.shared.v4.b32 {%f44, %f45, %f46, %f47}, [[[D1]]+4096];
// CHECK-NEXT: ld.shared.v4.b32 {%f48, %f49, %f50, %f51}, [[[D0]]+8192];
// CHECK-NEXT: ld.shared.v4.b32 {%f52, %f53, %f54, %f55}, [[[D1]]+8192];
// CHECK-NEXT: ld.shared.v4.b32 {%f56, %f57, %f58, %f59}, [[[D0]]+12288];
// CHECK-NEXT: ld.shared.v4.b32 {%f60, %f61, %f62, %f63}, [[[D1]]+12288];
// CHECK-NOT: bar.sync
// CHECK-NOT: prmt
// CHECK: ret;
// SASS-LABEL: .text.transpose_f32:
// SASS-COUNT-8: STS.128
// SASS-NEXT: BAR.SYNC.DEFER_BLOCKING 0x1, 0x80
// SASS-COUNT-8: LDS.128
// SASS-NOT: STS
// SASS-NOT: LDS
// SASS: EXIT
func.func @transpose_f32(%a: memref<64x64xf32>, %out: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.tiled<tiling = [[8, 64], [8, 16], [8, 8], [2, 1]], warp = [-7], lane = [-3, -4], vector = -2>} : (vector<64x64xf32>) -> vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// strided<vec = 1> -> strided<vec = 4>, f32: elements 512 apart (flat bits 9 and 10) are
// in registers on both sides: 16-byte accesses again. The store's lanes 0-2 hold flat
// bits 0-2, the load's hold bits 2-4: bits 3 and 4 are XORed onto the chunk bits of bits
// 0 and 1 (mul 144 = 128 + 16 on t bits 3-4). Bits 0 and 1 are the target's register
// slots, so the load has one base per value of them (the base XOR 16, 32, 48).
// CHECK-LABEL: .visible .entry strided1_to_strided4(
// CHECK: mov.u32 [[S:%r[0-9]+]], __smalti_relayout_0;
// CHECK-NEXT: and.b32 [[L:%r[0-9]+]], %r0, 7;
// CHECK-NEXT: shl.b32 [[C:%r[0-9]+]], [[L]], 4;
// CHECK-NEXT: bfe.u32 [[H:%r[0-9]+]], %r0, 3, 2;
// CHECK-NEXT: mul.lo.u32 [[HX:%r[0-9]+]], [[H]], 144;
// CHECK: add.u32 [[B:%r[0-9]+]], [[S]], {{%r[0-9]+}};
// CHECK-NEXT: st.shared.v4.b32 [[[B]]], {%f0, %f4, %f8, %f12};
// CHECK-NEXT: st.shared.v4.b32 [[[B]]+2048], {%f1, %f5, %f9, %f13};
// CHECK-COUNT-6: st.shared.v4.b32 [[[B]]+{{[0-9]+}}],
// CHECK-NEXT: bar.sync 1, 128;
// CHECK: add.u32 [[D0:%r[0-9]+]], [[S]], {{%r[0-9]+}};
// CHECK-NEXT: xor.b32 [[D1:%r[0-9]+]], [[D0]], 16;
// CHECK-NEXT: xor.b32 [[D2:%r[0-9]+]], [[D0]], 32;
// CHECK-NEXT: xor.b32 [[D3:%r[0-9]+]], [[D0]], 48;
// CHECK-NEXT: ld.shared.v4.b32 {%f32, %f33, %f34, %f35}, [[[D0]]];
// CHECK-NEXT: ld.shared.v4.b32 {%f36, %f37, %f38, %f39}, [[[D1]]];
// CHECK-NEXT: ld.shared.v4.b32 {%f40, %f41, %f42, %f43}, [[[D2]]];
// CHECK-NEXT: ld.shared.v4.b32 {%f44, %f45, %f46, %f47}, [[[D3]]];
// CHECK-NEXT: ld.shared.v4.b32 {%f48, %f49, %f50, %f51}, [[[D0]]+8192];
// CHECK-COUNT-3: ld.shared.v4.b32
// CHECK-NOT: bar.sync
// CHECK: ret;
func.func @strided1_to_strided4(%a: memref<64x64xf32>, %out: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 1>]} : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 4>} : (vector<64x64xf32>) -> vector<64x64xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// wgmma -> strided<vec = 8>, bf16: only column 0 is in registers on both sides (a packed
// .b32 pair), but the target holds 8 adjacent columns: the store writes whole .b32
// registers (st.shared.b32) and the load reads whole 16-byte vectors of its own registers
// (ld.shared.v4.b32), no prmt either side.
// CHECK-LABEL: .visible .entry wgmma_to_strided8_bf16(
// CHECK: add.u32 [[B:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT: xor.b32 {{%r[0-9]+}}, [[B]], 16;
// CHECK-COUNT-6: xor.b32 {{%r[0-9]+}}, [[B]], {{[0-9]+}};
// CHECK-NEXT: st.shared.b32 [[[B]]], %r8;
// CHECK-NEXT: st.shared.b32 [[[B]]+1024], %r9;
// CHECK-COUNT-14: st.shared.b32
// CHECK-NEXT: bar.sync 1, 128;
// CHECK-COUNT-4: ld.shared.v4.b32
// CHECK-NOT: prmt
// CHECK-NOT: ld.shared
// CHECK: ret;
func.func @wgmma_to_strided8_bf16(%a: memref<64x64xbf16>, %out: memref<64x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x64xbf16>, index, index) -> vector<64x64xbf16>
  %y = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 8>} : (vector<64x64xbf16>) -> vector<64x64xbf16>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x64xbf16>, memref<64x64xbf16>, index, index) -> ()
  return
}

// -----

// In a loop, the first store of a trip waits for every thread's loads of the trip before
// (the scratch loads stay pending, and loop_carried counts them at the top of the body):
// bar.sync before the stores and between stores and loads, none after the loads.
// CHECK-LABEL: .visible .entry loop(
// CHECK: $loop_0:
// CHECK-NOT: st.shared
// CHECK: bar.sync 1, 128;
// CHECK-NOT: bar.sync
// CHECK-COUNT-8: st.shared.v4.b32
// CHECK-NEXT: bar.sync 1, 128;
// CHECK-NOT: bar.sync
// CHECK-COUNT-8: ld.shared.v4.b32
// CHECK-NOT: bar.sync
// CHECK: @%p{{[0-9]+}} bra.uni $loop_0;
func.func @loop(%a: memref<256x64xf32>, %out: memref<256x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %row = arith.muli %i, %c64 : index
    %x = "smalti.vector_load"(%a, %row, %c0) {out_layouts = [#smalti.strided<vec = 4>]} : (memref<256x64xf32>, index, index) -> vector<64x64xf32>
    %y = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 1>} : (vector<64x64xf32>) -> vector<64x64xf32>
    "smalti.vector_store"(%y, %out, %row, %c0) : (vector<64x64xf32>, memref<256x64xf32>, index, index) -> ()
  }
  return
}
