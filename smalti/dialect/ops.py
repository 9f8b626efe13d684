"""Register-vector ops: vector_load, vector_store, layout_cast.

Ops have warpgroup semantics: a vector value is one array owned by the 128 threads of a
warpgroup, distributed over their registers by its layout.

    %v = "smalti.vector_load"(%ref, %i, %j) : (memref<...>, index, index) -> vector<...>
    "smalti.vector_store"(%v, %ref, %i, %j) : (vector<...>, memref<...>, index, index) -> ()
    %w = "smalti.layout_cast"(%v) {new_layout = #smalti...} : (vector<..>) -> vector<..>
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.bindings import is_workgroup_address_space
from smalti.dialect.checks import SYMMETRIC_SPACE, constant_index, is_symmetric_type
from smalti.dialect.definition import LAYOUT, Attr, Effect, Operand, Result, SmaltiOp
from smalti.dialect.diagnostics import error_at
from smalti.tiling import LayoutError, check_layout_fits


def check_memory_access(op: ir.Operation, vector: ir.Value, ref: ir.Value,
                        indices: list[ir.Value], what: str) -> None:
    """Shared checks of the ops that move a vector to or from a memref slice (vector_load,
    vector_store, the multimem ops): types, ranks, static bounds."""
    if not isinstance(ref.type, ir.MemRefType):
        raise error_at(op, f"expects a memref to {what}, got {ref.type}")
    if not isinstance(vector.type, ir.VectorType):
        raise error_at(op, f"expects a vector value, got {vector.type}")
    ref_type, vector_type = ir.MemRefType(ref.type), ir.VectorType(vector.type)
    space = ref_type.memory_space
    if not (space is None or is_workgroup_address_space(space)
            or is_symmetric_type(ref_type)):
        raise error_at(op, f"memory space {space} is not supported; vectors are loaded from "
                           f'and stored to global, "{SYMMETRIC_SPACE}" or shared (workgroup) '
                           "memory")
    if not ref_type.has_static_shape:
        raise error_at(op, f"expects a memref of static shape, got {ref_type}")
    if ref_type.element_type != vector_type.element_type:
        raise error_at(op, f"element type {vector_type.element_type} of the vector does not "
                           f"match element type {ref_type.element_type} of the memref")
    if vector_type.rank != ref_type.rank:
        raise error_at(op, f"vector rank {vector_type.rank} does not match memref rank "
                           f"{ref_type.rank}")
    if len(indices) != ref_type.rank:
        raise error_at(op, f"expects {ref_type.rank} indices for {ref_type}, got "
                           f"{len(indices)}")
    for i, index in enumerate(indices):
        if not isinstance(index.type, ir.IndexType):
            raise error_at(op, f"index #{i} must have type index, got {index.type}")
    for dim, (v, m) in enumerate(zip(vector_type.shape, ref_type.shape, strict=True)):
        if v > m:
            raise error_at(op, f"vector dim {dim} of size {v} exceeds memref dim of size {m}")
        start = constant_index(indices[dim])
        if start is not None and not 0 <= start <= m - v:
            raise error_at(op, f"slice [{start}, {start + v}) of dim {dim} is out of bounds "
                               f"for {ref_type}")


class VectorLoadOp(SmaltiOp):
    """Loads the slice of `source` (global or shared memory) starting at the indices, with
    the shape of the result."""

    OPERATION_NAME = "smalti.vector_load"
    EFFECTS = (Effect.read("source"),)

    source = Operand("the global or shared memref")
    indices = Operand("the slice's start, one index per dim", variadic=True)
    result = Result("the loaded vector")

    def verify_op(self) -> None:
        check_memory_access(self.operation, self.result, self.source, self.indices,
                             "load from")


class VectorStoreOp(SmaltiOp):
    """Stores `value` into the slice of `destination` starting at the indices."""

    OPERATION_NAME = "smalti.vector_store"
    EFFECTS = (Effect.write("destination"),)

    value = Operand("the vector stored")
    destination = Operand("the global or shared memref")
    indices = Operand("the slice's start, one index per dim", variadic=True)

    def verify_op(self) -> None:
        check_memory_access(self.operation, self.value, self.destination, self.indices,
                             "store to")


class LayoutCastOp(SmaltiOp):
    """The same array in the register layout `new_layout` (a hint to inference, a relayout
    in the lowering)."""

    OPERATION_NAME = "smalti.layout_cast"

    source = Operand("the vector")
    new_layout = Attr(LAYOUT, "the layout the result has")
    result = Result("the same array in new_layout", same_type_as="source")

    def verify_op(self) -> None:
        op = self.operation
        if not isinstance(self.source.type, ir.VectorType):
            raise error_at(op, f"expects a vector operand, got {self.source.type}")
        if self.source.type != self.result.type:
            raise error_at(op, f"result type {self.result.type} differs from operand type "
                               f"{self.source.type}")
        try:
            check_layout_fits(self.new_layout, tuple(ir.VectorType(self.source.type).shape))
        except LayoutError as error:
            raise error_at(op, f"'new_layout' {error}") from None
