// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// RUN: smalti-translate %s --split-input-file --to=sass | filecheck %s --check-prefix=SASS

// Collective kernels (smalti/lowering/collective.py). Three hidden .u64 parameters follow
// the kernel's own: the address of the device index, of the peer table (entry p: device p's
// symmetric heap) and the heap's multicast address. At the entry the device index is read,
// and the own heap is entry `device` of the peer table. The second RUN line assembles every
// kernel with ptxas.

// A kernel without multimem keeps PTX 8.0. Symmetric buffers are the own heap plus their
// offset; device_index widens the index read at the entry; device_count is a constant;
// remote_ref loads a peer's heap from the table: at a constant offset for a constant
// device, through mad.wide.u32 for a traced one (an index is narrowed to .u32 first).
// CHECK:      .version 8.0
// CHECK-LABEL: .visible .entry peers(
// CHECK-NEXT: .param .u64 peers_param_arg0,
// CHECK-NEXT: .param .u64 peers_param_smalti_device,
// CHECK-NEXT: .param .u64 peers_param_smalti_peers,
// CHECK-NEXT: .param .u64 peers_param_smalti_multicast
// CHECK-NEXT: )
// CHECK:      ld.param.u64 [[DP:%rd[0-9]+]], [peers_param_smalti_device];
// CHECK-NEXT: cvta.to.global.u64 [[DA:%rd[0-9]+]], [[DP]];
// CHECK-NEXT: ld.param.u64 [[PP:%rd[0-9]+]], [peers_param_smalti_peers];
// CHECK-NEXT: cvta.to.global.u64 [[PEERS:%rd[0-9]+]], [[PP]];
// CHECK-NEXT: ld.param.u64 {{%rd[0-9]+}}, [peers_param_smalti_multicast];
// CHECK-NEXT: ld.global.u32 [[DEV:%r[0-9]+]], [[[DA]]];
// CHECK-NEXT: mad.wide.u32 [[ENTRY:%rd[0-9]+]], [[DEV]], 8, [[PEERS]];
// CHECK-NEXT: ld.global.u64 [[OWNG:%rd[0-9]+]], [[[ENTRY]]];
// CHECK-NEXT: cvta.to.global.u64 [[OWN:%rd[0-9]+]], [[OWNG]];
// CHECK-NEXT: add.s64 [[B:%rd[0-9]+]], [[OWN]], 256;
// CHECK-NEXT: cvt.u64.u32 [[ME:%rd[0-9]+]], [[DEV]];
// CHECK-NEXT: add.s64 [[ME1:%rd[0-9]+]], [[ME]], 1;
// CHECK-NEXT: and.b64 [[NEXT:%rd[0-9]+]], [[ME1]], 3;
// CHECK-NEXT: ld.global.u64 [[H2G:%rd[0-9]+]], [[[PEERS]]+16];
// CHECK-NEXT: cvta.to.global.u64 [[H2:%rd[0-9]+]], [[H2G]];
// CHECK-NEXT: add.s64 [[B2:%rd[0-9]+]], [[H2]], 256;
// CHECK-NEXT: cvt.u32.u64 [[NEXT32:%r[0-9]+]], [[NEXT]];
// CHECK-NEXT: mad.wide.u32 [[NENTRY:%rd[0-9]+]], [[NEXT32]], 8, [[PEERS]];
// CHECK-NEXT: ld.global.u64 [[HNG:%rd[0-9]+]], [[[NENTRY]]];
// CHECK-NEXT: cvta.to.global.u64 [[AN:%rd[0-9]+]], [[HNG]];
// CHECK:      add.s64 {{%rd[0-9]+}}, [[B2]], [[T:%rd[0-9]+]];
// CHECK:      add.s64 {{%rd[0-9]+}}, [[AN]], [[T]];
// CHECK-NOT:  multimem
// CHECK:      ret;
// SASS-LABEL: .text.peers:
// SASS:       EXIT
func.func @peers(%out: memref<1024xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64, smalti.mesh_axis = "x"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c256 = arith.constant 256 : index
  %c512 = arith.constant 512 : index
  %a = "smalti.slice_symmetric"(%c0) : (index) -> memref<512xf32, "symmetric">
  %b = "smalti.slice_symmetric"(%c256) : (index) -> memref<512xf32, "symmetric">
  %me = "smalti.device_index"() {axis = "x"} : () -> index
  %n = "smalti.device_count"() : () -> index
  %next0 = arith.addi %me, %c1 : index
  %next = arith.remui %next0, %n : index
  %p2 = "smalti.remote_ref"(%b, %c2) : (memref<512xf32, "symmetric">, index) -> memref<512xf32, "symmetric">
  %pn = "smalti.remote_ref"(%a, %next) : (memref<512xf32, "symmetric">, index) -> memref<512xf32, "symmetric">
  %v = "smalti.vector_load"(%p2, %c0) : (memref<512xf32, "symmetric">, index) -> vector<512xf32>
  %w = "smalti.vector_load"(%pn, %c0) : (memref<512xf32, "symmetric">, index) -> vector<512xf32>
  "smalti.vector_store"(%v, %out, %c0) : (vector<512xf32>, memref<1024xf32>, index) -> ()
  "smalti.vector_store"(%w, %out, %c512) : (vector<512xf32>, memref<1024xf32>, index) -> ()
  return
}

