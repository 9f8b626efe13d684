// RUN: smalti-translate %s --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// A collective arrive along both dims of a 2x2 cluster: the warpgroup meets, then thread k
// (k < 4) arrives on barrier 1 of the CTA at cluster coordinates (k % 2, k / 2): its rank is
// this CTA's plus (k % 2 - x) + 2 (k / 2 - y), mapped with mapa, released at cluster scope.
// The wait on those barriers acquires at cluster scope; the local barrier's wait does not.
// CHECK-LABEL: .visible .entry release_all(
// CHECK: .reqnctapercluster 2, 2, 1
// CHECK: mov.u32 [[SMEM:%r[0-9]+]], smalti_smem;
// CHECK: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK: barrier.cluster.wait.aligned;
// CHECK-NEXT: bar.sync 1, 128;
// CHECK-NEXT: mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// CHECK-NEXT: and.b32 [[KX:%r[0-9]+]], [[TID]], 1;
// CHECK-NEXT: mov.u32 [[X:%r[0-9]+]], %cluster_ctaid.x;
// CHECK-NEXT: sub.u32 [[DX:%r[0-9]+]], [[KX]], [[X]];
// CHECK-NEXT: add.u32 [[R1:%r[0-9]+]], [[RANK]], [[DX]];
// CHECK-NEXT: shr.u32 [[KY:%r[0-9]+]], [[TID]], 1;
// CHECK-NEXT: mov.u32 [[Y:%r[0-9]+]], %cluster_ctaid.y;
// CHECK-NEXT: sub.u32 [[DY:%r[0-9]+]], [[KY]], [[Y]];
// CHECK-NEXT: mad.lo.u32 [[PEER:%r[0-9]+]], [[DY]], 2, [[R1]];
// CHECK-NEXT: setp.lt.u32 [[SOME:%p[0-9]+]], [[TID]], 4;
// CHECK-NEXT: add.u32 [[LOCAL:%r[0-9]+]], [[EMPTY:%r[0-9]+]], 8;
// CHECK-NEXT: @[[SOME]] mapa.shared::cluster.u32 [[REMOTE:%r[0-9]+]], [[LOCAL]], [[PEER]];
// CHECK-NEXT: @[[SOME]] mbarrier.arrive.release.cluster.shared::cluster.b64 _, [[[REMOTE]]];
// CHECK-NEXT: $wait_0:
// CHECK-NEXT: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 [[DONE:%p[0-9]+]], [[[EMPTY]]+8], 0;
// CHECK-NEXT: @![[DONE]] bra $wait_0;
// CHECK-NEXT: mbarrier.arrive.shared::cta.b64 _, [[[SMEM]]];
// CHECK-NEXT: $wait_1:
// CHECK-NEXT: mbarrier.try_wait.parity.shared::cta.b64 {{%p[0-9]+}}, [[[SMEM]]], 0;
func.func @release_all(%out: memref<4xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 4, 2>, smalti.cluster = array<i64: 2, 2, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o16 = arith.constant 16 : index
  %full = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  %empty = "smalti.slice_smem"(%o16) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%full) {arrival_count = 128 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.initialize_barrier"(%empty) {arrival_count = 4 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.cluster_barrier"() : () -> ()
  "smalti.arrive"(%empty, %c1) {collective = array<i64: 1, 0>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  %p = arith.constant 0 : i32
  "smalti.wait"(%empty, %c1, %p) : (memref<2xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  "smalti.arrive"(%full, %c0) : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.wait"(%full, %c0, %p) : (memref<2xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  "smalti.cluster_barrier"() : () -> ()
  return
}

// Along y only, in the second of two warpgroups, on a barrier chosen at run time: thread k
// (k < 2, its index in the warpgroup) arrives on the CTA at (x, k), rank + 2 (k - y); the
// named barrier is the warpgroup's own (1 + 1). The peer rank is computed once and reused.
// CHECK-LABEL: .visible .entry release_column(
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .reqnctapercluster 2, 2, 1
// CHECK: mad.lo.u32 [[ADDR:%r[0-9]+]], {{%r[0-9]+}}, 8, {{%r[0-9]+}};
// CHECK-NEXT: bar.sync 2, 128;
// CHECK-NEXT: and.b32 [[LANE:%r[0-9]+]], {{%r[0-9]+}}, 127;
// CHECK-NEXT: mov.u32 [[RANK:%r[0-9]+]], %cluster_ctarank;
// CHECK-NEXT: mov.u32 [[Y:%r[0-9]+]], %cluster_ctaid.y;
// CHECK-NEXT: sub.u32 [[DY:%r[0-9]+]], [[LANE]], [[Y]];
// CHECK-NEXT: mad.lo.u32 [[PEER:%r[0-9]+]], [[DY]], 2, [[RANK]];
// CHECK-NEXT: setp.lt.u32 [[SOME:%p[0-9]+]], [[LANE]], 2;
// CHECK-NEXT: @[[SOME]] mapa.shared::cluster.u32 [[REMOTE:%r[0-9]+]], [[ADDR]], [[PEER]];
// CHECK-NEXT: @[[SOME]] mbarrier.arrive.release.cluster.shared::cluster.b64 _, [[[REMOTE]]];
// CHECK: bar.sync 2, 128;
// CHECK-NOT: %cluster_ctarank
// CHECK: @[[SOME]] mapa.shared::cluster.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, [[PEER]];
// CHECK-NEXT: @[[SOME]] mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{{%r[0-9]+}}];
func.func @release_column(%i: i32) attributes {smalti.kernel, smalti.warpgroups = 2 : i64,
    smalti.grid = array<i64: 2, 2>, smalti.cluster = array<i64: 2, 2, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 2 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.cluster_barrier"() : () -> ()
  %idx = arith.index_cast %i : i32 to index
  "smalti.warpgroup_region"() ({
    "smalti.arrive"(%bars, %idx) {collective = array<i64: 1>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
    "smalti.arrive"(%bars, %c1) {collective = array<i64: 1>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  }) {warpgroup = 1 : i64} : () -> ()
  "smalti.cluster_barrier"() : () -> ()
  return
}
