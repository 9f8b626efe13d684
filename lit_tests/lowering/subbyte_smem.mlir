// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --arch=sm_100a --to=sass | filecheck %s --check-prefix=SASS

// 4-bit shared memory (f4E2M1FN, i4: two per byte, the lower index in the low nibble).
// Transforms measure bytes: a 128-byte swizzled tile row holds 256 elements, so a 16x512
// ref is four 8x256 tiles of 1024 bytes, one TMA box each (tiles along dim 1 are not
// consecutive). The tensor map is over bytes (UINT8, innermost extent and box halved; the
// bytes sm_100a's 16U4_ALIGN8B would move too): the innermost coordinate halves, `shr.s32`
// at run time and folded for the box origins (256 elements: 128). expect_tx counts the
// packed bytes: 16 x 1024 / 2 / 2 blocks = 4096 per block.
// CHECK-LABEL: .visible .entry roundtrip(
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[BASE]]], 4096;
// CHECK: cvt.u32.u64 [[COL:%r[0-9]+]], {{%rd[0-9]+}};
// CHECK-NEXT: shr.s32 [[X:%r[0-9]+]], [[COL]], 1;
// CHECK-NEXT: mov.b32 [[Y0:%r[0-9]+]], 0;
// CHECK-NEXT: add.u32 [[S0:%r[0-9]+]], [[BASE]], 1024;
// CHECK-NEXT: mov.b32 [[Y1:%r[0-9]+]], 0;
// CHECK-NEXT: add.s32 [[X1:%r[0-9]+]], [[X]], 128;
// CHECK-NEXT: add.u32 [[S1:%r[0-9]+]], [[BASE]], 2048;
// CHECK-NEXT: mov.b32 [[Y2:%r[0-9]+]], 8;
// CHECK-NEXT: add.u32 [[S2:%r[0-9]+]], [[BASE]], 3072;
// CHECK: add.u32 [[S3:%r[0-9]+]], [[BASE]], 4096;
// CHECK: elect.sync _|[[ELECTED:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[ELECTED]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [[[S0]]], [{{%rd[0-9]+}}, {[[X]], [[Y0]]}], [[[BASE]]];
// CHECK-NEXT: @[[ELECTED]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [[[S1]]], [{{%rd[0-9]+}}, {[[X1]], [[Y1]]}], [[[BASE]]];
// CHECK-NEXT: @[[ELECTED]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [[[S2]]], [{{%rd[0-9]+}}, {[[X]], [[Y2]]}], [[[BASE]]];
// CHECK-NEXT: @[[ELECTED]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [[[S3]]],
// CHECK-NOT: cp.async.bulk.tensor.2d.shared
// CHECK: shr.s32 [[XS:%r[0-9]+]], {{%r[0-9]+}}, 1;
// CHECK: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [{{%rd[0-9]+}}, {[[XS]], {{%r[0-9]+}}}], [[[S0]]];
// SASS-LABEL: .text.roundtrip:
// SASS-COUNT-4: UTMALDG.2D
// SASS-COUNT-4: UTMASTG.2D
func.func @roundtrip(%x: memref<16x1024xf4E2M1FN>, %out: memref<16x1024xf4E2M1FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %ccols = arith.constant 512 : index
  %o_t = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %raw = "smalti.slice_smem"(%o_t) : (index) -> memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>
  %t = "smalti.with_transforms"(%raw) {transforms = [#smalti.tile<[8, 256]>, #smalti.swizzle<128>]} : (memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>) -> memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  %bx = gpu.block_id x
  %col = arith.muli %bx, %ccols : index
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 4096 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%x, %t, %bars, %c0, %c0, %col) : (memref<16x1024xf4E2M1FN>, memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %p = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p) : (memref<1xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  "smalti.async_store"(%t, %out, %c0, %col) : (memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>, memref<16x1024xf4E2M1FN>, index, index) -> ()
  "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  return
}

// -----

// NVFP4: tcgen05_mma .kind::mxf4nvf4 .block_scale.scale_vec::4X (PTX ISA 8.7, so the module
// says .version 8.7) on packed K-major operands: A 128x256 and B 128x256 (viewed 256x128
// through a transpose) in 8x256-element tiles, 128-byte swizzle. The sm_100 descriptors:
// start >> 4, LBO 16 bytes (1, unused K-major), SBO 1024 bytes (64: 8 rows of 128 bytes),
// version 1 at bit 46, swizzle 128 B (2 at bit 61). Each MMA reads K = 64 elements,
// 32 bytes: the next one's descriptors are 2 (32 >> 4) on, its UE4M3 scale factors 4
// columns on (one 32-bit column holds 4 factors, one per 16 elements). expect_tx:
// (128 + 128) x 256 / 2 bytes of operands plus 8 x 512 of scale factors.
// CHECK: .version 8.7
// CHECK-LABEL: .visible .entry nvfp4(
// CHECK: mbarrier.arrive.expect_tx.shared::cta.b64 _, [{{%r[0-9]+}}], 36864;
// CHECK: or.b64 [[B:%rd[0-9]+]], {{%rd[0-9]+}}, 4611756662049538048;
// CHECK: or.b64 [[A:%rd[0-9]+]], {{%rd[0-9]+}}, 4611756662049538048;
// CHECK: add.s64 [[A1:%rd[0-9]+]], [[A]], 2;
// CHECK-NEXT: add.s64 [[B1:%rd[0-9]+]], [[B]], 2;
// CHECK-NEXT: add.u32 [[SA1:%r[0-9]+]], [[SA:%r[0-9]+]], 4;
// CHECK-NEXT: add.u32 [[SB1:%r[0-9]+]], [[SB:%r[0-9]+]], 4;
// CHECK: tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [{{%r[0-9]+}}], [[A]], [[B]], [[I:%r[0-9]+]], [[[SA]]], [[[SB]]], {{%p[0-9]+}};
// CHECK-NEXT: tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [{{%r[0-9]+}}], [[A1]], [[B1]], [[I]], [[[SA1]]], [[[SB1]]], {{%p[0-9]+}};
// CHECK-COUNT-2: tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X
// CHECK-NOT: tcgen05.mma
// SASS-LABEL: .text.nvfp4:
// SASS-COUNT-4: UTCOMMA.4X gdesc
func.func @nvfp4(%a: memref<128x256xf4E2M1FN>, %b: memref<128x256xf4E2M1FN>, %sfa: memref<4x32x16xf8E4M3FN>, %sfb: memref<4x32x16xf8E4M3FN>, %out: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %false = arith.constant false
  %o_a = arith.constant 1024 : index
  %o_b = arith.constant 17408 : index
  %o_sfa = arith.constant 33792 : index
  %o_sfb = arith.constant 35840 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %sa_raw = "smalti.slice_smem"(%o_a) : (index) -> memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>
  %sa = "smalti.with_transforms"(%sa_raw) {transforms = [#smalti.tile<[8, 256]>, #smalti.swizzle<128>]} : (memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>) -> memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>
  %sb_raw = "smalti.slice_smem"(%o_b) : (index) -> memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>
  %sb_load = "smalti.with_transforms"(%sb_raw) {transforms = [#smalti.tile<[8, 256]>, #smalti.swizzle<128>]} : (memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>) -> memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>
  %sb_view = "smalti.slice_smem"(%o_b) : (index) -> memref<256x128xf4E2M1FN, #gpu.address_space<workgroup>>
  %sb = "smalti.with_transforms"(%sb_view) {transforms = [#smalti.transpose<[1, 0]>, #smalti.tile<[8, 256]>, #smalti.swizzle<128>]} : (memref<256x128xf4E2M1FN, #gpu.address_space<workgroup>>) -> memref<256x128xf4E2M1FN, #gpu.address_space<workgroup>>
  %ssfa = "smalti.slice_smem"(%o_sfa) : (index) -> memref<4x32x16xf8E4M3FN, #gpu.address_space<workgroup>>
  %ssfb = "smalti.slice_smem"(%o_sfb) : (index) -> memref<4x32x16xf8E4M3FN, #gpu.address_space<workgroup>>
  %t = "smalti.tmem_alloc"() {columns = 128 : i64} : () -> memref<128x128xf32, "tmem">
  %tsfa = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x128xf8E4M3FN, "tmem">
  %tsfb = "smalti.tmem_alloc"() {columns = 32 : i64} : () -> memref<128x128xf8E4M3FN, "tmem">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 36864 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %sa, %bars, %c0, %c0, %c0) : (memref<128x256xf4E2M1FN>, memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%b, %sb_load, %bars, %c0, %c0, %c0) : (memref<128x256xf4E2M1FN>, memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%sfa, %ssfa, %bars, %c0, %c0, %c0, %c0) : (memref<4x32x16xf8E4M3FN>, memref<4x32x16xf8E4M3FN, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index, index) -> ()
  "smalti.async_load"(%sfb, %ssfb, %bars, %c0, %c0, %c0, %c0) : (memref<4x32x16xf8E4M3FN>, memref<4x32x16xf8E4M3FN, #gpu.address_space<workgroup>>, memref<2xi64, #gpu.address_space<workgroup>>, index, index, index, index) -> ()
  "smalti.wait"(%bars, %c0, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.tcgen05_cp"(%ssfa, %tsfa) {shape = "32x128b.warpx4"} : (memref<4x32x16xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, "tmem">) -> ()
  "smalti.tcgen05_cp"(%ssfb, %tsfb) {shape = "32x128b.warpx4"} : (memref<4x32x16xf8E4M3FN, #gpu.address_space<workgroup>>, memref<128x128xf8E4M3FN, "tmem">) -> ()
  "smalti.tcgen05_mma"(%sa, %sb, %t, %false, %tsfa, %tsfb) : (memref<128x256xf4E2M1FN, #gpu.address_space<workgroup>>, memref<256x128xf4E2M1FN, #gpu.address_space<workgroup>>, memref<128x128xf32, "tmem">, i1, memref<128x128xf8E4M3FN, "tmem">, memref<128x128xf8E4M3FN, "tmem">) -> ()
  "smalti.tcgen05_commit"(%bars, %c1) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%bars, %c1, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index, index) -> ()
  %v0 = "smalti.tmem_load"(%t) {column = 0 : i64} : (memref<128x128xf32, "tmem">) -> vector<128x128xf32>
  %col0 = arith.constant 0 : index
  "smalti.vector_store"(%v0, %out, %c0, %col0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  "smalti.tmem_dealloc"(%t) : (memref<128x128xf32, "tmem">) -> ()
  "smalti.tmem_dealloc"(%tsfa) : (memref<128x128xf8E4M3FN, "tmem">) -> ()
  "smalti.tmem_dealloc"(%tsfb) : (memref<128x128xf8E4M3FN, "tmem">) -> ()
  return
}
