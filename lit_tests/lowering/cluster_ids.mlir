// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// Ids in a 2x1x1 cluster over a 4x4 grid: gpu.cluster_id reads %clusterid, gpu.cluster_block_id
// %cluster_ctaid, each widened to 64 bits; along y the cluster has one block, so
// cluster_block_id y is 0 and cluster_id y is the block's own ctaid.y.
// gpu.cluster_dim (clusters per grid: 2 along x, 4 along y) and gpu.cluster_dim_blocks
// (blocks per cluster: 2, 1) are constants of the launch, folded into the arithmetic.
// CHECK-LABEL: .visible .entry cluster_ids(
// CHECK: .reqnctapercluster 2, 1, 1
// CHECK: mov.u32 [[CX:%r[0-9]+]], %clusterid.x;
// CHECK-NEXT: cvt.u64.u32 [[CX64:%rd[0-9]+]], [[CX]];
// CHECK-NEXT: mov.u32 [[CY:%r[0-9]+]], %clusterid.y;
// CHECK-NEXT: cvt.u64.u32 [[CY64:%rd[0-9]+]], [[CY]];
// CHECK-NEXT: mov.u32 [[BX:%r[0-9]+]], %cluster_ctaid.x;
// CHECK-NEXT: cvt.u64.u32 [[BX64:%rd[0-9]+]], [[BX]];
// CHECK-NEXT: mul.lo.s64 [[R0:%rd[0-9]+]], [[BX64]], 4;
// CHECK-NEXT: add.s64 [[R1:%rd[0-9]+]], [[R0]], [[CY64]];
// CHECK-NEXT: mul.lo.s64 [[R2:%rd[0-9]+]], [[R1]], 2;
// CHECK-NEXT: add.s64 [[ROW:%rd[0-9]+]], [[R2]], [[CX64]];
// CHECK: mul.lo.s64 {{%rd[0-9]+}}, [[ROW]], 512;
// CHECK: st.global.f32
func.func @cluster_ids(%tags: memref<16x128xf32>, %out: memref<16x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4, 4>,
                smalti.cluster = array<i64: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %cx = gpu.cluster_id x
  %cy = gpu.cluster_id y
  %bx = gpu.cluster_block_id x
  %by = gpu.cluster_block_id y
  %ncx = gpu.cluster_dim x
  %ncy = gpu.cluster_dim y
  %nby = gpu.cluster_dim_blocks y
  %r0 = arith.muli %bx, %nby : index
  %r1 = arith.addi %r0, %by : index
  %r2 = arith.muli %r1, %ncy : index
  %r3 = arith.addi %r2, %cy : index
  %r4 = arith.muli %r3, %ncx : index
  %row = arith.addi %r4, %cx : index
  %x = gpu.block_id x
  %y = gpu.block_id y
  %y4 = arith.muli %y, %c4 : index
  %block = arith.addi %y4, %x : index
  %v = "smalti.vector_load"(%tags, %block, %c0) : (memref<16x128xf32>, index, index) -> vector<1x128xf32>
  "smalti.vector_store"(%v, %out, %row, %c0) : (vector<1x128xf32>, memref<16x128xf32>, index, index) -> ()
  return
}

// -----

// Without a smalti.cluster every block is its own cluster: cluster_block_id is 0 and
// cluster_dim_blocks 1 (nothing is read), cluster_dim is the grid (4), and cluster_id still
// reads %clusterid (equal to %ctaid there). Block b copies row 3 - b to row b.
// CHECK-LABEL: .visible .entry no_cluster(
// CHECK-NOT: .reqnctapercluster
// CHECK-NOT: %cluster_ctaid
// CHECK: mov.u32 [[C:%r[0-9]+]], %clusterid.x;
// CHECK-NEXT: cvt.u64.u32 [[C64:%rd[0-9]+]], [[C]];
// CHECK-NEXT: sub.s64 [[REV:%rd[0-9]+]], 3, [[C64]];
// CHECK-NEXT: mul.lo.s64 {{%rd[0-9]+}}, [[REV]], 512;
// CHECK-NOT: %cluster_ctaid
// CHECK: mul.lo.s64 {{%rd[0-9]+}}, [[C64]], 512;
// CHECK: st.global.f32
func.func @no_cluster(%tags: memref<4x128xf32>, %out: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c = gpu.cluster_id x
  %b = gpu.cluster_block_id x
  %n = gpu.cluster_dim x
  %nb = gpu.cluster_dim_blocks x
  %cb = arith.muli %c, %nb : index
  %row = arith.addi %cb, %b : index
  %last = arith.subi %n, %c1 : index
  %rev = arith.subi %last, %row : index
  %v = "smalti.vector_load"(%tags, %rev, %c0) : (memref<4x128xf32>, index, index) -> vector<1x128xf32>
  "smalti.vector_store"(%v, %out, %row, %c0) : (vector<1x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}
