// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// One tensor map per (argument, box, swizzle), as 64-byte aligned params after the
// arguments; thread 0 issues one copy per box, elected (elect.sync) in a branch only warp 0
// takes (its warp index broadcast by shfl.sync: a uniform branch, so ptxas issues each
// UTMALDG once instead of looping to elect a thread): a 128x64 tile of 8-row 128 B swizzled tiles
// is one 128x64 box (consecutive tiles), then stored back as the same box. Only TMA wrote
// the tile, so the store needs no proxy fence (see the next case).
// CHECK-LABEL: .visible .entry tma(
// CHECK: .param .align 64 .b8 tma_param_tmap0[128],
// CHECK: .param .align 64 .b8 tma_param_tmap1[128]
// CHECK: mov.u64 [[M0:%rd[0-9]+]], tma_param_tmap0;
// CHECK: cvta.param.u64 [[T0:%rd[0-9]+]], [[M0]];
// CHECK: mov.u64 [[M1:%rd[0-9]+]], tma_param_tmap1;
// CHECK: cvta.param.u64 [[T1:%rd[0-9]+]], [[M1]];
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: @[[LEAD:%p[0-9]+]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[BASE]]], 16384;
// CHECK: bfe.u32 [[WARP:%r[0-9]+]], [[TID:%r[0-9]+]], 5, 2;
// CHECK-NEXT: shfl.sync.idx.b32 [[UNIFORM:%r[0-9]+]], [[WARP]], 0, 31, 4294967295;
// CHECK-NEXT: setp.ne.u32 [[OTHER:%p[0-9]+]], [[UNIFORM]], 0;
// CHECK-NEXT: @[[OTHER]] bra [[ISSUED:\$issued_[0-9]+]];
// CHECK-NEXT: elect.sync _|[[ELECTED:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[ELECTED]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [[[T0]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [[[BASE]]];
// CHECK-NEXT: [[ISSUED]]:
// CHECK-NOT: cp.async.bulk.tensor.2d.shared
// CHECK: mbarrier.try_wait.parity.shared::cta.b64
// CHECK-NOT: fence.proxy.async
// CHECK-NOT: bar.sync
// CHECK: @[[OTHER]] bra
// CHECK-NEXT: elect.sync _|[[ELECTED2:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[ELECTED2]] cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [[[T1]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}];
// CHECK-NEXT: @[[ELECTED2]] cp.async.bulk.commit_group;
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

// A tile the threads wrote: the store first publishes the writes to the async proxy (fence,
// then the warpgroup meets); a second store of untouched data does not fence again.
// CHECK-LABEL: .visible .entry store_written(
// CHECK: st.shared.v4.b32
// CHECK: fence.proxy.async.shared::cta;
// CHECK-NEXT: bar.sync 1, 128;
// CHECK: @{{%p[0-9]+}} cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group
// CHECK: cp.async.bulk.commit_group;
// CHECK-NOT: fence.proxy.async
// CHECK: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group
func.func @store_written(%a: memref<128x64xbf16>, %out: memref<256x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %o_t = arith.constant 1024 : index
  %t = "smalti.slice_smem"(%o_t) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x64xbf16>, index, index) -> vector<128x64xbf16>
  "smalti.vector_store"(%v, %t, %c0, %c0) : (vector<128x64xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, index, index) -> ()
  "smalti.async_store"(%t, %out, %c0, %c0) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<256x64xbf16>, index, index) -> ()
  "smalti.async_store"(%t, %out, %c128, %c0) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<256x64xbf16>, index, index) -> ()
  "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  return
}

