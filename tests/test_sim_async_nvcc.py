"""PTX that nvcc wrote (tests/fixtures/cuda/*.cu, inline PTX for TMA, mbarrier and wgmma),
run in the simulator and checked against numpy under every async completion policy."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.sim import TensorMap, run_ptx

FIXTURES = Path(__file__).parent / "fixtures" / "cuda"
POLICIES = [("eager", 0), ("latest", 0), ("random", 4)]


def fixture(name: str) -> tuple[str, str]:
    """The PTX text of fixture `name` and its (mangled) kernel name."""
    ptx = (FIXTURES / f"{name}.ptx").read_text()
    return ptx, re.search(r"\.entry (\w+)", ptx).group(1)


@pytest.mark.parametrize("policy", POLICIES)
def test_tma_mbarrier_tile_copy(policy):
    ptx, kernel = fixture("tma_copy")
    a = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    out = np.zeros_like(a)
    run_ptx(ptx, kernel, 6, 128, [TensorMap(a, box=(32, 32)), out, 96, 3],
            async_completion=policy[0], seed=policy[1])
    np.testing.assert_array_equal(out, 2 * a)


@pytest.mark.parametrize("policy", POLICIES)
def test_wgmma_bf16_matmul(policy):
    ptx, kernel = fixture("wgmma_matmul")
    rng = np.random.default_rng(1)
    m, n, k = 128, 64, 128
    a = (rng.integers(-8, 9, (m, k)) / 8).astype(ml_dtypes.bfloat16)
    b = (rng.integers(-8, 9, (n, k)) / 8).astype(ml_dtypes.bfloat16)
    c = np.zeros((m, n), np.float32)
    run_ptx(ptx, kernel, (n // 64, m // 64), 128, [a, b, c, n, k],
            async_completion=policy[0], seed=policy[1])
    expected = a.astype(np.float64) @ b.astype(np.float64).T
    np.testing.assert_array_equal(c, expected.astype(np.float32))
