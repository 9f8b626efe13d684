// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// Collective ops (smalti/dialect/ops_collective.py) and the attributes of a collective
// kernel (smalti.devices, smalti.mesh_axis: smalti/dialect/launch.py).

// ---- the kernel's attributes: each malformed one is reported once, at the kernel (not
// again at every collective op in it).

// expected-error @+1 {{'func.func' op 'smalti.devices' must be an integer from 1 to 64, got 0 : i64}}
func.func @devices_zero() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                      smalti.devices = 0 : i64} {
  %d = "smalti.device_index"() : () -> index
  %n = "smalti.device_count"() : () -> index
  return
}

// -----

// expected-error @+1 {{'smalti.devices' must be an integer from 1 to 64, got 65 : i64}}
func.func @devices_too_many() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                          smalti.devices = 65 : i64} {
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  %p = "smalti.remote_ref"(%b, %c9) : (memref<128xf32, "symmetric">, index) -> memref<128xf32, "symmetric">
  return
}

// -----

// expected-error @+1 {{'smalti.devices' must be an integer from 1 to 64, got "four"}}
func.func @devices_not_an_integer() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                                smalti.devices = "four"} {
  %n = "smalti.device_count"() : () -> index
  return
}

// -----

// expected-error @+1 {{'smalti.mesh_axis' must be a non-empty string, got 1 : i64}}
func.func @mesh_axis_not_a_string() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                                smalti.devices = 2 : i64, smalti.mesh_axis = 1 : i64} {
  %d = "smalti.device_index"() {axis = "x"} : () -> index
  return
}

// -----

// expected-error @+1 {{'smalti.mesh_axis' must be a non-empty string, got ""}}
func.func @mesh_axis_empty() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                         smalti.devices = 2 : i64, smalti.mesh_axis = ""} {
  %d = "smalti.device_index"() : () -> index
  return
}

// -----

// ---- slice_symmetric

func.func @slice_symmetric_not_collective() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op needs an enclosing kernel with 'smalti.devices' (a collective kernel: the devices it runs on)}}
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @slice_symmetric_outside_a_kernel() {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op needs an enclosing kernel with 'smalti.devices'}}
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @slice_symmetric_offset_type() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                                     smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{'smalti.slice_symmetric' op the offset must have type index, got i32}}
  %b = "smalti.slice_symmetric"(%c0) : (i32) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @slice_symmetric_offset_not_constant() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %d = "smalti.device_index"() : () -> index
  // expected-error @+1 {{'smalti.slice_symmetric' op expects a constant offset (an arith.constant of type index)}}
  %b = "smalti.slice_symmetric"(%d) : (index) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @slice_symmetric_offset_unaligned() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c64 = arith.constant 64 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op offset 64 must be a non-negative multiple of 128 bytes}}
  %b = "smalti.slice_symmetric"(%c64) : (index) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @slice_symmetric_offset_negative() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c = arith.constant -128 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op offset -128 must be a non-negative multiple of 128 bytes}}
  %b = "smalti.slice_symmetric"(%c) : (index) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @slice_symmetric_not_symmetric() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op expects the result to be a symmetric memref (memref<..., "symmetric">, from smalti.slice_symmetric), got memref<128xf32>}}
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32>
  return
}

// -----

func.func @slice_symmetric_shared() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op expects the result to be a symmetric memref}}
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @slice_symmetric_dynamic() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op expects the result of static shape, got memref<?xf32, "symmetric">}}
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<?xf32, "symmetric">
  return
}

// -----

func.func @slice_symmetric_strided() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.slice_symmetric' op expects a contiguous row-major result, got memref<4x64xf32, strided<[128, 1]>, "symmetric">}}
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<4x64xf32, strided<[128, 1]>, "symmetric">
  return
}

// -----

// ---- device_index, device_count

func.func @device_index_not_collective() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  // expected-error @+1 {{'smalti.device_index' op needs an enclosing kernel with 'smalti.devices'}}
  %d = "smalti.device_index"() : () -> index
  return
}

// -----

