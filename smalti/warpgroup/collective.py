"""Which ops need whole warpgroups, or the whole block, to reach them (keyed by op name)."""

from __future__ import annotations

from jaxlib.mlir import ir

# Ops whose threads of a warpgroup meet (named barriers, wgmma's .sync.aligned, shuffles),
# besides every op that produces or consumes a warpgroup-owned vector.
WARPGROUP_COLLECTIVE = frozenset({
    "smalti.wgmma",
    "smalti.warpgroup_barrier",
    "smalti.async_store",
    "smalti.async_store_wait",
    "vector.multi_reduction",
})
# Ops the whole block meets at (bar.sync 0; barrier.cluster: every CTA of the cluster too).
BLOCK_COLLECTIVE = frozenset({"smalti.initialize_barrier", "smalti.cluster_barrier"})


def owns_vectors(op: ir.Operation) -> bool:
    """Whether `op` reads or writes a warpgroup-owned vector value."""
    return any(isinstance(v.type, ir.VectorType) for v in (*op.operands, *op.results))


def warpgroup_collective(op: ir.Operation) -> bool:
    """Also a collective arrive: its warpgroup meets before one thread releases each peer."""
    return (op.name in WARPGROUP_COLLECTIVE or owns_vectors(op)
            or (op.name == "smalti.arrive" and "collective" in op.attributes))


def block_collective(op: ir.Operation) -> bool:
    return op.name in BLOCK_COLLECTIVE
