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


# Generated well-formed programs (the inference property test's strategy) through every
# pass and the translator: the drivers may refuse them, but only with located diagnostics.
from hypothesis import HealthCheck, given, settings  # noqa: E402

from smalti.passes import REGISTRY  # noqa: E402
from tests.test_inference_programs import programs  # noqa: E402


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_through_every_pass_and_the_translator(text):
    kernel = text.replace("func.func @k(%ref: memref<128x128xf32>) {",
                          "func.func @k(%ref: memref<128x128xf32>) attributes "
                          "{smalti.kernel, smalti.grid = array<i64: 1>} {")
    for name in REGISTRY:
        assert check_one(kernel, ("opt", f"--{name}")) is None, name
    assert check_one(kernel, ("translate", "--to=ptx")) is None