func.func @device_index_axis() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                           smalti.devices = 2 : i64, smalti.mesh_axis = "tp"} {
  // expected-error @+1 {{'smalti.device_index' op axis "x" is not the kernel's mesh axis "tp"}}
  %d = "smalti.device_index"() {axis = "x"} : () -> index
  return
}

// -----

// Without smalti.mesh_axis the kernel's axis is "x".
func.func @device_index_default_axis() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                                   smalti.devices = 2 : i64} {
  // expected-error @+1 {{'smalti.device_index' op axis "y" is not the kernel's mesh axis "x"}}
  %d = "smalti.device_index"() {axis = "y"} : () -> index
  return
}

// -----

func.func @device_index_type() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                           smalti.devices = 2 : i64} {
  // expected-error @+1 {{'smalti.device_index' op the result must have type index, got i32}}
  %d = "smalti.device_index"() : () -> i32
  return
}

// -----

func.func @device_count_not_collective() {
  // expected-error @+1 {{'smalti.device_count' op needs an enclosing kernel with 'smalti.devices'}}
  %n = "smalti.device_count"() : () -> index
  return
}

// -----

func.func @device_count_axis() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                           smalti.devices = 2 : i64, smalti.mesh_axis = "tp"} {
  // expected-error @+1 {{'smalti.device_count' op axis "dp" is not the kernel's mesh axis "tp"}}
  %n = "smalti.device_count"() {axis = "dp"} : () -> index
  return
}

// -----

func.func @device_count_type() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
                                           smalti.devices = 2 : i64} {
  // expected-error @+1 {{'smalti.device_count' op the result must have type index, got i64}}
  %n = "smalti.device_count"() : () -> i64
  return
}

// -----

// ---- remote_ref

func.func @remote_ref_not_collective(%a: memref<128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.remote_ref' op needs an enclosing kernel with 'smalti.devices'}}
  %p = "smalti.remote_ref"(%a, %c0) : (memref<128xf32>, index) -> memref<128xf32>
  return
}

// -----

func.func @remote_ref_not_symmetric(%a: memref<128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.remote_ref' op expects the ref to be a symmetric memref (memref<..., "symmetric">, from smalti.slice_symmetric), got memref<128xf32>}}
  %p = "smalti.remote_ref"(%a, %c0) : (memref<128xf32>, index) -> memref<128xf32>
  return
}

// -----

func.func @remote_ref_device_out_of_range() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.remote_ref' op device 4 is out of range for the kernel's 4 devices}}
  %p = "smalti.remote_ref"(%b, %c4) : (memref<128xf32, "symmetric">, index) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @remote_ref_device_negative() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64} {
  %c0 = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.remote_ref' op device -1 is out of range for the kernel's 4 devices}}
  %p = "smalti.remote_ref"(%b, %m1) : (memref<128xf32, "symmetric">, index) -> memref<128xf32, "symmetric">
  return
}

// -----

// A device may be an i32: its constant is range-checked too.
func.func @remote_ref_i32_device_out_of_range() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c7 = arith.constant 7 : i32
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.remote_ref' op device 7 is out of range for the kernel's 2 devices}}
  %p = "smalti.remote_ref"(%b, %c7) : (memref<128xf32, "symmetric">, i32) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @remote_ref_device_type() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : i64
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.remote_ref' op the device must be an index or i32, got i64}}
  %p = "smalti.remote_ref"(%b, %c1) : (memref<128xf32, "symmetric">, i64) -> memref<128xf32, "symmetric">
  return
}

// -----

func.func @remote_ref_result_type() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64} {
  %c0 = arith.constant 0 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.remote_ref' op result type memref<64xf32, "symmetric"> differs from operand type memref<128xf32, "symmetric">}}
  %p = "smalti.remote_ref"(%b, %c0) : (memref<128xf32, "symmetric">, index) -> memref<64xf32, "symmetric">
  return
}

// -----

// ---- semaphore_signal

func.func @signal_not_collective(%s: memref<4xi32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.semaphore_signal' op needs an enclosing kernel with 'smalti.devices'}}
  "smalti.semaphore_signal"(%s, %c0, %c0) : (memref<4xi32>, index, index) -> ()
  return
}

