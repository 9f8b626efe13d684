// RUN: smalti-opt %s --split-input-file --smalti-explain-schedule 2>&1 >/dev/null | filecheck %s
// RUN: smalti-opt %S/../../examples/matmul_128x128x64.mlir --smalti-explain-schedule 2>&1 >/dev/null | filecheck %s --check-prefix=HAND

// Pipelines in --smalti-explain-schedule: a stage count emit_pipeline's model chose, one a
// person gave (checked against the model, not rewritten), and a ring written by hand in the
// IR (examples/matmul_128x128x64.mlir: 2 stages where the model wants 4).

// CHECK-LABEL: @chosen: recorded pipeline (emit_pipeline) at matmul_pipelined.py:47:9:
// CHECK-NEXT:    choice: stages=4, prefetch distance=3 [chosen by the model]
// CHECK-NEXT:    why:
// CHECK-NEXT:      per step: 32768 B by TMA (0.29 us at one SM's copy rate), 2097152 bf16 tensor-core flops (0.28 us at the SM's share of the dense peak): a step takes 0.29 us, bound by TMA bandwidth
// CHECK-NEXT:      a load needs 0.79 us (TMA latency 0.50 us + its bytes): hidden with 3 load(s) in flight, so 4 stages
// CHECK-NEXT:      shared memory holds at most 7 stage(s) of 32776 B (232448 B less 0 B of the kernel's other buffers)
// CHECK-NEXT:      predicted: 3.13 us for 8 step(s) (step 0.29 us, epilogue 0.00 us)
// CHECK-NEXT:    the model recommends the same: stages=4
// CHECK-NEXT:    constants: local_latency_s = 0.50 us, sm_copy_bytes_per_s = 112 GB/s, smem_bytes_per_block = 232448 B
func.func @chosen() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = {kind = "pipeline", variant = "emit_pipeline",
                       at = "matmul_pipelined.py:47:9", stages = 4 : i64, given = 0 : i64,
                       step_bytes = 32768 : i64, stage_bytes = 32768 : i64,
                       flops_per_step = 2097152 : i64, dtype = "bf16",
                       other_smem_bytes = 0 : i64, steps = 8 : i64, epilogue_bytes = 0 : i64}} {
  return
}

// -----

// A given count too small for the latency, and a second schedule in an array.
// CHECK-LABEL: @given: recorded pipeline (emit_pipeline) at attention.py:10:3:
// CHECK-NEXT:    choice: stages=1, prefetch distance=0 [given (checked, not rewritten)]
// CHECK:           warning: 1 stage(s) cannot cover the TMA latency (the model wants 6): each step waits 0.65 us for its data
// CHECK:         note: the model recommends stages=6 (prefetch distance 5)
// CHECK-LABEL: @given: recorded pipeline (emit_pipeline) at attention.py:20:3:
// CHECK:           warning: 9 stage(s) do not fit in shared memory (at most 7)
func.func @given() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = [{kind = "pipeline", variant = "emit_pipeline", at = "attention.py:10:3",
                        stages = 1 : i64, step_bytes = 16384 : i64,
                        flops_per_step = 1048576 : i64, dtype = "bf16"},
                       {kind = "pipeline", variant = "emit_pipeline", at = "attention.py:20:3",
                        stages = 9 : i64, step_bytes = 32768 : i64,
                        flops_per_step = 2097152 : i64, dtype = "bf16"}]} {
  return
}

// HAND-LABEL: @matmul_128x128x64: pipeline (hand_written) at matmul_128x128x64.mlir:42:
// HAND-NEXT:    choice: stages=2, prefetch distance=1 [written by hand (checked, not rewritten)]
// HAND:           warning: 2 stage(s) cannot cover the TMA latency (the model wants 4)
// HAND:         note: the model recommends stages=4 (prefetch distance 3): predicted 3.13 us against 7.13 us
