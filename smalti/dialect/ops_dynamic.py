"""Dynamic addressing: scalars read from global memory at run time (a page table, group
offsets), and masked vector accesses whose window may hang over a global ref's end.

    %e = "smalti.load_scalar"(%table, %i, %j) : (memref<4x8xi32>, index, index) -> i32
    %v = "smalti.masked_load"(%ref, %mask, %other, %i, %j)
        : (memref<100x64xf32>, vector<128x64xi1>, vector<128x64xf32>, index, index)
        -> vector<128x64xf32>
    "smalti.masked_store"(%v, %ref, %mask, %i, %j)
        : (vector<128x64xf32>, memref<100x64xf32>, vector<128x64xi1>, index, index) -> ()

A scalar load reads one element, the same in every thread (one address): a value the
warpgroup may branch on. A masked access reads (or writes) the elements where `mask` holds;
the others are neither read nor written (a load gives `other`'s elements there), so the
window may reach past the ref's end where it is masked.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.checks import check_gmem_ref, check_index, check_vector, constant_index
from smalti.dialect.definition import Effect, Operand, Result, SmaltiOp
from smalti.dialect.diagnostics import error_at

SCALAR_BITS = (32, 64)  # load_scalar's element types: i32 and i64


def _check_indices(op: ir.Operation, ref: ir.MemRefType, indices: list[ir.Value]) -> None:
    if len(indices) != ref.rank:
        raise error_at(op, f"expects {ref.rank} indices for {ref}, got {len(indices)}")
    for i, index in enumerate(indices):
        check_index(op, index, f"index #{i}")


class LoadScalarOp(SmaltiOp):
    """One element of a global ref of i32 or i64, read at run time by every thread (the
    same address, so the same value: uniform across the warpgroup)."""

    OPERATION_NAME = "smalti.load_scalar"
    EFFECTS = (Effect.read("source"),)

    source = Operand("the global memref")
    indices = Operand("the element's position, one index per dim", variadic=True)
    result = Result("the element, of the memref's element type")

    def verify_op(self) -> None:
        op = self.operation
        ref = check_gmem_ref(op, self.source, "the source")
        element = ref.element_type
        if not (isinstance(element, ir.IntegerType) and element.width in SCALAR_BITS):
            raise error_at(op, f"loads scalars of i32 or i64 (indices), not {element}")
        if self.result.type != element:
            raise error_at(op, f"result type {self.result.type} differs from the element type "
                               f"{element} of the memref")
        _check_indices(op, ref, list(self.indices))
        for dim, (index, size) in enumerate(zip(self.indices, ref.shape, strict=True)):
            position = constant_index(index)
            if position is not None and not 0 <= position < size:
                raise error_at(op, f"index {position} of dim {dim} is out of bounds for {ref}")


def check_masked_access(op: ir.Operation, vector: ir.Value, ref: ir.Value, mask: ir.Value,
                        indices: list[ir.Value]) -> None:
    """Shared checks of masked_load and masked_store: a global ref, a vector of its element
    type and rank, a mask of i1 of the vector's shape, a window starting inside the ref (it
    may end past it: the elements there must be masked, which only run time can check)."""
    memref = check_gmem_ref(op, ref, "the ref")
    value = check_vector(op, vector, "the value")
    if memref.element_type != value.element_type:
        raise error_at(op, f"element type {value.element_type} of the vector does not match "
                           f"element type {memref.element_type} of the memref")
    if value.rank != memref.rank:
        raise error_at(op, f"vector rank {value.rank} does not match memref rank {memref.rank}")
    mask_type = check_vector(op, mask, "the mask")
    if not (isinstance(mask_type.element_type, ir.IntegerType)
            and mask_type.element_type.width == 1) or mask_type.shape != value.shape:
        raise error_at(op, f"the mask must be a vector of i1 of the value's shape "
                           f"{list(value.shape)}, got {mask_type}")
    _check_indices(op, memref, indices)
    for dim, (index, size) in enumerate(zip(indices, memref.shape, strict=True)):
        start = constant_index(index)
        if start is not None and not 0 <= start < size:
            raise error_at(op, f"the window of dim {dim} starts at {start}, outside [0, {size}) "
                               f"of {memref}")


class MaskedLoadOp(SmaltiOp):
    """Loads the window of `source` starting at the indices, with the result's shape, where
    `mask` holds; elsewhere the result is `other`'s element (and memory is not read)."""

    OPERATION_NAME = "smalti.masked_load"
    EFFECTS = (Effect.read("source"),)

    source = Operand("the global memref")
    mask = Operand("which elements are read: a vector of i1 of the result's shape")
    other = Operand("the result where the mask is false")
    indices = Operand("the window's start, one index per dim", variadic=True)
    result = Result("the loaded vector")

    def verify_op(self) -> None:
        op = self.operation
        check_masked_access(op, self.result, self.source, self.mask, list(self.indices))
        if self.other.type != self.result.type:
            raise error_at(op, f"'other' has type {self.other.type}, not the result's "
                               f"{self.result.type}")


class MaskedStoreOp(SmaltiOp):
    """Stores the elements of `value` where `mask` holds into the window of `destination`
    starting at the indices; the others are not written."""

    OPERATION_NAME = "smalti.masked_store"
    EFFECTS = (Effect.write("destination"),)

    value = Operand("the vector stored")
    destination = Operand("the global memref")
    mask = Operand("which elements are written: a vector of i1 of the value's shape")
    indices = Operand("the window's start, one index per dim", variadic=True)

    def verify_op(self) -> None:
        check_masked_access(self.operation, self.value, self.destination, self.mask,
                            list(self.indices))