// -----

func.func @signal_not_symmetric(%s: memref<4xi32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.semaphore_signal' op expects the semaphores to be a symmetric memref (memref<..., "symmetric">, from smalti.slice_symmetric), got memref<4xi32>}}
  "smalti.semaphore_signal"(%s, %c0, %c0) : (memref<4xi32>, index, index) -> ()
  return
}

// -----

func.func @signal_semaphores_type() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xf32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op expects semaphores as memref<Nxi32, "symmetric">, got memref<4xf32, "symmetric">}}
  "smalti.semaphore_signal"(%s, %c0, %c0) : (memref<4xf32, "symmetric">, index, index) -> ()
  return
}

// -----

func.func @signal_semaphores_rank() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<2x4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op expects semaphores as memref<Nxi32, "symmetric">, got memref<2x4xi32, "symmetric">}}
  "smalti.semaphore_signal"(%s, %c0, %c0) : (memref<2x4xi32, "symmetric">, index, index) -> ()
  return
}

// -----

func.func @signal_index_out_of_bounds() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op semaphore index 4 is out of bounds for 4 semaphores}}
  "smalti.semaphore_signal"(%s, %c4, %c0) : (memref<4xi32, "symmetric">, index, index) -> ()
  return
}

// -----

func.func @signal_index_type() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %i = arith.constant 0 : i32
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op the semaphore index must have type index, got i32}}
  "smalti.semaphore_signal"(%s, %i, %c0) : (memref<4xi32, "symmetric">, i32, index) -> ()
  return
}

// -----

func.func @signal_device_out_of_range() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op device 2 is out of range for the kernel's 2 devices}}
  "smalti.semaphore_signal"(%s, %c0, %c2) : (memref<4xi32, "symmetric">, index, index) -> ()
  return
}

// -----

func.func @signal_device_type() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op the device must be an index or i32, got f32}}
  "smalti.semaphore_signal"(%s, %c0, %f) : (memref<4xi32, "symmetric">, index, f32) -> ()
  return
}

// -----

func.func @signal_increment_zero() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op 'increment' must be at least 1, got 0}}
  "smalti.semaphore_signal"(%s, %c0, %c0) {increment = 0 : i64} : (memref<4xi32, "symmetric">, index, index) -> ()
  return
}

// -----

func.func @signal_increment_too_large() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_signal' op 'increment' 2147483648 exceeds 2147483647}}
  "smalti.semaphore_signal"(%s, %c0, %c0) {increment = 2147483648 : i64} : (memref<4xi32, "symmetric">, index, index) -> ()
  return
}

// -----

// ---- semaphore_wait

func.func @wait_not_collective() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %s = memref.alloca() : memref<4xi32>
  // expected-error @+1 {{'smalti.semaphore_wait' op needs an enclosing kernel with 'smalti.devices'}}
  "smalti.semaphore_wait"(%s, %c0) : (memref<4xi32>, index) -> ()
  return
}

// -----

func.func @wait_semaphores_type() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi64, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_wait' op expects semaphores as memref<Nxi32, "symmetric">, got memref<4xi64, "symmetric">}}
  "smalti.semaphore_wait"(%s, %c0) : (memref<4xi64, "symmetric">, index) -> ()
  return
}

// -----

func.func @wait_index_out_of_bounds() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<8xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_wait' op semaphore index 8 is out of bounds for 8 semaphores}}
  "smalti.semaphore_wait"(%s, %c8) : (memref<8xi32, "symmetric">, index) -> ()
  return
}

// -----

func.func @wait_value_zero() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_wait' op 'value' must be at least 1, got 0}}
  "smalti.semaphore_wait"(%s, %c0) {value = 0 : i64} : (memref<4xi32, "symmetric">, index) -> ()
  return
}

// -----

func.func @wait_value_too_large() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_symmetric"(%c0) : (index) -> memref<4xi32, "symmetric">
  // expected-error @+1 {{'smalti.semaphore_wait' op 'value' 4294967296 exceeds 2147483647}}
  "smalti.semaphore_wait"(%s, %c0) {value = 4294967296 : i64} : (memref<4xi32, "symmetric">, index) -> ()
  return
}

