// RUN: smalti-opt %s --split-input-file --smalti-explain-schedule 2>&1 | filecheck %s
// RUN: smalti-opt %s --split-input-file --smalti-explain-schedule 2>/dev/null | filecheck %s --check-prefix=IR
// RUN: not smalti-opt %S/Inputs/explain_schedule_errors.mlir --split-input-file --smalti-explain-schedule 2>&1 | filecheck %s --check-prefix=ERR

// --smalti-explain-schedule (smalti/tools/explain_schedule.py) prints, per kernel, the cost
// model's verdict on the schedule it recorded in `smalti.schedule` (smalti/schedule), and
// the model's own choice when that differs: a hand-written choice is checked, not
// rewritten. The report goes to stderr; the IR is printed unchanged.

// The model's own choice for the examples' small all-gather matmul on 4 devices.
// CHECK-LABEL: @ag_matmul: recorded schedule
// CHECK-NEXT:  problem: all_gather_matmul on 4 device(s), per device A shard [128, 128] x B [128, 128] -> [512, 128], bf16, 1 CTA
// CHECK-NEXT:  choice: chunk_rows=128, order=ring_forward (source_offsets 0, 1, 2, 3) [given (checked, not rewritten)]
// CHECK-NEXT:  predicted: {{[0-9.]+}} us; without overlap: {{[0-9.]+}} us ({{[0-9.]+}}x faster with overlap)
// CHECK-NEXT:  why:
// CHECK-NEXT:    bottleneck: {{.*}}
// CHECK:       steps of device {{[0-9]}} (the slowest
// CHECK-NEXT:    step 0: source {{[0-9]}} (own), 1 chunk(s), {{.*}}
// CHECK:       constants (H100 SXM5 (HGX, NVSwitch)):
// CHECK:         nvlink_bytes_per_s = 450 GB/s  [datasheet
// CHECK:         semaphore_s = 3.00 us  [estimate
// CHECK:       @ag_matmul: the recorded schedule is the model's best choice
// IR-LABEL:    func.func @ag_matmul(
// IR-SAME:     smalti.schedule = {chunk_rows = 128 : i64, ctas = 1 : i64, devices = 4 : i64, dtype = "bf16", k = 128 : i64, kind = "all_gather_matmul", m = 128 : i64, n = 128 : i64, order = "ring_forward", source_offsets = array<i64: 0, 1, 2, 3>}
func.func @ag_matmul(%out: memref<512x128xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64, smalti.mesh_axis = "x",
    smalti.schedule = {kind = "all_gather_matmul", m = 128 : i64, n = 128 : i64,
                       k = 128 : i64, devices = 4 : i64, dtype = "bf16", ctas = 1 : i64,
                       chunk_rows = 128 : i64, order = "ring_forward",
                       source_offsets = array<i64: 0, 1, 2, 3>}} {
  %me = "smalti.device_index"() {axis = "x"} : () -> index
  return
}

// -----

// A hand-written schedule: the naive order on 8 devices with 132 CTAs. It is evaluated as
// written; the model's choice follows, with why the naive order loses.
// CHECK-LABEL: @rs_naive: recorded schedule
// CHECK-NEXT:  problem: matmul_reduce_scatter on 8 device(s), per device A [8192, 4096] x B [4096, 4096] -> block [1024, 4096], bf16, 132 CTAs
// CHECK-NEXT:  choice: chunk_rows=512, order=naive [given (checked, not rewritten)]
// CHECK:       candidates (best first):
// CHECK-NEXT:    chunk_rows  order          predicted     no overlap    speedup
// CHECK-NEXT:           512  naive
// CHECK-NOT:            {{[0-9]+}}  ring_forward
// CHECK:       @rs_naive: the model's best choice differs (the recorded one is {{[0-9.]+}}x its predicted time)
// CHECK-NEXT:    problem: matmul_reduce_scatter on 8 device(s)
// CHECK-NEXT:    choice: chunk_rows=1024, order=ring_forward (source_offsets 1, 2, 3, 4, 5, 6, 7, 0) [chosen by the model from {{[0-9]+}} candidates]
// CHECK:           naive order (everyone visits device 0, then 1, ...) is {{[0-9.]+}}x slower: in each step every device computes the same block
// IR-LABEL:    func.func @rs_naive(
func.func @rs_naive(%out: memref<1024x4096xbf16>) attributes {smalti.kernel,
    smalti.grid = array<i64: 132>, smalti.devices = 8 : i64,
    smalti.schedule = {kind = "matmul_reduce_scatter", m = 1024 : i64, n = 4096 : i64,
                       k = 4096 : i64, devices = 8 : i64, dtype = "bf16", ctas = 132 : i64,
                       chunk_rows = 512 : i64, order = "naive"}} {
  return
}

// -----

// A kernel without a schedule gets a one-line note.
// CHECK: @plain: no schedule recorded ('smalti.schedule' is absent)
// IR-LABEL: func.func @plain(
func.func @plain(%out: memref<128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>} {
  return
}

// Malformed schedules are located errors at the kernel, one per chunk of
// Inputs/explain_schedule_errors.mlir; the tool fails and prints no IR.
// ERR:      explain_schedule_errors.mlir:3:1: error: 'func.func' op kernel @not_a_dict: 'smalti.schedule' must be a dictionary of schedule fields, got 3 : i64
// ERR:      explain_schedule_errors.mlir:9:1: error: 'func.func' op kernel @float_field: 'smalti.schedule' field 'm' must be an integer, a string or array<i64: ...>, got 1.280000e+02 : f32
// ERR:      explain_schedule_errors.mlir:17:1: error: 'func.func' op kernel @odd_rows: invalid 'smalti.schedule': m = 100 rows is not a multiple of 64
// ERR:      explain_schedule_errors.mlir:26:1: error: 'func.func' op kernel @bad_offsets: invalid 'smalti.schedule': all_gather_matmul source_offsets [1, 0, 2, 3] must start with 0
// ERR:      explain_schedule_errors.mlir:35:1: error: 'func.func' op kernel @unknown_dtype: invalid 'smalti.schedule': unknown operand dtype 'f64'
// ERR:      explain_schedule_errors.mlir:43:1: error: 'func.func' op kernel @missing: invalid 'smalti.schedule': missing field(s) chunk_rows
// ERR-NOT:  func.func
