// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// smalti.custom_primitive (smalti/lowering/custom_primitive.py): the body once per thread,
// its arguments the thread's element registers, what it yields packed into the results.

// Row sums of the WGMMA layout by hand: each thread adds its two elements of each of its
// rows, then two butterfly shuffles over the quad of lanes holding the row (inline_ptx on
// scalars, once per thread), then divides. The block arguments are the loaded registers.
// CHECK-LABEL: .visible .entry row_normalise(
// CHECK: ld.global.v2.f32 {[[X0:%f[0-9]+]], [[X1:%f[0-9]+]]}, [[[A:%rd[0-9]+]]];
// CHECK-NEXT: ld.global.v2.f32 {[[X2:%f[0-9]+]], [[X3:%f[0-9]+]]}, [[[A]]+256];
// CHECK-NEXT: add.rn.f32 [[S0:%f[0-9]+]], [[X0]], [[X1]];
// CHECK-NEXT: add.rn.f32 [[S1:%f[0-9]+]], [[X2]], [[X3]];
// CHECK-NEXT: {
// CHECK-NEXT: shfl.sync.bfly.b32 [[T0:%f[0-9]+]], [[S0]], 1, 0x1f, 0xffffffff;
// CHECK-NEXT: }
// CHECK-NEXT: {
// CHECK-NEXT: shfl.sync.bfly.b32 [[T1:%f[0-9]+]], [[S1]], 1, 0x1f, 0xffffffff;
// CHECK-NEXT: }
// CHECK-NEXT: add.rn.f32 [[U0:%f[0-9]+]], [[S0]], [[T0]];
// CHECK: add.rn.f32 [[W0:%f[0-9]+]], [[U0]], {{%f[0-9]+}};
// CHECK-NEXT: add.rn.f32 [[W1:%f[0-9]+]], {{%f[0-9]+}}, {{%f[0-9]+}};
// CHECK-NEXT: div.rn.f32 [[Y0:%f[0-9]+]], [[X0]], [[W0]];
// CHECK-NEXT: div.rn.f32 [[Y1:%f[0-9]+]], [[X1]], [[W0]];
// CHECK-NEXT: div.rn.f32 [[Y2:%f[0-9]+]], [[X2]], [[W1]];
// CHECK-NEXT: div.rn.f32 [[Y3:%f[0-9]+]], [[X3]], [[W1]];
// CHECK: st.global.v2.f32 [[[O:%rd[0-9]+]]], {[[Y0]], [[Y1]]};
// CHECK-NEXT: st.global.v2.f32 [[[O]]+256], {[[Y2]], [[Y3]]};
func.func @row_normalise(%a: memref<64x8xf32>, %out: memref<64x8xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<64x8xf32>, index, index) -> vector<64x8xf32>
  %y = "smalti.custom_primitive"(%x) ({
  ^bb0(%x0: f32, %x1: f32, %x2: f32, %x3: f32):
    %s0 = arith.addf %x0, %x1 : f32
    %s1 = arith.addf %x2, %x3 : f32
    %t0 = "smalti.inline_ptx"(%s0) {ptx = "shfl.sync.bfly.b32 $0, $1, 1, 0x1f, 0xffffffff;", constraints = "=f,f"} : (f32) -> f32
    %t1 = "smalti.inline_ptx"(%s1) {ptx = "shfl.sync.bfly.b32 $0, $1, 1, 0x1f, 0xffffffff;", constraints = "=f,f"} : (f32) -> f32
    %u0 = arith.addf %s0, %t0 : f32
    %u1 = arith.addf %s1, %t1 : f32
    %v0 = "smalti.inline_ptx"(%u0) {ptx = "shfl.sync.bfly.b32 $0, $1, 2, 0x1f, 0xffffffff;", constraints = "=f,f"} : (f32) -> f32
    %v1 = "smalti.inline_ptx"(%u1) {ptx = "shfl.sync.bfly.b32 $0, $1, 2, 0x1f, 0xffffffff;", constraints = "=f,f"} : (f32) -> f32
    %w0 = arith.addf %u0, %v0 : f32
    %w1 = arith.addf %u1, %v1 : f32
    %y0 = arith.divf %x0, %w0 : f32
    %y1 = arith.divf %x1, %w0 : f32
    %y2 = arith.divf %x2, %w1 : f32
    %y3 = arith.divf %x3, %w1 : f32
    "smalti.custom_yield"(%y0, %y1, %y2, %y3) : (f32, f32, f32, f32) -> ()
  }) {in_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>],
      out_layouts = [#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], lane = [-3, -2], vector = -1>]}
      : (vector<64x8xf32>) -> vector<64x8xf32>
  "smalti.vector_store"(%y, %out, %c0, %c0) : (vector<64x8xf32>, memref<64x8xf32>, index, index) -> ()
  return
}

// -----

