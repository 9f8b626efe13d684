"""The smalti-infer-layouts pass: build the equations of a kernel, solve, write attributes."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_ops

from smalti.dialect.attributes import (
    LayoutAttrError,
    attr_to_layouts,
    attr_to_transforms,
    layouts_to_attr,
    transforms_to_attr,
)
from smalti.dialect.diagnostics import Diagnostic, DiagnosticError, error_at
from smalti.dialect.ops import LayoutCastOp
from smalti.dialect.verifier import verify_op
from smalti.layout_inference.cuts import cut
from smalti.layout_inference.equations import SMEM, EquationSystem
from smalti.layout_inference.materialise import merge_equal, split_per_user
from smalti.layout_inference.report import describe, diagnose, note
from smalti.layout_inference.rules import RULES, RuleContext, is_smem_ref, is_vector, needs_variable
from smalti.layout_inference.solver import Solution, Unsatisfiable, solve_explained
from smalti.layout_inference.widening import apply_bitwidth_rule

INFERRED = "inferred"  # on a layout_cast inference inserted: the kind of its relayout
RELAYOUT_KINDS = {"registers": "in registers", "shuffles": "by shuffles within warps",
                  "smem": "through shared memory"}


def infer_layouts(module: ir.Operation) -> None:
    """Give every op with vector operands or results `in_layouts`/`out_layouts`."""
    for func in module.regions[0].blocks[0].operations:
        if isinstance(func.operation.opview, func_ops.FuncOp):
            infer_function(func.operation)


def infer_function(func: ir.Operation) -> None:
    """Annotate one function's ops with layouts and transforms."""
    with _collector_paused():
        _infer(func)


def explain_function(func: ir.Operation) -> list[Diagnostic]:
    """Infer one function, then say for every value which constraints decided its layout:
    one remark per value, at its defining op, with a note per constraint."""
    with _collector_paused():
        ctx, solution = _infer(func)
    remarks = []
    for value, var in ctx.variables.items():
        notes = tuple(note(constraint, func) for constraint in solution.reasons(var))
        if isinstance(value.owner, ir.Block):
            where, name = func.location, f"block argument #{ir.BlockArgument(value).arg_number}"
        else:
            where = value.owner.location
            name = f"result #{ir.OpResult(value).result_number} of '{value.owner.name}'"
            if INFERRED in value.owner.attributes:
                kind = ir.StringAttr(value.owner.attributes[INFERRED]).value
                name += f" (inserted by inference: a relayout {RELAYOUT_KINDS[kind]})"
        remarks.append(Diagnostic(where, f"{name} has {describe(solution.layouts[var.id])}",
                                  "remark", notes))
    return remarks


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Inference makes a few small objects per op (variables, constraints, origins) that
    all live until it ends: Python's cyclic collector would traverse them again and again
    (40% of the time at 100,000 ops), and could free nothing. It waits for the end."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _infer(func: ir.Operation) -> tuple[RuleContext, Solution]:
    system = EquationSystem()
    ctx = RuleContext(system)
    vector_ops: list[ir.Operation] = []
    errors: list[DiagnosticError] = []
    copies = split_per_user(func)  # constants and the like: one copy per user

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        if any(needs_variable(v) for v in (*op.operands, *op.results)):
            vector_ops.append(op)
            try:
                _add_constraints(ctx, op)
            except DiagnosticError as error:  # exceptions must not cross the C++ walk
                errors.append(error)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    if errors:
        merge_equal(copies, lambda a, b: True)  # leave the IR as it came
        raise DiagnosticError([d for e in errors for d in e.diagnostics])
    try:
        solution = solve_explained(system)
    except Unsatisfiable as failure:
        solution = _with_relayouts(func, ctx, system, failure, copies, vector_ops)
    cache: dict[tuple, ir.ArrayAttr] = {}
    with func.context:
        for op in vector_ops:
            _annotate(op, ctx, solution.layouts, cache)

    def same_layout(a: ir.Value, b: ir.Value) -> bool:
        return solution.layouts[ctx.variables[a].id] == solution.layouts[ctx.variables[b].id]

    merge_equal(copies, same_layout, forget=lambda value: ctx.variables.pop(value))
    return ctx, solution


