"""The smalti-infer-layouts pass: build the equations of a kernel, solve, write attributes."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_ops

from smalti.dialect.attributes import (
    LayoutAttrError,
    attr_to_layouts,
    attr_to_transforms,
    layout_to_text,
    layouts_to_attr,
    transform_to_text,
    transforms_to_attr,
)
from smalti.dialect.diagnostics import Diagnostic, DiagnosticError, error_at, format_location
from smalti.dialect.verifier import verify_op
from smalti.layout_inference.equations import SMEM, Equal, EquationSystem, Hint, IsLayout, Origin
from smalti.layout_inference.rules import RULES, RuleContext, is_smem_ref, is_vector, needs_variable
from smalti.layout_inference.solver import Conflict, Solution, Unsatisfiable, solve_explained


def infer_layouts(module: ir.Operation) -> None:
    """Give every op with vector operands or results `in_layouts`/`out_layouts`."""
    for func in module.regions[0].blocks[0].operations:
        if isinstance(func.operation.opview, func_ops.FuncOp):
            infer_function(func.operation)


def infer_function(func: ir.Operation) -> None:
    """Annotate one function's ops with layouts and transforms."""
    _infer(func)


def explain_function(func: ir.Operation) -> list[Diagnostic]:
    """Infer one function, then say for every value which constraints decided its layout:
    one remark per value, at its defining op, with a note per constraint."""
    ctx, solution = _infer(func)
    remarks = []
    for value, var in ctx.variables.items():
        notes = tuple(_note(constraint, func) for constraint in solution.reasons(var))
        if isinstance(value.owner, ir.Block):
            where, name = func.location, f"block argument #{ir.BlockArgument(value).arg_number}"
        else:
            where = value.owner.location
            name = f"result #{ir.OpResult(value).result_number} of '{value.owner.name}'"
        remarks.append(Diagnostic(where, f"{name} has {describe(solution.layouts[var.id])}",
                                  "remark", notes))
    return remarks


def _infer(func: ir.Operation) -> tuple[RuleContext, Solution]:
    system = EquationSystem()
    ctx = RuleContext(system)
    vector_ops: list[ir.Operation] = []
    errors: list[DiagnosticError] = []

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
        raise DiagnosticError([d for e in errors for d in e.diagnostics])
    try:
        solution = solve_explained(system)
    except Unsatisfiable as failure:
        raise _explain(failure.conflict, func) from None
    cache: dict[tuple, ir.ArrayAttr] = {}
    with func.context:
        for op in vector_ops:
            _annotate(op, ctx, solution.layouts, cache)
    return ctx, solution


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


def describe(value: object) -> str:
    """A layout or a transforms tuple, as written in attributes."""
    if isinstance(value, tuple):
        return "[" + ", ".join(f"#smalti.{transform_to_text(t)}" for t in value) + "]"
    return f"#smalti.{layout_to_text(value)}"


def _explain(conflict: Conflict, func: ir.Operation) -> DiagnosticError:
    """A located error at the last constraint of the chain, with a note per link."""
    chain = conflict.chain
    anchor = chain[-1].origin if chain else Origin("func.func", func.location)
    notes = [_note(constraint, func) for constraint in chain]
    if conflict.cast_variable is not None:
        value = conflict.cast_variable.value
        target = (f" to {describe(conflict.cast_layout)}"
                  if conflict.cast_layout is not None else "")
        uses = [c.origin for c in chain if isinstance(c, Equal)]
        where = uses[-1].location if uses else func.location
        notes.append(Diagnostic(where, f"a smalti.layout_cast of {_value_name(value)}{target} "
                                       "before this use would resolve the conflict", "note"))
    message = (f"'{anchor.op_name}' op cannot be given a layout: {conflict.message} "
               f"({len(chain)} constraints in conflict)")
    location = anchor.location or func.location
    return DiagnosticError(Diagnostic(location, message, notes=tuple(notes)))


def _note(constraint, func: ir.Operation) -> Diagnostic:
    """One constraint of an explanation, as a note at the op that stated it."""
    origin = constraint.origin
    detail = origin.reason
    if isinstance(constraint, IsLayout | Hint):
        detail += f": {describe(constraint.layout)}"
    return Diagnostic(origin.location or func.location, f"'{origin.op_name}': {detail}", "note")


def _value_name(value: ir.Value | None) -> str:
    """How to point a user at a value: the op (and source line) that defines it."""
    if value is None:
        return "the value"
    owner = value.owner
    if isinstance(owner, ir.Block):
        return f"block argument #{value.arg_number}"
    return f"the result of '{owner.name}' at {format_location(owner.location)}"
