"""benchmarks/ops_quality.py without Triton: its smalti half measures a row kernel and a
wgmma kernel, and its table has an entry for every op smalti.ops exports. (0 spills per op:
tests/test_ops_*.py; reading loops of SASS: tests/test_sass_loops.py.)"""

import importlib.util
import sys
from pathlib import Path

import pytest

import smalti.ops

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ops_quality.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("ops_quality", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def entry(bench, name):
    (found,) = [e for e in bench.ops() if e.name == name]
    return found


def test_smalti_half_measures_a_row_kernel(bench):
    row = bench.measure_entry(entry(bench, "softmax fwd"), peer=False)
    assert row.triton is None
    figures = row.smalti
    assert figures.registers > 0
    assert figures.spill_bytes == 0
    assert len(figures.loops) == 2  # statistics, then result: one column tile per iteration
    assert all(length > 32 for length in figures.loops)  # each loads a tile: 32 LDG at least
    assert figures.per_unit == sum(figures.loops)
    line = bench.markdown(row)
    assert line.startswith("| softmax fwd | x 4096x4096 bf16 |")
    assert line.count("|") == bench.HEADER.splitlines()[0].count("|")
    assert row.as_json()["triton"] is None


def test_smalti_half_normalises_an_mma_loop_per_k_tile(bench):
    quantized = entry(bench, "quantized_matmul int8")
    row = bench.measure_entry(quantized, peer=False)
    (length,) = row.smalti.loops
    assert row.smalti.spill_bytes == 0
    assert row.smalti.smem_bytes > 64 * 1024  # dynamic: x's two stages and two tiles
    # one warpgroup, one 128x128x64 K step per iteration: 8 HGMMA.64x128x16
    assert row.smalti.per_unit == length


def test_every_entry_names_a_smalti_kernel(bench):
    """The entries call the ops' kernel factories (private: they change with the ops)."""
    for e in bench.ops():
        kernel = e.smalti.kernel()
        assert callable(kernel.compile), e.name
        assert e.unit_macs is None or e.unit_macs % (64 * 64 * 16) == 0, e.name


def test_every_exported_op_has_an_entry(bench):
    measured = {e.op for e in bench.ops()}
    exported = set(smalti.ops.__all__) - {"dot_product_attention_with_lse"}  # an alias
    assert exported <= measured, exported - measured
