// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// A collective arrive names distinct cluster dims of size > 1 of its kernel's cluster.
func.func @arrive_collective_repeats() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' [0, 0] repeats a cluster dim}}
  "smalti.arrive"(%b, %o) {collective = array<i64: 0, 0>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @arrive_collective_not_a_dim() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' dim 3 is not a cluster dim (0 = x, 1 = y, 2 = z)}}
  "smalti.arrive"(%b, %o) {collective = array<i64: 3>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @arrive_collective_negative_dim() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' dim -1 is not a cluster dim}}
  "smalti.arrive"(%b, %o) {collective = array<i64: -1>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @arrive_collective_size_one() attributes {smalti.kernel,
    smalti.grid = array<i64: 2, 2>, smalti.cluster = array<i64: 2, 1>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' dim 1 has size 1 in the kernel's 'smalti.cluster' [2, 1, 1]: nothing to share along it}}
  "smalti.arrive"(%b, %o) {collective = array<i64: 1>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @arrive_collective_without_cluster() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' dim 0 has size 1 in the kernel's 'smalti.cluster' [1, 1, 1]}}
  "smalti.arrive"(%b, %o) {collective = array<i64: 0>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @arrive_collective_outside_a_kernel() {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' needs an enclosing kernel (a func.func marked 'smalti.kernel') with a 'smalti.cluster'}}
  "smalti.arrive"(%b, %o) {collective = array<i64: 0>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

func.func @arrive_collective_not_an_array() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' must be an array<i64: ...>, got [0]}}
  "smalti.arrive"(%b, %o) {collective = [0]} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

// The operands are checked before the attribute.
func.func @arrive_collective_index_out_of_bounds() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op barrier index 2 is out of bounds for 2 barriers}}
  "smalti.arrive"(%b, %c2) {collective = array<i64: 0>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}

// -----

// A collective arrive in a kernel of an explicit 1x1x1 cluster has no peer to release.
func.func @arrive_collective_cluster_of_one() attributes {smalti.kernel,
    smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 1, 1, 1>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<2xi64, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.arrive' op 'collective' dim 0 has size 1}}
  "smalti.arrive"(%b, %o) {collective = array<i64: 0>} : (memref<2xi64, #gpu.address_space<workgroup>>, index) -> ()
  return
}
