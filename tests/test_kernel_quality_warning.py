"""A kernel that spills does not run silently: `kernel.compile` returns ptxas's report, and
spills (or a ptxas performance failure) are a KernelQualityWarning at the kernel's line."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import pytest

import smalti.dsl as sd
from smalti.ptx.ptxas_log import PtxasReport
from smalti.runtime.cache import ptxas_available
from smalti.runtime.quality import KernelQualityWarning, quality_problems
from tests.dsl_helpers import isolated_cache  # noqa: F401

needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not installed")


@needs_ptxas
def test_a_tile_too_large_for_the_registers_warns_at_the_kernels_line():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 512), jnp.float32))
    def whole_tile(x_ref, o_ref):  # 512 f32 values per thread, all live at once
        x = x_ref[...]
        o_ref[...] = x * x + sd.exp(x)

    with pytest.warns(KernelQualityWarning, match=r"kernel whole_tile spills registers to "
                                                  r"local memory \(\d+ bytes stored") as caught:
        _, compiled = whole_tile.compile(jax.ShapeDtypeStruct((128, 512), jnp.float32))
    [warning] = [w for w in caught if w.category is KernelQualityWarning]
    assert warning.filename == __file__
    assert warning.lineno == whole_tile.fn.__code__.co_firstlineno
    assert compiled.report is not None and compiled.report.spill_stores > 0


@needs_ptxas
def test_a_kernel_that_fits_reports_its_registers_and_does_not_warn():
    @sd.kernel(out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32))
    def fits(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelQualityWarning)
        _, compiled = fits.compile(jax.ShapeDtypeStruct((128, 128), jnp.float32))
    report = compiled.report
    assert report is not None and report.kernel == "fits"
    assert 0 < report.registers <= 255 and report.spill_stores == 0


def test_performance_failures_are_problems_too():
    report = PtxasReport("k", registers=168, warnings=(
        "(C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized",))
    assert quality_problems(report) == [
        "ptxas: (C7510) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized"]
    assert quality_problems(PtxasReport("k", registers=40)) == []
