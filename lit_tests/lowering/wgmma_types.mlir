// RUN: smalti-translate %s --split-input-file --to=ptx | filecheck %s
// RUN: smalti-translate %s --split-input-file --to=sass | filecheck %s --check-prefix=SASS

// f8 and tf32 wgmma: both operands K-major, B^T (N x K) loaded by TMA and viewed as K x N
// through a leading transpose. 32 bytes of K per instruction (k32 for e4m3, k8 for tf32), and
// no imm-trans-a/b operands (the PTX ISA allows transposes for .f16/.bf16 only).

// e4m3: A 128x128, B^T 64x128, both 128-byte swizzled tiles one span (128 e4m3) wide.
// Descriptors: LBO 16 (unused), SBO 1024 (8 rows of 128 B), mode 1. The second 64-row block
// of A starts 8192 B (512 in the >>4 field) later; K steps move both starts by 32 B (2).
// CHECK-LABEL: .visible .entry wgmma_f8E4M3FN_f8E4M3FN(
// CHECK: or.b64 [[B:%rd[0-9]+]], {{%rd[0-9]+}}, 4611686293305360384;
// CHECK: or.b64 [[A:%rd[0-9]+]], {{%rd[0-9]+}}, 4611686293305360384;
// CHECK: wgmma.fence.sync.aligned;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{(%f[0-9]+, ){31}%f[0-9]+}}}, [[A]], [[B]], {{%p[0-9]+}}, 1, 1;
// CHECK-NEXT: add.s64 [[A1:%rd[0-9]+]], [[A]], 512;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{.*}}}, [[A1]], [[B]], {{%p[0-9]+}}, 1, 1;
// CHECK-NEXT: add.s64 [[B2:%rd[0-9]+]], [[B]], 2;
// CHECK-NEXT: add.s64 [[A2:%rd[0-9]+]], [[A]], 2;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{.*}}}, [[A2]], [[B2]], {{%p[0-9]+}}, 1, 1;
// CHECK-NEXT: add.s64 [[A3:%rd[0-9]+]], [[A]], 514;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{.*}}}, [[A3]], [[B2]], {{%p[0-9]+}}, 1, 1;
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{{.*}}}, {{%rd[0-9]+}}, {{%rd[0-9]+}}, {{%p[0-9]+}}, 1, 1;
// CHECK-NOT: wgmma.mma_async
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK-NEXT: wgmma.wait_group.sync.aligned 0;
// SASS-LABEL: .text.wgmma_f8E4M3FN_f8E4M3FN:
// SASS-COUNT-8: QGMMA.64x64x32.F32.E4M3.E4M3
// SASS-NOT: GMMA
func.func @wgmma_f8E4M3FN_f8E4M3FN(%a: memref<128x128xf8E4M3FN>, %bt: memref<64x128xf8E4M3FN>, %out: memref<128x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 17408 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %sbt = "smalti.slice_smem"(%o_b) : (index) -> memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>
  %sb_raw = "smalti.slice_smem"(%o_b) : (index) -> memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>
  %sb = "smalti.with_transforms"(%sb_raw) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 128]>, #smalti.swizzle<128>]} : (memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 24576 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<128x128xf8E4M3FN>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%bt, %sbt, %bars, %c0, %c0, %c0) : (memref<64x128xf8E4M3FN>, memref<64x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<1xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %acc = arith.constant dense<0.0> : vector<128x64xf32>
  %d = "smalti.wgmma"(%acc, %sa, %sb) : (vector<128x64xf32>, memref<128x128xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x64xf8E4M3FN, #gpu.address_space<workgroup>>) -> vector<128x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<128x64xf32>, memref<128x64xf32>, index, index) -> ()
  return
}

// -----

