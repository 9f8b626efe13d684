// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// 4-bit shared-memory refs pack two elements per byte: transforms measure bytes, so a
// 128-byte swizzle takes tiles 256 elements wide (this one verifies).
func.func @four_bit_swizzle_row(%s: memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>) {
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[8, 256]>, #smalti.swizzle<128>]} : (memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>) -> memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @four_bit_tile_too_narrow(%s: memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'transforms' a 128-byte swizzle needs the innermost dim to span exactly 128 bytes; physical shape [2, 4, 8, 128] of 4-bit elements spans 64}}
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[8, 128]>, #smalti.swizzle<128>]} : (memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>) -> memref<16x512xf4E2M1FN, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @i4_swizzle_64(%s: memref<8x256xi4, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'transforms' a 64-byte swizzle needs the innermost dim to span exactly 64 bytes; physical shape [1, 1, 8, 256] of 4-bit elements spans 128}}
  %t = "smalti.with_transforms"(%s) {transforms = [#smalti.tile<[8, 256]>, #smalti.swizzle<64>]} : (memref<8x256xi4, #gpu.address_space<workgroup>>) -> memref<8x256xi4, #gpu.address_space<workgroup>>
  return
}
