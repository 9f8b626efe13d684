"""A kernel's launch signature: its arguments, grid, warpgroups, cluster, dynamic shared
memory, tensor maps and debug buffer (see `smalti.dialect.launch` for the attributes).

Arguments are global-memory buffers (memrefs of static shape) or scalars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import row_major_strides
from smalti.dialect.diagnostics import error_at
from smalti.dialect.launch import (
    checked_cluster,
    kernel_devices,
    kernel_grid,
    kernel_mesh_axis,
    kernel_name,
    kernel_warpgroups,
)
from smalti.dialect.ops_collective import (
    MultimemLoadReduceOp,
    MultimemRedOp,
    MultimemStoreOp,
    SliceSymmetricOp,
)
from smalti.dialect.ops_debug import DebugPrintRecord, debug_print_records
from smalti.dialect.ops_memory import SliceSmemOp
from smalti.tiling import WARPGROUP_SIZE

SCALAR_TYPES = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")
NARROW_FLOAT_TYPES = ("f8E4M3FN", "f8E5M2", "f6E2M3FN", "f6E3M2FN", "f4E2M1FN", "f8E8M0FNU")
"""Float types of buffers only: FP8 (e4m3, e5m2), FP6 (e2m3, e3m2) and FP4 (e2m1) data and
the E8M0 scales of block-scaled MMA (PTX ISA section "Alternate Floating Point
Data Formats"). UE4M3 scales (an e4m3 whose sign bit is 0) travel as f8E4M3FN."""
NARROW_INT_TYPES = ("i4",)
"""Integer types of buffers only: int4, two per byte (the low nibble first), as XLA lays out
jnp.int4 arrays (smalti/runtime/subbyte.py)."""
ELEMENT_TYPES = (*SCALAR_TYPES, *NARROW_FLOAT_TYPES, *NARROW_INT_TYPES)


@dataclass(frozen=True)
class Arch:
    """A GPU architecture smalti compiles for: its PTX `.target` and ptxas `-arch` name,
    and the oldest PTX ISA version whose `.target` takes it (PTX ISA 12 "Release Notes":
    sm_90a from 8.0, sm_100a from 8.6)."""

    name: str
    ptx_version: str

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.ptx_version.split("."))


ARCHES = {"sm_90a": Arch("sm_90a", "8.0"), "sm_100a": Arch("sm_100a", "8.6")}
"""The architectures smalti compiles for: Hopper and Blackwell (datacenter)."""
DEFAULT_ARCH = "sm_90a"



def check_arch(name: str) -> Arch:
    """The Arch called `name`; ValueError naming the known ones otherwise."""
    if name not in ARCHES:
        raise ValueError(f"unknown GPU architecture {name!r}; smalti compiles for "
                         f"{', '.join(ARCHES)}")
    return ARCHES[name]


