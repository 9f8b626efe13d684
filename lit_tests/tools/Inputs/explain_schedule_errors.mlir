// Malformed `smalti.schedule` attributes (lit_tests/tools/explain_schedule.mlir).

func.func @not_a_dict() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = 3 : i64} {
  return
}

// -----
func.func @float_field() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = {kind = "all_gather_matmul", m = 128.0 : f32, n = 128 : i64,
                       k = 128 : i64, devices = 4 : i64, dtype = "bf16",
                       chunk_rows = 64 : i64, order = "ring_forward"}} {
  return
}

// -----
func.func @odd_rows() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = {kind = "all_gather_matmul", m = 100 : i64, n = 128 : i64,
                       k = 128 : i64, devices = 4 : i64, dtype = "bf16",
                       chunk_rows = 64 : i64, order = "ring_forward"}} {
  return
}

// -----

func.func @bad_offsets() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = {kind = "all_gather_matmul", m = 128 : i64, n = 128 : i64,
                       k = 128 : i64, devices = 4 : i64, dtype = "bf16",
                       chunk_rows = 64 : i64, source_offsets = array<i64: 1, 0, 2, 3>}} {
  return
}

// -----

func.func @unknown_dtype() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = {kind = "all_gather_matmul", m = 128 : i64, n = 128 : i64,
                       k = 128 : i64, devices = 4 : i64, dtype = "f64",
                       chunk_rows = 64 : i64, order = "ring_forward"}} {
  return
}

// -----
func.func @missing() attributes {smalti.kernel, smalti.grid = array<i64: 1>,
    smalti.schedule = {kind = "all_gather_matmul", m = 128 : i64, n = 128 : i64,
                       k = 128 : i64, devices = 4 : i64, dtype = "bf16",
                       order = "ring_forward"}} {
  return
}
