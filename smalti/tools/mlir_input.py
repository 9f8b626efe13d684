"""Parsing a source chunk the way mlir-opt does: one `builtin.module` at the top, always.

`smalti.dialect.context.parse_module` wraps other top-level ops in an implicit module; two
things are left to the drivers: with a DiagnosticCollector active, errors reach handlers
instead of `MLIRError.error_diagnostics`, so the several-top-level-ops case is recognised here;
and the implicit module is given the location of its first op rather than line 1, so that
diagnostics about it land inside the chunk they came from.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.context import parse_module
from smalti.dialect.diagnostics import format_location
from smalti.tools.reported import DiagnosticCollector
from smalti.tools.split import Chunk

_MANY_TOP_LEVEL_OPS = "source must contain a single top-level operation"
_EXPLICIT_MODULE = ("module", '"builtin.module"')


def parse_chunk(chunk: Chunk, source_name: str, context: ir.Context,
                collector: DiagnosticCollector) -> ir.Operation | None:
    """The chunk as a `builtin.module` op, or None with the parse errors left in `collector`."""
    text = chunk.padded_text
    try:
        module = parse_module(text, source_name, context)
    except ir.MLIRError:
        errors = collector.diagnostics
        if len(errors) != 1 or not errors[0].message.startswith(_MANY_TOP_LEVEL_OPS):
            return None
        collector.take()
        # Several top-level ops, parsed and verified: wrap them. Only line 1's columns move,
        # and that line is blank in every chunk but the first.
        try:
            module = parse_module("module {" + text + "\n}\n", source_name, context)
        except ir.MLIRError:
            return None
    if _is_implicit(module, text, source_name):
        return _relocated(module, context)
    return module


def _is_implicit(module: ir.Operation, text: str, source_name: str) -> bool:
    """Whether `module` is the wrapper parse_module made (located at 1:1, where no module is)."""
    return (format_location(module.location) == f"{source_name}:1:1"
            and not text.startswith(_EXPLICIT_MODULE))


def _relocated(module: ir.Operation, context: ir.Context) -> ir.Operation:
    """An implicit module moved to the location of its first op (its ops moved along)."""
    ops = list(module.regions[0].blocks[0].operations)
    if not ops:
        return module
    with context:
        moved = ir.Module.create(ops[0].location)
        for op in ops:
            moved.body.append(op.detach_from_parent())
    return moved.operation
