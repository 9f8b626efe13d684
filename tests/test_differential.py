"""The differential tester (tests/differential): a fixed batch of generated kernels, as .mlir
and as DSL programs, must hold against the numpy reference (new findings fail, printed
minimised); the findings filed in tests/differential/findings/ are replayed (expected
failures, strictly, where their owners have yet to fix them); and the tester's own parts are
checked: it catches a wrong kernel, it is deterministic, its minimiser shrinks."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from tests.differential.campaign import run_campaign, summary
from tests.differential.dtypes import BF16, F16
from tests.differential.findings import finding_files, read_finding, replay
from tests.differential.generator import generate
from tests.differential.minimise import minimise, size
from tests.differential.numerics import round_to
from tests.differential.program import Reduce, from_json, to_json, walk
from tests.differential.runner import Outcome, run_program, source_text

# About 45 s on a 2-core machine without a GPU.
CI_BATCH = [("mlir", seed) for seed in range(80)] + [("dsl", seed) for seed in range(60)]


def test_a_fixed_batch_finds_nothing_new():
    results = run_campaign(CI_BATCH, workers=1, minimise=True, out=None, timeout_s=300)
    new = [r for r in results if r.is_new_finding]
    report = "\n\n".join(f"{r.kind} seed {r.seed}: {r.outcome}: {r.detail}\n{r.message}\n"
                         f"minimised:\n{r.minimised}" for r in new[:3])
    assert not new, f"{summary(results, 0)}\n\n{report}"
    assert len(results) == len(CI_BATCH)
    assert sum(r.outcome == "match" for r in results) > len(CI_BATCH) // 2


def _finding_params():
    params = []
    for path in finding_files():
        finding = read_finding(path)
        marks = ([pytest.mark.xfail(strict=True, raises=AssertionError, reason=finding.xfail)]
                 if finding.xfail else [])
        params.append(pytest.param(path, marks=marks, id=path.name))
    return params


@pytest.mark.parametrize("path", _finding_params())
def test_filed_finding(path):
    outcome = replay(path)
    assert outcome.kind == "match", f"{path.name}: {outcome.kind}: {outcome.message}"


def test_a_wrong_kernel_is_caught():
    """The same program with one op changed in its text is a mismatch, for each op tried."""
    caught = 0
    for seed in range(40):
        program = generate("mlir", seed)
        text = source_text(program)
        if "arith.addf" not in text or run_program(program).kind != "match":
            continue
        outcome = run_program(program, source=text.replace("arith.addf", "arith.subf"))
        caught += outcome.kind == "mismatch"
    assert caught >= 3


def test_generation_is_deterministic_and_serialises():
    for kind in ("mlir", "dsl"):
        for seed in range(20):
            program = generate(kind, seed)
            assert to_json(generate(kind, seed)) == to_json(program)  # (NaN != NaN)
            assert to_json(from_json(to_json(program))) == to_json(program)
            assert source_text(program) == source_text(from_json(to_json(program)))


def test_the_minimiser_keeps_the_finding_class():
    def runner(program):
        has_sum = any(isinstance(s, Reduce) and s.kind == "sum" for s in walk(program.body))
        return Outcome("mismatch", "wrong numbers") if has_sum else Outcome("match")

    program = next(p for p in (generate("mlir", s) for s in range(100))
                   if runner(p).kind == "mismatch" and size(p)[0] > 10)
    reduced = minimise(program, runner(program), runner=runner)
    assert runner(reduced.program).kind == "mismatch"
    assert size(reduced.program)[0] <= 4 < size(program)[0]


def test_rounding_is_exact():
    """The reference rounds float64 once to bf16 and f16, ties to even, as ml_dtypes does
    from float32 for values float32 holds exactly."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10000) * rng.choice([1e-40, 1e-5, 1, 1e4, 1e38], 10000))
    x = x.astype(np.float32).astype(np.float64)
    for dtype, numpy in ((BF16, ml_dtypes.bfloat16), (F16, np.float16)):
        with np.errstate(over="ignore"):
            want = x.astype(np.float32).astype(numpy)
        np.testing.assert_array_equal(round_to(x, dtype).astype(np.float64),
                                      want.astype(np.float64))
    assert math.isinf(float(round_to(np.array([65520.0]), F16)[0]))
