// RUN: smalti-opt %s --split-input-file --verify-diagnostics --smalti-verify

// persistent_tiles (smalti/dialect/ops_launch_control.py): a body of one block whose
// arguments are the three block ids, at the top level of the kernel, once.

func.func @two_ids() attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  // expected-error @+1 {{'smalti.persistent_tiles' op expects a body with three index arguments (the block ids x, y, z), got index, index}}
  "smalti.persistent_tiles"() ({
  ^bb0(%x: index, %y: index):
  }) : () -> ()
  return
}

// -----

func.func @i32_ids() attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  // expected-error @+1 {{expects a body with three index arguments (the block ids x, y, z), got i32, index, index}}
  "smalti.persistent_tiles"() ({
  ^bb0(%x: i32, %y: index, %z: index):
  }) : () -> ()
  return
}

// -----

func.func @no_body() attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  // expected-error @+1 {{'smalti.persistent_tiles' op expects a body of one block, got 0}}
  "smalti.persistent_tiles"() ({
  }) : () -> ()
  return
}

// -----

func.func @in_a_loop() attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c2 step %c1 {
    // expected-error @+1 {{'smalti.persistent_tiles' op must stand at the top level of the kernel body (every thread of the block runs its loop), not inside another op}}
    "smalti.persistent_tiles"() ({
    ^bb0(%x: index, %y: index, %z: index):
    }) : () -> ()
  }
  return
}

// -----

func.func @twice() attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  "smalti.persistent_tiles"() ({
  ^bb0(%x: index, %y: index, %z: index):
  }) : () -> ()
  // expected-error @+1 {{'smalti.persistent_tiles' op is the kernel's second persistent_tiles: after the first one's failed request, the PTX ISA leaves another undefined}}
  "smalti.persistent_tiles"() ({
  ^bb0(%x: index, %y: index, %z: index):
  }) : () -> ()
  return
}

// -----

func.func @operand(%n: i32) attributes {smalti.kernel, smalti.grid = array<i64: 4>} {
  // expected-error @+1 {{'smalti.persistent_tiles' op expects 0 operands, got 1}}
  "smalti.persistent_tiles"(%n) ({
  ^bb0(%x: index, %y: index, %z: index):
  }) : (i32) -> ()
  return
}
