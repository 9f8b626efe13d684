"""The smalti MLIR dialect: ops, layout attributes, kernel conventions and verifiers."""

from smalti.dialect.attributes import (
    LayoutAttrError,
    attr_to_layout,
    attr_to_layouts,
    layout_to_attr,
    layouts_to_attr,
)
from smalti.dialect.context import make_context, parse_module
from smalti.dialect.definition import OP_CLASSES, SmaltiOp
from smalti.dialect.diagnostics import Diagnostic, DiagnosticError, error_at, format_location
from smalti.dialect.kernel import KernelArg, KernelSignature, kernel_signature
from smalti.dialect.launch import kernel_functions
from smalti.dialect.ops import LayoutCastOp, VectorLoadOp, VectorStoreOp
from smalti.dialect.verifier import verify

__all__ = [
    "OP_CLASSES",
    "Diagnostic",
    "DiagnosticError",
    "KernelArg",
    "KernelSignature",
    "LayoutAttrError",
    "LayoutCastOp",
    "SmaltiOp",
    "VectorLoadOp",
    "VectorStoreOp",
    "attr_to_layout",
    "attr_to_layouts",
    "error_at",
    "format_location",
    "kernel_functions",
    "kernel_signature",
    "layout_to_attr",
    "layouts_to_attr",
    "make_context",
    "parse_module",
    "verify",
]
