"""Flash attention on `sd.emit_pipeline` (examples/flash_attention_pipelined.py): numbers
under jax.jit and with adversarial async completion against jax.nn.dot_product_attention,
causal tiles past the diagonal never loaded, the model's stage choice recorded, and its main
loop in SASS against the hand-written kernel's (examples/flash_attention.py). Also the two
pipeline features attention needs: squeezed BlockSpec dims and a `last_step` body."""

from __future__ import annotations

from functools import cache

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import smalti.dsl as sd
from smalti.dialect.schedule_attr import kernel_schedules
from smalti.ptx.sass import main_loop
from smalti.ptx.toolchain import disassemble
from smalti.runtime import run_simulated
from smalti.runtime.cache import ptxas_available
from smalti.runtime.compiler import compile_module
from tests.dsl_helpers import isolated_cache, line_of, load_example  # noqa: F401

BF16, F32 = jnp.bfloat16, jnp.float32
ATOL = 2e-2
THIS_FILE = __file__


@cache
def example():
    return load_example("flash_attention_pipelined")


def inputs(heads: int, seq: int, head_dim: int, seed: int = 0) -> tuple[jax.Array, ...]:
    keys = jax.random.split(jax.random.key(seed), 3)
    return tuple(jax.random.normal(key, (heads, seq, head_dim), F32).astype(BF16)
                 for key in keys)


def expected(q, k, v, causal: bool) -> np.ndarray:
    """jax.nn.dot_product_attention in f32 (one head per leading index)."""
    q, k, v = (jnp.asarray(x).astype(F32)[:, :, None, :] for x in (q, k, v))
    return np.asarray(jax.nn.dot_product_attention(q, k, v, is_causal=causal)[:, :, 0, :])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq, head_dim", [(128, 64), (256, 64), (256, 128)])
def test_pipelined_flash_attention_matches_dot_product_attention(seq, head_dim, causal):
    q, k, v = inputs(2, seq, head_dim)
    out = jax.jit(example().flash_attention, static_argnames="causal")(q, k, v, causal=causal)
    assert out.shape == q.shape and out.dtype == BF16
    np.testing.assert_allclose(np.asarray(out, np.float32), expected(q, k, v, causal),
                               atol=ATOL, rtol=0)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_no_hazards_when_async_work_completes_late(causal):
    """Every TMA copy and wgmma completes as late as allowed: a missing wait or fence in the
    generated pipeline would be a SimError. Grid (2, 2, 2)."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 256, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    spec = jax.ShapeDtypeStruct(q.shape, BF16)
    kernel = example().causal_attention if causal else example().attention
    compiled = compile_module(kernel.trace(spec, spec, spec).module)
    result = run_simulated(compiled, q, k, v, np.zeros_like(q), async_completion="latest",
                           seed=5)[-1]
    np.testing.assert_allclose(result.astype(np.float32), expected(q, k, v, causal),
                               atol=ATOL, rtol=0)


def test_causal_attention_never_loads_tiles_past_the_diagonal():
    """NaN keys and values after row 128 would poison any Q block that loaded them, masked
    or not: the pipeline's prefetches stop at the (traced) step count."""
    q, k, v = inputs(1, 256, 64, seed=3)
    poisoned_k, poisoned_v = (x.at[:, 128:, :].set(jnp.nan) for x in (k, v))
    run = jax.jit(example().flash_attention, static_argnames="causal")
    clean = np.asarray(run(q, k, v, causal=True), np.float32)
    poisoned = np.asarray(run(q, poisoned_k, poisoned_v, causal=True), np.float32)
    np.testing.assert_array_equal(poisoned[:, :128], clean[:, :128])
    assert np.isnan(poisoned[:, 128:]).all()


def test_the_stage_count_is_the_models_and_recorded():
    spec = jax.ShapeDtypeStruct((2, 512, 64), BF16)
    traced = example().attention.trace(spec, spec, spec)
    (func,) = [op for op in traced.module.regions[0].blocks[0].operations
               if "smalti.kernel" in op.attributes]
    (fields,) = kernel_schedules(func)
    # a step: K and V tiles of 64 x 64 bf16, S (64x64x64) and P V (64x64x64) on the cores
    assert (fields["step_bytes"], fields["flops_per_step"]) == (16384, 2 * 2 * 64 ** 3)
    assert (fields["stages"], fields["given"], fields["steps"]) == (6, 0, 8)


@cache
def loop_per_hgmma(name: str, kernel: str, head_dim: int) -> float:
    # 2048 keys: 32 K/V steps stay a loop (ptxas unrolls the 8 steps of 512 keys whole)
    spec = jax.ShapeDtypeStruct((2, 2048, head_dim), BF16)
    cubin = getattr(load_example(name), kernel).compile(spec, spec, spec)[1].cubin
    loop = main_loop(disassemble(cubin))
    return loop.length / loop.hgmma


@pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")
@pytest.mark.parametrize("kernel", ["attention", "causal_attention"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_main_loop_is_as_short_as_the_hand_written_one(kernel, head_dim):
    """SASS instructions of the innermost loop holding an HGMMA, per HGMMA (a K/V step has
    the same HGMMAs in both kernels): within 5% of the hand-written kernel's."""
    ours = loop_per_hgmma("flash_attention_pipelined", kernel, head_dim)
    theirs = loop_per_hgmma("flash_attention", kernel, head_dim)
    assert ours <= 1.05 * theirs, (ours, theirs)


def row_sums_kernel(steps: int, last: bool):
    """Sums 64-row blocks of x[1] (a squeezed leading dim); with `last`, the final block
    counts ten times."""

    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 128), F32))
    def sums(x_ref, o_ref):
        spec = sd.BlockSpec((None, 64, 128), lambda j: (1, j, 0))

        def add(_, block, acc):
            return acc + block[...]

        def add_ten(_, block, acc):
            return acc + block[...] * 10.0

        o_ref[...] = sd.emit_pipeline(add, grid=steps, in_specs=[spec],
                                      init_carry=sd.zeros((64, 128), F32),
                                      last_step=add_ten if last else None)(x_ref)

    return sums


@pytest.mark.parametrize("steps", [1, 3, 5])
@pytest.mark.parametrize("last", [False, True])
def test_squeezed_dims_and_a_last_step(steps, last):
    x = np.random.default_rng(steps).standard_normal((2, 64 * steps, 128)).astype(np.float32)
    got = np.asarray(jax.jit(row_sums_kernel(steps, last))(x))
    blocks = x[1].reshape(steps, 64, 128)
    want = blocks.sum(0) + (9.0 * blocks[-1] if last else 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_last_step_with_the_wrong_signature_names_the_line():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((64, 128), F32))
    def misuse(x_ref, o_ref):
        o_ref[...] = sd.emit_pipeline(  # MARK: last
            lambda _, block, acc: acc + block[...], grid=2,
            in_specs=[sd.BlockSpec((None, 64, 128), lambda j: (0, j, 0))],
            init_carry=sd.zeros((64, 128), F32), last_step=lambda _, acc: acc)(x_ref)

    with pytest.raises(TypeError, match=r"emit_pipeline's last_step <lambda> must take "
                                        r"\(indices, in0, carry\)") as caught:
        misuse.trace(jax.ShapeDtypeStruct((1, 128, 128), F32))
    assert str(caught.value).startswith(f"{THIS_FILE}:{line_of('MARK: last', misuse.fn)}:")
    with pytest.raises(ValueError, match=r"two or more positive Python ints \(and None for "
                                         r"squeezed dims\)"):
        sd.BlockSpec((None, 64), lambda j: (0, j))
