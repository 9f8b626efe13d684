"""The smalti-tile pass: every shared-memory slice gets its physical (tiled, transposed)
shape from its inferred transforms, checked against the slice's offset and the swizzle."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.attributes import LayoutAttrError, attr_to_transforms
from smalti.dialect.checks import constant_index, element_bytes
from smalti.dialect.diagnostics import DiagnosticError, error_at
from smalti.dialect.ops_memory import SliceSmemOp
from smalti.tiling.smem import SwizzleTransform, physical_shape

PHYSICAL_SHAPE_ATTR = "physical_shape"


def tile_shared_memory(module: ir.Operation) -> None:
    """Annotate each `smalti.slice_smem` with `physical_shape`; located errors otherwise."""
    errors: list[DiagnosticError] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        view = op.operation.opview
        if isinstance(view, SliceSmemOp):
            try:
                _tile(view)
            except DiagnosticError as error:  # exceptions must not cross the C++ walk
                errors.append(error)
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    if errors:
        raise DiagnosticError([d for e in errors for d in e.diagnostics])


def _tile(op: SliceSmemOp) -> None:
    if "out_transforms" not in op.attributes:
        raise error_at(op, "has no 'out_transforms': run smalti-infer-layouts before "
                           "smalti-tile")
    ref_type = ir.MemRefType(op.result.type)
    try:
        transforms = attr_to_transforms(op.attributes["out_transforms"][0])
        shape = physical_shape(transforms, tuple(ref_type.shape), element_bytes(ref_type))
    except (LayoutAttrError, ValueError) as error:
        raise error_at(op, f"transforms do not apply: {error}") from None
    swizzles = [t.swizzle_bytes for t in transforms if isinstance(t, SwizzleTransform)]
    offset = constant_index(op.offset)
    if swizzles and offset is not None and offset % (8 * swizzles[0]):
        raise error_at(op, f"a {swizzles[0]}-byte swizzled slice must start on a multiple of "
                           f"{8 * swizzles[0]} bytes, this one starts at {offset}")
    with op.context:
        op.attributes[PHYSICAL_SHAPE_ATTR] = ir.DenseI64ArrayAttr.get(list(shape))