// -----

// An i32 device needs no narrowing; a remote_ref of a remote_ref is the same offset in the
// second peer's heap (here offset 0: the heap itself).
// CHECK-LABEL: .visible .entry peer_i32(
// CHECK-NEXT: .param .s32 peer_i32_param_arg0,
// CHECK-NEXT: .param .u64 peer_i32_param_arg1,
// CHECK-NEXT: .param .u64 peer_i32_param_smalti_device,
// CHECK:      ld.param.s32 [[D:%r[0-9]+]], [peer_i32_param_arg0];
// CHECK:      ld.param.u64 [[PP:%rd[0-9]+]], [peer_i32_param_smalti_peers];
// CHECK-NEXT: cvta.to.global.u64 [[PEERS:%rd[0-9]+]], [[PP]];
// CHECK:      cvta.to.global.u64 [[OWN:%rd[0-9]+]], {{%rd[0-9]+}};
// CHECK-NEXT: mad.wide.u32 [[E:%rd[0-9]+]], [[D]], 8, [[PEERS]];
// CHECK-NEXT: ld.global.u64 {{%rd[0-9]+}}, [[[E]]];
// CHECK-NEXT: cvta.to.global.u64 {{%rd[0-9]+}}, {{%rd[0-9]+}};
// CHECK-NEXT: ld.global.u64 [[H1G:%rd[0-9]+]], [[[PEERS]]+8];
// CHECK-NEXT: cvta.to.global.u64 [[H1:%rd[0-9]+]], [[H1G]];
// CHECK-NOT:  sub.s64
// CHECK:      add.s64 [[A:%rd[0-9]+]], [[H1]], {{%rd[0-9]+}};
// CHECK-NEXT: ld.global.v4.f32 {{{.*}}}, [[[A]]];
func.func @peer_i32(%d: i32, %out: memref<512xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : i32
  %a = "smalti.slice_symmetric"(%c0) : (index) -> memref<512xf32, "symmetric">
  %p = "smalti.remote_ref"(%a, %d) : (memref<512xf32, "symmetric">, i32) -> memref<512xf32, "symmetric">
  %q = "smalti.remote_ref"(%p, %c1) : (memref<512xf32, "symmetric">, i32) -> memref<512xf32, "symmetric">
  %v = "smalti.vector_load"(%q, %c0) : (memref<512xf32, "symmetric">, index) -> vector<512xf32>
  "smalti.vector_store"(%v, %out, %c0) : (vector<512xf32>, memref<512xf32>, index) -> ()
  return
}

// -----

