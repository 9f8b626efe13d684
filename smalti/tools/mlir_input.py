"""Parsing a source chunk the way mlir-opt does: one `builtin.module` at the top, always."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.context import parse_module
from smalti.tools.split import Chunk


def parse_chunk(chunk: Chunk, source_name: str, context: ir.Context) -> ir.Operation | None:
    """The chunk as a `builtin.module` op, or None (the parse errors went to the context's
    diagnostic handlers, i.e. the driver's DiagnosticCollector)."""
    try:
        return parse_module(chunk.padded_text, source_name, context)
    except ir.MLIRError:
        return None
