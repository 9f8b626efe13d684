// RUN: smalti-translate %s --split-input-file --verify-diagnostics

// 4-bit elements pack two per byte: a slice must start at a byte.
func.func @odd_start(%a: memref<8x264xi4>, %b: memref<8x256xi4>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'smalti.vector_load' op a slice of i4 must start at a byte (an even element offset), got element 1}}
  %x = "smalti.vector_load"(%a, %c0, %c1) : (memref<8x264xi4>, index, index) -> vector<8x256xi4>
  "smalti.vector_store"(%x, %b, %c0, %c0) : (vector<8x256xi4>, memref<8x256xi4>, index, index) -> ()
  return
}

// -----

// ... and a run-time start must be a provable multiple of 2.
func.func @dynamic_start(%a: memref<8x512xf4E2M1FN>, %b: memref<8x256xf4E2M1FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %block = gpu.block_id x
  %col = arith.muli %block, %c3 : index
  // expected-error @+1 {{'smalti.vector_load' op a slice of f4E2M1FN must start at a byte: its element offset must be a provable multiple of 2 (index * 2)}}
  %x = "smalti.vector_load"(%a, %c0, %col) : (memref<8x512xf4E2M1FN>, index, index) -> vector<8x256xf4E2M1FN>
  "smalti.vector_store"(%x, %b, %c0, %c0) : (vector<8x256xf4E2M1FN>, memref<8x256xf4E2M1FN>, index, index) -> ()
  return
}

// -----

// Eight 4-bit elements fill a register: a layout giving each thread fewer is refused.
func.func @short_vectors(%a: memref<8x512xi4>, %b: memref<8x512xi4>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'smalti.vector_load' op vectors of i4 hold 8 elements per register: the layout's vector of 4 is not a multiple of 8}}
  %x = "smalti.vector_load"(%a, %c0, %c0) {out_layouts = [#smalti.strided<vec = 4>]} : (memref<8x512xi4>, index, index) -> vector<8x512xi4>
  "smalti.vector_store"(%x, %b, %c0, %c0) : (vector<8x512xi4>, memref<8x512xi4>, index, index) -> ()
  return
}

// -----

// Converting 4-bit values makes 16- or 32-bit floats.
func.func @to_f8(%a: memref<8x128xf4E2M1FN>, %b: memref<8x128xf8E4M3FN>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x128xf4E2M1FN>, index, index) -> vector<8x128xf4E2M1FN>
  // expected-error @+1 {{'arith.extf' op converts f4E2M1FN to bf16, f16 or f32, not f8E4M3FN}}
  %y = arith.extf %x : vector<8x128xf4E2M1FN> to vector<8x128xf8E4M3FN>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x128xf8E4M3FN>, memref<8x128xf8E4M3FN>, index, index) -> ()
  return
}

// -----

// TMA moves 4-bit elements as bytes (smalti/lowering/tma.py): a copy starts on a byte, so its
// innermost index is even.
func.func @tma_of_int4_odd_start(%a: memref<64x512xi4>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %o_t = arith.constant 1024 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %t = "smalti.slice_smem"(%o_t) : (index) -> memref<64x256xi4, #gpu.address_space<workgroup>>
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 8192 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  // expected-error @+1 {{'smalti.async_load' op a TMA copy of 4-bit elements starts on a byte: the innermost index must be even, got 3}}
  "smalti.async_load"(%a, %t, %bars, %c0, %c0, %c3) : (memref<64x512xi4>, memref<64x256xi4, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %p = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p) : (memref<1xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  return
}

// -----

// Registers hold 4-bit vectors only to store or widen them.
func.func @add_int4(%a: memref<8x256xi4>, %b: memref<8x256xi4>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<8x256xi4>, index, index) -> vector<8x256xi4>
  // expected-error @+1 {{'arith.addi' op has no lowering for vectors of i4: 4-bit vectors are loaded, stored and converted to bf16, f16 or f32 (arith.sitofp, arith.uitofp, arith.extf) only}}
  %y = arith.addi %x, %x : vector<8x256xi4>
  "smalti.vector_store"(%y, %b, %c0, %c0) : (vector<8x256xi4>, memref<8x256xi4>, index, index) -> ()
  return
}