// semaphore_signal: the semaphore's address on the peer (constant index: an offset; a
// traced one: its address moved from the own heap to the peer's), the warpgroup meets, then
// thread 0 adds with a release at system scope. semaphore_wait: thread 0 polls its own
// semaphore with acquire loads until it holds `value`, takes `value` off with a CAS (a lost
// race polls again), and the warpgroup meets.
// CHECK:      .version 8.0
// CHECK-LABEL: .visible .entry semaphores(
// CHECK:      mad.wide.u32 {{%rd[0-9]+}}, {{%r[0-9]+}}, 8, [[PEERS:%rd[0-9]+]];
// CHECK-NEXT: ld.global.u64 {{%rd[0-9]+}}, [{{%rd[0-9]+}}];
// CHECK-NEXT: cvta.to.global.u64 [[OWN:%rd[0-9]+]], {{%rd[0-9]+}};
// CHECK-NEXT: add.s64 [[SEMS:%rd[0-9]+]], [[OWN]], 128;
// CHECK-NEXT: cvt.u64.u32 [[ME:%rd[0-9]+]], {{%r[0-9]+}};
// CHECK-NEXT: ld.global.u64 [[H1G:%rd[0-9]+]], [[[PEERS]]+8];
// CHECK-NEXT: cvta.to.global.u64 [[H1:%rd[0-9]+]], [[H1G]];
// CHECK-NEXT: add.s64 [[S1:%rd[0-9]+]], [[H1]], 128;
// CHECK-NEXT: bar.sync 1, 128;
// CHECK-NEXT: mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT: setp.eq.u32 [[LEADER:%p[0-9]+]], [[TID]], 0;
// CHECK-NEXT: @[[LEADER]] red.release.sys.global.add.u32 [[[S1]]+12], 2;
// CHECK-NEXT: cvt.u32.u64 [[I:%r[0-9]+]], [[ME]];
// CHECK-NEXT: mad.wide.u32 [[LOCAL:%rd[0-9]+]], [[I]], 4, [[SEMS]];
// CHECK-NEXT: cvt.u32.u64 [[P:%r[0-9]+]], [[ME]];
// CHECK-NEXT: mad.wide.u32 [[E:%rd[0-9]+]], [[P]], 8, [[PEERS]];
// CHECK-NEXT: ld.global.u64 [[HPG:%rd[0-9]+]], [[[E]]];
// CHECK-NEXT: cvta.to.global.u64 [[HP:%rd[0-9]+]], [[HPG]];
// CHECK-NEXT: sub.s64 [[OFF:%rd[0-9]+]], [[LOCAL]], [[OWN]];
// CHECK-NEXT: add.s64 [[REMOTE:%rd[0-9]+]], [[HP]], [[OFF]];
// CHECK-NEXT: bar.sync 1, 128;
// CHECK-NEXT: @[[LEADER]] red.release.sys.global.add.u32 [[[REMOTE]]], 1;
// CHECK-NEXT: @![[LEADER]] bra $[[DONE:semaphore_taken_[0-9]+]];
// CHECK-NEXT: $[[POLL:semaphore_poll_[0-9]+]]:
// CHECK-NEXT: ld.acquire.sys.global.u32 [[SEEN:%r[0-9]+]], [[[SEMS]]+12];
// CHECK-NEXT: setp.lt.u32 [[SHORT:%p[0-9]+]], [[SEEN]], 5;
// CHECK-NEXT: @[[SHORT]] bra $[[POLL]];
// CHECK-NEXT: sub.u32 [[LEFT:%r[0-9]+]], [[SEEN]], 5;
// CHECK-NEXT: atom.relaxed.sys.global.cas.b32 [[OLD:%r[0-9]+]], [[[SEMS]]+12], [[SEEN]], [[LEFT]];
// CHECK-NEXT: setp.ne.b32 [[LOST:%p[0-9]+]], [[OLD]], [[SEEN]];
// CHECK-NEXT: @[[LOST]] bra $[[POLL]];
// CHECK-NEXT: $[[DONE]]:
// CHECK-NEXT: bar.sync 1, 128;
// CHECK-NEXT: ret;
// SASS-LABEL: .text.semaphores:
// SASS:       REDG.E.ADD.STRONG.SYS
// SASS:       REDG.E.ADD.STRONG.SYS
// SASS:       LDG.E.STRONG.SYS
// SASS:       ATOMG.E.CAS.STRONG.SYS
func.func @semaphores() attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 8 : i64} {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c128 = arith.constant 128 : index
  %s = "smalti.slice_symmetric"(%c128) : (index) -> memref<16xi32, "symmetric">
  %me = "smalti.device_index"() : () -> index
  "smalti.semaphore_signal"(%s, %c3, %c1) {increment = 2 : i64} : (memref<16xi32, "symmetric">, index, index) -> ()
  "smalti.semaphore_signal"(%s, %me, %me) : (memref<16xi32, "symmetric">, index, index) -> ()
  "smalti.semaphore_wait"(%s, %c3) {value = 5 : i64} : (memref<16xi32, "symmetric">, index) -> ()
  return
}

