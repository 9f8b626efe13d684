"""smalti ops: Python OpView classes over generic (unregistered) MLIR ops, with verifiers.

Ops have warpgroup semantics: a vector value is one array owned by the 128 threads of a
warpgroup, distributed over their registers by its layout.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.attributes import LayoutAttrError, attr_to_layout, layout_to_attr
from smalti.dialect.bindings import (
    is_workgroup_address_space,
    register_python_dialect,
    register_python_operation,
)
from smalti.dialect.diagnostics import error_at
from smalti.tiling import Layout, LayoutError, check_layout_fits


@register_python_dialect
class SmaltiDialect(ir.Dialect):
    DIALECT_NAMESPACE = "smalti"


class SmaltiOp(ir.OpView):
    """Common base: every smalti op can check itself and report a located error."""

    _ODS_REGIONS = (0, True)

    def verify_op(self) -> None:
        """Raise DiagnosticError unless the op is well formed."""
        raise NotImplementedError

    def _expect_counts(self, operands: int | None, results: int) -> None:
        op = self.operation
        if operands is not None and len(op.operands) != operands:
            raise error_at(op, f"expects {operands} operands, got {len(op.operands)}")
        if len(op.results) != results:
            raise error_at(op, f"expects {results} results, got {len(op.results)}")


OP_CLASSES: dict[str, type[SmaltiOp]] = {}


def operand(index: int) -> property:
    """Accessor of operand `index` (smalti ops are generic ops, with no generated ones)."""

    def get(self: SmaltiOp) -> ir.Value:
        return self.operation.operands[index]

    return property(get)


def operands_from(start: int) -> property:
    """Accessor of the operands from `start` on (e.g. the indices after the refs)."""

    def get(self: SmaltiOp) -> list[ir.Value]:
        return list(self.operation.operands)[start:]

    return property(get)


def _register(cls: type[SmaltiOp]) -> type[SmaltiOp]:
    OP_CLASSES[cls.OPERATION_NAME] = cls
    return register_python_operation(SmaltiDialect, cls)


def _check_memory_access(op: ir.Operation, vector: ir.Value, ref: ir.Value,
                         indices: list[ir.Value], what: str) -> None:
    """Shared checks of vector_load and vector_store: types, ranks, static bounds."""
    if not isinstance(ref.type, ir.MemRefType):
        raise error_at(op, f"expects a memref to {what}, got {ref.type}")
    if not isinstance(vector.type, ir.VectorType):
        raise error_at(op, f"expects a vector value, got {vector.type}")
    ref_type, vector_type = ir.MemRefType(ref.type), ir.VectorType(vector.type)
    space = ref_type.memory_space
    if space is not None and not is_workgroup_address_space(space):
        raise error_at(op, f"memory space {space} is not supported; vector_load and "
                           "vector_store access global or shared (workgroup) memory")
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


def constant_index(value: ir.Value) -> int | None:
    """The value of an `arith.constant` index, or None."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    owner = owner.operation if hasattr(owner, "operation") else owner
    if owner.name == "arith.constant" and isinstance(value.type, ir.IndexType):
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


@_register
class VectorLoadOp(SmaltiOp):
    """%v = "smalti.vector_load"(%ref, %i, %j) : (memref<...>, index, index) -> vector<...>

    Loads the slice of `ref` starting at the indices, with the shape of the result."""

    OPERATION_NAME = "smalti.vector_load"

    source = operand(0)
    indices = operands_from(1)

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(None, 1)
        if len(op.operands) < 1:
            raise error_at(op, "expects a memref operand")
        _check_memory_access(op, op.results[0], self.source, self.indices, "load from")

    @staticmethod
    def build(source: ir.Value, indices: list[ir.Value], result_type: ir.Type) -> VectorLoadOp:
        return ir.Operation.create(VectorLoadOp.OPERATION_NAME, results=[result_type],
                                   operands=[source, *indices]).opview


@_register
class VectorStoreOp(SmaltiOp):
    """"smalti.vector_store"(%v, %ref, %i, %j) : (vector<...>, memref<...>, index, index) -> ()

    Stores `v` into the slice of `ref` starting at the indices."""

    OPERATION_NAME = "smalti.vector_store"

    value = operand(0)
    destination = operand(1)
    indices = operands_from(2)

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(None, 0)
        if len(op.operands) < 2:
            raise error_at(op, "expects a vector and a memref operand")
        _check_memory_access(op, self.value, self.destination, self.indices, "store to")

    @staticmethod
    def build(value: ir.Value, destination: ir.Value, indices: list[ir.Value]) -> VectorStoreOp:
        return ir.Operation.create(VectorStoreOp.OPERATION_NAME, results=[],
                                   operands=[value, destination, *indices]).opview


@_register
class LayoutCastOp(SmaltiOp):
    """%w = "smalti.layout_cast"(%v) {new_layout = #smalti...} : (vector<..>) -> vector<..>

    The same array in the register layout `new_layout` (a hint to inference, a relayout in
    the lowering)."""

    OPERATION_NAME = "smalti.layout_cast"

    @property
    def new_layout(self) -> Layout:
        return attr_to_layout(self.operation.attributes["new_layout"])

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(1, 1)
        source, result = op.operands[0], op.results[0]
        if not isinstance(source.type, ir.VectorType):
            raise error_at(op, f"expects a vector operand, got {source.type}")
        if source.type != result.type:
            raise error_at(op, f"result type {result.type} differs from operand type "
                               f"{source.type}")
        if "new_layout" not in op.attributes:
            raise error_at(op, "requires a 'new_layout' attribute")
        try:
            check_layout_fits(self.new_layout, tuple(ir.VectorType(source.type).shape))
        except (LayoutAttrError, LayoutError) as error:
            raise error_at(op, f"'new_layout' {error}") from None

    @staticmethod
    def build(source: ir.Value, new_layout: Layout) -> LayoutCastOp:
        return ir.Operation.create(
            LayoutCastOp.OPERATION_NAME, results=[source.type], operands=[source],
            attributes={"new_layout": layout_to_attr(new_layout)}).opview
