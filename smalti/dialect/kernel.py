"""Kernel functions: a `func.func` marked `smalti.kernel`, its launch grid and arguments.

    func.func @name(%a: memref<128x256xf32>, ...) attributes {smalti.kernel,
        smalti.grid = array<i64: 2, 1, 1>, smalti.warpgroups = 1 : i64,
        smalti.cluster = array<i64: 2, 1, 1>}

Arguments are global-memory buffers (memrefs of static shape) or scalars. `smalti.cluster`
(default 1, 1, 1) groups the grid's CTAs into clusters that share distributed shared memory
and TMA multicasts; the grid must be a whole number of clusters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.diagnostics import DiagnosticError, error_at
from smalti.tiling import WARPGROUP_SIZE

if TYPE_CHECKING:
    from smalti.dialect.ops_debug import DebugPrintRecord

KERNEL_ATTR = "smalti.kernel"
GRID_ATTR = "smalti.grid"
WARPGROUPS_ATTR = "smalti.warpgroups"
CLUSTER_ATTR = "smalti.cluster"
MAX_PORTABLE_CLUSTER = 8  # CTAs per cluster every sm_90 launch supports (16 needs an opt-in)

SCALAR_TYPES = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")
ELEMENT_TYPES = (*SCALAR_TYPES, "f8E4M3FN", "f8E5M2")


@dataclass(frozen=True)
class KernelArg:
    """One argument: a buffer (`shape` set) or a scalar (`shape` None) of `dtype`."""

    name: str
    dtype: str  # MLIR spelling of the element type: "f32", "bf16", "i32", ...
    shape: tuple[int, ...] | None


@dataclass(frozen=True)
class TensorMapRecord:
    """A TMA tensor map a kernel takes as a `.param .align 64 .b8 NAME[128]` after its
    arguments: over kernel argument `arg` (a global ref of `dtype` and `shape`), boxes of
    `box` elements (numpy order), swizzled by `swizzle` bytes (None: not swizzled)."""

    param: str
    arg: int
    dtype: str
    shape: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int | None = None


@dataclass(frozen=True)
class KernelSignature:
    name: str
    grid: tuple[int, int, int]
    warpgroups: int
    args: tuple[KernelArg, ...]
    smem_bytes: int = 0  # dynamic shared memory the launch must provide
    tensor_maps: tuple[TensorMapRecord, ...] = ()  # set by the lowering
    # smalti.debug_print ops; when any, a hidden `.param .u64 debug` follows the tensor maps
    debug_prints: tuple[DebugPrintRecord, ...] = ()
    cluster: tuple[int, int, int] = (1, 1, 1)  # CTAs per cluster (x, y, z)

    @property
    def block(self) -> tuple[int, int, int]:
        return (WARPGROUP_SIZE * self.warpgroups, 1, 1)

    @property
    def debug_buffer_bytes(self) -> int:
        """Bytes of the hidden debug buffer the launch must provide, zeroed (0: none)."""
        return sum(record.size_bytes for record in self.debug_prints)


def is_kernel(op: ir.Operation) -> bool:
    return op.name == "func.func" and KERNEL_ATTR in op.attributes


def kernel_functions(module: ir.Operation) -> list[ir.Operation]:
    """The kernel functions at the top level of `module`, in order."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if is_kernel(op.operation)]


def kernel_signature(func: ir.Operation) -> KernelSignature:
    """Read and check a kernel's signature; DiagnosticError at the function otherwise."""
    name = ir.StringAttr(func.attributes["sym_name"]).value
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    if function_type.results:
        raise error_at(func, f"kernel @{name} must not return values")
    grid = _grid(func, name)
    cluster = _cluster(func, grid)
    warpgroups = 1
    if WARPGROUPS_ATTR in func.attributes:
        attr = func.attributes[WARPGROUPS_ATTR]
        if not isinstance(attr, ir.IntegerAttr) or ir.IntegerAttr(attr).value < 1:
            raise error_at(func, f"'{WARPGROUPS_ATTR}' must be a positive integer, got {attr}")
        warpgroups = ir.IntegerAttr(attr).value
    args = tuple(_kernel_arg(func, name, i, t) for i, t in enumerate(function_type.inputs))
    from smalti.dialect.ops_debug import debug_print_records

    prints = debug_print_records(func, math.prod(grid) * warpgroups)
    return KernelSignature(name, grid, warpgroups, args, dynamic_smem_bytes(func),
                           debug_prints=prints, cluster=cluster)