// -----

// ---- multimem_store

func.func @multimem_store_not_collective(%a: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  // expected-error @+1 {{'smalti.multimem_store' op needs an enclosing kernel with 'smalti.devices'}}
  "smalti.multimem_store"(%v, %a, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

func.func @multimem_store_not_symmetric(%a: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  // expected-error @+1 {{'smalti.multimem_store' op expects the ref to be a symmetric memref (memref<..., "symmetric">, from smalti.slice_symmetric), got memref<128xf32>}}
  "smalti.multimem_store"(%v, %a, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

func.func @multimem_store_f64() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf64>
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf64, "symmetric">
  // expected-error @+1 {{'smalti.multimem_store' op multimem does not support element type f64; it takes f32, f16, bf16, i32, i64}}
  "smalti.multimem_store"(%v, %b, %c0) : (vector<128xf64>, memref<128xf64, "symmetric">, index) -> ()
  return
}

// -----

func.func @multimem_store_i8() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1> : vector<128xi8>
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xi8, "symmetric">
  // expected-error @+1 {{'smalti.multimem_store' op multimem does not support element type i8}}
  "smalti.multimem_store"(%v, %b, %c0) : (vector<128xi8>, memref<128xi8, "symmetric">, index) -> ()
  return
}

// -----

// The shared checks of vector accesses apply (element types, bounds).
func.func @multimem_store_element_mismatch() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf16>
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.multimem_store' op element type f16 of the vector does not match element type f32 of the memref}}
  "smalti.multimem_store"(%v, %b, %c0) : (vector<128xf16>, memref<128xf32, "symmetric">, index) -> ()
  return
}

// -----

func.func @multimem_store_out_of_bounds() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  %c64 = arith.constant 64 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.multimem_store' op slice [64, 192) of dim 0 is out of bounds for memref<128xf32, "symmetric">}}
  "smalti.multimem_store"(%v, %b, %c64) : (vector<128xf32>, memref<128xf32, "symmetric">, index) -> ()
  return
}

// -----

// ---- multimem_load_reduce

func.func @load_reduce_not_collective() attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %b = memref.alloca() : memref<128xf32>
  // expected-error @+1 {{'smalti.multimem_load_reduce' op needs an enclosing kernel with 'smalti.devices'}}
  %v = "smalti.multimem_load_reduce"(%b, %c0) {reduction = "add"} : (memref<128xf32>, index) -> vector<128xf32>
  return
}

// -----

func.func @load_reduce_not_symmetric(%a: memref<128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.multimem_load_reduce' op expects the ref to be a symmetric memref}}
  %v = "smalti.multimem_load_reduce"(%a, %c0) {reduction = "add"} : (memref<128xf32>, index) -> vector<128xf32>
  return
}

// -----

func.func @load_reduce_no_reduction() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.multimem_load_reduce' op requires a string 'reduction' attribute}}
  %v = "smalti.multimem_load_reduce"(%b, %c0) : (memref<128xf32, "symmetric">, index) -> vector<128xf32>
  return
}

// -----

// multimem loads reduce f32 only by add.
func.func @load_reduce_f32_min() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.multimem_load_reduce' op reduction "min" of f32 is not one multimem performs; it takes "add"}}
  %v = "smalti.multimem_load_reduce"(%b, %c0) {reduction = "min"} : (memref<128xf32, "symmetric">, index) -> vector<128xf32>
  return
}

// -----

func.func @load_reduce_bf16_xor() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<256xbf16, "symmetric">
  // expected-error @+1 {{'smalti.multimem_load_reduce' op reduction "xor" of bf16 is not one multimem performs; it takes "add", "min", "max"}}
  %v = "smalti.multimem_load_reduce"(%b, %c0) {reduction = "xor"} : (memref<256xbf16, "symmetric">, index) -> vector<256xbf16>
  return
}

// -----