// tf32 (f32 operands): A 64x64, B^T 128x64, 128-byte swizzled tiles of 32 f32 (128 B) wide,
// so K crosses into the next column of tiles after 4 steps: A's next tile is 64 rows x 128 B
// (8192 B: 512) away, B^T's 128 rows x 128 B (16384 B: 1024).
// CHECK-LABEL: .visible .entry wgmma_f32_f32(
// CHECK: or.b64 [[B:%rd[0-9]+]], {{%rd[0-9]+}}, 4611686293305360384;
// CHECK: or.b64 [[A:%rd[0-9]+]], {{%rd[0-9]+}}, 4611686293305360384;
// CHECK: wgmma.fence.sync.aligned;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {{{(%f[0-9]+, ){63}%f[0-9]+}}}, [[A]], [[B]], {{%p[0-9]+}}, 1, 1;
// CHECK-NEXT: add.s64 [[B1:%rd[0-9]+]], [[B]], 2;
// CHECK-NEXT: add.s64 [[A1:%rd[0-9]+]], [[A]], 2;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {{{.*}}}, [[A1]], [[B1]], {{%p[0-9]+}}, 1, 1;
// CHECK-COUNT-2: wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32
// CHECK-NEXT: add.s64 [[B4:%rd[0-9]+]], [[B]], 1024;
// CHECK-NEXT: add.s64 [[A4:%rd[0-9]+]], [[A]], 512;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {{{.*}}}, [[A4]], [[B4]], {{%p[0-9]+}}, 1, 1;
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {{{.*}}}, {{%rd[0-9]+}}, {{%rd[0-9]+}}, {{%p[0-9]+}}, 1, 1;
// CHECK-NOT: wgmma.mma_async
// CHECK: wgmma.commit_group.sync.aligned;
// SASS-LABEL: .text.wgmma_f32_f32:
// SASS-COUNT-8: HGMMA.64x128x8.F32.TF32
// SASS-NOT: GMMA
func.func @wgmma_f32_f32(%a: memref<64x64xf32>, %bt: memref<128x64xf32>, %out: memref<64x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 17408 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %sa = "smalti.slice_smem"(%o_a) : (index) -> memref<64x64xf32, #gpu.address_space<workgroup>>
  %sbt = "smalti.slice_smem"(%o_b) : (index) -> memref<128x64xf32, #gpu.address_space<workgroup>>
  %sb_raw = "smalti.slice_smem"(%o_b) : (index) -> memref<64x128xf32, #gpu.address_space<workgroup>>
  %sb = "smalti.with_transforms"(%sb_raw) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[128, 32]>, #smalti.swizzle<128>]} : (memref<64x128xf32, #gpu.address_space<workgroup>>) -> memref<64x128xf32, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 49152 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<64x64xf32>, memref<64x64xf32, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%bt, %sbt, %bars, %c0, %c0, %c0) : (memref<128x64xf32>, memref<128x64xf32, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<1xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %acc = arith.constant dense<0.0> : vector<64x128xf32>
  %d = "smalti.wgmma"(%acc, %sa, %sb) : (vector<64x128xf32>, memref<64x64xf32, #gpu.address_space<workgroup>>, memref<64x128xf32, #gpu.address_space<workgroup>>) -> vector<64x128xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x128xf32>, memref<64x128xf32>, index, index) -> ()
  return
}

// -----

// A from registers, e4m3 x e5m2: f32 values loaded strided by rows in the 8-bit A fragment
// layout (4 adjacent columns per thread and register) round to e4m3 in pairs, four per
// .b32; each instruction takes four of them: rows g and g + 8, K 4q.. and 16 + 4q.. of its
// 32-column step. ptxas makes QGMMA with a register A (R, not a descriptor).
// CHECK-LABEL: .visible .entry register_a_e4m3(
// CHECK: ld.global.v4.f32 {[[F0:%f[0-9]+]], [[F1:%f[0-9]+]], {{%f[0-9]+}}, {{%f[0-9]+}}}, [[[X:%rd[0-9]+]]];
// CHECK-NEXT: ld.global.v4.f32 {{.*}}, [[[X]]+2048];
// CHECK-NEXT: ld.global.v4.f32 {{.*}}, [[[X]]+64];
// CHECK: cvt.rn.satfinite.e4m3x2.f32 [[P0:%rs[0-9]+]], [[F1]], [[F0]];
// CHECK-NEXT: cvt.rn.satfinite.e4m3x2.f32 [[P1:%rs[0-9]+]], {{%f[0-9]+}}, {{%f[0-9]+}};
// CHECK-NEXT: mov.b32 [[A0:%r[0-9]+]], {[[P0]], [[P1]]};
// CHECK: mov.b32 [[A1:%r[0-9]+]], {{.*}}
// CHECK: mov.b32 [[A2:%r[0-9]+]], {{.*}}
// CHECK: mov.b32 [[A3:%r[0-9]+]], {{.*}}
// CHECK: wgmma.fence.sync.aligned;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2 {{{(%f[0-9]+, ){31}%f[0-9]+}}}, {[[A0]], [[A1]], [[A2]], [[A3]]}, [[B:%rd[0-9]+]], {{%p[0-9]+}}, 1, 1;
// CHECK-NEXT: add.s64 [[B1:%rd[0-9]+]], [[B]], 2;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2 {{{.*}}}, {{{(%r[0-9]+, ){3}%r[0-9]+}}}, [[B1]], {{%p[0-9]+}}, 1, 1;
// CHECK-NEXT: wgmma.commit_group.sync.aligned;
// SASS-LABEL: .text.register_a_e4m3:
// SASS-COUNT-2: QGMMA.64x64x32.F32.E4M3.E5M2 R{{[0-9]+}}, R{{[0-9]+}}, gdesc
// SASS-NOT: GMMA
func.func @register_a_e4m3(%a: memref<64x64xf32>, %bt: memref<64x64xf8E5M2>, %out: memref<64x64xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %o_b = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %sbt = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xf8E5M2, #gpu.address_space<workgroup>>
  %sb_raw = "smalti.slice_smem"(%o_b) : (index) -> memref<64x64xf8E5M2, #gpu.address_space<workgroup>>
  %sb = "smalti.with_transforms"(%sb_raw) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[64, 64]>, #smalti.swizzle<64>]} : (memref<64x64xf8E5M2, #gpu.address_space<workgroup>>) -> memref<64x64xf8E5M2, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 4096 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%bt, %sbt, %bars, %c0, %c0, %c0) : (memref<64x64xf8E5M2>, memref<64x64xf8E5M2, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x64xf32>, index, index) -> vector<64x64xf32>
  %p = arith.truncf %x : vector<64x64xf32> to vector<64x64xf8E4M3FN>
  "smalti.wait"(%bars, %c0, %c0) : (memref<1xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %acc = arith.constant dense<0.0> : vector<64x64xf32>
  %d = "smalti.wgmma"(%acc, %p, %sb) : (vector<64x64xf32>, vector<64x64xf8E4M3FN>, memref<64x64xf8E5M2, #gpu.address_space<workgroup>>) -> vector<64x64xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<64x64xf32>, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

// A from registers, tf32: f32 values in the tf32 A fragment layout (one column per
// register: q and q + 4 of each 8), copied to .b32 registers before the fence (wgmma takes
// tf32 A only as .b32, and registers written after wgmma.fence may not feed it). Two 64-row
// blocks, two K steps: the first step's fragments are columns 0..7, the second's 8..15.
// CHECK-LABEL: .visible .entry register_a_tf32(
// CHECK: ld.global.f32 [[R0:%f[0-9]+]], [[[X:%rd[0-9]+]]];
// CHECK-NEXT: ld.global.f32 [[R8:%f[0-9]+]], [[[X]]+512];
// CHECK-NEXT: ld.global.f32 [[C4:%f[0-9]+]], [[[X]]+16];
// CHECK-NEXT: ld.global.f32 [[R8C4:%f[0-9]+]], [[[X]]+528];
// CHECK: mov.b32 [[A0:%r[0-9]+]], [[R0]];
// CHECK-NEXT: mov.b32 [[A1:%r[0-9]+]], [[R8]];
// CHECK-NEXT: mov.b32 [[A2:%r[0-9]+]], [[C4]];
// CHECK-NEXT: mov.b32 [[A3:%r[0-9]+]], [[R8C4]];
// CHECK-COUNT-12: mov.b32 {{%r[0-9]+}}, {{%f[0-9]+}};
// CHECK-NOT: mov.b32
// CHECK: wgmma.fence.sync.aligned;
// CHECK-NEXT: wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {{{(%f[0-9]+, ){15}%f[0-9]+}}}, {[[A0]], [[A1]], [[A2]], [[A3]]}, {{%rd[0-9]+}}, {{%p[0-9]+}}, 1, 1;
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {{{.*}}}, {{{(%r[0-9]+, ){3}%r[0-9]+}}}, {{%rd[0-9]+}}, {{%p[0-9]+}}, 1, 1;
// CHECK-NEXT: wgmma.commit_group.sync.aligned;
// SASS-LABEL: .text.register_a_tf32:
// SASS-COUNT-4: HGMMA.64x32x8.F32.TF32 R{{[0-9]+}}, R{{[0-9]+}}, gdesc
// SASS-NOT: GMMA
func.func @register_a_tf32(%a: memref<128x16xf32>, %bt: memref<32x16xf32>, %out: memref<128x32xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %o_b = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %sbt = "smalti.slice_smem"(%o_b) : (index) -> memref<32x16xf32, #gpu.address_space<workgroup>>
  %sb_raw = "smalti.slice_smem"(%o_b) : (index) -> memref<16x32xf32, #gpu.address_space<workgroup>>
  %sb = "smalti.with_transforms"(%sb_raw) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[32, 16]>, #smalti.swizzle<64>]} : (memref<16x32xf32, #gpu.address_space<workgroup>>) -> memref<16x32xf32, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 2048 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%bt, %sbt, %bars, %c0, %c0, %c0) : (memref<32x16xf32>, memref<32x16xf32, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x16xf32>, index, index) -> vector<128x16xf32>
  "smalti.wait"(%bars, %c0, %c0) : (memref<1xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %acc = arith.constant dense<0.0> : vector<128x32xf32>
  %d = "smalti.wgmma"(%acc, %x, %sb) : (vector<128x32xf32>, vector<128x16xf32>, memref<16x32xf32, #gpu.address_space<workgroup>>) -> vector<128x32xf32>
  "smalti.vector_store"(%d, %out, %c0, %c0) : (vector<128x32xf32>, memref<128x32xf32>, index, index) -> ()
  return
}
