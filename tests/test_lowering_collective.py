"""Collective kernels assemble with ptxas for sm_90a, without spills: the kernels of
lit_tests/lowering/collective.mlir, and a multimem op of every element type and reduction
the verifiers accept (smalti/dialect/ops_collective.py), so the verifiers' tables and the
instructions the lowering writes for them cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smalti.dialect.ops_collective import (
    FLOAT_TYPES,
    INTEGER_TYPES,
    LOAD_REDUCTIONS,
    RED_REDUCTIONS,
)
from smalti.runtime import compile_mlir
from smalti.runtime.quality import quality_problems

ROOT = Path(__file__).resolve().parents[1]
LIT_FILE = ROOT / "lit_tests" / "lowering" / "collective.mlir"
CHUNKS = LIT_FILE.read_text().split("// -----")


def _assembled_without_problems(text: str, name: str) -> str:
    """The PTX of `text`, after checking that ptxas assembles it cleanly."""
    compiled = compile_mlir(text, name)
    result = compiled.assemble()
    for kernel in compiled.kernels:
        report = result.reports[kernel]
        assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
        assert quality_problems(report) == [], kernel
    return compiled.ptx


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_lit_kernels_assemble(index):
    chunk = CHUNKS[index]
    name = re.search(r"func\.func @(\w+)", chunk).group(1)
    ptx = _assembled_without_problems(chunk, f"{LIT_FILE}:{name}")
    assert "_param_smalti_peers" in ptx
    expected_version = "8.2" if '"smalti.multimem_' in chunk else "8.0"
    assert f".version {expected_version}\n" in ptx


def _kernel(element: str, body: str) -> str:
    """A collective kernel with a 16x128 `element` symmetric buffer %buf, its vector %v
    (loaded from %a) and a 2-D slice start %c0, %c0; `body` uses them."""
    vector = f"vector<16x128x{element}>"
    ref = f'memref<16x128x{element}, "symmetric">'
    return f"""
func.func @k(%a: memref<16x128x{element}>) attributes {{smalti.kernel,
    smalti.grid = array<i64: 1>, smalti.devices = 4 : i64}} {{
  %c0 = arith.constant 0 : index
  %buf = "smalti.slice_symmetric"(%c0) : (index) -> {ref}
  %v = "smalti.vector_load"(%a, %c0, %c0) : (memref<16x128x{element}>, index, index) -> {vector}
  {body.format(vector=vector, ref=ref)}
  return
}}
"""


def _cases(table: dict[str, tuple[str, ...]]) -> list[tuple[str, str]]:
    return [(element, reduction) for element, reductions in table.items()
            for reduction in reductions]


@pytest.mark.parametrize(("element", "reduction"), _cases(LOAD_REDUCTIONS))
def test_every_load_reduce_assembles(element, reduction):
    body = ('%r = "smalti.multimem_load_reduce"(%buf, %c0, %c0) {{reduction = "' + reduction
            + '"}} : ({ref}, index, index) -> {vector}\n'
            '  "smalti.vector_store"(%r, %a, %c0, %c0) : ({vector}, memref<16x128x'
            + element + '>, index, index) -> ()')
    ptx = _assembled_without_problems(_kernel(element, body), f"load_reduce_{element}")
    assert f"multimem.ld_reduce.weak.global.{reduction}." in ptx


@pytest.mark.parametrize(("element", "reduction"), _cases(RED_REDUCTIONS))
def test_every_red_assembles(element, reduction):
    body = ('"smalti.multimem_red"(%v, %buf, %c0, %c0) {{reduction = "' + reduction
            + '"}} : ({vector}, {ref}, index, index) -> ()')
    ptx = _assembled_without_problems(_kernel(element, body), f"red_{element}")
    assert f"multimem.red.relaxed.sys.global.{reduction}." in ptx


@pytest.mark.parametrize("element", FLOAT_TYPES + INTEGER_TYPES)
def test_every_store_assembles(element):
    body = '"smalti.multimem_store"(%v, %buf, %c0, %c0) : ({vector}, {ref}, index, index) -> ()'
    ptx = _assembled_without_problems(_kernel(element, body), f"store_{element}")
    assert "multimem.st.weak.global." in ptx
