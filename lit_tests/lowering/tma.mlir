// RUN: smalti-translate %s --to=ptx | filecheck %s

// One tensor map per (argument, box, swizzle), as 64-byte aligned params after the
// arguments; thread 0 issues one copy per box: a 128x64 tile of 8-row 128 B swizzled tiles
// is one 128x64 box (consecutive tiles), then stored back as the same box.
// CHECK-LABEL: .visible .entry tma(
// CHECK: .param .align 64 .b8 tma_param_tmap0[128],
// CHECK: .param .align 64 .b8 tma_param_tmap1[128]
// CHECK: mov.u64 [[M0:%rd[0-9]+]], tma_param_tmap0;
// CHECK: cvta.param.u64 [[T0:%rd[0-9]+]], [[M0]];
// CHECK: mov.u64 [[M1:%rd[0-9]+]], tma_param_tmap1;
// CHECK: cvta.param.u64 [[T1:%rd[0-9]+]], [[M1]];
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: @[[LEAD:%p[0-9]+]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[BASE]]], 16384;
// CHECK: @[[LEAD]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [[[T0]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [[[BASE]]];
// CHECK-NOT: cp.async.bulk.tensor.2d.shared
// CHECK: mbarrier.try_wait.parity.shared::cta.b64
// CHECK: fence.proxy.async.shared::cta;
// CHECK: bar.sync 1, 128;
// CHECK: @[[LEAD]] cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [[[T1]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}];
// CHECK: @[[LEAD]] cp.async.bulk.commit_group;
// CHECK: @[[LEAD]] cp.async.bulk.wait_group.read 0;
// CHECK: bar.sync 1, 128;
func.func @tma(%a: memref<256x64xbf16>, %out: memref<256x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %o_t = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %t = "smalti.slice_smem"(%o_t) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  %bx = gpu.block_id x
  %row = arith.muli %bx, %c128 : index
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 16384 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %t, %bars, %c0, %row, %c0) : (memref<256x64xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %p = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p) : (memref<1xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  "smalti.async_store"(%t, %out, %row, %c0) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<256x64xbf16>, index, index) -> ()
  "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  return
}