// -----

// multimem (PTX 8.2): the multicast address is made global at the entry, a symmetric buffer
// is the same offset from it, and each thread accesses its elements as vector_load and
// vector_store would: 16-byte .v4.f32 vectors, .weak data accesses (the semaphores order
// them), .red relaxed at system scope.
// CHECK:      .version 8.2
// CHECK-LABEL: .visible .entry multimem_f32(
// CHECK:      ld.param.u64 [[MCP:%rd[0-9]+]], [multimem_f32_param_smalti_multicast];
// CHECK:      cvta.to.global.u64 [[MC:%rd[0-9]+]], [[MCP]];
// CHECK:      ld.global.v4.f32 {[[X0:%f[0-9]+]], [[X1:%f[0-9]+]], [[X2:%f[0-9]+]], [[X3:%f[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK-NEXT: ld.global.v4.f32 {[[Y0:%f[0-9]+]], [[Y1:%f[0-9]+]], [[Y2:%f[0-9]+]], [[Y3:%f[0-9]+]]}, [{{%rd[0-9]+}}+2048];
// CHECK-NEXT: add.s64 [[BUF:%rd[0-9]+]], [[MC]], 4096;
// CHECK-NEXT: add.s64 [[ST:%rd[0-9]+]], [[BUF]], [[T:%rd[0-9]+]];
// CHECK-NEXT: multimem.st.weak.global.v4.f32 [[[ST]]], {[[X0]], [[X1]], [[X2]], [[X3]]};
// CHECK-NEXT: multimem.st.weak.global.v4.f32 [[[ST]]+2048], {[[Y0]], [[Y1]], [[Y2]], [[Y3]]};
// CHECK-NEXT: add.s64 [[BUF2:%rd[0-9]+]], [[MC]], 4096;
// CHECK-NEXT: add.s64 [[ROW2:%rd[0-9]+]], [[BUF2]], 1024;
// CHECK-NEXT: add.s64 [[RED:%rd[0-9]+]], [[ROW2]], [[T]];
// CHECK-NEXT: multimem.red.relaxed.sys.global.add.v4.f32 [[[RED]]], {[[X0]], [[X1]], [[X2]], [[X3]]};
// CHECK-NEXT: multimem.red.relaxed.sys.global.add.v4.f32 [[[RED]]+2048], {[[Y0]], [[Y1]], [[Y2]], [[Y3]]};
// CHECK-NEXT: add.s64 [[BUF3:%rd[0-9]+]], [[MC]], 4096;
// CHECK-NEXT: add.s64 [[LD:%rd[0-9]+]], [[BUF3]], [[T]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.add.v4.f32 {[[R0:%f[0-9]+]], [[R1:%f[0-9]+]], [[R2:%f[0-9]+]], [[R3:%f[0-9]+]]}, [[[LD]]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.add.v4.f32 {{{.*}}}, [[[LD]]+2048];
// CHECK:      st.global.v4.f32 [{{%rd[0-9]+}}], {[[R0]], [[R1]], [[R2]], [[R3]]};
// SASS-LABEL: .text.multimem_f32:
// SASS:       REDG.E.ADD.F32x4.FTZ.RN.STRONG.SYS
// SASS:       LDGMC.E.ADD.F32x4.RN.STRONG.SYS
func.func @multimem_f32(%out: memref<8x128xf32>) attributes {smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4096 = arith.constant 4096 : index
  %buf = "smalti.slice_symmetric"(%c4096) : (index) -> memref<16x128xf32, "symmetric">
  %v = "smalti.vector_load"(%out, %c0, %c0) : (memref<8x128xf32>, index, index) -> vector<8x128xf32>
  "smalti.multimem_store"(%v, %buf, %c0, %c0) : (vector<8x128xf32>, memref<16x128xf32, "symmetric">, index, index) -> ()
  "smalti.multimem_red"(%v, %buf, %c2, %c0) {reduction = "add"} : (vector<8x128xf32>, memref<16x128xf32, "symmetric">, index, index) -> ()
  %r = "smalti.multimem_load_reduce"(%buf, %c0, %c0) {reduction = "add"} : (memref<16x128xf32, "symmetric">, index, index) -> vector<8x128xf32>
  "smalti.vector_store"(%r, %out, %c0, %c0) : (vector<8x128xf32>, memref<8x128xf32>, index, index) -> ()
  return
}

