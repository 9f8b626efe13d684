// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// smalti.invalidate_barrier takes a 1-D array of i64 mbarriers, as initialize_barrier does.
func.func @invalidate_not_barriers() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2x2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.invalidate_barrier' op expects barriers as memref<Nxi64, #gpu.address_space<workgroup>>, got memref<2x2xi64, #gpu.address_space<workgroup>>}}
  "smalti.invalidate_barrier"(%b) : (memref<2x2xi64, #gpu.address_space<workgroup>>) -> ()
  return
}

// -----

func.func @invalidate_global() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %b = memref.alloc() : memref<2xi64>
  // expected-error @+1 {{'smalti.invalidate_barrier'}}
  "smalti.invalidate_barrier"(%b) : (memref<2xi64>) -> ()
  return
}
