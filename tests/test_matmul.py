"""The reference matmul (examples/matmul_128x128x64.mlir): ptxas, SASS, simulator numbers,
and hazards planted by removing one wait or fence from the generated PTX."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.simulate import check_arguments
from smalti.runtime.tensor_maps import sim_tensor_maps
from smalti.sim import SimError, run_ptx

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "matmul_128x128x64.mlir"
BF16 = ml_dtypes.bfloat16


@cache
def compiled():
    return compile_mlir(EXAMPLE.read_text(), EXAMPLE.name)


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((512, 512)).astype(BF16)
    b = rng.standard_normal((512, 512)).astype(BF16)
    return a, b, np.zeros((512, 512), BF16)


def _assert_within_one_ulp(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Within one bf16 ulp of the f32 reference rounded to bf16, plus (for results that
    cancel to near zero) the f32 summation-order error bound 2^-20 * (|A| @ |B|)."""
    wide_a, wide_b = a.astype(np.float32), b.astype(np.float32)
    expected = (wide_a @ wide_b).astype(BF16).astype(np.float32)
    ulp = np.spacing(np.abs(expected).astype(BF16)).astype(np.float32)
    tolerance = ulp + 2.0**-20 * (np.abs(wide_a) @ np.abs(wide_b))
    error = np.abs(got.astype(np.float32) - expected)
    assert (error <= tolerance).all(), f"{int((error > tolerance).sum())} elements off"
    assert (error == 0).mean() > 0.99


def test_ptxas_compiles_without_spills_or_performance_warnings():
    result = compile_ptx(compiled().ptx, arch="sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log
    assert not re.search(r"C75\d\d", result.log), result.log
    assert re.search(r"Used \d+ registers", result.log)
    counts = sass_opcode_counts(disassemble(result.cubin))
    assert any(k.startswith("HGMMA") for k in counts)
    assert any(k.startswith("UTMALDG") for k in counts)
    assert any(k.startswith("UTMASTG") for k in counts)


def test_signature_carries_tensor_maps_and_dynamic_smem():
    signature = compiled().signature()
    assert signature.smem_bytes == 66560
    boxes = {(r.arg, r.box, r.swizzle) for r in signature.tensor_maps}
    assert boxes == {(0, (128, 64), 128), (1, (64, 64), 128), (2, (128, 64), 128)}


@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_simulator_matches_numpy_512(policy):
    a, b, c = _inputs()
    out = run_simulated(compiled(), a, b, c, async_completion=policy, seed=3)[-1]
    _assert_within_one_ulp(out, a, b)


def _run_ptx(ptx: str) -> None:
    signature = compiled().signature()
    buffers = check_arguments(signature, _inputs())
    run_ptx(ptx, signature.name, signature.grid, signature.block,
            [*buffers, *sim_tensor_maps(signature, buffers)], signature.smem_bytes,
            async_completion="latest")


@pytest.mark.parametrize("pattern", [
    r"\twgmma\.wait_group\.sync\.aligned 0;\n",                       # wgmma results read early
    r"\tfence\.proxy\.async\.shared::cta;\n",                          # st.shared invisible to TMA
    r"\$wait_\d+:\n\tmbarrier\.try_wait[^\n]*\n\t@!%p\d+ bra \$wait_\d+;\n",  # TMA data read early
    r"\t@%p\d+ cp\.async\.bulk\.wait_group\.read 0;\n",           # exit while TMA still reads
])
def test_removing_a_wait_or_fence_is_reported(pattern):
    ptx = compiled().ptx
    planted, count = re.subn(pattern, "", ptx, count=1)
    assert count == 1, f"pattern {pattern!r} not found in the generated PTX"
    with pytest.raises(SimError):
        _run_ptx(planted)