// A 2x2 cluster: the kernel requires it (.reqnctapercluster). %t is shared along cluster dim
// y: the CTA at y loads rows [64 y, 64 y + 64) of the 128-row tile (part y, 8192 bytes on)
// and multicasts them to ranks x and x + 2: ctaMask 0b0101 shifted by its rank less 2 y.
// %u is shared by all four CTAs (dims y and x): part x + 2 y of 32 rows, ctaMask 0b1111.
// Every CTA's barrier still receives both whole tiles, and the wait on it acquires at
// cluster scope: the peers' complete-tx operations are releases at .cluster scope.
// CHECK-LABEL: .visible .entry multicast(
// CHECK: .maxntid 128, 1, 1
// CHECK-NEXT: .reqnctapercluster 2, 2, 1
// CHECK-NEXT: {
// CHECK: mov.u32 [[SMEM:%r[0-9]+]], smalti_smem;
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: bar.sync 0;
// CHECK-NEXT: barrier.cluster.arrive.aligned;
// CHECK-NEXT: barrier.cluster.wait.aligned;
// CHECK: @[[LEAD:%p[0-9]+]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[SMEM]]], 32768;
// CHECK: mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// CHECK-NEXT: mov.u32 [[Y:%r[0-9]+]], %cluster_ctaid.y;
// CHECK-NEXT: mul.lo.u32 [[YSTEP:%r[0-9]+]], [[Y]], 2;
// CHECK-NEXT: sub.u32 [[FIRST:%r[0-9]+]], [[RANK]], [[YSTEP]];
// CHECK-NEXT: shl.b32 [[MASK32:%r[0-9]+]], 5, [[FIRST]];
// CHECK-NEXT: cvt.u16.u32 [[MASK:%rs[0-9]+]], [[MASK32]];
// CHECK-NEXT: cvt.u32.u64 [[ROW:%r[0-9]+]], {{%rd[0-9]+}};
// CHECK-NEXT: mul.lo.u32 [[PARTROW:%r[0-9]+]], [[Y]], 64;
// CHECK-NEXT: add.s32 [[R:%r[0-9]+]], [[PARTROW]], [[ROW]];
// CHECK-NEXT: add.u32 [[T:%r[0-9]+]], [[SMEM]], 1024;
// CHECK-NEXT: mad.lo.u32 [[DST:%r[0-9]+]], [[Y]], 8192, [[T]];
// CHECK-NEXT: mov.b32 [[C:%r[0-9]+]], 0;
// CHECK:      @[[OTHER:%p[0-9]+]] bra [[ISSUED:\$issued_[0-9]+]];
// CHECK-NEXT: elect.sync _|[[ELECTED:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[ELECTED]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [[[DST]]], [{{%rd[0-9]+}}, {[[C]], [[R]]}], [[[SMEM]]], [[MASK]];
// CHECK-NEXT: [[ISSUED]]:
// CHECK-NEXT: mov.u32 [[X:%r[0-9]+]], %cluster_ctaid.x;
// CHECK-NEXT: sub.u32 [[F1:%r[0-9]+]], [[RANK]], [[X]];
// CHECK-NEXT: mad.lo.u32 [[PART:%r[0-9]+]], [[Y]], 2, [[X]];
// CHECK-NEXT: mul.lo.u32 [[YSTEP2:%r[0-9]+]], [[Y]], 2;
// CHECK-NEXT: sub.u32 [[F2:%r[0-9]+]], [[F1]], [[YSTEP2]];
// CHECK-NEXT: shl.b32 [[ALL32:%r[0-9]+]], 15, [[F2]];
// CHECK-NEXT: cvt.u16.u32 [[ALL:%rs[0-9]+]], [[ALL32]];
// CHECK-NEXT: mul.lo.u32 [[UROW:%r[0-9]+]], [[PART]], 32;
// CHECK-NEXT: add.u32 [[U:%r[0-9]+]], [[SMEM]], 17408;
// CHECK-NEXT: mad.lo.u32 [[UDST:%r[0-9]+]], [[PART]], 4096, [[U]];
// CHECK-NEXT: mov.b32 [[C2:%r[0-9]+]], 0;
// CHECK-NEXT: @[[OTHER]] bra
// CHECK-NEXT: elect.sync _|[[ELECTED2:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[ELECTED2]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [[[UDST]]], [{{%rd[0-9]+}}, {[[C2]], [[UROW]]}], [[[SMEM]]], [[ALL]];
// CHECK-NOT: cp.async.bulk.tensor.2d.shared
// CHECK: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64
func.func @multicast(%a: memref<256x64xbf16>, %out: memref<1024x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2, 4>,
                smalti.cluster = array<i64: 2, 2, 1>} {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %o_t = arith.constant 1024 : index
  %o_u = arith.constant 17408 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %t = "smalti.slice_smem"(%o_t) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %u = "smalti.slice_smem"(%o_u) : (index) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.cluster_barrier"() : () -> ()
  %bx = gpu.block_id x
  %row = arith.muli %bx, %c128 : index
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 32768 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%a, %t, %bars, %c0, %row, %c0) {collective = array<i64: 1>} : (memref<256x64xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  "smalti.async_load"(%a, %u, %bars, %c0, %c0, %c0) {collective = array<i64: 1, 0>} : (memref<256x64xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %p = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p) : (memref<1xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  "smalti.async_store"(%t, %out, %row, %c0) : (memref<128x64xbf16, #gpu.address_space<workgroup>>, memref<1024x64xbf16>, index, index) -> ()
  "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  return
}
