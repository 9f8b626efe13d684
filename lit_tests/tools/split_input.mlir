// RUN: smalti-opt %s --split-input-file | filecheck %s
// RUN: smalti-opt %s | filecheck %s --check-prefix=WHOLE

// Each chunk is its own module; outputs are joined by the marker, in order.
// CHECK:      module {
// CHECK-NEXT:   func.func @first()
// CHECK-NOT:    func.func @second
// CHECK:      // -----
// CHECK-NEXT: module {
// CHECK-NEXT:   func.func @second()
// CHECK:      // -----
// CHECK-NEXT: module {
// CHECK-NEXT:   func.func @third_a()
// CHECK:        func.func @third_b()

// Without the flag the markers are comments: one module holds all functions.
// WHOLE:     module {
// WHOLE:       func.func @first()
// WHOLE:       func.func @second()
// WHOLE:       func.func @third_a()
// WHOLE-NOT: // -----

func.func @first() {
  return
}

// -----

func.func @second() {
  return
}

// -----

// Two top-level ops in one chunk are wrapped in one module, as mlir-opt does.
func.func @third_a() {
  return
}
func.func @third_b() {
  return
}