// -----

// f16 and bf16 move in pairs (.f16x2, .bf16x2: one .b32 register each); their sums
// accumulate in f32 (.acc::f32), min and max do not.
// CHECK:      .version 8.2
// CHECK-LABEL: .visible .entry multimem_f16(
// CHECK:      ld.param.u64 [[MCP:%rd[0-9]+]], [multimem_f16_param_smalti_multicast];
// CHECK:      cvta.to.global.u64 [[MC:%rd[0-9]+]], [[MCP]];
// CHECK:      ld.global.v4.b32 {[[H0:%r[0-9]+]], [[H1:%r[0-9]+]], [[H2:%r[0-9]+]], [[H3:%r[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK-NEXT: add.s64 [[A:%rd[0-9]+]], [[MC]], [[T:%rd[0-9]+]];
// CHECK-NEXT: multimem.st.weak.global.v4.f16x2 [[[A]]], {[[H0]], [[H1]], [[H2]], [[H3]]};
// CHECK-NEXT: add.s64 [[A2:%rd[0-9]+]], [[MC]], [[T]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.add.acc::f32.v4.f16x2 {[[S0:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, [[[A2]]];
// CHECK-NEXT: add.s64 [[A3:%rd[0-9]+]], [[MC]], [[T]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.max.v4.f16x2 {[[M0:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, [[[A3]]];
// CHECK-NEXT: add.rn.f16x2 {{%r[0-9]+}}, [[S0]], [[M0]];
// CHECK:      ld.global.v4.b32 {[[B0:%r[0-9]+]], [[B1:%r[0-9]+]], [[B2:%r[0-9]+]], [[B3:%r[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK-NEXT: add.s64 [[BUF:%rd[0-9]+]], [[MC]], 2048;
// CHECK-NEXT: add.s64 [[BA:%rd[0-9]+]], [[BUF]], [[T]];
// CHECK-NEXT: multimem.st.weak.global.v4.bf16x2 [[[BA]]], {[[B0]], [[B1]], [[B2]], [[B3]]};
// CHECK-NEXT: add.s64 {{%rd[0-9]+}}, [[MC]], 2048;
// CHECK-NEXT: add.s64 [[BR:%rd[0-9]+]], {{%rd[0-9]+}}, [[T]];
// CHECK-NEXT: multimem.red.relaxed.sys.global.add.v4.bf16x2 [[[BR]]], {[[B0]], [[B1]], [[B2]], [[B3]]};
// CHECK-NEXT: add.s64 {{%rd[0-9]+}}, [[MC]], 2048;
// CHECK-NEXT: add.s64 [[BL:%rd[0-9]+]], {{%rd[0-9]+}}, [[T]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.add.acc::f32.v4.bf16x2 {{{.*}}}, [[[BL]]];
// SASS-LABEL: .text.multimem_f16:
// SASS:       LDGMC.E.F32ADD.F16x8.RN.STRONG.SYS
// SASS:       LDGMC.E.MAX.F16x8.RN.STRONG.SYS
// SASS:       REDG.E.ADD.BF16x8.RN.STRONG.SYS
// SASS:       LDGMC.E.F32ADD.BF16x8.RN.STRONG.SYS
func.func @multimem_f16(%out: memref<8x128xf16>, %out2: memref<8x128xbf16>) attributes {
    smalti.kernel, smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c2048 = arith.constant 2048 : index
  %h = "smalti.slice_symmetric"(%c0) : (index) -> memref<8x128xf16, "symmetric">
  %b = "smalti.slice_symmetric"(%c2048) : (index) -> memref<8x128xbf16, "symmetric">
  %v = "smalti.vector_load"(%out, %c0, %c0) : (memref<8x128xf16>, index, index) -> vector<8x128xf16>
  "smalti.multimem_store"(%v, %h, %c0, %c0) : (vector<8x128xf16>, memref<8x128xf16, "symmetric">, index, index) -> ()
  %r = "smalti.multimem_load_reduce"(%h, %c0, %c0) {reduction = "add"} : (memref<8x128xf16, "symmetric">, index, index) -> vector<8x128xf16>
  %m = "smalti.multimem_load_reduce"(%h, %c0, %c0) {reduction = "max"} : (memref<8x128xf16, "symmetric">, index, index) -> vector<8x128xf16>
  %s = arith.addf %r, %m : vector<8x128xf16>
  "smalti.vector_store"(%s, %out, %c0, %c0) : (vector<8x128xf16>, memref<8x128xf16>, index, index) -> ()
  %w = "smalti.vector_load"(%out2, %c0, %c0) : (memref<8x128xbf16>, index, index) -> vector<8x128xbf16>
  "smalti.multimem_store"(%w, %b, %c0, %c0) : (vector<8x128xbf16>, memref<8x128xbf16, "symmetric">, index, index) -> ()
  "smalti.multimem_red"(%w, %b, %c0, %c0) {reduction = "add"} : (vector<8x128xbf16>, memref<8x128xbf16, "symmetric">, index, index) -> ()
  %q = "smalti.multimem_load_reduce"(%b, %c0, %c0) {reduction = "add"} : (memref<8x128xbf16, "symmetric">, index, index) -> vector<8x128xbf16>
  "smalti.vector_store"(%q, %out2, %c0, %c0) : (vector<8x128xbf16>, memref<8x128xbf16>, index, index) -> ()
  return
}

