"""Failures of layout inference as located diagnostics: one error per independent part of
the kernel that has no layouts, naming a minimal set of conflicting constraints (one note
per constraint, at the op that states it), why each layout tried for the value in question
fails, and a layout_cast that resolves the conflict when one exists and lowers."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.attributes import layout_to_text, transform_to_text
from smalti.dialect.diagnostics import Diagnostic, DiagnosticError, format_location
from smalti.layout_inference.conflicts import explain
from smalti.layout_inference.equations import (
    SMEM,
    Constraint,
    EquationSystem,
    Hint,
    IsLayout,
    Origin,
    Variable,
    variables_of,
)
from smalti.layout_inference.materialise import is_unknown
from smalti.layout_inference.solver import Failure, Unsatisfiable
from smalti.tiling import (
    WGMMA_COL_LAYOUT,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_TF32_A,
    WGMMA_ROW_LAYOUT,
    WGMMA_TRANSPOSED_LAYOUT,
)

MAX_NOTES = 24  # constraint notes shown per error

# Short names of canonical layouts (as smalti-layout spells them), for lists of attempts.
NAMES = {WGMMA_LAYOUT: "wgmma", WGMMA_ROW_LAYOUT: "wgmma-row", WGMMA_COL_LAYOUT: "wgmma-col",
         WGMMA_TRANSPOSED_LAYOUT: "wgmma-transposed", WGMMA_LAYOUT_8BIT: "wgmma-8bit",
         WGMMA_LAYOUT_TF32_A: "wgmma-tf32-a"}


def diagnose(failure: Unsatisfiable, system: EquationSystem, func: ir.Operation,
             irreparable: dict[int, tuple[Constraint, ...]] | None = None) -> DiagnosticError:
    """One located error per failed part of the system. `irreparable`: for the parts (by
    position) that no relayout resolves, the conflict to name, which relayouts between
    its ops would not resolve either (smalti.layout_inference.cuts)."""
    irreparable = irreparable or {}
    return DiagnosticError([_diagnose(part, system, func, irreparable.get(i))
                            for i, part in enumerate(failure.failures)])


def _diagnose(failure: Failure, system: EquationSystem, func: ir.Operation,
              irreparable: tuple[Constraint, ...] | None = None) -> Diagnostic:
    explanation = explain(system, failure, irreparable)
    core, conflict = explanation.constraints, explanation.conflict
    notes = _elided([note(constraint, func) for constraint in core])
    if explanation.gave_up:  # nothing proven: name the value and what constrains it
        var = conflict.variable
        anchor = _defining_location(var, func) if var is not None else func.location
        owner = _owner_name(var)
        return Diagnostic(anchor, (
            f"'{owner}' op cannot be given a layout: {conflict.message} deciding "
            f"{_value_name(var, func)}; a smalti.layout_cast of it (or of a value next to "
            f"it) to the layout it should have will settle it ({_count(core)} around it)"),
            notes=tuple(notes))
    in_core = {id(c) for c in core}
    anchor = next((c for c in reversed(conflict.chain) if id(c) in in_core),
                  core[-1] if core else None)
    origin = anchor.origin if anchor is not None else Origin("func.func", func.location)
    var = conflict.variable
    if var is None or not conflict.attempts:
        headline = conflict.message
    else:
        what = "transforms" if var.domain == SMEM else "layout"
        headline = (f"no {what} of {_value_name(var, func)} satisfies these constraints "
                    "together")
        notes.append(Diagnostic(_defining_location(var, func),
                                ("transforms" if var.domain == SMEM else "layouts")
                                + " tried: " + _attempts(conflict.attempts), "note"))
    if explanation.cast is not None:
        equality, layout = explanation.cast
        notes.append(Diagnostic(
            locate(equality.origin, func),
            f"a smalti.layout_cast of {_value_name(equality.a, func)} to {describe(layout)} "
            "before its use here would resolve the conflict", "note"))
    given = "transforms" if _in_smem(core, var) else "a layout"
    unresolved = ("; no relayout resolves it"
                  if irreparable is not None and given == "a layout" else "")
    message = (f"'{origin.op_name}' op cannot be given {given}: {headline} "
               f"({_count(core)} in conflict){unresolved}")
    return Diagnostic(locate(origin, func), message, notes=tuple(notes))


def _in_smem(core: tuple[Constraint, ...], var: Variable | None) -> bool:
    """Whether the conflict is about shared-memory transforms rather than layouts."""
    variables = [var] if var is not None else [v for c in core for v in variables_of(c)]
    return bool(variables) and all(v.domain == SMEM for v in variables)


def _elided(notes: list[Diagnostic]) -> list[Diagnostic]:
    """At most MAX_NOTES notes: the first and last halves, and one note for those between
    (a conflict carried along a long chain of elementwise ops names every one of them)."""
    if len(notes) <= MAX_NOTES:
        return notes
    half = MAX_NOTES // 2
    skipped = notes[half:-half]
    return [*notes[:half],
            Diagnostic(skipped[0].location, f"... and {len(skipped)} more constraints of ops "
                                            "in between, not shown", "note"),
            *notes[-half:]]


def note(constraint: Constraint | Hint, func: ir.Operation) -> Diagnostic:
    """One constraint of an explanation, as a note at the op that stated it."""
    origin = constraint.origin
    detail = origin.reason
    if isinstance(constraint, IsLayout | Hint):
        detail += f": {describe(constraint.layout)}"
    return Diagnostic(locate(origin, func), f"'{origin.op_name}': {detail}", "note")


def describe(value: object) -> str:
    """A layout or a transforms tuple, as written in attributes."""
    if isinstance(value, tuple):
        return "[" + ", ".join(f"#smalti.{transform_to_text(t)}" for t in value) + "]"
    return f"#smalti.{layout_to_text(value)}"


def locate(origin: Origin, func: ir.Operation) -> ir.Location:
    """Where to report a constraint: its op's location; for an op without one (made by a
    fold), the first user that has one; else the function."""
    if origin.location is not None and not is_unknown(origin.location):
        return origin.location
    if origin.op is not None:
        for result in origin.op.results:
            for use in result.uses:
                if not is_unknown(use.owner.location):
                    return use.owner.location
    return func.location


def _count(constraints: tuple[Constraint, ...]) -> str:
    return f"{len(constraints)} constraint{'s' if len(constraints) != 1 else ''}"


def _attempts(attempts: tuple[tuple[object, str], ...]) -> str:
    """Each layout tried and why it failed, layouts failing alike grouped."""
    grouped: dict[str, list[str]] = {}
    for layout, why in attempts:
        grouped.setdefault(why, []).append(NAMES.get(layout) or describe(layout))
    return "; ".join(f"{', '.join(names)}: {why}" for why, names in grouped.items())


def _defining_location(var: Variable, func: ir.Operation) -> ir.Location:
    value = var.value
    if value is None or isinstance(value.owner, ir.Block):
        return func.location
    owner = value.owner.operation
    return locate(Origin(owner.name, owner.location, "", owner), func)


def _owner_name(var: Variable | None) -> str:
    """The name of the op defining var's value (func.func for a block argument)."""
    if var is None or var.value is None or isinstance(var.value.owner, ir.Block):
        return "func.func"
    return var.value.owner.name


def _value_name(var: Variable | None, func: ir.Operation) -> str:
    """How to point a user at a value: the op (and source line) that defines it."""
    if var is None or var.value is None:
        return "the value"
    owner = var.value.owner
    if isinstance(owner, ir.Block):
        return f"block argument #{ir.BlockArgument(var.value).arg_number}"
    return (f"the result of '{owner.name}' at "
            f"{format_location(_defining_location(var, func))}")
