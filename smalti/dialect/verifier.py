"""The smalti-verify pass: every smalti op, every layout attribute, every kernel signature."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.attributes import LayoutAttrError, attr_to_layouts
from smalti.dialect.definition import OP_CLASSES, SmaltiOp
from smalti.dialect.diagnostics import DiagnosticError, error_at
from smalti.dialect.kernel import kernel_signature
from smalti.dialect.launch import is_kernel
from smalti.tiling import LayoutError, check_layout_fits

LAYOUT_ATTRS = {"in_layouts": "operands", "out_layouts": "results"}


def verify(module: ir.Operation) -> None:
    """Raise one DiagnosticError listing every malformed op found in `module`."""
    diagnostics = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        try:
            verify_op(op.operation)
        except DiagnosticError as error:
            diagnostics.extend(error.diagnostics)
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    if diagnostics:
        raise DiagnosticError(diagnostics)


def verify_op(op: ir.Operation) -> None:
    """Raise a located DiagnosticError if `op` is malformed: a smalti op's structure (its
    declared fields) and its own checks, a kernel's signature, inferred layout attributes."""
    if op.name.startswith("smalti."):
        view = op.opview
        if not isinstance(view, SmaltiOp):
            known = ", ".join(sorted(OP_CLASSES))
            raise error_at(op, f"is not a smalti op (known: {known})")
        view.check_structure()
        view.verify_op()
    if is_kernel(op):
        kernel_signature(op)
    for attr_name, kind in LAYOUT_ATTRS.items():
        if attr_name in op.attributes:
            _verify_layouts(op, attr_name, list(getattr(op, kind)))


def _verify_layouts(op: ir.Operation, attr_name: str, values: list[ir.Value]) -> None:
    """`in_layouts`/`out_layouts` hold one fitting layout per vector operand/result."""
    try:
        layouts = attr_to_layouts(op.attributes[attr_name])
    except LayoutAttrError as error:
        raise error_at(op, f"'{attr_name}': {error}") from None
    vectors = [v for v in values if isinstance(v.type, ir.VectorType)]
    if len(layouts) != len(vectors):
        raise error_at(op, f"'{attr_name}' has {len(layouts)} layouts for {len(vectors)} "
                           "vector values")
    for i, (layout, value) in enumerate(zip(layouts, vectors, strict=True)):
        try:
            check_layout_fits(layout, tuple(ir.VectorType(value.type).shape))
        except LayoutError as error:
            raise error_at(op, f"'{attr_name}' #{i} does not fit {value.type}: {error}") from None
