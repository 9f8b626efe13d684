"""Named passes, and a pass manager mixing smalti's Python passes with upstream ones."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import func as func_ops

from smalti.dialect.diagnostics import Diagnostic, DiagnosticError
from smalti.dialect.verifier import verify
from smalti.layout_inference import explain_function, infer_layouts
from smalti.passes.canonicalize import ALIASES
from smalti.passes.cse import eliminate_pure_ops
from smalti.tiling.pass_ import tile_shared_memory
from smalti.warpgroup import check_warpgroups


@dataclass(frozen=True)
class PassInfo:
    argument: str  # the pipeline and command-line name, e.g. "smalti-infer-layouts"
    description: str
    # Raises DiagnosticError on bad input; may return remarks (Diagnostics) to report.
    run: Callable[[ir.Operation], list[Diagnostic] | None]


def _explain_layouts(op: ir.Operation) -> list[Diagnostic]:
    return [remark for func in op.regions[0].blocks[0].operations
            if isinstance(func.operation.opview, func_ops.FuncOp)
            for remark in explain_function(func.operation)]


REGISTRY: dict[str, PassInfo] = {
    info.argument: info
    for info in (
        PassInfo("smalti-verify", "Check every smalti op and kernel signature", verify),
        PassInfo("smalti-cse", "Merge identical pure smalti ops and drop unused ones "
                 "(upstream cse cannot: the dialect is unregistered)", eliminate_pure_ops),
        PassInfo("smalti-infer-layouts",
                 "Assign in_layouts/out_layouts to every op by solving the layout equations",
                 infer_layouts),
        PassInfo("smalti-tile",
                 "Give shared-memory slices their physical shape from their transforms",
                 tile_shared_memory),
        PassInfo("smalti-warpgroup",
                 "Check warpgroup semantics (collective ops reached by whole warpgroups, "
                 "warp-specialised regions) and record per-role register budgets",
                 check_warpgroups),
        PassInfo("smalti-explain-layouts",
                 "Infer layouts, then remark for every value which constraints decided it",
                 _explain_layouts),
    )
}

# smalti-canonicalize: upstream canonicalize less the patterns that change numbers
# (smalti.passes.canonicalize).
DEFAULT_PIPELINE = ("builtin.module(smalti-verify,smalti-canonicalize,cse,smalti-cse,"
                    "smalti-infer-layouts,smalti-tile,smalti-warpgroup)")


def split_pipeline(pipeline: str) -> list[str]:
    """The top-level elements of `builtin.module(a,b{x=1},func.func(c))`, nesting kept."""
    text = pipeline.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    elements, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced pass pipeline: {pipeline!r}")
        elif ch == "," and depth == 0:
            elements.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced pass pipeline: {pipeline!r}")
    elements.append(text[start:].strip())
    return [e for e in elements if e]


class _PassFailures:
    """Keeps the DiagnosticErrors that Python passes raised inside a pass manager run, and
    the remarks they returned."""

    def __init__(self) -> None:
        self.errors: list[DiagnosticError] = []
        self.remarks: list[Diagnostic] = []

    def wrap(self, info: PassInfo) -> Callable[[ir.Operation, object], None]:
        def run(op: ir.Operation, pass_: object) -> None:
            try:
                # smalti ops are unregistered, so MLIR cannot verify them between passes:
                # every smalti pass starts from verified ops, as upstream passes do.
                verify(op.operation)
                self.remarks.extend(info.run(op.operation) or ())
            except DiagnosticError as error:
                self.errors.append(error)
                for diagnostic in error.diagnostics:
                    diagnostic.location.emit_error(diagnostic.message)
                pass_.signal_pass_failure()

        run.__name__ = info.argument.replace("-", "_")
        return run


AfterPass = Callable[[int, str, ir.Operation], None]


def build_pass_manager(
    pipeline: str, context: ir.Context, *, print_ir_after_all: bool = False,
    after_pass: AfterPass | None = None,
) -> tuple[passmanager.PassManager, _PassFailures]:
    """A pass manager on `builtin.module` running `pipeline`'s elements in order;
    `after_pass(index, element, module)` is called after each (for dumps)."""
    failures = _PassFailures()
    with context:
        pm = passmanager.PassManager("builtin.module")
        for index, element in enumerate(split_pipeline(pipeline)):
            info = REGISTRY.get(element)
            if info is not None:
                pm.add(failures.wrap(info), name=info.argument, argument=info.argument,
                       description=info.description)
            else:
                try:
                    pm.add(ALIASES[element][0] if element in ALIASES else element)
                except ValueError as error:
                    raise ValueError(f"unknown pass or bad pipeline element {element!r}: "
                                     f"{error}") from None
            if after_pass is not None:
                pm.add(_observer(after_pass, index, element), name=f"after-{index}")
        if print_ir_after_all:
            pm.enable_ir_printing(print_after_all=True)
    return pm, failures


def _observer(after_pass: AfterPass, index: int, element: str
              ) -> Callable[[ir.Operation, object], None]:
    def observe(op: ir.Operation, pass_: object) -> None:
        del pass_
        after_pass(index, element, op.operation)

    return observe


def run_pipeline(module: ir.Operation, pipeline: str = DEFAULT_PIPELINE, *,
                 after_pass: AfterPass | None = None) -> None:
    """Run `pipeline` on `module` in place; raise DiagnosticError with located messages.

    Upstream passes report through the context: their diagnostics are read from the
    MLIRError or, when the context routes errors to handlers, seen (not consumed) here.
    """
    pm, failures = build_pass_manager(pipeline, module.context, after_pass=after_pass)
    seen: list[Diagnostic] = []

    def observe(diagnostic: ir.Diagnostic) -> bool:
        if diagnostic.severity == ir.DiagnosticSeverity.ERROR:
            seen.append(Diagnostic(diagnostic.location, str(diagnostic.message)))
        return False

    handler = module.context.attach_diagnostic_handler(observe)
    try:
        pm.run(module)
    except ir.MLIRError as error:
        if failures.errors:
            raise DiagnosticError([d for e in failures.errors for d in e.diagnostics]) from None
        captured = [Diagnostic(d.location, d.message) for d in error.error_diagnostics]
        raise DiagnosticError(captured or seen or [
            Diagnostic(module.location, f"pass pipeline {pipeline} failed")]) from None
    finally:
        handler.detach()
