// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-warpgroup

// A collective arrive meets its warpgroup (bar.sync) before one thread releases each peer:
// under a branch on the thread index, part of the warpgroup would wait there forever.
func.func @collective_arrive_under_thread_branch() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %b = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %tid = gpu.thread_id x
  %low = arith.cmpi ult, %tid, %c64 : index
  // expected-note @+1 {{'scf.if' branches on a value that differs between threads of a warpgroup}}
  scf.if %low {
    // expected-error @+1 {{'smalti.arrive' op must be reached by whole warpgroups, but it is under control flow that depends on the thread index}}
    "smalti.arrive"(%b, %c0) {collective = array<i64: 0>} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  }
  return
}

// -----

// A plain arrive is each thread's own: any subset of the warpgroup may arrive.
func.func @plain_arrive_under_thread_branch() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %b = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %tid = gpu.thread_id x
  %low = arith.cmpi ult, %tid, %c64 : index
  scf.if %low {
    "smalti.arrive"(%b, %c0) : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  }
  return
}
