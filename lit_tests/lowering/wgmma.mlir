// RUN: smalti-translate %s --to=ptx | filecheck %s

// A (64x64, K-major) and B (64x128, N contiguous: MN-major) in 128-byte swizzled tiles of
// 64 rows (tall tiles: TMA fills each in one box). Descriptors: A: LBO 16 (unused), SBO 1024
// (8 rows of 128 B), mode 1 (128B); B: LBO 8192 (the next 64 columns: the next tile), SBO
// 1024 (next 8 K rows). K steps of 32 bytes move A's start by 32 B (2 in the >>4 field) and
// B's by 16 rows (2048 B: 128).
// CHECK-LABEL: .visible .entry wgmma_64x128x64(
// CHECK: .maxntid 128, 1, 1
// CHECK: or.b64 [[B:%rd[0-9]+]], {{%rd[0-9]+}}, 4611686293338849280;
// CHECK: or.b64 [[A:%rd[0-9]+]], {{%rd[0-9]+}}, 4611686293305360384;
// CHECK: wgmma.fence.sync.aligned;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{(%f[0-9]+, ){63}%f[0-9]+}}}, [[A]], [[B]], {{%p[0-9]+}}, 1, 1, 0, 1;
// CHECK: add.s64 [[B1:%rd[0-9]+]], [[B]], 128;
// CHECK: add.s64 [[A1:%rd[0-9]+]], [[A]], 2;
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{.*}}}, [[A1]], [[B1]], {{%p[0-9]+}}, 1, 1, 0, 1;
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NOT: wgmma.mma_async
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: wgmma.wait_group.sync.aligned 0;
// CHECK: st.global.v2.f32
func.func @wgmma_64x128x64(%out: memref<64x128xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %o_b = arith.constant 8192 : index
  %a = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %b = "smalti.slice_smem"(%o_b) : (index) -> memref<64x128xbf16, #gpu.address_space<workgroup>>
  %acc = arith.constant dense<0.0> : vector<64x128xf32>
  %d = "smalti.wgmma"(%acc, %a, %b) : (vector<64x128xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x128xbf16, #gpu.address_space<workgroup>>) -> vector<64x128xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}
