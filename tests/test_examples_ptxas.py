"""The examples assemble for sm_90a with ptxas: no spills, no performance warnings."""

from pathlib import Path

import pytest

from smalti.ptx.toolchain import compile_ptx, disassemble, sass_opcode_counts
from smalti.runtime import compile_mlir

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.mlir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_compiles_without_spills(path):
    compiled = compile_mlir(path.read_text(), str(path))
    result = compile_ptx(compiled.ptx, arch="sm_90a")
    for name in compiled.kernels:
        report = result.reports[name]
        assert report.registers > 0
        assert (report.spill_stores, report.spill_loads, report.stack_frame) == (0, 0, 0)
        assert report.performance_failures == ()
    counts = sass_opcode_counts(disassemble(result.cubin))
    # Global memory is read and written, by threads (LDG/STG) or by TMA (UTMALDG/UTMASTG).
    assert counts.get("LDG", 0) + counts.get("UTMALDG", 0) > 0
    assert counts.get("STG", 0) + counts.get("UTMASTG", 0) > 0
