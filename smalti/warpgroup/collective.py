"""Which ops need whole warpgroups, or the whole block, to reach them: what their classes
declare (smalti ops' traits), and every op that owns a warpgroup-owned vector."""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.definition import SmaltiOp


def owns_vectors(op: ir.Operation) -> bool:
    """Whether `op` reads or writes a warpgroup-owned vector value (its threads then meet:
    shuffles, reductions across warps)."""
    return any(isinstance(v.type, ir.VectorType) for v in (*op.operands, *op.results))


def warpgroup_collective(op: ir.Operation) -> bool:
    """Whether every thread of the warpgroup must reach `op`."""
    view = op.opview
    return owns_vectors(op) or (isinstance(view, SmaltiOp) and view.is_warpgroup_collective())


def block_collective(op: ir.Operation) -> bool:
    """Whether every thread of the block must reach `op`."""
    view = op.opview
    return isinstance(view, SmaltiOp) and view.is_block_collective()
