"""Parsing a source chunk the way mlir-opt does: one `builtin.module` at the top, always."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.context import parse_module
from smalti.tools.reported import DiagnosticCollector
from smalti.tools.split import Chunk

_MANY_TOP_LEVEL_OPS = "source must contain a single top-level operation"


def parse_chunk(chunk: Chunk, source_name: str, context: ir.Context,
                collector: DiagnosticCollector) -> ir.Operation | None:
    """The chunk as a `builtin.module` op (other top-level ops are wrapped in one, as
    mlir-opt does), or None with the parse errors left in `collector`."""
    text = chunk.padded_text
    try:
        top = parse_module(text, source_name, context)
    except ir.MLIRError:
        errors = collector.diagnostics
        if len(errors) != 1 or not errors[0].message.startswith(_MANY_TOP_LEVEL_OPS):
            return None
        collector.take()
        # Several top-level ops parsed and verified: wrap them. Only line 1's columns move,
        # and that line is blank in every chunk but the first.
        try:
            return parse_module("module {" + text + "\n}\n", source_name, context)
        except ir.MLIRError:
            return None
    if top.name == "builtin.module":
        return top
    with context:
        module = ir.Module.create(ir.Location.file(source_name, chunk.first_line, 1))
        module.body.append(top)
        return module.operation