def dynamic_smem_bytes(func: ir.Operation) -> int:
    """The dynamic shared memory a kernel's `smalti.slice_smem` ops carve: max offset + size."""
    from smalti.dialect.ops_memory import slice_end

    ends = [0]

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.operation.name == "smalti.slice_smem":
            end = slice_end(op.operation)
            if end is not None:
                ends.append(end)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return max(ends)


def _grid(func: ir.Operation, name: str) -> tuple[int, int, int]:
    if GRID_ATTR not in func.attributes:
        raise error_at(func, f"kernel @{name} needs a '{GRID_ATTR}' attribute "
                             "(array<i64: X[, Y[, Z]]>)")
    attr = func.attributes[GRID_ATTR]
    if not isinstance(attr, ir.DenseI64ArrayAttr) or not 1 <= len(attr) <= 3:
        raise error_at(func, f"'{GRID_ATTR}' must be array<i64: X[, Y[, Z]]>, got {attr}")
    grid = [*list(attr), 1, 1][:3]
    if any(g < 1 for g in grid):
        raise error_at(func, f"'{GRID_ATTR}' sizes must be positive, got {list(attr)}")
    return (grid[0], grid[1], grid[2])


def _cluster(func: ir.Operation, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    """The kernel's `smalti.cluster` (1, 1, 1 without one), checked against the grid."""
    if CLUSTER_ATTR not in func.attributes:
        return (1, 1, 1)
    attr = func.attributes[CLUSTER_ATTR]
    if not isinstance(attr, ir.DenseI64ArrayAttr) or not 1 <= len(attr) <= 3:
        raise error_at(func, f"'{CLUSTER_ATTR}' must be array<i64: X[, Y[, Z]]>, got {attr}")
    cluster = [*list(attr), 1, 1][:3]
    if any(c < 1 for c in cluster):
        raise error_at(func, f"'{CLUSTER_ATTR}' sizes must be positive, got {list(attr)}")
    if math.prod(cluster) > MAX_PORTABLE_CLUSTER:
        raise error_at(func, f"'{CLUSTER_ATTR}' {list(attr)} has {math.prod(cluster)} CTAs; a "
                             f"portable cluster has at most {MAX_PORTABLE_CLUSTER}")
    for axis, (g, c) in enumerate(zip(grid, cluster, strict=True)):
        if g % c:
            raise error_at(func, f"grid {list(grid)} is not a whole number of clusters "
                                 f"{cluster}: dim {'xyz'[axis]} of size {g} is not a multiple "
                                 f"of {c}")
    return (cluster[0], cluster[1], cluster[2])


def kernel_cluster(func: ir.Operation) -> tuple[int, int, int] | None:
    """A kernel's cluster shape; None when its grid or cluster is malformed (reported at
    the function by the kernel's own check)."""
    try:
        return _cluster(func, _grid(func, ir.StringAttr(func.attributes["sym_name"]).value))
    except DiagnosticError:
        return None


def enclosing_kernel(op: ir.Operation) -> ir.Operation | None:
    """The kernel function `op` is nested in, if any."""
    parent = op.parent
    while parent is not None:
        if is_kernel(parent):
            return parent
        parent = parent.parent
    return None


def _kernel_arg(func: ir.Operation, name: str, index: int, t: ir.Type) -> KernelArg:
    if isinstance(t, ir.MemRefType):
        ref = ir.MemRefType(t)
        if not ref.has_static_shape or ref.memory_space is not None:
            raise error_at(func, f"argument #{index} of kernel @{name} must be a global memref "
                                 f"of static shape, got {t}")
        if type_name(ref.element_type) not in ELEMENT_TYPES:
            raise error_at(func, f"argument #{index} of kernel @{name} has unsupported element "
                                 f"type {ref.element_type}")
        if ref.get_strides_and_offset() != (_row_major(ref.shape), 0):
            raise error_at(func, f"argument #{index} of kernel @{name} must be a contiguous "
                                 f"row-major memref, got {t}")
        return KernelArg(f"arg{index}", type_name(ref.element_type), tuple(ref.shape))
    if type_name(t) in SCALAR_TYPES:
        return KernelArg(f"arg{index}", type_name(t), None)
    raise error_at(func, f"argument #{index} of kernel @{name} has type {t}; kernel arguments "
                         "are memrefs or scalars of " + ", ".join(SCALAR_TYPES))


def _row_major(shape: list[int]) -> list[int]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return list(reversed(strides))
