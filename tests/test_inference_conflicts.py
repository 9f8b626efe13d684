"""Layout inference on programs nobody here wrote (issue 14): constants in a layout per use,
explanations that name a minimal set of conflicting constraints, no replicated blow-ups.

The .mlir programs are those of lit_tests/inference/{constants_per_use,conflicts,
replication}.mlir; here they run through the simulator against numpy, and random programs
check the explanations' claims against an independent exhaustive search."""

from __future__ import annotations

import re
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from jaxlib.mlir import ir

import smalti.dsl as sd
from smalti.dialect import DiagnosticError, make_context, parse_module
from smalti.dialect.ops import LayoutCastOp
from smalti.dialect.verifier import verify
from smalti.layout_inference import Hint, solver
from smalti.layout_inference.conflicts import explain
from smalti.layout_inference.equations import EquationSystem, variables_of
from smalti.layout_inference.infer import _add_constraints
from smalti.layout_inference.materialise import split_per_user
from smalti.layout_inference.rules import RuleContext, needs_variable
from smalti.layout_inference.solver import Unsatisfiable, solve
from smalti.passes import run_pipeline
from smalti.runtime import compile_mlir, run_simulated
from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_ROW_LAYOUT,
    WGSplatLayout,
    WGStridedLayout,
)
from smalti.tiling.cost import copies, registers_per_thread, replication_problem
from tests.dsl_helpers import isolated_cache  # noqa: F401
from tests.test_inference_programs import _exhaustive_solution_exists, _system, programs

LIT = Path(__file__).resolve().parents[1] / "lit_tests" / "inference"
FRONT = "builtin.module(smalti-verify,canonicalize,cse)"


def chunk(file: str, name: str) -> str:
    """The `// -----` chunk of a lit file defining `@name`."""
    return next(c for c in (LIT / file).read_text().split("// -----") if f"@{name}(" in c)


# Constants take any layout.

def test_one_zero_for_a_row_and_a_column_sum_matches_numpy():
    compiled = compile_mlir(chunk("constants_per_use.mlir", "row_and_column_sums"), "rc.mlir")
    x = np.random.default_rng(0).integers(-8, 9, (128, 128)).astype(np.float32)
    _, rows, cols = run_simulated(compiled, x, np.zeros(128, np.float32),
                                  np.zeros(128, np.float32))
    np.testing.assert_array_equal(rows, x.sum(1))
    np.testing.assert_array_equal(cols, x.sum(0))


def test_a_folded_constant_in_two_layouts_matches_numpy():
    compiled = compile_mlir(chunk("constants_per_use.mlir", "folded"), "folded.mlir")
    rng = np.random.default_rng(1)
    in1 = rng.choice([0.5, 1.0, 2.0, -1.0], 256).astype(np.float16)
    in2 = rng.choice([0.0625, 0.25, 1.0], 256).astype(np.float16)
    _, _, out0, out4 = run_simulated(compiled, in1, in2, np.zeros(256, np.float16),
                                     np.zeros((64, 256), np.float16))
    c = np.float16(0.125)
    v13 = np.minimum(in2, np.float16(c * c + c))  # every row of the fma is the same
    np.testing.assert_array_equal(out4, np.full((64, 256), c, np.float16))
    np.testing.assert_array_equal(out0, (v13.astype(np.float64) * in1 + v13).astype(np.float16))


def test_scalar_and_iota_copies_match_numpy():
    text = chunk("constants_per_use.mlir", "scalar_and_iota").replace(
        "func.func @scalar_and_iota(%a: memref<64x64xf32>, %b: memref<64x64xi32>, %s: f32) {",
        "func.func @scalar_and_iota(%a: memref<64x64xf32>, %b: memref<64x64xi32>, %s: f32) "
        "attributes {smalti.kernel, smalti.grid = array<i64: 1>} {")
    compiled = compile_mlir(text, "scalar.mlir")
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    y = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    a, b, _ = run_simulated(compiled, x, y, np.float32(0.5))
    np.testing.assert_array_equal(a, x.T + 0.5)  # the second store wins
    np.testing.assert_array_equal(b, y.T + np.arange(64, dtype=np.int32)[:, None])


def test_dsl_row_and_column_sums_of_one_tile(isolated_cache):  # noqa: F811
    @sd.kernel(grid=(1,), out_shape=(jax.ShapeDtypeStruct((128,), jnp.float32),
                                     jax.ShapeDtypeStruct((128,), jnp.float32)))
    def sums(x_ref, rows_ref, cols_ref):
        x = x_ref[...]
        rows_ref[...] = x.sum(axis=1)
        cols_ref[...] = x.sum(axis=0)

    x = jax.random.randint(jax.random.key(0), (128, 128), -8, 9).astype(jnp.float32)
    rows, cols = jax.jit(sums)(x)
    np.testing.assert_array_equal(np.asarray(rows), np.asarray(x).sum(1))
    np.testing.assert_array_equal(np.asarray(cols), np.asarray(x).sum(0))