func.func @load_reduce_i32_unknown() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xi32, "symmetric">
  // expected-error @+1 {{'smalti.multimem_load_reduce' op reduction "mul" of i32 is not one multimem performs; it takes "add", "min", "max", "and", "or", "xor"}}
  %v = "smalti.multimem_load_reduce"(%b, %c0) {reduction = "mul"} : (memref<128xi32, "symmetric">, index) -> vector<128xi32>
  return
}

// -----

func.func @load_reduce_f64() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf64, "symmetric">
  // expected-error @+1 {{'smalti.multimem_load_reduce' op multimem does not support element type f64; it takes f32, f16, bf16, i32, i64}}
  %v = "smalti.multimem_load_reduce"(%b, %c0) {reduction = "add"} : (memref<128xf64, "symmetric">, index) -> vector<128xf64>
  return
}

// -----

// ---- multimem_red

func.func @red_not_collective(%a: memref<128xf32>) attributes {
    smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  // expected-error @+1 {{'smalti.multimem_red' op needs an enclosing kernel with 'smalti.devices'}}
  "smalti.multimem_red"(%v, %a, %c0) {reduction = "add"} : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

func.func @red_not_symmetric(%a: memref<128xf32>) attributes {
    smalti.kernel, smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  // expected-error @+1 {{'smalti.multimem_red' op expects the ref to be a symmetric memref}}
  "smalti.multimem_red"(%v, %a, %c0) {reduction = "add"} : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

// Floats reduce into memory only by add.
func.func @red_f32_max() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<128xf32, "symmetric">
  // expected-error @+1 {{'smalti.multimem_red' op reduction "max" of f32 is not one multimem performs; it takes "add"}}
  "smalti.multimem_red"(%v, %b, %c0) {reduction = "max"} : (vector<128xf32>, memref<128xf32, "symmetric">, index) -> ()
  return
}

// -----

func.func @red_f16_min() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<256xf16>
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<256xf16, "symmetric">
  // expected-error @+1 {{'smalti.multimem_red' op reduction "min" of f16 is not one multimem performs; it takes "add"}}
  "smalti.multimem_red"(%v, %b, %c0) {reduction = "min"} : (vector<256xf16>, memref<256xf16, "symmetric">, index) -> ()
  return
}

// -----

func.func @red_i16() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1> : vector<256xi16>
  %b = "smalti.slice_symmetric"(%c0) : (index) -> memref<256xi16, "symmetric">
  // expected-error @+1 {{'smalti.multimem_red' op multimem does not support element type i16; it takes f32, f16, bf16, i32, i64}}
  "smalti.multimem_red"(%v, %b, %c0) {reduction = "add"} : (vector<256xi16>, memref<256xi16, "symmetric">, index) -> ()
  return
}

// -----

// ---- vector_load / vector_store reach symmetric memory; the message for another memory
// space names it among the ones they take.

func.func @vector_load_memory_space(%a: memref<128xf32, 5 : i32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.vector_load' op memory space 5 : i32 is not supported; vectors are loaded from and stored to global, "symmetric" or shared (workgroup) memory}}
  %v = "smalti.vector_load"(%a, %c0) : (memref<128xf32, 5 : i32>, index) -> vector<128xf32>
  return
}

// -----

func.func @vector_store_memory_space(%a: memref<128xf32, "remote">) {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  // expected-error @+1 {{'smalti.vector_store' op memory space "remote" is not supported; vectors are loaded from and stored to global, "symmetric" or shared (workgroup) memory}}
  "smalti.vector_store"(%v, %a, %c0) : (vector<128xf32>, memref<128xf32, "remote">, index) -> ()
  return
}

// -----

// A multimem op on a ref of another memory space is told it needs a symmetric one.
func.func @multimem_store_shared() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<1.0> : vector<128xf32>
  %b = "smalti.slice_smem"(%c0) : (index) -> memref<128xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.multimem_store' op expects the ref to be a symmetric memref (memref<..., "symmetric">, from smalti.slice_symmetric), got memref<128xf32, #gpu.address_space<workgroup>>}}
  "smalti.multimem_store"(%v, %b, %c0) : (vector<128xf32>, memref<128xf32, #gpu.address_space<workgroup>>, index) -> ()
  return
}
