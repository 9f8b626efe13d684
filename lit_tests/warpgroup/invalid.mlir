// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-warpgroup

// A vector op under a branch on the thread index: only some threads would hold the vector.
func.func @vector_under_thread_branch(%a: memref<128x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %tid = gpu.thread_id x
  %low = arith.cmpi ult, %tid, %c64 : index
  // expected-note @+1 {{'scf.if' branches on a value that differs between threads of a warpgroup}}
  scf.if %low {
    // expected-error @+1 {{'smalti.vector_load' op must be reached by whole warpgroups, but it is under control flow that depends on the thread index}}
    %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
    "smalti.vector_store"(%v, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
  }
  return
}

// -----

// A loop whose trip count depends on the thread: warpgroup_barrier would be met unevenly.
func.func @barrier_in_thread_loop() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tid = gpu.thread_id x
  %lane = arith.remui %tid, %c1 : index
  // expected-note @+1 {{'scf.for' branches on a value that differs between threads of a warpgroup}}
  scf.for %i = %c0 to %lane step %c1 {
    // expected-error @+1 {{'smalti.warpgroup_barrier' op must be reached by whole warpgroups}}
    "smalti.warpgroup_barrier"() : () -> ()
  }
  return
}

// -----

// Thread dependence flows through loop-carried values.
func.func @carried_thread_index() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %o = arith.constant 1024 : index
  %x = "smalti.slice_smem"(%c0) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %y = "smalti.slice_smem"(%o) : (index) -> memref<64x256xbf16, #gpu.address_space<workgroup>>
  %acc = arith.constant dense<0.0> : vector<64x256xf32>
  %tid = gpu.thread_id x
  %last = scf.for %i = %c0 to %c4 step %c1 iter_args(%j = %c0) -> (index) {
    scf.yield %tid : index
  }
  %odd = arith.cmpi eq, %last, %c1 : index
  // expected-note @+1 {{'scf.if' branches on a value that differs between threads of a warpgroup}}
  scf.if %odd {
    // expected-error @+1 {{'smalti.wgmma' op must be reached by whole warpgroups}}
    %d = "smalti.wgmma"(%acc, %x, %y) : (vector<64x256xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x256xbf16, #gpu.address_space<workgroup>>) -> vector<64x256xf32>
  }
  return
}

// -----

// The block meets at initialize_barrier (bar.sync 0): not inside a role.
func.func @block_barrier_in_role() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                               smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-note @+1 {{the region}}
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.initialize_barrier' op must be reached by the whole block, but it is in a warpgroup_region that only some warpgroups run}}
    "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<2xi64, #gpu.address_space<workgroup>>) -> ()
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

func.func @region_under_control_flow(%p: i1) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  scf.if %p {
    // expected-error @+1 {{'smalti.warpgroup_region' op must stand at the top level of a kernel body}}
    "smalti.warpgroup_region"() ({
    }) {warpgroup = 0 : i64} : () -> ()
  }
  return
}

// -----

func.func @no_such_warpgroup() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                           smalti.warpgroups = 2 : i64} {
  // expected-error @+1 {{'smalti.warpgroup_region' op names warpgroup 2, but the kernel has 2 (smalti.warpgroups)}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = array<i64: 1, 2>} : () -> ()
  return
}

// -----

func.func @two_roles_one_warpgroup() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                                 smalti.warpgroups = 3 : i64} {
  // expected-note @+1 {{the other region}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = array<i64: 0, 1>} : () -> ()
  // expected-error @+1 {{'smalti.warpgroup_region' op warpgroup 1 already runs another warpgroup_region; each warpgroup takes one role}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = array<i64: 1, 2>} : () -> ()
  return
}

// -----

// 3 x 232 registers x 128 threads = 89088 > 65536.
// expected-error @+1 {{register budgets [232, 232, 232] x 128 threads need 89088 registers, more than the 65536 of the register file}}
func.func @budgets_overflow() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                          smalti.warpgroups = 3 : i64} {
  // expected-note @+1 {{warpgroup(s) [0]: 232 registers per thread}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 0 : i64, max_registers = 232 : i64} : () -> ()
  // expected-note @+1 {{warpgroup(s) [1, 2]: 232 registers per thread}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = array<i64: 1, 2>, max_registers = 232 : i64} : () -> ()
  return
}

// -----

// Without a budget of its own, a warpgroup keeps the entry budget (168 for 3 warpgroups).
// expected-error @+1 {{register budgets [168, 256, 256] x 128 threads need 87040 registers}}
func.func @unbudgeted_role_counts_its_entry_budget() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.warpgroups = 3 : i64} {
  // expected-note @+1 {{warpgroup(s) [1, 2]: 256 registers per thread}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = array<i64: 1, 2>, max_registers = 256 : i64} : () -> ()
  return
}

// -----

func.func @code_after_budgeted_roles(%a: memref<128x128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-note @+1 {{the budget is set here}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 0 : i64, max_registers = 40 : i64} : () -> ()
  // expected-error @+1 {{'smalti.vector_load' op follows a warpgroup_region that set a register budget}}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  return
}

// -----

func.func @not_a_kernel() {
  // expected-error @+1 {{'smalti.warpgroup_region' op must be in a kernel (a func.func marked smalti.kernel)}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 0 : i64} : () -> ()
  return
}

// -----

// Every thread of the cluster meets at cluster_barrier: not inside a role.
func.func @cluster_barrier_in_role() attributes {smalti.kernel, smalti.grid = array<i64: 2>,
                                                 smalti.cluster = array<i64: 2>,
                                                 smalti.warpgroups = 2 : i64} {
  // expected-note @+1 {{the region}}
  "smalti.warpgroup_region"() ({
    // expected-error @+1 {{'smalti.cluster_barrier' op must be reached by the whole block, but it is in a warpgroup_region that only some warpgroups run}}
    "smalti.cluster_barrier"() : () -> ()
  }) {warpgroup = 0 : i64} : () -> ()
  return
}
