"""Random well-formed programs through the infer-layouts pass.

Every answer must satisfy every constraint the rules state for the program and never take a
replicated layout over the register limit (smalti.tiling.cost); every refusal must be
confirmed by an independent exhaustive search (plain backtracking over a fixed set of
layouts within that limit, without the solver's propagation or ordering).
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jaxlib.mlir import ir

from smalti.dialect import DiagnosticError, attr_to_layouts, make_context, parse_module
from smalti.dialect.attributes import layout_to_text
from smalti.layout_inference import (
    EquationSystem,
    infer_function,
)
from smalti.layout_inference.materialise import split_per_user
from smalti.layout_inference.rules import RULES, RuleContext, is_vector
from smalti.layout_inference.solver import fits, too_dear
from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
    WGSplatLayout,
    WGStridedLayout,
)
from tests.constraint_oracle import constraint_holds

MATRIX = "vector<128x128xf32>"
ROW = "vector<128xf32>"
REF = "memref<128x128xf32>"
CAST_TARGETS = {
    MATRIX: [WGStridedLayout(4), WGStridedLayout(2), WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT,
             WGSplatLayout()],
    ROW: [WGMMA_ROW_LAYOUT, WGMMA_COL_LAYOUT, WGStridedLayout(1), WGSplatLayout()],
}
UNIVERSE = list(dict.fromkeys(layout for targets in CAST_TARGETS.values() for layout in targets))
UNIVERSE += [WGStridedLayout(8), WGStridedLayout(16)]


@st.composite
def programs(draw) -> str:
    """MLIR text of one function: loads, elementwise ops, constants, casts, reductions
    (with accumulators shared between reductions of either axis), broadcasts, transposes,
    loops, stores."""
    lines = [f"func.func @k(%ref: {REF}) {{", "  %c0 = arith.constant 0 : index",
             "  %c1 = arith.constant 1 : index", "  %c3 = arith.constant 3 : index"]
    values: dict[str, list[str]] = {MATRIX: [], ROW: []}
    constants: list[str] = []  # row accumulators
    count = 0

    def new(kind: str) -> str:
        nonlocal count
        count += 1
        values[kind].append(f"%v{count}")
        return f"%v{count}"

    lines.append(f'  {new(MATRIX)} = "smalti.vector_load"(%ref, %c0, %c0) : '
                 f"({REF}, index, index) -> {MATRIX}")
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from([MATRIX, ROW] if values[ROW] else [MATRIX]))
        choice = draw(st.sampled_from(["binary", "const", "cast", "reduce", "broadcast",
                                       "broadcast_in_dim", "transpose", "loop"]))
        match choice:
            case "binary":
                a, b = draw(st.sampled_from(values[kind])), draw(st.sampled_from(values[kind]))
                op = draw(st.sampled_from(["arith.addf", "arith.mulf", "arith.maximumf"]))
                lines.append(f"  {new(kind)} = {op} {a}, {b} : {kind}")
            case "const":
                lines.append(f"  {new(kind)} = arith.constant dense<2.0> : {kind}")
            case "cast":
                source = draw(st.sampled_from(values[kind]))
                target = draw(st.sampled_from(CAST_TARGETS[kind]))
                lines.append(f'  {new(kind)} = "smalti.layout_cast"({source}) {{new_layout = '
                             f"#smalti.{layout_to_text(target)}}} : ({kind}) -> {kind}")
            case "reduce":  # a new accumulator, or one shared with earlier reductions
                source = draw(st.sampled_from(values[MATRIX]))
                if constants and draw(st.booleans()):
                    acc = draw(st.sampled_from(constants))
                else:
                    acc = new(ROW)
                    constants.append(acc)
                    lines.append(f"  {acc} = arith.constant dense<0.0> : {ROW}")
                dim = draw(st.sampled_from([0, 1]))
                lines.append(f"  {new(ROW)} = vector.multi_reduction <add>, {source}, {acc} "
                             f"[{dim}] : {MATRIX} to {ROW}")
            case "broadcast":
                if not values[ROW]:
                    continue
                source = draw(st.sampled_from(values[ROW]))
                lines.append(f"  {new(MATRIX)} = vector.broadcast {source} : {ROW} to {MATRIX}")
            case "broadcast_in_dim":
                if not values[ROW]:
                    continue
                source = draw(st.sampled_from(values[ROW]))
                dim = draw(st.sampled_from([0, 1]))
                lines.append(f'  {new(MATRIX)} = "smalti.broadcast_in_dim"({source}) '
                             f"{{broadcast_dimensions = array<i64: {dim}>}} : ({ROW}) -> {MATRIX}")
            case "transpose":
                source = draw(st.sampled_from(values[MATRIX]))
                lines.append(f"  {new(MATRIX)} = vector.transpose {source}, [1, 0] : {MATRIX} "
                             f"to {MATRIX}")
            case "loop":
                init = draw(st.sampled_from(values[MATRIX]))
                other = draw(st.sampled_from(values[MATRIX]))
                result = new(MATRIX)
                lines.append(f"  {result} = scf.for %i{count} = %c0 to %c3 step %c1 "
                             f"iter_args(%acc{count} = {init}) -> ({MATRIX}) {{")
                lines.append(f"    %s{count} = arith.addf %acc{count}, {other} : {MATRIX}")
                lines.append(f"    scf.yield %s{count} : {MATRIX}")
                lines.append("  }")
    stored = draw(st.sampled_from(values[MATRIX]))
    lines.append(f'  "smalti.vector_store"({stored}, %ref, %c0, %c0) : '
                 f"({MATRIX}, {REF}, index, index) -> ()")
    lines += ["  return", "}"]
    return "\n".join(lines)


def _system(func: ir.Operation) -> tuple[EquationSystem, RuleContext]:
    """The program's constraints, as the rules state them (annotations ignored)."""
    system = EquationSystem()
    ctx = RuleContext(system)

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        if any(is_vector(v) for v in (*op.operands, *op.results)):
            ctx.op = op.opview
            RULES.get(op)(ctx, op.opview)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return system, ctx


