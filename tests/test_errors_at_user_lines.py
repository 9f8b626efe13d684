"""Kernel failures found only when the kernel runs (in the simulator) name the user's source
line as well as the PTX line: the .mlir op, or the DSL kernel's Python line (through the
`.loc` line info smalti's PTX carries). Found while tracing, they name the Python line."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.runtime import compile_mlir, run_simulated
from smalti.sim import SimError
from tests.dsl_helpers import isolated_cache, line_of  # noqa: F401

WINDOW = """func.func @k(%a: memref<256xf32>, %i: i32, %out: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %j = arith.index_cast %i : i32 to index
  %v = "smalti.vector_load"(%a, %j) : (memref<256xf32>, index) -> vector<128xf32>
  "smalti.vector_store"(%v, %out, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}
"""


def test_an_out_of_bounds_load_names_the_mlir_line_and_the_ptx_line():
    compiled = compile_mlir(WINDOW, "window.mlir")
    a, out = np.zeros(256, np.float32), np.zeros(128, np.float32)
    np.testing.assert_array_equal(run_simulated(compiled, a + 1, np.int32(128), out)[-1], 1)
    with pytest.raises(SimError, match=r"out-of-bounds global load .* at line \d+ "
                                       r"\(window\.mlir:5:8\): `ld\.global") as caught:
        run_simulated(compiled, a, np.int32(200), out)
    assert str(caught.value.source) == "window.mlir:5:8"


def test_an_out_of_bounds_window_in_a_dsl_kernel_is_refused_at_its_python_line():
    """The loop counter slices past the vector's end (the case that used to reach the
    simulator and name only a PTX line): found while tracing, at the user's line."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    def running(x_ref, o_ref):
        def body(k, acc):
            return acc + x_ref[k * 64:k * 64 + 128]  # k = 2 reads [128, 256)

        o_ref[...] = sd.fori(0, 3, body, sd.zeros((128,)))

    line = line_of("k = 2 reads", running.fn)
    with pytest.raises(IndexError, match=rf"^{__file__}:{line}:\d+: the window of dim 0 of "
                                         r"x_ref reaches \[128, 256\)"):
        jax.jit(running)(jnp.zeros(192, jnp.float32))


def test_a_deadlock_in_a_dsl_kernel_names_its_python_line():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128,), jnp.float32), smem=[sd.Barriers(1)])
    def stuck(x_ref, o_ref, bars):
        bars[0].wait(0)  # phase 0 never completes
        o_ref[...] = x_ref[...]

    line = line_of("never completes", stuck.fn)
    with pytest.raises(Exception, match=rf"mbarrier deadlock.*\({__file__}:{line}:\d+\)"):
        jax.block_until_ready(jax.jit(stuck)(jnp.ones(128, jnp.float32)))