// -----

// multimem does not vectorise integers: one instruction per element. Stores and adds are
// .u32 / .u64, min and max signed (.s32 / .s64), and, or, xor bitwise (.b32 / .b64).
// CHECK:      .version 8.2
// CHECK-LABEL: .visible .entry multimem_int(
// CHECK:      ld.param.u64 [[MCP:%rd[0-9]+]], [multimem_int_param_smalti_multicast];
// CHECK:      cvta.to.global.u64 [[MC:%rd[0-9]+]], [[MCP]];
// CHECK:      ld.global.v4.b32 {[[I0:%r[0-9]+]], [[I1:%r[0-9]+]], [[I2:%r[0-9]+]], [[I3:%r[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK-NEXT: add.s64 [[A:%rd[0-9]+]], [[MC]], [[T:%rd[0-9]+]];
// CHECK-NEXT: multimem.st.weak.global.u32 [[[A]]], [[I0]];
// CHECK-NEXT: multimem.st.weak.global.u32 [[[A]]+4], [[I1]];
// CHECK-NEXT: multimem.st.weak.global.u32 [[[A]]+8], [[I2]];
// CHECK-NEXT: multimem.st.weak.global.u32 [[[A]]+12], [[I3]];
// CHECK-NEXT: add.s64 [[X:%rd[0-9]+]], [[MC]], [[T]];
// CHECK-NEXT: multimem.red.relaxed.sys.global.xor.b32 [[[X]]], [[I0]];
// CHECK-NEXT: multimem.red.relaxed.sys.global.xor.b32 [[[X]]+4], [[I1]];
// CHECK-NEXT: multimem.red.relaxed.sys.global.xor.b32 [[[X]]+8], [[I2]];
// CHECK-NEXT: multimem.red.relaxed.sys.global.xor.b32 [[[X]]+12], [[I3]];
// CHECK-NEXT: add.s64 [[L:%rd[0-9]+]], [[MC]], [[T]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.min.s32 [[M0:%r[0-9]+]], [[[L]]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.min.s32 [[M1:%r[0-9]+]], [[[L]]+4];
// CHECK-NEXT: multimem.ld_reduce.weak.global.min.s32 [[M2:%r[0-9]+]], [[[L]]+8];
// CHECK-NEXT: multimem.ld_reduce.weak.global.min.s32 [[M3:%r[0-9]+]], [[[L]]+12];
// CHECK-NEXT: add.s64 [[N:%rd[0-9]+]], [[MC]], [[T]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.or.b32 [[O0:%r[0-9]+]], [[[N]]];
// CHECK:      add.s32 {{%r[0-9]+}}, [[M0]], [[O0]];
// CHECK:      ld.global.v2.b64 {[[W0:%rd[0-9]+]], [[W1:%rd[0-9]+]]}, [{{%rd[0-9]+}}];
// CHECK:      multimem.red.relaxed.sys.global.add.u64 [[[R:%rd[0-9]+]]], [[W0]];
// CHECK-NEXT: multimem.red.relaxed.sys.global.add.u64 [[[R]]+8], [[W1]];
// CHECK:      multimem.ld_reduce.weak.global.max.s64 {{%rd[0-9]+}}, [[[Q:%rd[0-9]+]]];
// CHECK-NEXT: multimem.ld_reduce.weak.global.max.s64 {{%rd[0-9]+}}, [[[Q]]+8];
// CHECK:      multimem.st.weak.global.u64 [{{%rd[0-9]+}}], [[W0]];
// CHECK-NEXT: multimem.st.weak.global.u64 [{{%rd[0-9]+}}+8], [[W1]];
// CHECK:      multimem.red.relaxed.sys.global.and.b64 [{{%rd[0-9]+}}], [[W0]];
// SASS-LABEL: .text.multimem_int:
// SASS:       REDG.E.XOR.STRONG.SYS
// SASS:       LDGMC.E.MIN.S32.STRONG.SYS
func.func @multimem_int(%out: memref<4x128xi32>, %o64: memref<2x128xi64>) attributes {
    smalti.kernel, smalti.grid = array<i64: 1>, smalti.devices = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c2048 = arith.constant 2048 : index
  %buf = "smalti.slice_symmetric"(%c0) : (index) -> memref<4x128xi32, "symmetric">
  %b64 = "smalti.slice_symmetric"(%c2048) : (index) -> memref<2x128xi64, "symmetric">
  %v = "smalti.vector_load"(%out, %c0, %c0) : (memref<4x128xi32>, index, index) -> vector<4x128xi32>
  "smalti.multimem_store"(%v, %buf, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32, "symmetric">, index, index) -> ()
  "smalti.multimem_red"(%v, %buf, %c0, %c0) {reduction = "xor"} : (vector<4x128xi32>, memref<4x128xi32, "symmetric">, index, index) -> ()
  %r = "smalti.multimem_load_reduce"(%buf, %c0, %c0) {reduction = "min"} : (memref<4x128xi32, "symmetric">, index, index) -> vector<4x128xi32>
  %o = "smalti.multimem_load_reduce"(%buf, %c0, %c0) {reduction = "or"} : (memref<4x128xi32, "symmetric">, index, index) -> vector<4x128xi32>
  %ro = arith.addi %r, %o : vector<4x128xi32>
  "smalti.vector_store"(%ro, %out, %c0, %c0) : (vector<4x128xi32>, memref<4x128xi32>, index, index) -> ()
  %w = "smalti.vector_load"(%o64, %c0, %c0) : (memref<2x128xi64>, index, index) -> vector<2x128xi64>
  "smalti.multimem_red"(%w, %b64, %c0, %c0) {reduction = "add"} : (vector<2x128xi64>, memref<2x128xi64, "symmetric">, index, index) -> ()
  %x = "smalti.multimem_load_reduce"(%b64, %c0, %c0) {reduction = "max"} : (memref<2x128xi64, "symmetric">, index, index) -> vector<2x128xi64>
  "smalti.multimem_store"(%w, %b64, %c0, %c0) : (vector<2x128xi64>, memref<2x128xi64, "symmetric">, index, index) -> ()
  "smalti.multimem_red"(%w, %b64, %c0, %c0) {reduction = "and"} : (vector<2x128xi64>, memref<2x128xi64, "symmetric">, index, index) -> ()
  "smalti.vector_store"(%x, %o64, %c0, %c0) : (vector<2x128xi64>, memref<2x128xi64>, index, index) -> ()
  return
}

