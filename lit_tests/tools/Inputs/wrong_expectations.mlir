func.func @f(%a: i32) -> i32 {
  // expected-error @+1 {{this message is not the one produced}}
  return %b : i32
}

// -----

// expected-warning @+1 {{never emitted}}
func.func @g() {
  return
}

// -----

// expected-error @+1 missing braces
func.func @h() {
  return
}
