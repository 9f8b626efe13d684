"""smalti's canonicalization keeps the numbers of the program as written (issue 14).

Upstream `canonicalize` folds truncf(sitofp(x)) into one rounding; the default pipeline runs
it without those patterns (smalti.passes.canonicalize). Each test here would fail with plain
canonicalize: the first checks upstream still applies every disabled pattern (so a renamed
pattern cannot silently come back), the others run the program both ways.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir import passmanager

from smalti.dialect.context import make_context, parse_module
from smalti.passes import DEFAULT_PIPELINE, split_pipeline
from smalti.passes.canonicalize import CANONICALIZE, NUMERICS_CHANGING_PATTERNS
from smalti.runtime import compile_mlir, run_simulated

BF16 = ml_dtypes.bfloat16
PLAIN = DEFAULT_PIPELINE.replace("smalti-canonicalize", "canonicalize")

# A program each disabled pattern rewrites: (pattern, the conversion it folds into truncf).
ROUNDED_TWICE = {
    "(anonymous namespace)::TruncFSIToFPToSIToFP": "arith.sitofp",
    "(anonymous namespace)::TruncFUIToFPToUIToFP": "arith.uitofp",
}


def _double_rounding(conversion: str) -> str:
    return f"""
func.func @kernel(%a: memref<128xi32>, %out: memref<128xbf16>)
    attributes {{smalti.kernel, smalti.grid = array<i64: 1>}} {{
  %c0 = arith.constant 0 : index
  %x = "smalti.vector_load"(%a, %c0) : (memref<128xi32>, index) -> vector<128xi32>
  %f = {conversion} %x : vector<128xi32> to vector<128xf32>
  %h = arith.truncf %f : vector<128xf32> to vector<128xbf16>
  "smalti.vector_store"(%h, %out, %c0) : (vector<128xbf16>, memref<128xbf16>, index) -> ()
  return
}}
"""


def _canonicalized(text: str, pipeline_element: str) -> str:
    context = make_context()
    module = parse_module(text, "canonicalize.mlir", context)
    with context:
        passmanager.PassManager.parse(f"builtin.module({pipeline_element})").run(module)
    return str(module)


def test_the_disabled_patterns_are_the_ones_named():
    assert set(NUMERICS_CHANGING_PATTERNS) == set(ROUNDED_TWICE)
    assert "smalti-canonicalize" in split_pipeline(DEFAULT_PIPELINE)
    for name in NUMERICS_CHANGING_PATTERNS:
        assert name in CANONICALIZE


@pytest.mark.parametrize("pattern", sorted(ROUNDED_TWICE))
def test_upstream_applies_each_disabled_pattern_and_smalti_does_not(pattern):
    """Upstream folds the two roundings into one conversion to bf16 (this jaxlib still has
    the pattern under this name); smalti's canonicalization keeps both."""
    text = _double_rounding(ROUNDED_TWICE[pattern])
    upstream = _canonicalized(text, "canonicalize")
    assert "arith.truncf" not in upstream
    assert "to vector<128xbf16>" in upstream
    ours = _canonicalized(text, CANONICALIZE)
    assert "arith.truncf" in ours and "vector<128xi32> to vector<128xf32>" in ours


def _ties(signed: bool) -> np.ndarray:
    """i32 values whose f32 rounding is a bf16 tie, so one rounding and two differ: just
    above k 2^24 + 2^23 (k even), f32 rounds down to the tie and bf16 to even, below."""
    x = np.arange(128, dtype=np.int32) * 1000003
    if signed:  # the values of truncf_sitofp_double_rounding.mlir
        x[0], x[1] = -547356703, -1438646243
    else:
        x[:2] = np.array([2**31 + 2**23 + 1, 3 * 2**30 + 2**23 + 5], np.uint32).view(np.int32)
    return x


@pytest.mark.parametrize(("conversion", "reference"), [
    ("arith.sitofp", lambda x: x.astype(np.float32)),
    ("arith.uitofp", lambda x: x.view(np.uint32).astype(np.float32)),
])
def test_int_to_bf16_through_f32_rounds_twice_as_numpy(conversion, reference):
    x = _ties(conversion == "arith.sitofp")
    want = reference(x).astype(BF16)
    compiled = compile_mlir(_double_rounding(conversion), "rounding.mlir")
    got = run_simulated(compiled, x, np.zeros(128, BF16))[-1]
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    # the plain upstream pipeline rounds once and is off by one bf16 ulp on the ties
    plain = compile_mlir(_double_rounding(conversion), "rounding.mlir", pipeline=PLAIN)
    wrong = run_simulated(plain, x, np.zeros(128, BF16))[-1]
    assert (wrong.astype(np.float64) != want.astype(np.float64)).sum() >= 1


def test_exact_patterns_still_run():
    """What canonicalization does without changing numbers still happens: the extsi an
    sitofp reads is folded away (the lowering converts from i1 directly)."""
    text = """
func.func @kernel(%a: memref<128xi32>, %out: memref<128xf32>)
    attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %z = arith.constant dense<0> : vector<128xi32>
  %x = "smalti.vector_load"(%a, %c0) : (memref<128xi32>, index) -> vector<128xi32>
  %p = arith.cmpi slt, %x, %z : vector<128xi32>
  %i = arith.extsi %p : vector<128xi1> to vector<128xi32>
  %f = arith.sitofp %i : vector<128xi32> to vector<128xf32>
  "smalti.vector_store"(%f, %out, %c0) : (vector<128xf32>, memref<128xf32>, index) -> ()
  return
}
"""
    assert "arith.extsi" not in _canonicalized(text, CANONICALIZE)
