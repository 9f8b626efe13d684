// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

func.func @no_warpgroup() {
  // expected-error @+1 {{requires an i64 or array<i64: ...> 'warpgroup' attribute: the warpgroups that run the region}}
  "smalti.warpgroup_region"() ({
  }) : () -> ()
  return
}

// -----

func.func @negative_warpgroup() {
  // expected-error @+1 {{'warpgroup' must name non-negative warpgroup indices, got [-1]}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = -1 : i64} : () -> ()
  return
}

// -----

func.func @duplicate_warpgroup() {
  // expected-error @+1 {{'warpgroup' names a warpgroup twice: [1, 1]}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = array<i64: 1, 1>} : () -> ()
  return
}

// -----

func.func @budget_too_small() {
  // expected-error @+1 {{'max_registers': register budget 16 must be a multiple of 8 in [24, 256]}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 0 : i64, max_registers = 16 : i64} : () -> ()
  return
}

// -----

func.func @budget_not_a_multiple_of_8() {
  // expected-error @+1 {{'max_registers': register budget 100 must be a multiple of 8 in [24, 256]}}
  "smalti.warpgroup_region"() ({
  }) {warpgroup = 0 : i64, max_registers = 100 : i64} : () -> ()
  return
}

// -----

func.func @operands(%x: index) {
  // expected-error @+1 {{expects 0 operands, got 1}}
  "smalti.warpgroup_region"(%x) ({
  }) {warpgroup = 0 : i64} : (index) -> ()
  return
}

// -----

func.func @block_arguments() {
  // expected-error @+1 {{expects a region without block arguments}}
  "smalti.warpgroup_region"() ({
  ^bb0(%i: index):
  }) {warpgroup = 0 : i64} : () -> ()
  return
}