def _with_relayouts(func: ir.Operation, ctx: RuleContext, system: EquationSystem,
                    failure: Unsatisfiable, copies: list, vector_ops: list[ir.Operation]
                    ) -> Solution:
    """Solve a system without a single layout assignment by inserting relayouts
    (smalti.layout_inference.cuts): a `smalti.layout_cast` before each chosen use, at the
    using op's location, marked `inferred` with the relayout's kind; or raise the located
    explanation of the parts no relayout resolves (the IR as it came)."""
    cuts = cut(system, failure.failures)
    solution = None
    if not cuts.unresolved:
        # Each part solved with these cuts; were it otherwise, the original is explained.
        with contextlib.suppress(Unsatisfiable):
            solution = solve_explained(cuts.system)
    if solution is None:
        failures = cuts.unresolved or failure.failures
        error = diagnose(Unsatisfiable(failures[0].conflict, failures), system, func,
                         cuts.irreparable)
        merge_equal(copies, lambda a, b: True)
        raise error from None
    with func.context:
        for relayout in cuts.relayouts(solution.layouts):
            op, value = relayout.use.op, relayout.use.var.value
            with ir.InsertionPoint(op):
                cast = LayoutCastOp.build(source=value, new_layout=relayout.target,
                                          loc=op.location)
            cast.operation.attributes[INFERRED] = ir.StringAttr.get(relayout.cost.kind)
            for number, operand in enumerate(op.operands):
                if operand == value:
                    op.operands[number] = cast.result
            ctx.variables[cast.result] = relayout.var
            vector_ops.append(cast.operation)
    return solution


def _annotate(op: ir.Operation, ctx: RuleContext, solution: dict,
              cache: dict[tuple, ir.ArrayAttr]) -> None:
    """Write the solved layouts (vectors) and transforms (SMEM refs) of op's values; equal
    attribute lists are built once (`cache`), as most ops share a handful of layouts."""
    for side, layout_attr, transform_attr in (("operands", "in_layouts", "in_transforms"),
                                              ("results", "out_layouts", "out_transforms")):
        layouts, transforms = [], []
        for value in getattr(op, side):
            var = ctx.variables.get(value)
            if var is not None:
                (transforms if var.domain == SMEM else layouts).append(solution[var.id])
        for name, values, encode in ((layout_attr, layouts, _layouts_attr),
                                     (transform_attr, transforms, _transforms_attr)):
            if values:
                key = (name[-7:], *values)
                if key not in cache:
                    cache[key] = encode(values)
                op.attributes[name] = cache[key]


def _layouts_attr(layouts: list) -> ir.ArrayAttr:
    return layouts_to_attr(layouts)


def _transforms_attr(transforms: list) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([transforms_to_attr(list(t)) for t in transforms])


def _add_constraints(ctx: RuleContext, op: ir.Operation) -> None:
    rule = RULES.get(op)
    if rule is None:
        raise error_at(op, "has no layout inference rule; smalti cannot lower it on vectors")
    verify_op(op)  # rules read fields: malformed ops stop here, located
    ctx.op = op.opview
    rule(ctx, ctx.op)
    apply_bitwidth_rule(ctx, op)
    if "out_layouts" in op.attributes:  # a previous run or the user fixed these
        try:
            layouts = attr_to_layouts(op.attributes["out_layouts"])
        except LayoutAttrError as error:
            raise error_at(op, f"'out_layouts': {error}") from None
        results = [r for r in op.results if is_vector(r)]
        if len(layouts) != len(results):
            raise error_at(op, f"'out_layouts' has {len(layouts)} layouts for {len(results)} "
                               "vector results")
        for result, layout in zip(results, layouts, strict=True):
            ctx.fix(result, layout, "annotated in out_layouts")
    if "out_transforms" in op.attributes:
        refs = [r for r in op.results if is_smem_ref(r)]
        try:
            transforms = [tuple(attr_to_transforms(a)) for a in op.attributes["out_transforms"]]
        except (LayoutAttrError, TypeError) as error:
            raise error_at(op, f"'out_transforms': {error}") from None
        if len(transforms) != len(refs):
            raise error_at(op, f"'out_transforms' has {len(transforms)} entries for "
                               f"{len(refs)} shared-memory results")
        for ref, value in zip(refs, transforms, strict=True):
            ctx.fix(ref, value, "annotated in out_transforms")
