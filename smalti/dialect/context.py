"""The MLIR context smalti works in: jaxlib's dialects plus `smalti` as unregistered ops."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect import (  # noqa: F401  (defining the op classes registers them)
    ops,
    ops_collective,
    ops_compute,
    ops_custom,
    ops_debug,
    ops_dynamic,
    ops_inline,
    ops_launch_control,
    ops_memory,
    ops_mma,
    ops_sync,
    ops_tcgen05,
    ops_tmem,
    ops_tmem_shared,
    ops_warpgroup,
)
from smalti.dialect.bindings import register_jax_dialects


def make_context() -> ir.Context:
    """A fresh context with arith, func, gpu, math, memref, scf, vector, ... loaded and the
    `smalti` namespace allowed (its ops come back as the OpView classes of smalti.dialect)."""
    context = ir.Context()
    registry = ir.DialectRegistry()
    register_jax_dialects(registry)
    context.append_dialect_registry(registry)
    context.load_all_available_dialects()
    context.allow_unregistered_dialects = True
    # MLIR verifies in worker threads, whose diagnostics reach Python handlers that need the
    # GIL the parsing thread holds: a deadlock (found by the fuzzer). One thread, always.
    context.enable_multithreading(False)
    return context


_MANY_TOP_LEVEL_OPS = "source must contain a single top-level operation"


def parse_module(text: str, source_name: str, context: ir.Context) -> ir.Operation:
    """Parse `text` into a `builtin.module` op with locations in `source_name`.

    Like mlir-opt, top-level ops other than one `module` go into an implicit module, located
    at the first of them. (With several top-level ops the text is wrapped in `module {`, so
    columns on line 1 move by 8.) Raises ir.MLIRError on malformed input; its diagnostics,
    or the context's handlers when `emit_error_diagnostics` is set, say where.
    """
    many_ops: list[bool] = []

    def watch(diagnostic: ir.Diagnostic) -> bool:
        if _MANY_TOP_LEVEL_OPS in str(diagnostic.message):
            many_ops.append(True)
            return True
        return False

    with context:
        handler = context.attach_diagnostic_handler(watch)
        try:
            op = ir.Operation.parse(text, source_name=source_name).operation
        except ir.MLIRError as error:
            if not many_ops and not any(_MANY_TOP_LEVEL_OPS in d.message
                                        for d in error.error_diagnostics):
                raise
            op = None
        finally:
            handler.detach()
        if op is None:
            wrapper = ir.Operation.parse("module {" + text + "\n}", source_name=source_name)
            ops = [o.operation for o in wrapper.regions[0].blocks[0].operations]
            return _implicit_module([o.detach_from_parent() for o in ops], text, source_name)
        if op.name == "builtin.module":
            if not len(op.regions[0].blocks[0].operations) and "module" not in text:
                return _implicit_module([], text, source_name)  # an empty input
            return op
        return _implicit_module([op], text, source_name)


def _implicit_module(top_level: list[ir.Operation], text: str, source_name: str) -> ir.Operation:
    """A module holding detached `top_level` ops, located where the first of them is (or,
    with no ops, at the input's first line that is not blank)."""
    if top_level:
        location = top_level[0].location
    else:
        lines = text.splitlines()
        first = next((i for i, line in enumerate(lines) if line.strip()), 0)
        location = ir.Location.file(source_name, first + 1, 1)
    module = ir.Module.create(location)
    for op in top_level:
        module.body.append(op)
    return module.operation