def check_ops_for_arch(module: ir.Operation, arch: str) -> None:
    """A located DiagnosticError at the first op of `module` that `arch` lacks (an op class's
    ARCHES; ValueError for an unknown arch)."""
    check_arch(arch)
    found: list[tuple[ir.Operation, tuple[str, ...], str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        view = op.operation.opview
        arches = getattr(type(view), "ARCHES", None)  # a smalti op limited to some targets
        feature = getattr(type(view), "ARCH_FEATURE", "")
        if arches is None and hasattr(view, "arch_requirement"):  # limited by its attributes
            arches, feature = view.arch_requirement()
        if arches is not None and arch not in arches:
            found.append((op, arches, feature))
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    if found:
        op, arches, what = found[0]
        raise error_at(op, f"needs {' or '.join(arches)}: {arch} has no {what}; compile "
                           f"with --arch={arches[0]}")


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
    `box` elements (numpy order), swizzled by `swizzle` bytes (None: not swizzled).

    A map over a symmetric buffer (`symmetric_offset` set, `arg` -1) is one per device: the
    parameter is `.b8 NAME[128 * devices]`, entry p the map over device p's copy of the
    buffer, at its heap's address + `symmetric_offset` (row-major `shape`)."""

    param: str
    arg: int
    dtype: str
    shape: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int | None = None
    symmetric_offset: int | None = None


@dataclass(frozen=True)
class CollectiveSpec:
    """What a collective kernel needs of its launch: it runs once on each of `devices`
    devices along `mesh_axis`, with `symmetric_bytes` of symmetric heap (the same offset on
    every device), reached through a multicast mapping when `multimem`.

    Its PTX takes three hidden `.u64` parameters after the debug buffer (if any):
    `smalti_device`, the address of an i32 holding the device's index along the axis;
    `smalti_peers`, the address of a table of `devices` u64s, entry p the address of device
    p's symmetric heap; `smalti_multicast`, the multicast address of the heap (0 when the
    kernel has no multimem op)."""

    devices: int
    mesh_axis: str
    symmetric_bytes: int = 0
    multimem: bool = False

    HIDDEN_PARAMS = ("smalti_device", "smalti_peers", "smalti_multicast")


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
    collective: CollectiveSpec | None = None  # a kernel that reaches other devices
    arch: str = DEFAULT_ARCH  # the architecture its PTX and cubin are for (ARCHES)

    @property
    def block(self) -> tuple[int, int, int]:
        return (WARPGROUP_SIZE * self.warpgroups, 1, 1)

    @property
    def debug_buffer_bytes(self) -> int:
        """Bytes of the hidden debug buffer the launch must provide, zeroed (0: none)."""
        return sum(record.size_bytes for record in self.debug_prints)


def kernel_signature(func: ir.Operation) -> KernelSignature:
    """Read and check a kernel's signature; DiagnosticError at the function otherwise."""
    name = kernel_name(func)
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    if function_type.results:
        raise error_at(func, f"kernel @{name} must not return values")
    grid = kernel_grid(func)
    cluster = checked_cluster(func)
    warpgroups = kernel_warpgroups(func)
    args = tuple(_kernel_arg(func, name, i, t) for i, t in enumerate(function_type.inputs))
    prints = debug_print_records(func, math.prod(grid) * warpgroups)
    carving = _carving(func)
    return KernelSignature(name, grid, warpgroups, args, carving.smem_bytes,
                           debug_prints=prints, cluster=cluster,
                           collective=_collective_spec(func, carving))


@dataclass
class _Carving:
    """What a kernel's ops carve out of its buffers: the ends of its slices of dynamic
    shared memory and of the symmetric heap, and whether it uses multimem."""

    smem_bytes: int = 0
    symmetric_bytes: int = 0
    multimem: bool = False


def _carving(func: ir.Operation) -> _Carving:
    """The kernel's `_Carving`, in one walk."""
    carving = _Carving()

    def visit(op: ir.Operation) -> ir.WalkResult:
        view = op.operation.opview
        match view:
            case SliceSmemOp():
                carving.smem_bytes = max(carving.smem_bytes, view.end_bytes() or 0)
            case SliceSymmetricOp():
                carving.symmetric_bytes = max(carving.symmetric_bytes, view.end_bytes() or 0)
            case MultimemStoreOp() | MultimemLoadReduceOp() | MultimemRedOp():
                carving.multimem = True
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return carving


def _collective_spec(func: ir.Operation, carving: _Carving) -> CollectiveSpec | None:
    """The kernel's `CollectiveSpec` (None: it reaches no other device)."""
    devices = kernel_devices(func)
    if devices is None:
        return None
    return CollectiveSpec(devices, kernel_mesh_axis(func), carving.symmetric_bytes,
                          carving.multimem)


def _kernel_arg(func: ir.Operation, name: str, index: int, t: ir.Type) -> KernelArg:
    if isinstance(t, ir.MemRefType):
        ref = ir.MemRefType(t)
        if not ref.has_static_shape or ref.memory_space is not None:
            raise error_at(func, f"argument #{index} of kernel @{name} must be a global memref "
                                 f"of static shape, got {t}")
        if type_name(ref.element_type) not in ELEMENT_TYPES:
            raise error_at(func, f"argument #{index} of kernel @{name} has unsupported element "
                                 f"type {ref.element_type}")
        if ref.get_strides_and_offset() != (row_major_strides(ref.shape), 0):
            raise error_at(func, f"argument #{index} of kernel @{name} must be a contiguous "
                                 f"row-major memref, got {t}")
        return KernelArg(f"arg{index}", type_name(ref.element_type), tuple(ref.shape))
    if type_name(t) in SCALAR_TYPES:
        return KernelArg(f"arg{index}", type_name(t), None)
    raise error_at(func, f"argument #{index} of kernel @{name} has type {t}; kernel arguments "
                         "are memrefs or scalars of " + ", ".join(SCALAR_TYPES))
