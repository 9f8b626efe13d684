"""debug_print through the CUDA launcher: after a launch on the GPU, the lines printed from the
kernel's debug buffer are exactly the simulator's. Skipped where JAX has no GPU (conftest.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from smalti.runtime import simulate
from smalti.runtime.jax_integration import call_kernel
from tests.dsl_helpers import isolated_cache  # noqa: F401
from tests.test_jax_integration import (
    DEBUG_OUTPUTS,
    compile_debug_kernel,
    debug_input,
    simulated_module,
)


def test_debug_print_on_gpu_prints_the_simulators_lines(capsys):
    compiled = compile_debug_kernel()
    a = debug_input()
    expected: list[str] = []
    simulated = simulate.run_simulated(simulated_module(compiled), a, np.zeros_like(a),
                                       print_fn=expected.append)
    assert len(expected) == 6 and "last of 3 runs" in expected[-1]
    run = jax.jit(lambda x: call_kernel(compiled, [x], DEBUG_OUTPUTS)[0])
    x = jnp.asarray(a)
    capsys.readouterr()
    for _ in range(2):  # the second launch must not count the first one's runs
        out = run(x)
        out.block_until_ready()
        jax.effects_barrier()
        assert capsys.readouterr().err == "".join(f"{line}\n" for line in expected)
    assert out.devices() == x.devices() and next(iter(out.devices())).platform == "gpu"
    np.testing.assert_array_equal(np.asarray(out), simulated[-1])
