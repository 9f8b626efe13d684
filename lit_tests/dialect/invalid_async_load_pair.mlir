// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// async_load's cta_group (smalti/dialect/ops_memory.py): 1 or 2; 2 (the pair leader's
// barrier) needs a cluster of CTA pairs and does not combine with multicast.

func.func @cta_group_3(%g: memref<256x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'smalti.async_load' op 'cta_group' must be 1 or 2, got 3}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {cta_group = 3 : i64} : (memref<256x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @cta_group_2_without_cluster(%g: memref<256x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'cta_group' 2 needs a cluster of an even number of CTAs (smalti.cluster: pairs of ranks 2i, 2i + 1), got 1x1x1}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {cta_group = 2 : i64} : (memref<256x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @cta_group_2_odd_cluster(%g: memref<256x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 3>, smalti.cluster = array<i64: 3>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'cta_group' 2 needs a cluster of an even number of CTAs (smalti.cluster: pairs of ranks 2i, 2i + 1), got 3x1x1}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {cta_group = 2 : i64} : (memref<256x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}

// -----

func.func @cta_group_2_multicast(%g: memref<256x64xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 2>, smalti.cluster = array<i64: 2>} {
  %o = arith.constant 0 : index
  %b = "smalti.slice_smem"(%o) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %s = "smalti.slice_smem"(%o) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'cta_group' 2 (the pair leader's barrier) does not combine with 'collective' (multicast)}}
  "smalti.async_load"(%g, %s, %b, %o, %o, %o) {cta_group = 2 : i64, collective = array<i64: 0>} : (memref<256x64xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  return
}
