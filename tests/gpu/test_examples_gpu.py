"""The examples on a Hopper GPU (through the FFI launcher) against jax.numpy, and benchmarks
printing their throughput against XLA's (GB/s for the memory-bound kernels, TFLOP/s for the
matmuls and flash attention). Skipped where JAX has no GPU (see conftest.py)."""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.dsl_helpers import isolated_cache, load_example  # noqa: F401

BF16 = jnp.bfloat16
F32 = jnp.float32


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


def _bf16_normal(seed: int, *shapes: tuple[int, ...]) -> tuple[jax.Array, ...]:
    keys = jax.random.split(jax.random.key(seed), len(shapes))
    return tuple(jax.random.normal(key, shape, F32).astype(BF16)
                 for key, shape in zip(keys, shapes, strict=True))


def assert_matmul_close(got: jax.Array, want: jax.Array) -> None:
    """`got` within one bf16 ulp of the (bf16) reference, plus 1e-2: f32 sums of thousands
    of products taken in another order (by other tensor-core instructions) differ by ~1e-3,
    while a wrong tile, stage or K step is off by O(1) in sums of size ~sqrt(K)."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    bound = np.spacing(np.abs(want).astype(BF16)).astype(np.float32) + 1e-2
    error = np.abs(got - want)
    assert not (error > bound).any(), (f"{int((error > bound).sum())} of {error.size} elements "
                                       f"off by more than a bf16 ulp + 1e-2 (max |error| "
                                       f"{error.max():.3g})")


# The kernels under test: (examples/NAME.py, its kernel function).
MATMULS = [("matmul", "matmul"), ("matmul_ws", "matmul_ws")]


@pytest.mark.parametrize("name, kernel", MATMULS, ids=[name for name, _ in MATMULS])
def test_matmul_on_gpu_matches_jnp_dot(name, kernel):
    """M, N and K all differ, so a transposed index or a swapped grid axis shows."""
    example = load_example(name)
    a, b = _bf16_normal(2, (2048, 4096), (4096, 1024))
    out = jax.jit(getattr(example, kernel))(a, b)
    assert out.shape == (2048, 1024) and out.dtype == BF16 and out.devices() == a.devices()
    assert_matmul_close(out, jax.jit(example.reference)(a, b))


def attention_reference(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool) -> np.ndarray:
    """jax.nn.dot_product_attention in f32 at full matmul precision (no TF32)."""
    q, k, v = (x.astype(F32) for x in (q, k, v))
    with jax.default_matmul_precision("highest"):
        out = jax.jit(xla_attention, static_argnames="causal")(q, k, v, causal=causal)
    return np.asarray(out)


def xla_attention(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool,
                  implementation: str | None = None) -> jax.Array:
    """jax.nn.dot_product_attention on (batch * heads, seq, d) arrays, as one head each."""
    q, k, v = (x[:, :, None, :] for x in (q, k, v))  # (batch, seq, 1 head, d)
    return jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                        implementation=implementation)[:, :, 0, :]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_flash_attention_on_gpu_matches_dot_product_attention(head_dim, causal):
    example = load_example("flash_attention")
    shape = (8, 2048, head_dim)
    q, k, v = _bf16_normal(3, shape, shape, shape)
    out = jax.jit(example.flash_attention, static_argnames="causal")(q, k, v, causal=causal)
    assert out.shape == shape and out.dtype == BF16 and out.devices() == q.devices()
    np.testing.assert_allclose(np.asarray(out, np.float32),
                               attention_reference(q, k, v, causal), atol=2e-2, rtol=1e-2)


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


def tflops_cases(size: int, heads: int, seq: int) -> list[tuple]:
    """(name, smalti, [(baseline name, baseline)], arguments, FLOPs): the matmuls at
    size^3 against jnp.dot, flash attention on heads x seq x d (d 64 and 128) against
    jax.nn.dot_product_attention (XLA's, and cuDNN's flash attention, which may not be
    installed). A causal pass counts half the FLOPs of a full one."""
    cases = []
    a, b = _bf16_normal(4, (size, size), (size, size))
    for name, kernel in MATMULS:
        example = load_example(name)
        cases.append((f"{name} {size}^3 bf16", jax.jit(getattr(example, kernel)),
                      [("jnp.dot", jax.jit(example.reference))], (a, b), 2 * size ** 3))
    attention = load_example("flash_attention").flash_attention
    for head_dim in (64, 128):
        shape = (heads, seq, head_dim)
        for causal in (False, True):
            baselines = [(label, jax.jit(functools.partial(
                xla_attention, causal=causal, implementation=implementation)))
                for label, implementation in (("XLA", None), ("cuDNN", "cudnn"))]
            cases.append((f"flash attention {heads}x{seq}x{head_dim} bf16"
                          f"{' causal' if causal else ''}",
                          jax.jit(functools.partial(attention, causal=causal)), baselines,
                          _bf16_normal(5, shape, shape, shape),
                          4 * heads * seq * seq * head_dim // (2 if causal else 1)))
    return cases


def test_benchmark_prints_tflops_against_xla(capsys):
    with capsys.disabled():
        for name, kernel, baselines, args, flops in tflops_cases(4096, 32, 4096):
            ours = _seconds(kernel, *args)
            line = f"\n{name}: smalti {flops / ours / 1e12:.0f} TFLOP/s ({ours * 1e6:.0f} us)"
            for baseline, fn in baselines:
                try:
                    theirs = _seconds(fn, *args)
                except Exception as error:
                    if baseline != "cuDNN":  # cuDNN may be missing or reject the shape
                        raise
                    line += f", cuDNN did not run ({type(error).__name__})"
                    continue
                line += (f", {baseline} {flops / theirs / 1e12:.0f} TFLOP/s "
                         f"({theirs * 1e6:.0f} us)")
            print(line)
            assert ours > 0
