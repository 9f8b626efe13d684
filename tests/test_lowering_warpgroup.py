"""Warp-specialised regions through ptxas and the simulator: roles with budgets, and
reductions across warps in kernels of several warpgroups (per-warpgroup scratch and
named barriers)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from smalti.dialect import DiagnosticError
from smalti.ptx.toolchain import compile_ptx
from smalti.runtime import compile_mlir, run_simulated
from smalti.sim import SimError, run_ptx

WGMMA = ("#smalti.tiled<tiling = [[64, 8], [16, 8], [8, 8], [2]], warp = [-7], "
         "lane = [-3, -2], vector = -1>")


def _col_sum(source: str, out: str) -> str:
    return f"""
    %x = "smalti.vector_load"(%{source}, %c0, %c0) {{out_layouts = [{WGMMA}]}} : (memref<64x32xf32>, index, index) -> vector<64x32xf32>
    %z = arith.constant dense<0.0> : vector<32xf32>
    %r = vector.multi_reduction <add>, %x, %z [0] : vector<64x32xf32> to vector<32xf32>
    "smalti.vector_store"(%r, %{out}, %c0) : (vector<32xf32>, memref<32xf32>, index) -> ()"""


ROLES = f"""
func.func @roles(%a: memref<64x32xf32>, %b: memref<64x32xf32>, %oa: memref<32xf32>,
                 %ob: memref<32xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 3 : i64}} {{
  %c0 = arith.constant 0 : index
  "smalti.warpgroup_region"() ({{
  }}) {{warpgroup = 0 : i64, max_registers = 40 : i64}} : () -> ()
  "smalti.warpgroup_region"() ({{{_col_sum("a", "oa")}
  }}) {{warpgroup = 1 : i64, max_registers = 232 : i64}} : () -> ()
  "smalti.warpgroup_region"() ({{{_col_sum("b", "ob")}
  }}) {{warpgroup = 2 : i64, max_registers = 232 : i64}} : () -> ()
  return
}}
"""


def _inputs():
    rng = np.random.default_rng(0)
    return (rng.integers(-4, 5, (64, 32)).astype(np.float32),
            rng.integers(-4, 5, (64, 32)).astype(np.float32))


@pytest.mark.parametrize("policy", ["eager", "latest", "random"])
def test_two_warpgroups_reduce_at_once(policy):
    a, b = _inputs()
    compiled = compile_mlir(ROLES, "roles.mlir")
    zeros = np.zeros(32, np.float32)
    *_, out_a, out_b = run_simulated(compiled, a, b, zeros, zeros, async_completion=policy,
                                     seed=1)
    np.testing.assert_array_equal(out_a, a.sum(axis=0))
    np.testing.assert_array_equal(out_b, b.sum(axis=0))


def test_roles_assemble_with_budgets_honoured():
    ptx = compile_mlir(ROLES, "roles.mlir").ptx
    assert "bar.sync 0;" not in ptx  # each warpgroup meets only its own 128 threads
    assert {"bar.sync 2, 128;", "bar.sync 3, 128;"} <= set(ptx.replace("\t", "").split("\n"))
    report = compile_ptx(ptx).reports["roles"]
    assert report.performance_failures == ()


ALL_WARPGROUPS = f"""
func.func @everyone(%a: memref<64x32xf32>, %oa: memref<32xf32>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>, smalti.warpgroups = 2 : i64}} {{
  %c0 = arith.constant 0 : index
  "smalti.warpgroup_region"() ({{{_col_sum("a", "oa")}
  }}) {{warpgroup = array<i64: 0, 1>}} : () -> ()
  return
}}
"""


def test_a_role_of_two_warpgroups_indexes_scratch_by_warpgroup():
    """Both warpgroups reduce the same input into the same output (same values): with one
    shared scratch they would race on it; per-warpgroup scratch keeps them apart."""
    a, _ = _inputs()
    compiled = compile_mlir(ALL_WARPGROUPS, "everyone.mlir")
    offset = re.compile(r"mad\.lo\.u32 (%r\d+), %r\d+, 512, (%r\d+);")
    assert offset.search(compiled.ptx) and "bar.sync 0;" not in compiled.ptx
    out = run_simulated(compiled, a, np.zeros(32, np.float32))[-1]
    np.testing.assert_array_equal(out, a.sum(axis=0))
    shared = offset.sub(r"mov.u32 \1, \2;", compiled.ptx)  # one scratch for both
    signature = compiled.signature()
    with pytest.raises(SimError, match="shared"):
        run_ptx(shared, signature.name, signature.grid, signature.block,
                [a.copy(), np.zeros(32, np.float32)])


def test_misuse_is_a_located_error_from_the_default_pipeline():
    text = ROLES.replace("max_registers = 40", "max_registers = 256")
    with pytest.raises(DiagnosticError, match=r"roles.mlir:2:1: error: .*register budgets "
                                              r"\[256, 232, 232\]"):
        compile_mlir(text, "roles.mlir")
