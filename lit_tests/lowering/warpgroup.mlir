// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// Roles: a branch on %tid.x / 128 per region, setmaxnreg first in each role (below the entry
// budget of 168 for 3 warpgroups: .dec; above: .inc), and .minnctapersm 1 on the entry so
// ptxas honours them. Layouts use the warpgroup-local thread index %tid.x % 128; a region
// run by one warpgroup meets on its own named barrier (1 + warpgroup) with a constant id.
// CHECK-LABEL: .visible .entry roles(
// CHECK: .maxntid 384, 1, 1
// CHECK-NEXT: .minnctapersm 1
// CHECK: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK: shr.u32 [[WG:%r[0-9]+]], [[TID]], 7;
// CHECK: setp.eq.u32 [[P0:%p[0-9]+]], [[WG]], 0;
// CHECK-NEXT: @![[P0]] bra $role_end_0;
// CHECK-NEXT: setmaxnreg.dec.sync.aligned.u32 40;
// CHECK: $role_end_0:
// CHECK: sub.u32 [[OFF:%r[0-9]+]], [[WG]], 1;
// CHECK-NEXT: setp.lt.u32 [[P1:%p[0-9]+]], [[OFF]], 2;
// CHECK-NEXT: @![[P1]] bra $role_end_1;
// CHECK-NEXT: setmaxnreg.inc.sync.aligned.u32 232;
// CHECK: and.b32 {{%r[0-9]+}}, [[TID]], 127;
// CHECK: ld.global.v4.f32
// CHECK: add.u32 [[ID:%r[0-9]+]], [[WG]], 1;
// CHECK-NEXT: bar.sync [[ID]], 128;
// CHECK: $role_end_1:
// CHECK-NEXT: ret;
func.func @roles(%a: memref<128x128xf32>, %b: memref<128x128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.warpgroups = 3 : i64} {
  %c0 = arith.constant 0 : index
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 0 : i64, max_registers = 40 : i64} : () -> ()
  "smalti.warpgroup_region"() ({
    %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
    "smalti.warpgroup_barrier"() : () -> ()
    "smalti.vector_store"(%v, %b, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  }) {warpgroup = array<i64: 1, 2>, max_registers = 232 : i64} : () -> ()
  return
}

// -----

// A region of one warpgroup uses a constant barrier id; a region without a budget sets
// none, and a kernel without budgets declares no .minnctapersm.
// CHECK-LABEL: .visible .entry one_role(
// CHECK-NOT: .minnctapersm
// CHECK: setp.eq.u32 [[P:%p[0-9]+]], {{%r[0-9]+}}, 1;
// CHECK-NEXT: @![[P]] bra $role_end_0;
// CHECK-NOT: setmaxnreg
// CHECK: bar.sync 2, 128;
// CHECK: $role_end_0:
func.func @one_role() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                  smalti.warpgroups = 2 : i64} {
  "smalti.warpgroup_region"() ({
    "smalti.warpgroup_barrier"() : () -> ()
  }) {warpgroup = 1 : i64} : () -> ()
  return
}

// -----

// Warpgroups named by a set that is not a range: a bit test of a mask.
// CHECK-LABEL: .visible .entry sparse_role(
// CHECK: mov.b32 [[MASK:%r[0-9]+]], 5;
// CHECK-NEXT: shr.u32 [[BIT:%r[0-9]+]], [[MASK]], {{%r[0-9]+}};
// CHECK-NEXT: and.b32 [[ONE:%r[0-9]+]], [[BIT]], 1;
// CHECK-NEXT: setp.ne.u32 [[P:%p[0-9]+]], [[ONE]], 0;
// CHECK-NEXT: @![[P]] bra $role_end_0;
func.func @sparse_role() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                     smalti.warpgroups = 3 : i64} {
  "smalti.warpgroup_region"() ({
    "smalti.warpgroup_barrier"() : () -> ()
  }) {warpgroup = array<i64: 0, 2>} : () -> ()
  return
}

// -----

// A reduction across warps in a kernel of two warpgroups: each warpgroup has its own scratch
// (offset by warpgroup x 512 bytes) and meets on its own named barrier, never bar.sync 0.
// CHECK-LABEL: .visible .entry col_sum_two_warpgroups(
// CHECK: .shared .align 16 .b8 __smalti_reduce_0[1024];
// CHECK: mov.u32 [[BASE:%r[0-9]+]], __smalti_reduce_0;
// CHECK: shr.u32 [[WG:%r[0-9]+]], {{%r[0-9]+}}, 7;
// CHECK: mad.lo.u32 {{%r[0-9]+}}, [[WG]], 512, [[BASE]];
// CHECK-NOT: bar.sync 0;
// CHECK: add.u32 [[ID:%r[0-9]+]], [[WG]], 1;
// CHECK-NEXT: bar.sync [[ID]], 128;
// CHECK-NOT: bar.sync 0;
// CHECK: bar.sync {{%r[0-9]+}}, 128;
func.func @col_sum_two_warpgroups(%a: memref<64x32xf32>, %acc: memref<32xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]} : (memref<64x32xf32>, index, index) -> vector<64x32xf32>
  %z = "smalti.vector_load"(%acc, %c0) : (memref<32xf32>, index) -> vector<32xf32>
  %r = vector.multi_reduction <add>, %x, %z [0] : vector<64x32xf32> to vector<32xf32>
  "smalti.vector_store"(%r, %acc, %c0) : (vector<32xf32>, memref<32xf32>, index) -> ()
  return
}