// bf16 pairs: the packed register splits into one argument per element, bf16 arithmetic
// is native (max.NaN.bf16), f32 arithmetic between conversions; the yielded elements join
// into one register again.
// CHECK-LABEL: .visible .entry swap_pairs(
// CHECK: ld.global.b32 [[P:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK-NEXT: mov.b32 {[[LO:%rs[0-9]+]], [[HI:%rs[0-9]+]]}, [[P]];
// CHECK-NEXT: max.NaN.bf16 [[M:%rs[0-9]+]], [[LO]], [[HI]];
// CHECK-NEXT: cvt.f32.bf16 [[W:%f[0-9]+]], [[LO]];
// CHECK-NEXT: mul.rn.f32 [[H:%f[0-9]+]], [[W]], 0f3F000000;
// CHECK-NEXT: cvt.rn.bf16.f32 [[N:%rs[0-9]+]], [[H]];
// CHECK-NEXT: mov.b32 [[R:%r[0-9]+]], {[[M]], [[N]]};
// CHECK: st.global.b32 [{{%rd[0-9]+}}], [[R]];
func.func @swap_pairs(%a: memref<256xbf16>, %out: memref<256xbf16>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<256xbf16>, index) -> vector<256xbf16>
  %y = "smalti.custom_primitive"(%x) ({
  ^bb0(%x0: bf16, %x1: bf16):
    %m = arith.maximumf %x0, %x1 : bf16
    %w = arith.extf %x0 : bf16 to f32
    %h = arith.constant 0.5 : f32
    %p = arith.mulf %w, %h : f32
    %n = arith.truncf %p : f32 to bf16
    "smalti.custom_yield"(%m, %n) : (bf16, bf16) -> ()
  }) {in_layouts = [#smalti.strided<vec = 2>], out_layouts = [#smalti.strided<vec = 2>]}
      : (vector<256xbf16>) -> vector<256xbf16>
  "smalti.vector_store"(%y, %out, %c0) : (vector<256xbf16>, memref<256xbf16>, index) -> ()
  return
}

// -----

// A shared-memory ref with declared transforms: inference gives the slice (and so the
// vector_store filling it) the 8x8 tiles; the body gets the ref's shared address, after the
// warpgroup meets (the body may read what other threads stored), and reads the tiles itself.
// CHECK-LABEL: .visible .entry tiled_read(
// CHECK: mov.u32 [[BASE:%r[0-9]+]], smalti_smem;
// CHECK: st.shared.v2.f32 [{{%r[0-9]+}}], {{{%f[0-9]+}}, {{%f[0-9]+}}};
// CHECK-NEXT: bar.sync 1, 128;
// CHECK: cvt.u32.u64 [[OFF:%r[0-9]+]], {{%rd[0-9]+}};
// CHECK-NEXT: add.s32 [[ADDR:%r[0-9]+]], [[BASE]], [[OFF]];
// CHECK-NEXT: {
// CHECK-NEXT: ld.shared.v2.f32 {[[E0:%f[0-9]+]], [[E1:%f[0-9]+]]}, [[[ADDR]]];
// CHECK-NEXT: }
// CHECK: st.global.v2.f32 [{{%rd[0-9]+}}], {[[E0]], [[E1]]};
func.func @tiled_read(%a: memref<16x16xf32>, %out: memref<16x16xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %s = "smalti.slice_smem"(%c0) : (index) -> memref<16x16xf32, #gpu.address_space<workgroup>>
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<16x16xf32>, index, index) -> vector<16x16xf32>
  "smalti.vector_store"(%v, %s, %c0, %c0) : (vector<16x16xf32>, memref<16x16xf32, #gpu.address_space<workgroup>>, index, index) -> ()
  %r = "smalti.custom_primitive"(%s) ({
  ^bb0(%base: i32):
    %tid = gpu.thread_id x
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c7 = arith.constant 7 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c127 = arith.constant 127 : index
    %t = arith.andi %tid, %c127 : index
    %row = arith.shrui %t, %c3 : index
    %col8 = arith.andi %t, %c7 : index
    %tile_row = arith.shrui %row, %c3 : index
    %in_row = arith.andi %row, %c7 : index
    %tr2 = arith.shli %tile_row, %c1 : index
    %tile_off = arith.muli %tr2, %c64 : index
    %row_off = arith.muli %in_row, %c8 : index
    %c2 = arith.constant 2 : index
    %two_t = arith.muli %col8, %c2 : index
    %col_in = arith.andi %two_t, %c7 : index
    %hi = arith.shrui %two_t, %c3 : index
    %hi64 = arith.muli %hi, %c64 : index
    %e0 = arith.addi %tile_off, %row_off : index
    %e1 = arith.addi %e0, %col_in : index
    %e = arith.addi %e1, %hi64 : index
    %c4 = arith.constant 4 : index
    %bytes = arith.muli %e, %c4 : index
    %off = arith.index_cast %bytes : index to i32
    %addr = arith.addi %base, %off : i32
    %x0, %x1 = "smalti.inline_ptx"(%addr) {ptx = "ld.shared.v2.f32 {$0, $1}, [$2];", constraints = "=f,=f,r"} : (i32) -> (f32, f32)
    "smalti.custom_yield"(%x0, %x1) : (f32, f32) -> ()
  }) {in_transforms = [[#smalti.tile<[8, 8]>]], out_layouts = [#smalti.strided<vec = 2>]}
      : (memref<16x16xf32, #gpu.address_space<workgroup>>) -> vector<16x16xf32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<16x16xf32>, memref<16x16xf32>, index, index) -> ()
  return
}
