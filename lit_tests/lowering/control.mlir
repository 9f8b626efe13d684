// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// (Line info, the .loc before each op's instructions, is checked in line_info.mlir.)

// A loop over column blocks with a dynamic trip count: the counter and the carried vector
// live in fixed registers, filled by mov before the loop and at the end of each iteration;
// the trip count is tested once before entering and at the back edge.
// CHECK-LABEL: .visible .entry column_blocks(
// CHECK: ld.param.s32 [[N:%r[0-9]+]], [column_blocks_param_arg1];
// CHECK: mov.b32 [[ZERO:%f[0-9]+]], 0;
// CHECK: cvt.s64.s32 [[UPPER:%rd[0-9]+]], [[N]];
// CHECK: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT: mov.f32 [[ACC0:%f[0-9]+]], [[ZERO]];
// CHECK-NEXT: mov.f32 {{%f[0-9]+}}, [[ZERO]];
// CHECK-NEXT: mov.f32 {{%f[0-9]+}}, [[ZERO]];
// CHECK-NEXT: mov.f32 [[ACC3:%f[0-9]+]], [[ZERO]];
// CHECK-NEXT: mov.b64 [[I:%rd[0-9]+]], 0;
// CHECK-NEXT: setp.ge.s64 [[SKIP:%p[0-9]+]], [[I]], [[UPPER]];
// CHECK-NEXT: @[[SKIP]] bra.uni $loop_end_0;
// CHECK-NEXT: $loop_0:
// CHECK-NEXT: mul.lo.s64 [[COL:%rd[0-9]+]], [[I]], 128;
// CHECK-NEXT: mul.lo.s64 [[BYTES:%rd[0-9]+]], [[COL]], 4;
// CHECK-NEXT: add.s64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[BYTES]];
// CHECK-NOT: %tid.x
// CHECK: ld.global.v4.f32 {[[V0:%f[0-9]+]], {{.*}}}, [{{%rd[0-9]+}}];
// CHECK-NEXT: add.rn.f32 [[S0:%f[0-9]+]], [[ACC0]], [[V0]];
// CHECK: mov.f32 [[ACC0]], [[S0]];
// CHECK: add.s64 [[I]], [[I]], 1;
// CHECK-NEXT: setp.lt.s64 [[AGAIN:%p[0-9]+]], [[I]], [[UPPER]];
// CHECK-NEXT: @[[AGAIN]] bra.uni $loop_0;
// CHECK-NEXT: $loop_end_0:
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}], {[[ACC0]], {{.*}}, [[ACC3]]};
func.func @column_blocks(%a: memref<4x512xf32>, %n: i32, %out: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant dense<0.0> : vector<4x128xf32>
  %upper = arith.index_cast %n : i32 to index
  %sum = scf.for %i = %c0 to %upper step %c1 iter_args(%acc = %zero) -> (vector<4x128xf32>) {
    %start = arith.muli %i, %c128 : index
    %v = "smalti.vector_load"(%a, %c0, %start) : (memref<4x512xf32>, index, index) -> vector<4x128xf32>
    %next = arith.addf %acc, %v : vector<4x128xf32>
    scf.yield %next : vector<4x128xf32>
  }
  "smalti.vector_store"(%sum, %out, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}

// -----

// Static bounds enter the loop without a test; swapped carried values go through a copy.
// CHECK-LABEL: .visible .entry swap(
// CHECK: mov.b64 [[I:%rd[0-9]+]], 0;
// CHECK-NOT: setp.ge
// CHECK-NEXT: $loop_0:
// CHECK-NEXT: mov.f32 [[T:%f[0-9]+]], [[V:%f[0-9]+]];
// CHECK: mov.f32 {{%f[0-9]+}}, [[T]];
// CHECK: mov.f32 [[V]], {{%f[0-9]+}};
// CHECK: add.s64 [[I]], [[I]], 1;
// CHECK-NEXT: setp.lt.s64 [[AGAIN:%p[0-9]+]], [[I]], 3;
func.func @swap(%a: memref<4x128xf32>, %b: memref<4x128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %y = "smalti.vector_load"(%b, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %p, %q = scf.for %i = %c0 to %c3 step %c1 iter_args(%u = %x, %v = %y)
      -> (vector<4x128xf32>, vector<4x128xf32>) {
    scf.yield %v, %u : vector<4x128xf32>, vector<4x128xf32>
  }
  "smalti.vector_store"(%p, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  "smalti.vector_store"(%q, %b, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  return
}

// -----

// scf.if yielding an i1 vector: the branches move predicates (mov.pred) into the result's.
// CHECK-LABEL: .visible .entry branch_i1(
// CHECK: @!{{%p[0-9]+}} bra.uni $if_else_0;
// CHECK: setp.lt.f32 [[LT:%p[0-9]+]]
// CHECK: mov.pred [[R:%p[0-9]+]], [[LT]];
// CHECK: $if_else_0:
// CHECK: setp.gt.f32 [[GT:%p[0-9]+]]
// CHECK: mov.pred [[R]], [[GT]];
// CHECK: $if_end_0:
// CHECK: selp.f32 {{%f[0-9]+}}, {{%f[0-9]+}}, {{%f[0-9]+}}, [[R]];
func.func @branch_i1(%a: memref<128xf32>, %n: i32)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : i32
  %zero = arith.constant dense<0.0> : vector<128xf32>
  %x = "smalti.vector_load"(%a, %c0) : (memref<128xf32>, index) -> vector<128xf32>
  %big = arith.cmpi sgt, %n, %c2 : i32
  %m = scf.if %big -> (vector<128xi1>) {
    %lt = arith.cmpf olt, %x, %zero : vector<128xf32>
    scf.yield %lt : vector<128xi1>
  } else {
    %gt = arith.cmpf ogt, %x, %zero : vector<128xf32>
    scf.yield %gt : vector<128xi1>
  }
  %y = arith.select %m, %zero, %x : vector<128xi1>, vector<128xf32>
  "smalti.vector_store"(%y, %a, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}

// -----

// scf.if on a uniform comparison: both branches move their vector into shared registers.
// CHECK-LABEL: .visible .entry branch(
// CHECK: setp.gt.s32 [[BIG:%p[0-9]+]], {{%r[0-9]+}}, 2;
// CHECK-NEXT: @![[BIG]] bra.uni $if_else_0;
// CHECK-NEXT: mul.rn.f32 [[D:%f[0-9]+]], [[X:%f[0-9]+]], {{%f[0-9]+}};
// CHECK: mov.f32 [[R:%f[0-9]+]], [[D]];
// CHECK: bra.uni $if_end_0;
// CHECK-NEXT: $if_else_0:
// CHECK-NEXT: neg.f32 [[E:%f[0-9]+]], [[X]];
// CHECK: mov.f32 [[R]], [[E]];
// CHECK: $if_end_0:
// CHECK-NEXT: add.s32 [[SEL:%r[0-9]+]], {{%r[0-9]+}}, 1;
// CHECK-NEXT: selp.s32 {{%r[0-9]+}}, {{%r[0-9]+}}, [[SEL]], [[BIG]];
func.func @branch(%a: memref<4x128xf32>, %n: i32, %m: memref<4x128xi32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : i32
  %one = arith.constant 1 : i32
  %two = arith.constant dense<2.0> : vector<4x128xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<4x128xf32>, index, index) -> vector<4x128xf32>
  %big = arith.cmpi sgt, %n, %c2 : i32
  %r = scf.if %big -> (vector<4x128xf32>) {
    %d = arith.mulf %x, %two : vector<4x128xf32>
    scf.yield %d : vector<4x128xf32>
  } else {
    %e = arith.negf %x : vector<4x128xf32>
    scf.yield %e : vector<4x128xf32>
  }
  %n1 = arith.addi %n, %one : i32
  %pick = arith.select %big, %n, %n1 : i32
  %pb = vector.broadcast %pick : i32 to vector<4x128xi32>
  "smalti.vector_store"(%r, %a, %c0, %c0) : (vector<4x128xf32>, memref<4x128xf32>, index, index) -> ()
  "smalti.vector_store"(%pb, %m, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  return
}
