"""A second opinion on layout-inference refusals: is there really no layout assignment?

A refusal ("... cannot be given a layout") is a documented limitation only when no
assignment of layouts satisfies the program's constraints, even with relayouts inserted
between its ops (which inference tries first). Any assignment without relayouts is one
with them, so an assignment of the plain constraints disproves a refusal. This module
states the constraints exactly as smalti's rules do (after the passes that run before inference), and searches assignments by
plain backtracking over a fixed universe of layouts, with the register limit, without the
solver's propagation or ordering: the method of tests/test_inference_programs.py, applied
to the tester's programs. An assignment found means smalti refused a satisfiable program.

The universe is finite, so "no assignment" is relative to it: a refusal it cannot
contradict stays a limitation (no false findings), and the search stops after a budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect import make_context, parse_module
from smalti.dialect.attributes import layout_to_text, text_to_layout
from smalti.layout_inference.equations import (
    SMEM,
    EquationSystem,
    variables_of,
)
from smalti.layout_inference.materialise import split_per_user
from smalti.layout_inference.rules import RULES, RuleContext, is_vector
from smalti.layout_inference.solver import fits, too_dear
from smalti.passes import run_pipeline
from smalti.tiling import WGSplatLayout, WGStridedLayout
from tests.constraint_oracle import UnknownConstraint, constraint_holds
from tests.differential.ops import LAYOUTS

BEFORE_INFERENCE = "builtin.module(smalti-verify,smalti-canonicalize,cse)"
UNIVERSE = [*(WGStridedLayout(v) for v in (1, 2, 4, 8, 16)), WGSplatLayout(),
            *(text_to_layout(c.text) for c in LAYOUTS.values())]
BUDGET = 200_000  # assignments tried


@dataclass(frozen=True)
class Verdict:
    """"confirmed" (no assignment exists in the universe), "satisfiable" (one does:
    `detail` names it), or "unjudged" (`detail` says why)."""

    kind: str
    detail: str = ""


class _Unjudged(Exception):
    pass


def judge_refusal(text: str, filename: str) -> Verdict:
    """The verdict on the refusal of the module `text` by layout inference."""
    try:
        context = make_context()
        module = parse_module(text, filename, context)
        with context:
            run_pipeline(module, BEFORE_INFERENCE)
            func = module.regions[0].blocks[0].operations[0].operation
            split_per_user(func)  # as inference sees it: a constant per user
            system, partial = _system(func)
            assignment = _search(system)
    except _Unjudged as why:
        return Verdict("unjudged", str(why))
    except Exception as error:  # smalti's internals moved
        return Verdict("unjudged", f"{type(error).__name__}: {error}")
    if assignment is None:
        return Verdict("confirmed")
    if partial:
        return Verdict("unjudged", "satisfiable without the shared-memory constraints")
    named = [f"{_describe(var.value)}: #smalti.{layout_to_text(layout)}"
             for var, layout in assignment[:6]]
    used = dict.fromkeys(f"#smalti.{layout_to_text(layout)}" for _, layout in assignment)
    return Verdict("satisfiable", f"{'; '.join(named)} (layouts used: {', '.join(used)})")


def _describe(value: object) -> str:
    if isinstance(value, ir.OpResult):
        return f"{value.owner.name} at {value.owner.location}"
    return str(value)[:60]


def _system(func: ir.Operation) -> tuple[EquationSystem, bool]:
    """The constraints of the rules on register layouts; whether some on shared-memory
    transforms were left out (fewer constraints: a refusal still confirmed is confirmed)."""
    system = EquationSystem()
    ctx = RuleContext(system)

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        if any(is_vector(v) for v in (*op.operands, *op.results)):
            ctx.op = op.opview
            RULES.get(op)(ctx, op.opview)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    smem = {var.id for var in system.variables if var.domain == SMEM}
    kept = [c for c in system.constraints if not {v.id for v in variables_of(c)} & smem]
    partial = len(kept) < len(system.constraints)
    system.constraints = kept
    system.variables = [var for var in system.variables if var.id not in smem]
    return system, partial


def _holds(constraint: object, layout_of) -> bool:
    try:
        return constraint_holds(constraint, layout_of)
    except UnknownConstraint as kind:
        raise _Unjudged(f"a constraint the search does not know: {kind}") from None


def _connected_order(system: EquationSystem) -> list:
    """Variables in an order where each shares the most constraints with those before it
    (maximum cardinality search), so conflicts show early and the search backtracks
    little."""
    neighbours: dict[int, set[int]] = {var.id: set() for var in system.variables}
    for constraint in system.constraints:
        ids = {v.id for v in variables_of(constraint)}
        for i in ids:
            neighbours[i] |= ids - {i}
    by_id = {var.id: var for var in system.variables}
    weight = dict.fromkeys(by_id, 0)
    order = []
    while weight:
        best = max(weight, key=lambda i: (weight[i], -i))
        order.append(by_id[best])
        del weight[best]
        for n in neighbours[best]:
            if n in weight:
                weight[n] += 1
    return order


def _search(system: EquationSystem) -> list | None:
    """A satisfying assignment [(variable, layout)], or None."""
    variables = _connected_order(system)
    position = {var.id: k for k, var in enumerate(variables)}
    by_last: dict[int, list] = {}  # constraints, by the variable assigned last among theirs
    for constraint in system.constraints:
        last = max(variables_of(constraint), key=lambda v: position[v.id])
        by_last.setdefault(last.id, []).append(constraint)
    candidates = {var.id: [layout for layout in UNIVERSE if fits(layout, var.shape)
                           and too_dear(layout, var) is None] for var in variables}
    assignment: dict[int, object] = {}
    tries = 0

    def layout_of(var):
        return assignment[var.id]

    def extend(index: int) -> bool:
        nonlocal tries
        if index == len(variables):
            return True
        var = variables[index]
        for layout in candidates[var.id]:
            tries += 1
            if tries > BUDGET:
                raise _Unjudged(f"the search gave up after {BUDGET} tries")
            assignment[var.id] = layout
            if all(_holds(c, layout_of) for c in by_last.get(var.id, ())) and extend(index + 1):
                return True
        assignment.pop(var.id, None)
        return False

    if not extend(0):
        return None
    return [(var, assignment[var.id]) for var in variables]


__all__ = ["BUDGET", "UNIVERSE", "Verdict", "judge_refusal"]
