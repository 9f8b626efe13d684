// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// role_tiles (smalti/dialect/ops_launch_control.py): a body of one block whose arguments are
// the three block ids and the pass, a ring of 16-byte responses with one full and one empty
// barrier per slot, directly in a warpgroup_region, an index result, exactly one requesting
// walk per ring, and (in clusters) walks covering every warpgroup once.
// tmem_alloc_shared (smalti/dialect/ops_tmem_shared.py): at the top level, a warpgroup of
// the kernel, and tmem_alloc's own checks.

#smem = #gpu.address_space<workgroup>

func.func @three_arguments() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.role_tiles' op expects a body with four index arguments (the block ids x, y, z and the pass), got index, index, index}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index):
    }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @responses_of_eight_bytes() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x8xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.role_tiles' op expects the responses as memref<Dx16xi8> (one 16-byte try_cancel response per slot), got memref<2x8xi8, #gpu.address_space<workgroup>>}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) {request = true} : (memref<2x8xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @barriers_per_slot() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  %three = "smalti.slice_smem"(%c0) : (index) -> memref<3xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.role_tiles' op expects one 'empty' barrier per response slot (2), got 3}}
    %n = "smalti.role_tiles"(%ring, %bars, %three) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<3xi64, #smem>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @at_top_level() attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  // expected-error @+1 {{'smalti.role_tiles' op must stand directly in a warpgroup_region (the role that walks the tiles), not inside another op}}
  %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
  ^bb0(%x: index, %y: index, %z: index, %p: index):
  }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @i32_result() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.role_tiles' op expects an index result (the passes run), got i32}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> i32
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @nobody_requests() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.role_tiles' op its response ring has 0 requesting role_tiles ops; exactly one role requests (request = true)}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @two_request() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{its response ring has 2 requesting role_tiles ops}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{its response ring has 2 requesting role_tiles ops}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  }) {warpgroup = 1 : i64} : () -> ()
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @cluster_walks_miss_a_warpgroup() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.cluster = array<i64: 2, 1, 1>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.role_tiles' op in a cluster the walks of one ring end at the cluster's meeting, so every warpgroup of the kernel ([0, 1]) runs exactly one; its walks run warpgroups [0]}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

func.func @shared_alloc_in_a_region() attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.tmem_alloc_shared' op must stand at the top level of the kernel body (every thread of the block meets in it), not inside another op}}
    %t = "smalti.tmem_alloc_shared"() {columns = 32 : i64, warpgroup = 0 : i64} : () -> memref<128x32xf32, "tmem">
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

func.func @shared_alloc_owner_out_of_range() attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  // expected-error @+1 {{'smalti.tmem_alloc_shared' op 'warpgroup' 2 is not a warpgroup of the kernel, which has 2}}
  %t = "smalti.tmem_alloc_shared"() {columns = 32 : i64, warpgroup = 2 : i64} : () -> memref<128x32xf32, "tmem">
  return
}

// -----

func.func @shared_alloc_columns() attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  // expected-error @+1 {{'smalti.tmem_alloc_shared' op 'columns' must be a power of two from 32 to 512, got 96}}
  %t = "smalti.tmem_alloc_shared"() {columns = 96 : i64, warpgroup = 1 : i64} : () -> memref<128x96xf32, "tmem">
  return
}

// -----

#smem = #gpu.address_space<workgroup>

func.func @walked_twice() attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %ring = "smalti.slice_smem"(%c0) : (index) -> memref<2x16xi8, #smem>
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #smem>
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.role_tiles' op warpgroup 0 walks its response ring twice; after a failed response another request is undefined (PTX ISA)}}
    %n = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) {request = true} : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
    // expected-error @+1 {{'smalti.role_tiles' op warpgroup 0 walks its response ring twice}}
    %m = "smalti.role_tiles"(%ring, %bars, %bars) ({
    ^bb0(%x: index, %y: index, %z: index, %p: index):
    }) : (memref<2x16xi8, #smem>, memref<2xi64, #smem>, memref<2xi64, #smem>) -> index
  }) {warpgroup = 0 : i64} : () -> ()
  return
}