def _exhaustive_solution_exists(system: EquationSystem) -> bool:
    """Plain backtracking over UNIVERSE: is there any satisfying assignment?"""
    variables = system.variables
    by_last_var: dict[int, list] = {}
    for c in system.constraints:
        ids = [getattr(c, f).id for f in ("a", "b", "var", "target", "source") if hasattr(c, f)]
        by_last_var.setdefault(max(ids), []).append(c)
    assignment: dict[int, object] = {}

    def layout_of(var):
        return assignment[var.id]

    def extend(index: int) -> bool:
        if index == len(variables):
            return True
        var = variables[index]
        for layout in UNIVERSE:
            if not fits(layout, var.shape) or too_dear(layout, var) is not None:
                continue
            assignment[var.id] = layout
            if all(constraint_holds(c, layout_of) for c in by_last_var.get(var.id, ())) and extend(
                    index + 1):
                return True
        del assignment[var.id]
        return False

    return extend(0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_are_solved_exactly(text):
    context = make_context()
    module = parse_module(text, "random.mlir", context)
    func = module.regions[0].blocks[0].operations[0].operation
    with context:
        try:
            infer_function(func)
        except DiagnosticError:
            event("refused")
            split_per_user(func)  # as inference sees it: a constant per user
            system, _ = _system(func)
            assert not _exhaustive_solution_exists(system), "refused a satisfiable program"
            return
        event("solved")
        system, ctx = _system(func)
        written: dict[int, object] = {}

        def record(op: ir.Operation) -> ir.WalkResult:
            op = op.operation
            for attr, values in (("in_layouts", op.operands), ("out_layouts", op.results)):
                vectors = [v for v in values if is_vector(v)]
                if vectors:
                    for value, layout in zip(vectors, attr_to_layouts(op.attributes[attr]),
                                             strict=True):
                        written[ctx.variables[value].id] = layout
            return ir.WalkResult.ADVANCE

        func.walk(record, ir.WalkOrder.PRE_ORDER)
    for var in system.variables:
        if var.id in written:
            assert fits(written[var.id], var.shape)
            assert too_dear(written[var.id], var) is None, (written[var.id], text)

    def layout_of(var):
        return written[var.id]

    for constraint in system.constraints:
        assert constraint_holds(constraint, layout_of), (constraint, text)
