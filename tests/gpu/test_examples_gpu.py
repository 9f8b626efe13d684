"""The examples on a Hopper GPU (through the FFI launcher) against jax.numpy, and a benchmark
printing their throughput. Skipped where JAX has no GPU (see conftest.py)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from tests.dsl_helpers import isolated_cache, load_example  # noqa: F401


def _inputs(rows: int, cols: int):
    keys = jax.random.split(jax.random.key(0), 3)
    return (jax.random.normal(keys[0], (rows, cols), jnp.float32),
            jax.random.normal(keys[1], (cols,), jnp.float32),
            jax.random.normal(keys[2], (rows,), jnp.float32))


def test_pointwise_on_gpu_matches_jax_numpy_exactly():
    example = load_example("pointwise")
    x, scale, shift = _inputs(4096, 4096)
    out = jax.jit(example.scale_shift)(x, scale, shift)
    assert out.devices() == x.devices()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(example.reference(x, scale, shift)))


def test_softmax_on_gpu_matches_jax_nn_softmax():
    example = load_example("softmax")
    x = jax.random.normal(jax.random.key(1), (4096, 4096), jnp.float32)
    out = jax.jit(example.softmax)(x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax.nn.softmax(x, axis=-1)),
                               rtol=1e-5, atol=1e-7)


def _seconds(fn, *args, repeats: int = 20) -> float:
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / repeats


def test_benchmark_prints_throughput_against_xla(capsys):
    pointwise, softmax = load_example("pointwise"), load_example("softmax")
    x, scale, shift = _inputs(8192, 8192)
    cases = [
        ("pointwise", jax.jit(pointwise.scale_shift), jax.jit(pointwise.reference),
         (x, scale, shift), 2 * x.nbytes),
        ("softmax", jax.jit(softmax.softmax), jax.jit(lambda v: jax.nn.softmax(v, axis=-1)),
         (x,), 3 * x.nbytes),  # read twice, write once
    ]
    with capsys.disabled():
        for name, kernel, reference, args, traffic in cases:
            ours, theirs = _seconds(kernel, *args), _seconds(reference, *args)
            print(f"\n{name} 8192x8192 f32: smalti {traffic / ours / 1e9:.0f} GB/s "
                  f"({ours * 1e6:.0f} us), XLA {traffic / theirs / 1e9:.0f} GB/s "
                  f"({theirs * 1e6:.0f} us)")
            assert ours > 0 and theirs > 0