// -----

// TMA with symmetric buffers: a map over a symmetric buffer is one per device, in one
// parameter of 128 bytes per device; a copy through a peer's copy (remote_ref) takes that
// device's entry (a constant device: a constant offset; a traced one: mad.wide.u32), one
// through the own copy the entry of the device index read at the entry. A load fences the
// async proxy first (what it reads was written through the generic proxy, published by a
// semaphore); in a kernel whose TMA stores write symmetric buffers, a signal first waits for
// those writes (cp.async.bulk.wait_group 0) and fences the async proxy.
// CHECK-LABEL: .visible .entry peer_tma(
// CHECK-NEXT: .param .s32 peer_tma_param_arg0,
// CHECK-NEXT: .param .align 64 .b8 peer_tma_param_tmap0[512],
// CHECK-NEXT: .param .u64 peer_tma_param_smalti_device,
// CHECK:      mov.u64 [[M:%rd[0-9]+]], peer_tma_param_tmap0;
// CHECK-NEXT: cvta.param.u64 [[MAPS:%rd[0-9]+]], [[M]];
// CHECK:      ld.global.u32 [[DEV:%r[0-9]+]], [{{%rd[0-9]+}}];
// CHECK:      add.s64 [[M2:%rd[0-9]+]], [[MAPS]], 256;
// CHECK:      elect.sync _|[[E1:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[E1]] fence.proxy.async.global;
// CHECK-NEXT: @[[E1]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [[[M2]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}];
// CHECK:      mad.wide.u32 [[MP:%rd[0-9]+]], {{%r[0-9]+}}, 128, [[MAPS]];
// CHECK:      elect.sync _|[[E2:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[E2]] fence.proxy.async.global;
// CHECK-NEXT: @[[E2]] cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [[[MP]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}];
// CHECK:      mad.wide.u32 [[MOWN:%rd[0-9]+]], [[DEV]], 128, [[MAPS]];
// CHECK:      elect.sync _|[[E3:%p[0-9]+]], 4294967295;
// CHECK-NEXT: @[[E3]] cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [[[MOWN]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}];
// CHECK:      @[[LEAD:%p[0-9]+]] cp.async.bulk.wait_group 0;
// CHECK-NEXT: @[[LEAD]] fence.proxy.async.global;
// CHECK-NEXT: @[[LEAD]] red.release.sys.global.add.u32
// SASS-LABEL: .text.peer_tma:
// SASS:       UTMALDG.2D
// SASS:       UTMASTG.2D
func.func @peer_tma(%peer32: i32) attributes {
    smalti.kernel, smalti.grid = array<i64: 1>, smalti.devices = 4 : i64} {
  %peer = arith.index_cast %peer32 : i32 to index
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1024 = arith.constant 1024 : index
  %c16384 = arith.constant 16384 : index
  %bars = "smalti.slice_smem"(%c0) : (index) -> memref<1xi64, #gpu.address_space<workgroup>>
  %t = "smalti.slice_smem"(%c1024) : (index) -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %buf = "smalti.slice_symmetric"(%c0) : (index) -> memref<128x64xbf16, "symmetric">
  %sems = "smalti.slice_symmetric"(%c16384) : (index) -> memref<1xi32, "symmetric">
  "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>) -> ()
  %two = "smalti.remote_ref"(%buf, %c2) : (memref<128x64xbf16, "symmetric">, index) -> memref<128x64xbf16, "symmetric">
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 8192 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%two, %t, %bars, %c0, %c0, %c0) : (memref<128x64xbf16, "symmetric">, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %p0 = arith.constant 0 : i32
  "smalti.wait"(%bars, %c0, %p0) : (memref<1xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  %other = "smalti.remote_ref"(%buf, %peer) : (memref<128x64xbf16, "symmetric">, index) -> memref<128x64xbf16, "symmetric">
  "smalti.arrive_expect_tx"(%bars, %c0) {bytes = 8192 : i64} : (memref<1xi64, #gpu.address_space<workgroup>>, index) -> ()
  "smalti.async_load"(%other, %t, %bars, %c0, %c0, %c0) : (memref<128x64xbf16, "symmetric">, memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<1xi64, #gpu.address_space<workgroup>>, index, index, index) -> ()
  %p1 = arith.constant 1 : i32
  "smalti.wait"(%bars, %c0, %p1) : (memref<1xi64, #gpu.address_space<workgroup>>, index, i32) -> ()
  "smalti.async_store"(%t, %buf, %c0, %c0) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<128x64xbf16, "symmetric">, index, index) -> ()
  "smalti.async_store_wait"() {pending = 0 : i64} : () -> ()
  "smalti.semaphore_signal"(%sems, %c0, %peer) {increment = 1 : i64} : (memref<1xi32, "symmetric">, index, index) -> ()
  return
}
