// RUN: smalti-opt %s --smalti-warpgroup | filecheck %s

// The pass records one budget per warpgroup; branches on the warpgroup index (the thread
// index divided by 128) are uniform within each warpgroup, so collectives may sit under them.
// CHECK-LABEL: func.func @roles
// CHECK-SAME: smalti.register_budgets = array<i64: 40, 232, 232>
// CHECK-LABEL: func.func @no_budgets
// CHECK-NOT: smalti.register_budgets
func.func @roles(%a: memref<128x128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.warpgroups = 3 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 0 : i64, max_registers = 40 : i64} : () -> ()
  "smalti.warpgroup_region"() ({
    %tid = gpu.thread_id x
    %wg = arith.divui %tid, %c128 : index
    %first = arith.cmpi eq, %wg, %c1 : index
    scf.if %first {
      %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
      "smalti.vector_store"(%v, %a, %c0, %c0) : (vector<128x128xf32>, memref<128x128xf32>, index, index) -> ()
    }
  }) {warpgroup = array<i64: 1, 2>, max_registers = 232 : i64} : () -> ()
  return
}

func.func @no_budgets() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                    smalti.warpgroups = 2 : i64} {
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 1 : i64} : () -> ()
  return
}
