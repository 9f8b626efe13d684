"""Collective ops: a kernel that runs on `smalti.devices` devices at once and reaches the
others' memory from inside (smalti/dialect/launch.py has the kernel attributes).

    %buf = "smalti.slice_symmetric"(%c0) : (index) -> memref<4x128xf32, "symmetric">
    %d = "smalti.device_index"() : () -> index
    %n = "smalti.device_count"() : () -> index
    %peer = "smalti.remote_ref"(%buf, %p) : (memref<4x128xf32, "symmetric">, index)
                                            -> memref<4x128xf32, "symmetric">
    "smalti.semaphore_signal"(%sems, %i, %p) {increment = 1 : i64}
    "smalti.semaphore_wait"(%sems, %i) {value = 3 : i64}
    "smalti.multimem_store"(%v, %buf, %r, %c)
    %sum = "smalti.multimem_load_reduce"(%buf, %r, %c) {reduction = "add"}
    "smalti.multimem_red"(%v, %buf, %r, %c) {reduction = "add"}

Symmetric memrefs (`memref<..., "symmetric">`) are global memory at the same offset of every
device's symmetric heap: `slice_symmetric` carves them at a constant byte offset, as
`slice_smem` carves shared memory. Plain vector_load / vector_store reach the device's own
copy, or a peer's through `remote_ref`. Semaphores are i32 elements of a symmetric memref:
`semaphore_signal` adds `increment` to semaphore i of device p, releasing at system scope
what the warpgroup wrote before it; `semaphore_wait` waits until the device's own semaphore
i holds at least `value`, acquires at system scope, and takes `value` off it (so a kernel
whose waits match its signals leaves its semaphores at zero). The multimem ops reach the
same elements of every device at once through the heap's multicast mapping: a store to all,
a load of the reduction over all, an atomic reduction into all.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import (
    check_constant_slice,
    check_index,
    check_symmetric_ref,
    constant_index,
    slice_end_bytes,
)
from smalti.dialect.definition import (
    INTEGER,
    STRING,
    Attr,
    Effect,
    Operand,
    Result,
    SmaltiOp,
    Trait,
)
from smalti.dialect.diagnostics import DiagnosticError, error_at
from smalti.dialect.launch import (
    DEVICES_ATTR,
    enclosing_kernel,
    kernel_devices,
    kernel_mesh_axis,
)
from smalti.dialect.ops import check_memory_access

SYMMETRIC_ALIGNMENT = 128  # bytes: what TMA, multimem and 16-byte vector accesses need
MAX_SEMAPHORE_STEP = (1 << 31) - 1
# Reductions multimem performs, per element type (PTX ISA, multimem.ld_reduce / .red, as
# ptxas 13.5 accepts them for sm_90a: f32 loads only add, f16 and bf16 loads add, min and max;
# floats reduce into memory by add; integers (signed for min and max) all six).
FLOAT_TYPES = ("f32", "f16", "bf16")
INTEGER_TYPES = ("i32", "i64")
INTEGER_REDUCTIONS = ("add", "min", "max", "and", "or", "xor")
LOAD_REDUCTIONS = {"f32": ("add",), "f16": ("add", "min", "max"),
                   "bf16": ("add", "min", "max"),
                   **dict.fromkeys(INTEGER_TYPES, INTEGER_REDUCTIONS)}
RED_REDUCTIONS = {**dict.fromkeys(FLOAT_TYPES, ("add",)),
                  **dict.fromkeys(INTEGER_TYPES, INTEGER_REDUCTIONS)}


def collective_devices(op: ir.Operation) -> int | None:
    """The device count of the collective kernel enclosing `op` (None when its
    `smalti.devices` is malformed: the kernel's own check reports that, once); a located
    error when the op is not in a kernel with `smalti.devices`."""
    func = enclosing_kernel(op)
    if func is None or DEVICES_ATTR not in func.attributes:
        raise error_at(op, f"needs an enclosing kernel with '{DEVICES_ATTR}' (a collective "
                           "kernel: the devices it runs on)")
    try:
        return kernel_devices(func)
    except DiagnosticError:
        return None


def _constant_device(value: ir.Value) -> int | None:
    """The value of an `arith.constant` of type index or i32, or None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    attr = owner.operation.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _check_device(op: ir.Operation, value: ir.Value, devices: int | None) -> None:
    """`value` names a device: an index or i32, below `devices` when it is a constant."""
    if not (isinstance(value.type, ir.IndexType)
            or (isinstance(value.type, ir.IntegerType) and ir.IntegerType(value.type).width == 32)):
        raise error_at(op, f"the device must be an index or i32, got {value.type}")
    device = _constant_device(value)
    if devices is not None and device is not None and not 0 <= device < devices:
        raise error_at(op, f"device {device} is out of range for the kernel's {devices} "
                           "devices")


def _check_axis(op: ir.Operation, axis: str | None) -> None:
    """An op's `axis`, when written, is the kernel's mesh axis."""
    func = enclosing_kernel(op)
    if axis is None or func is None:
        return
    try:
        mesh_axis = kernel_mesh_axis(func)
    except DiagnosticError:
        return  # malformed: the kernel's own check reports it
    if axis != mesh_axis:
        raise error_at(op, f"axis \"{axis}\" is not the kernel's mesh axis \"{mesh_axis}\"")


class SliceSymmetricOp(SmaltiOp):
    """A typed view of the kernel's symmetric heap at a constant byte offset: the same
    offset on every device."""

    OPERATION_NAME = "smalti.slice_symmetric"
    USER_FACING = False  # the DSL carves its declared symmetric buffers with it

    offset = Operand("the byte offset, an arith.constant index")
    result = Result("the symmetric ref")

    def end_bytes(self) -> int | None:
        """The byte after the slice, when its offset and type are well formed."""
        return slice_end_bytes(self.offset, self.result)

    def verify_op(self) -> None:
        op = self.operation
        collective_devices(op)
        check_constant_slice(op, self.offset, self.result,
                             lambda: check_symmetric_ref(op, self.result, "the result"),
                             SYMMETRIC_ALIGNMENT)


def _verify_device_query(op: ir.Operation, axis: str | None, result: ir.Value) -> None:
    """device_index and device_count: in a collective kernel, of its axis, an index."""
    collective_devices(op)
    _check_axis(op, axis)
    check_index(op, result, "the result")


class DeviceIndexOp(SmaltiOp):
    """This device's index along the kernel's mesh axis (0 to devices - 1)."""

    OPERATION_NAME = "smalti.device_index"

    axis = Attr(STRING, "the mesh axis (the kernel's)", optional=True)
    result = Result("the index")

    def verify_op(self) -> None:
        _verify_device_query(self.operation, self.axis, self.result)


class DeviceCountOp(SmaltiOp):
    """The number of devices along the kernel's mesh axis (its `smalti.devices`)."""

    OPERATION_NAME = "smalti.device_count"
    # The DSL's sd.device_count() is static (an int, as sd.num_programs is): it needs no op.
    USER_FACING = False

    axis = Attr(STRING, "the mesh axis (the kernel's)", optional=True)
    result = Result("the count")

    def verify_op(self) -> None:
        _verify_device_query(self.operation, self.axis, self.result)


class RemoteRefOp(SmaltiOp):
    """The same symmetric ref on device `device`: loads and stores through it reach that
    device's memory (peer-mapped over NVLink)."""

    OPERATION_NAME = "smalti.remote_ref"

    source = Operand("the symmetric ref")
    device = Operand("the device whose copy the result is (index or i32)")
    result = Result("the peer's copy", same_type_as="source")

    def verify_op(self) -> None:
        op = self.operation
        devices = collective_devices(op)
        check_symmetric_ref(op, self.source, "the ref")
        _check_device(op, self.device, devices)
        if self.result.type != self.source.type:
            raise error_at(op, f"result type {self.result.type} differs from operand type "
                               f"{self.source.type}")


def _check_semaphore(op: ir.Operation, semaphores: ir.Value, index: ir.Value) -> None:
    ref = check_symmetric_ref(op, semaphores, "the semaphores")
    if ref.rank != 1 or type_name(ref.element_type) != "i32":
        raise error_at(op, f'expects semaphores as memref<Nxi32, "symmetric">, got {ref}')
    check_index(op, index, "the semaphore index")
    value = constant_index(index)
    if value is not None and not 0 <= value < ref.shape[0]:
        raise error_at(op, f"semaphore index {value} is out of bounds for {ref.shape[0]} "
                           "semaphores")


class SemaphoreSignalOp(SmaltiOp):
    """Adds `increment` to semaphore i of device `device`, releasing at system scope: what
    the warpgroup wrote before it (its threads meet first) is visible to the device once
    its wait sees the increment."""

    OPERATION_NAME = "smalti.semaphore_signal"
    TRAITS = Trait.WARPGROUP_COLLECTIVE
    EFFECTS = (Effect.write("semaphores"),)

    semaphores = Operand("the symmetric i32 semaphore array")
    index = Operand("the semaphore signalled")
    device = Operand("the device whose semaphore it is (index or i32)")
    increment = Attr(INTEGER, "what it adds", optional=True, default=1, minimum=1)

    def verify_op(self) -> None:
        op = self.operation
        devices = collective_devices(op)
        _check_semaphore(op, self.semaphores, self.index)
        _check_device(op, self.device, devices)
        if self.increment > MAX_SEMAPHORE_STEP:
            raise error_at(op, f"'increment' {self.increment} exceeds {MAX_SEMAPHORE_STEP}")


class SemaphoreWaitOp(SmaltiOp):
    """Waits until this device's semaphore i holds at least `value`, acquires at system
    scope (what the signallers wrote before signalling is visible to the whole warpgroup
    after it), and takes `value` off the semaphore."""

    OPERATION_NAME = "smalti.semaphore_wait"
    TRAITS = Trait.WARPGROUP_COLLECTIVE
    EFFECTS = (Effect.read("semaphores"), Effect.write("semaphores"))

    semaphores = Operand("the symmetric i32 semaphore array")
    index = Operand("the semaphore waited on")
    value = Attr(INTEGER, "what it waits for and takes", optional=True, default=1, minimum=1)

    def verify_op(self) -> None:
        op = self.operation
        collective_devices(op)
        _check_semaphore(op, self.semaphores, self.index)
        if self.value > MAX_SEMAPHORE_STEP:
            raise error_at(op, f"'value' {self.value} exceeds {MAX_SEMAPHORE_STEP}")


def _check_multimem(op: ir.Operation, vector: ir.Value, ref: ir.Value,
                    indices: list[ir.Value], what: str,
                    reductions: dict[str, tuple[str, ...]] | None, reduction: str | None
                    ) -> None:
    """A multimem op: a vector slice of a symmetric ref, of an element type and reduction
    multimem has."""
    collective_devices(op)
    check_symmetric_ref(op, ref, "the ref")
    check_memory_access(op, vector, ref, indices, what)
    element = type_name(ir.VectorType(vector.type).element_type)
    kinds = reductions or dict.fromkeys((*FLOAT_TYPES, *INTEGER_TYPES), ())
    if element not in kinds:
        raise error_at(op, f"multimem does not support element type {element}; it takes "
                           + ", ".join(kinds))
    if reductions is not None and reduction not in kinds[element]:
        raise error_at(op, f"reduction \"{reduction}\" of {element} is not one multimem "
                           f"performs; it takes " + ", ".join(f'"{r}"' for r in kinds[element]))


class MultimemStoreOp(SmaltiOp):
    """Stores `value` into the slice of `destination` on every device at once."""

    OPERATION_NAME = "smalti.multimem_store"
    EFFECTS = (Effect.write("destination"),)

    value = Operand("the vector stored")
    destination = Operand("the symmetric ref")
    indices = Operand("the slice's start, one index per dim", variadic=True)

    def verify_op(self) -> None:
        _check_multimem(self.operation, self.value, self.destination, self.indices,
                        "store to", None, None)


class MultimemLoadReduceOp(SmaltiOp):
    """The slice of `source` reduced over every device's copy (f16 and bf16 sums
    accumulate in f32, then round once)."""

    OPERATION_NAME = "smalti.multimem_load_reduce"
    EFFECTS = (Effect.read("source"),)

    source = Operand("the symmetric ref")
    indices = Operand("the slice's start, one index per dim", variadic=True)
    reduction = Attr(STRING, "add (min, max for f16, bf16 and integers; and, or, xor "
                                "for integers)")
    result = Result("the reduced vector")

    def verify_op(self) -> None:
        _check_multimem(self.operation, self.result, self.source, self.indices, "load from",
                        LOAD_REDUCTIONS, self.reduction)


class MultimemRedOp(SmaltiOp):
    """Reduces `value` into the slice of `destination` on every device, atomically per
    element."""

    OPERATION_NAME = "smalti.multimem_red"
    EFFECTS = (Effect.read("destination"), Effect.write("destination"))

    value = Operand("the vector reduced in")
    destination = Operand("the symmetric ref")
    indices = Operand("the slice's start, one index per dim", variadic=True)
    reduction = Attr(STRING, "add (min, max, and, or, xor for integers)")

    def verify_op(self) -> None:
        _check_multimem(self.operation, self.value, self.destination, self.indices,
                        "reduce into", RED_REDUCTIONS, self.reduction)
