"""The Hopper FP8 matmul with per-block scales (examples/fp8_blockscaled_matmul.py): numbers
against the dequantized product, scales applied in the main loop (a scale per K block that
differs per row, so applying them once at the end would be wrong), no register spills, and
shapes it cannot take refused by name."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from smalti.runtime.compiler import CompiledModule
from tests.dsl_helpers import load_example

S = jax.ShapeDtypeStruct
example = load_example("fp8_blockscaled_matmul")


def test_main_loop_scaling_matches_the_dequantized_product():
    rng = np.random.default_rng(7)
    m, n, k = 128, 256, 512
    # Rows whose magnitude changes along K: each 1x128 block gets its own scale.
    x = rng.standard_normal((m, k)) * np.repeat(rng.uniform(0.01, 100, (m, k // 128)), 128, 1)
    a, a_scale = example.quantize(x, 1)
    bt, bt_scale = example.quantize(rng.standard_normal((n, k)), 128)
    out = np.asarray(example.fp8_matmul(a, a_scale, bt, bt_scale), np.float64)
    expected = example.reference(a, a_scale, bt, bt_scale)
    ulp = np.spacing(np.abs(expected).astype(ml_dtypes.bfloat16)).astype(np.float64)
    assert (np.abs(out - expected) <= ulp + 1e-3 * np.abs(expected).max()).all()
    scaled_at_the_end = (a.astype(np.float64) @ bt.astype(np.float64).T) * a_scale.mean(1)[:, None]
    assert not np.allclose(out, scaled_at_the_end, rtol=1e-2)


def test_no_register_spills():
    specs = (S((128, 512), jnp.float8_e4m3fn), S((128, 4), jnp.float32),
             S((256, 512), jnp.float8_e4m3fn), S((2, 4), jnp.float32))
    _, compiled = example.fp8_matmul.compile(*specs)
    report = CompiledModule(compiled.ptx, {compiled.name: compiled.signature}).assemble(
        ).reports[compiled.name]
    assert report.spill_stores == report.spill_loads == 0


def test_shapes_it_cannot_take_are_refused():
    with pytest.raises(ValueError, match=r"fp8_matmul needs A \[M, K\], its scales"):
        example.fp8_matmul.trace(S((128, 384), jnp.float8_e4m3fn), S((128, 3), jnp.float32),
                                 S((128, 384), jnp.float8_e4m3fn), S((1, 3), jnp.float32))
