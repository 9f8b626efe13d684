"""The drivers on mutated inputs: the regression corpus of past findings, and a short run."""

from pathlib import Path

import pytest

from tests.fuzzing import check_one, fuzz

CORPUS = sorted((Path(__file__).parent / "fuzz_corpus").glob("*.mlir"))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_past_findings_stay_fixed(path):
    text = path.read_text()
    argv = tuple(text.splitlines()[0].removeprefix("// ARGS: ").split())
    assert check_one(text, argv) is None


def test_a_short_fuzzing_run_finds_nothing():
    findings = fuzz(150, seed=12345, batch_size=150)
    assert findings == [], "\n".join(f"{f.argv}: {f.problem}" for f in findings[:5])