def test_copies_are_merged_back_and_failures_leave_the_ir_as_it_came():
    text = """
func.func @k(%a: memref<128x128xf32>) {
  %c0 = arith.constant 0 : index
  %two = arith.constant dense<2.0> : vector<128x128xf32>
  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) -> vector<128x128xf32>
  %s = arith.addf %x, %two : vector<128x128xf32>
  %t = "smalti.layout_cast"(%two) {new_layout = #smalti.splat} : (vector<128x128xf32>) -> vector<128x128xf32>
  %u = "smalti.layout_cast"(%s) {new_layout = #smalti.splat} : (vector<128x128xf32>) -> vector<128x128xf32>
  return
}"""
    context = make_context()
    module = parse_module(text, "k.mlir", context)
    before = str(module)
    with context, pytest.raises(DiagnosticError):
        run_pipeline(module, "builtin.module(smalti-infer-layouts)")
    assert str(module) == before


# Explanations name a minimal set of conflicting constraints.

def _failures(text: str) -> tuple[EquationSystem, tuple, ir.Module]:
    """The equation system of a refused program (a constant per user), its failures, and
    the module its constraints' origins point into (keep it alive while using them)."""
    context = make_context()
    module = parse_module(text, "random.mlir", context)
    func = module.regions[0].blocks[0].operations[0].operation
    with context:
        split_per_user(func)
        system, _ = _system(func)
    try:
        solve(system)
    except Unsatisfiable as failure:
        return system, failure.failures, module
    return system, (), module


def _subsystem(system: EquationSystem, constraints) -> EquationSystem:
    variables = sorted({v.id: v for c in constraints for v in variables_of(c)}.values(),
                       key=lambda v: v.id)
    return EquationSystem(variables, list(constraints), [])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_explanations_are_minimal_conflicts_without_preferences(text):
    system, failures, module = _failures(text)
    for failure in failures:
        explanation = explain(system, failure)
        core = explanation.constraints
        assert core and not any(isinstance(c, Hint) for c in core)
        assert not _exhaustive_solution_exists(_subsystem(system, core)), text
        for i in range(len(core)):  # each constraint is needed
            rest = core[:i] + core[i + 1:]
            assert _exhaustive_solution_exists(_subsystem(system, rest)), (core[i], text)
    del module


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_every_diagnostic_is_located_and_every_suggested_cast_lowers(text):
    text = text.replace("func.func @k(%ref: memref<128x128xf32>) {", KERNEL)
    context = make_context()
    module = parse_module(text, "random.mlir", context)
    with context:
        try:
            run_pipeline(module, "builtin.module(smalti-verify,smalti-infer-layouts)")
            return
        except DiagnosticError as error:
            report = str(error)
    for line in report.splitlines():
        assert re.match(r"random\.mlir:\d+:\d+: (error|note): ", line), line
        assert "<unknown>" not in line and "prefers" not in line and "cheapest" not in line
    applied, parts = _with_suggested_cast(text)
    assert ("a smalti.layout_cast of" in report) == (applied is not None)
    event("a cast suggested" if applied is not None else "no cast suggested")
    if applied is not None and parts == 1:  # the cast resolves the only conflict: it lowers
        assert compile_mlir(applied, "cast.mlir").ptx


KERNEL = ("func.func @k(%ref: memref<128x128xf32>) "
          "attributes {smalti.kernel, smalti.grid = array<i64: 1>} {")


def _with_suggested_cast(text: str) -> tuple[str | None, int]:
    """The program with the first suggested layout_cast inserted before its use (or None),
    and how many parts of it have no layouts."""
    context = make_context()
    module = parse_module(text, "random.mlir", context)
    func = module.regions[0].blocks[0].operations[0].operation
    with context:
        split_per_user(func)
        system = _equations(func)
        try:
            solve(system)
        except Unsatisfiable as failure:
            failures = failure.failures
        for failure in failures:
            explanation = explain(system, failure)
            if explanation.cast is None:
                continue
            equality, layout = explanation.cast
            use, value = equality.origin.op, equality.a.value
            with ir.InsertionPoint(use):
                cast = LayoutCastOp.build(source=value, new_layout=layout, loc=use.location)
            for number, operand in enumerate(use.operands):
                if operand == value:
                    use.operands[number] = cast.result
            verify(module.operation)
            return str(module), len(failures)
    return None, len(failures)


