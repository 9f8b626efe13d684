"""Kernel functions and their launch attributes: a `func.func` marked `smalti.kernel`, its
grid, warpgroups and cluster. A leaf of the dialect (ops ask which kernel encloses them and
its cluster; the kernel's full signature is in `smalti.dialect.kernel`).

    func.func @name(%a: memref<128x256xf32>, ...) attributes {smalti.kernel,
        smalti.grid = array<i64: 2, 1, 1>, smalti.warpgroups = 1 : i64,
        smalti.cluster = array<i64: 2, 1, 1>}

`smalti.cluster` (default 1, 1, 1) groups the grid's CTAs into clusters that share
distributed shared memory and TMA multicasts; the grid must be a whole number of clusters.

A collective kernel (one that reaches other devices: smalti/dialect/ops_collective.py) runs
once on each of `smalti.devices` devices along the mesh axis `smalti.mesh_axis`:

    attributes {smalti.kernel, smalti.grid = array<i64: 4>, smalti.devices = 4 : i64,
                smalti.mesh_axis = "x"}
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import DiagnosticError, error_at

KERNEL_ATTR = "smalti.kernel"
GRID_ATTR = "smalti.grid"
WARPGROUPS_ATTR = "smalti.warpgroups"
CLUSTER_ATTR = "smalti.cluster"
DEVICES_ATTR = "smalti.devices"
MESH_AXIS_ATTR = "smalti.mesh_axis"
DEFAULT_MESH_AXIS = "x"
MAX_DEVICES = 64  # devices one collective kernel may span (a peer table of u64s each)
MAX_PORTABLE_CLUSTER = 8  # CTAs per cluster every sm_90 launch supports (16 needs an opt-in)

Dims = tuple[int, int, int]


def is_kernel(op: ir.Operation) -> bool:
    return op.name == "func.func" and KERNEL_ATTR in op.attributes


def kernel_functions(module: ir.Operation) -> list[ir.Operation]:
    """The kernel functions at the top level of `module`, in order."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if is_kernel(op.operation)]


def kernel_name(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def enclosing_kernel(op: ir.Operation) -> ir.Operation | None:
    """The kernel function `op` is nested in, if any."""
    parent = op.parent
    while parent is not None:
        if is_kernel(parent):
            return parent
        parent = parent.parent
    return None


def _dims(func: ir.Operation, attr_name: str) -> Dims:
    attr = func.attributes[attr_name]
    if not isinstance(attr, ir.DenseI64ArrayAttr) or not 1 <= len(attr) <= 3:
        raise error_at(func, f"'{attr_name}' must be array<i64: X[, Y[, Z]]>, got {attr}")
    dims = [*list(attr), 1, 1][:3]
    if any(d < 1 for d in dims):
        raise error_at(func, f"'{attr_name}' sizes must be positive, got {list(attr)}")
    return (dims[0], dims[1], dims[2])


def kernel_grid(func: ir.Operation) -> Dims:
    """The kernel's `smalti.grid`; a located error if it is missing or malformed."""
    if GRID_ATTR not in func.attributes:
        raise error_at(func, f"kernel @{kernel_name(func)} needs a '{GRID_ATTR}' attribute "
                             "(array<i64: X[, Y[, Z]]>)")
    return _dims(func, GRID_ATTR)


def kernel_warpgroups(func: ir.Operation) -> int:
    """The kernel's `smalti.warpgroups` (default 1); a located error if malformed."""
    if WARPGROUPS_ATTR not in func.attributes:
        return 1
    attr = func.attributes[WARPGROUPS_ATTR]
    if not isinstance(attr, ir.IntegerAttr) or ir.IntegerAttr(attr).value < 1:
        raise error_at(func, f"'{WARPGROUPS_ATTR}' must be a positive integer, got {attr}")
    return ir.IntegerAttr(attr).value


def checked_cluster(func: ir.Operation) -> Dims:
    """The kernel's `smalti.cluster` (1, 1, 1 without one), checked against its grid."""
    grid = kernel_grid(func)
    if CLUSTER_ATTR not in func.attributes:
        return (1, 1, 1)
    cluster = _dims(func, CLUSTER_ATTR)
    written = list(func.attributes[CLUSTER_ATTR])
    if math.prod(cluster) > MAX_PORTABLE_CLUSTER:
        raise error_at(func, f"'{CLUSTER_ATTR}' {written} has {math.prod(cluster)} CTAs; a "
                             f"portable cluster has at most {MAX_PORTABLE_CLUSTER}")
    for axis, (g, c) in enumerate(zip(grid, cluster, strict=True)):
        if g % c:
            raise error_at(func, f"grid {list(grid)} is not a whole number of clusters "
                                 f"{list(cluster)}: dim {'xyz'[axis]} of size {g} is not a "
                                 f"multiple of {c}")
    return cluster


def kernel_cluster(func: ir.Operation) -> Dims | None:
    """A kernel's cluster shape; None when its grid or cluster is malformed (reported at
    the function by the kernel's own check)."""
    try:
        return checked_cluster(func)
    except DiagnosticError:
        return None


def kernel_devices(func: ir.Operation) -> int | None:
    """The kernel's `smalti.devices` (None: not a collective kernel); a located error if
    malformed."""
    if DEVICES_ATTR not in func.attributes:
        return None
    attr = func.attributes[DEVICES_ATTR]
    if not isinstance(attr, ir.IntegerAttr) or not 1 <= ir.IntegerAttr(attr).value <= MAX_DEVICES:
        raise error_at(func, f"'{DEVICES_ATTR}' must be an integer from 1 to {MAX_DEVICES}, "
                             f"got {attr}")
    return ir.IntegerAttr(attr).value


def kernel_mesh_axis(func: ir.Operation) -> str:
    """The mesh axis a collective kernel's devices lie along (default "x")."""
    if MESH_AXIS_ATTR not in func.attributes:
        return DEFAULT_MESH_AXIS
    attr = func.attributes[MESH_AXIS_ATTR]
    if not isinstance(attr, ir.StringAttr) or not ir.StringAttr(attr).value:
        raise error_at(func, f"'{MESH_AXIS_ATTR}' must be a non-empty string, got {attr}")
    return ir.StringAttr(attr).value


def unpaired_cluster(op: ir.Operation) -> str | None:
    """The cluster of `op`'s kernel as text ('none', or e.g. '3x1x1') when it cannot be cut
    into CTA pairs (.cta_group::2 needs an even number of CTAs); None when it can."""
    func = enclosing_kernel(op)
    cluster = kernel_cluster(func) if func is not None else None
    if cluster is None or math.prod(cluster) % 2:
        return "none" if cluster is None else "x".join(map(str, cluster))
    return None
