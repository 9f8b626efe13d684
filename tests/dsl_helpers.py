"""Shared by the DSL and JAX tests: an isolated compile cache, example loading, the
skip for kernels whose ops other engineers have not given a lowering yet, and the operands
and checks of the matmul examples' tests."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """examples/NAME.py as a module."""
    spec = importlib.util.spec_from_file_location(f"smalti_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(marker: str, fn) -> int:
    """The line number, in fn's file, of the source line of `fn` containing `marker`."""
    lines, first = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if marker in text:
            return first + offset
    raise AssertionError(f"{marker!r} not in the source of {fn.__name__}")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test compiles into its own cache directory."""
    monkeypatch.setenv("SMALTI_CACHE_DIR", str(tmp_path / "smalti-cache"))


def bf16_matmul_specs(m: int, n: int, k: int) -> tuple[jax.ShapeDtypeStruct, ...]:
    """The specs of a bf16 matmul's A (m, k) and B (k, n)."""
    return jax.ShapeDtypeStruct((m, k), jnp.bfloat16), jax.ShapeDtypeStruct((k, n), jnp.bfloat16)


def normal_bf16_operands(seed: int, m: int, n: int, k: int) -> tuple[jax.Array, jax.Array]:
    """Standard-normal bf16 A (m, k) and B (k, n) from jax.random key `seed`."""
    keys = jax.random.split(jax.random.key(seed), 2)
    return (jax.random.normal(keys[0], (m, k), jnp.float32).astype(jnp.bfloat16),
            jax.random.normal(keys[1], (k, n), jnp.float32).astype(jnp.bfloat16))


def quantized_operands(example: ModuleType, m: int, n: int, k: int,
                       seed: int) -> tuple[np.ndarray, ...]:
    """A (m, k) and B (n, k) of standard-normal values quantised by `example.quantize`, each
    followed by its scales."""
    rng = np.random.default_rng(seed)
    a, a_scale = example.quantize(rng.standard_normal((m, k)).astype(np.float32))
    b, b_scale = example.quantize(rng.standard_normal((n, k)).astype(np.float32))
    return a, a_scale, b, b_scale


def assert_within_one_bf16_ulp(out: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """`out` is `exact` rounded to bf16, give or take the f32 accumulation's rounding (one
    bf16 ulp); returns `exact` in f32."""
    expected = exact.astype(np.float32)
    ulp = np.spacing(np.abs(expected).astype(ml_dtypes.bfloat16)).astype(np.float32)
    error = np.abs(np.asarray(out, np.float32) - expected)
    assert (error <= ulp).all(), float(error.max())
    return expected
