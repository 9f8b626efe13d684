"""The MLIR context smalti works in: jaxlib's dialects plus `smalti` as unregistered ops."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext


def make_context() -> ir.Context:
    """A fresh context with arith, func, gpu, math, memref, scf, vector, ... loaded and the
    `smalti` namespace allowed (its ops come back as the OpView classes of smalti.dialect)."""
    import smalti.dialect.ops  # noqa: F401  (registers the OpView classes)

    context = ir.Context()
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    context.append_dialect_registry(registry)
    context.load_all_available_dialects()
    context.allow_unregistered_dialects = True
    return context


_MANY_TOP_LEVEL_OPS = "source must contain a single top-level operation"


def parse_module(text: str, source_name: str, context: ir.Context) -> ir.Operation:
    """Parse `text` into a `builtin.module` op with locations in `source_name`.

    Like mlir-opt, top-level ops other than one `module` are wrapped in an implicit module.
    (With several top-level ops the wrapper shares line 1, so columns on line 1 move by 8.)
    Raises ir.MLIRError, whose diagnostics are located, on malformed input.
    """
    with context:
        try:
            op = ir.Operation.parse(text, source_name=source_name).operation
        except ir.MLIRError as error:
            if not any(_MANY_TOP_LEVEL_OPS in d.message for d in error.error_diagnostics):
                raise
            return ir.Operation.parse("module {" + text + "\n}", source_name=source_name).operation
        if op.name == "builtin.module":
            return op
        module = ir.Module.create(ir.Location.file(source_name, 1, 1))
        module.body.append(op)
        return module.operation