def _equations(func: ir.Operation) -> EquationSystem:
    """The constraints inference states for `func` (annotations included)."""
    system = EquationSystem()
    ctx = RuleContext(system)

    def visit(op: ir.Operation) -> ir.WalkResult:
        if any(needs_variable(v) for v in (*op.operation.operands, *op.operation.results)):
            _add_constraints(ctx, op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return system


def test_the_suggested_cast_lowers_and_computes_the_program():
    """The cast an explanation suggests (where inference's own search for relayouts meets
    its limits) lowers: the row plus column sums, which inference now resolves itself
    (tests/test_inferred_relayouts.py), against the equations alone."""
    text = chunk("inferred_relayouts.mlir", "row_plus_column_sums")
    applied, parts = _with_suggested_cast(text)
    assert applied is not None and parts == 1
    assert '"smalti.layout_cast"' in applied
    compiled = compile_mlir(applied, "cast.mlir")
    x = np.random.default_rng(2).integers(-8, 9, (128, 128)).astype(np.float32)
    _, out = run_simulated(compiled, x, np.zeros(128, np.float32))
    np.testing.assert_array_equal(out, x.sum(0) + x.sum(1))


def test_a_search_that_gives_up_names_a_located_value(monkeypatch):
    monkeypatch.setattr(solver, "SEARCH_BUDGET", 1)
    text = chunk("constants_per_use.mlir", "row_and_column_sums")
    with pytest.raises(DiagnosticError) as failure:
        compile_mlir(text, "rc.mlir")
    first, *notes = str(failure.value).splitlines()
    assert re.match(r"rc\.mlir:\d+:\d+: error: 'smalti.vector_load' op cannot be given a "
                    r"layout: the layout search gave up after 1 tries deciding the result of "
                    r"'smalti.vector_load' at rc\.mlir:\d+:\d+; a smalti.layout_cast of it", first)
    assert first.endswith("(5 constraints around it)"), first
    assert len(notes) == 5 and all(re.match(r"rc\.mlir:\d+:\d+: note: '", n) for n in notes)


def test_a_conflict_along_a_long_chain_is_explained_quickly_and_briefly():
    """Casts at the ends of 2,000 elementwise ops, the last to a splat (which no distributed
    value becomes, so no relayout between the ops resolves it): every op is in the minimal
    conflict (each link is needed), minimised as one unit and shown as its ends."""
    ops = ['%v0 = "smalti.layout_cast"(%x) {new_layout = #smalti.strided<vec = 4>} : '
           '(vector<128x128xf32>) -> vector<128x128xf32>']
    ops += [f"%v{i} = arith.negf %v{i - 1} : vector<128x128xf32>" for i in range(1, 2001)]
    ops.append('%w = "smalti.layout_cast"(%v2000) {new_layout = #smalti.splat} : '
               '(vector<128x128xf32>) -> vector<128x128xf32>')
    text = ("func.func @k(%a: memref<128x128xf32>) {\n  %c0 = arith.constant 0 : index\n"
            '  %x = "smalti.vector_load"(%a, %c0, %c0) : (memref<128x128xf32>, index, index) '
            "-> vector<128x128xf32>\n" + "".join(f"  {op}\n" for op in ops) +
            "  return\n}")
    context = make_context()
    module = parse_module(text, "chain.mlir", context)
    start = time.perf_counter()
    with context, pytest.raises(DiagnosticError) as failure:
        run_pipeline(module, "builtin.module(smalti-infer-layouts)")
    assert time.perf_counter() - start < 30
    first, *notes = str(failure.value).splitlines()
    assert "(2003 constraints in conflict); no relayout resolves it" in first, first
    assert len(notes) == 25 and "... and 1979 more constraints of ops in between" in notes[12]


# No replicated blow-ups.

@pytest.mark.parametrize(("layout", "shape", "registers", "n"), [
    (WGMMA_LAYOUT, (64, 128), 64, 1),
    (WGStridedLayout(4), (64, 128), 64, 1),
    (WGSplatLayout(), (64, 128), 1, 1),
    (WGMMA_ROW_LAYOUT, (128,), 4, 4),
    (WGMMA_COL_LAYOUT, (256,), 64, 32),
    (WGMMA_COL_LAYOUT, (64, 128), 2048, 32),
])
def test_registers_per_thread_and_copies(layout, shape, registers, n):
    assert registers_per_thread(layout, shape, 32) == registers
    assert copies(layout, shape) == n


def test_row_and_column_vectors_may_replicate_but_2d_tiles_may_not():
    assert replication_problem(WGMMA_COL_LAYOUT, (512,), 32) is None  # 128 registers
    assert replication_problem(WGMMA_ROW_LAYOUT, (128,), 32) is None
    assert "2048 registers per thread" in replication_problem(WGMMA_COL_LAYOUT, (64, 128), 32)
    assert replication_problem(WGMMA_ROW_LAYOUT, (64, 128), 32) is not None
