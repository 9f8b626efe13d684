"""Every smalti op has what it needs, found from its class: a verifier test (an expected
error at the op in a `--verify-diagnostics` lit test), a lit test of its lowering, an
inference rule (where it has operands or results), a lowering rule, a DSL entry (where
users reach it), and a test that runs it in the simulator. Adding an op without one of them
fails here, naming the op and what it lacks (docs/adding_an_op.md says where each goes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smalti.dialect import OP_CLASSES
from smalti.dialect.definition import SmaltiOp
from smalti.dsl.trace import DSL_ENTRIES
from smalti.layout_inference.rules import RULES as INFERENCE_RULES
from smalti.lowering import RULES as LOWERING_RULES

ROOT = Path(__file__).resolve().parents[1]
OPS = sorted(OP_CLASSES.values(), key=lambda cls: cls.OPERATION_NAME)
_ANNOTATION = re.compile(r"expected-(?:error|warning)\s*(?:@([+-]\d+))?")
_OP_NAME = re.compile(r'"(smalti\.\w+)"')


def _lit_files(run_flag: str) -> list[list[str]]:
    """The lines of each lit test whose RUN lines use `run_flag`."""
    files = []
    for path in sorted((ROOT / "lit_tests").rglob("*.mlir")):
        lines = path.read_text().splitlines()
        if any("RUN:" in line and run_flag in line for line in lines):
            files.append(lines)
    return files


def _ops_with_expected_errors() -> set[str]:
    """Op names that some --verify-diagnostics test expects an error or warning at."""
    found = set()
    for lines in _lit_files("--verify-diagnostics"):
        for i, line in enumerate(lines):
            match = _ANNOTATION.search(line)
            if match:
                target = i + int(match.group(1) or 0)
                if 0 <= target < len(lines):
                    found.update(_OP_NAME.findall(lines[target]))
    return found


def _ops_in_lowering_tests() -> set[str]:
    """Op names written in lit tests that translate to PTX and FileCheck it."""
    return {name for lines in _lit_files("--to=ptx")
            if any("CHECK" in line for line in lines)
            for name in _OP_NAME.findall("\n".join(lines))}


def _simulated_tests() -> str:
    """The text of every pytest file that runs kernels in the simulator (on one device or
    several), and of the examples (tests run each of them against numpy:
    tests/test_readme_main_job.py, test_dsl_*.py, test_collectives.py)."""
    texts = [path.read_text() for path in sorted((ROOT / "tests").glob("test_*.py"))
             if path.name != Path(__file__).name]
    examples = [path.read_text() for path in sorted((ROOT / "examples").iterdir())
                if path.suffix in (".py", ".mlir")]
    runs = ("run_simulated(", "run_simulated_devices(", "jax.jit(")
    return "\n".join([t for t in texts if any(run in t for run in runs)] + examples)


@pytest.fixture(scope="module")
def evidence() -> dict[str, object]:
    return {"errors": _ops_with_expected_errors(), "lowered": _ops_in_lowering_tests(),
            "simulated": _simulated_tests()}


def _spellings(op: type[SmaltiOp]) -> list[str]:
    """How a test writes the op: its name in .mlir text, or a call of its DSL entry
    (`sd.wgmma(`, `.arrive(`; indexing for a Ref's __getitem__ / __setitem__)."""
    spellings = [f'"{op.OPERATION_NAME}"']
    entry = DSL_ENTRIES.of(op)
    if entry is not None:
        name = entry.__name__
        spellings.append("_ref[" if name in ("__getitem__", "__setitem__") else f".{name}(")
    return spellings


def missing(op: type[SmaltiOp], evidence: dict[str, object]) -> list[str]:
    """What `op` lacks, each with where to add it (empty: nothing)."""
    name = op.OPERATION_NAME
    lacks = []
    if name not in evidence["errors"]:
        lacks.append("a verifier test: an expected-error at it in a "
                     "lit_tests/dialect/invalid*.mlir test (--verify-diagnostics)")
    if name not in evidence["lowered"]:
        lacks.append("a lowering lit test under lit_tests/lowering/ "
                     "(smalti-translate --to=ptx | filecheck)")
    if (op.OPERANDS or op.RESULTS) and op not in INFERENCE_RULES:
        lacks.append("a layout inference rule: @rule(...) in smalti/layout_inference/rules.py")
    if op not in LOWERING_RULES:
        lacks.append("a lowering rule: @lowering_rule(...) in smalti/lowering/")
    if op.USER_FACING and op not in DSL_ENTRIES:
        lacks.append("a DSL entry: @dsl_entry(...) on the smalti.dsl function that creates "
                     "it (or USER_FACING = False)")
    if not any(s in evidence["simulated"] for s in _spellings(op)):
        lacks.append("a simulator test: a tests/test_*.py test that runs it (run_simulated "
                     "or jax.jit) against numpy")
    return lacks


def test_there_are_ops_to_check():
    assert len(OPS) >= 20
    assert all(issubclass(cls, SmaltiOp) for cls in OPS)


@pytest.mark.parametrize("op", OPS, ids=lambda cls: cls.OPERATION_NAME)
def test_op_has_every_rule_and_test_it_needs(op, evidence):
    lacks = missing(op, evidence)
    assert not lacks, f"{op.OPERATION_NAME} lacks " + "; ".join(lacks)


def test_ops_without_values_or_users_need_no_rule_or_entry():
    for op in OPS:
        if not (op.OPERANDS or op.RESULTS):
            assert op not in INFERENCE_RULES, op.OPERATION_NAME  # nothing to constrain
        if not op.USER_FACING:
            assert op not in DSL_ENTRIES, f"{op.OPERATION_NAME} says USER_FACING = False"


def test_a_new_op_without_anything_is_reported(evidence):
    """The check fails for an op defined and nothing else."""
    from smalti.dialect.definition import Operand, Result

    class UnfinishedOp(SmaltiOp):
        OPERATION_NAME = "smalti.test_only_unfinished"
        source = Operand()
        result = Result()

    try:
        lacks = missing(UnfinishedOp, evidence)
    finally:
        del OP_CLASSES[UnfinishedOp.OPERATION_NAME]
    assert [what.split(":")[0].split(" (")[0] for what in lacks] == [
        "a verifier test", "a lowering lit test under lit_tests/lowering/",
        "a layout inference rule", "a lowering rule", "a DSL entry", "a simulator test"]


def test_a_second_rule_for_one_op_is_refused():
    from smalti.dialect.ops import VectorLoadOp

    with pytest.raises(ValueError, match=r"two lowering rules for smalti\.vector_load"):
        LOWERING_RULES.register(VectorLoadOp)(lambda ctx, op: None)
    with pytest.raises(TypeError, match="keyed by op classes"):
        LOWERING_RULES.register("smalti.vector_load")(lambda ctx, op: None)
