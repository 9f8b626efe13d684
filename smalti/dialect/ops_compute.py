"""Compute ops on register values: broadcast_in_dim, iota, optimization_barrier.

    %b = "smalti.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 0>}
           : (vector<128xf32>) -> vector<128x64xf32>
    %i = "smalti.iota"() {dimension = 1 : i64} : () -> vector<64x128xi32>
    %x, %y = "smalti.optimization_barrier"(%a, %b) : (vector<..>, f32) -> (vector<..>, f32)
"""

from __future__ import annotations

import itertools

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.diagnostics import error_at
from smalti.dialect.ops import SmaltiOp, _register


def _vector(op: ir.Operation, value: ir.Value, what: str) -> ir.VectorType:
    if not isinstance(value.type, ir.VectorType):
        raise error_at(op, f"expects {what} to be a vector, got {value.type}")
    return ir.VectorType(value.type)


@_register
class BroadcastInDimOp(SmaltiOp):
    """Operand dim i becomes result dim broadcast_dimensions[i] (increasing); the other
    result dims are new, and operand dims of size 1 may stretch."""

    OPERATION_NAME = "smalti.broadcast_in_dim"

    @property
    def broadcast_dimensions(self) -> tuple[int, ...]:
        return tuple(int(d) for d in
                     ir.DenseI64ArrayAttr(self.operation.attributes["broadcast_dimensions"]))

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(1, 1)
        source = _vector(op, op.operands[0], "the operand")
        result = _vector(op, op.results[0], "the result")
        if source.element_type != result.element_type:
            raise error_at(op, f"result element type {result.element_type} differs from "
                               f"operand element type {source.element_type}")
        attr = op.attributes.get("broadcast_dimensions", None)
        if not isinstance(attr, ir.DenseI64ArrayAttr):
            raise error_at(op, "requires a 'broadcast_dimensions' array<i64: ...> attribute")
        dims = self.broadcast_dimensions
        if len(dims) != source.rank:
            raise error_at(op, f"'broadcast_dimensions' has {len(dims)} entries for an operand "
                               f"of rank {source.rank}")
        if any(not 0 <= d < result.rank for d in dims):
            raise error_at(op, f"'broadcast_dimensions' {list(dims)} are not dims of a rank-"
                               f"{result.rank} result")
        if any(a >= b for a, b in itertools.pairwise(dims)):
            raise error_at(op, f"'broadcast_dimensions' {list(dims)} must increase (use "
                               "vector.transpose to permute)")
        for i, d in enumerate(dims):
            if source.shape[i] not in (1, result.shape[d]):
                raise error_at(op, f"operand dim {i} of size {source.shape[i]} cannot broadcast "
                                   f"to result dim {d} of size {result.shape[d]}")


@_register
class IotaOp(SmaltiOp):
    """Each element holds its index along `dimension` (i32)."""

    OPERATION_NAME = "smalti.iota"

    def verify_op(self) -> None:
        op = self.operation
        self._expect_counts(0, 1)
        result = _vector(op, op.results[0], "the result")
        if type_name(result.element_type) != "i32":
            raise error_at(op, f"expects an i32 result, got {result.element_type}")
        attr = op.attributes.get("dimension", None)
        if not isinstance(attr, ir.IntegerAttr):
            raise error_at(op, "requires an integer 'dimension' attribute")
        dim = ir.IntegerAttr(attr).value
        if not 0 <= dim < result.rank:
            raise error_at(op, f"'dimension' {dim} is not a dim of a rank-{result.rank} result")
        if result.shape[dim] > 2**31:
            raise error_at(op, f"dim {dim} of size {result.shape[dim]} overflows i32")


@_register
class OptimizationBarrierOp(SmaltiOp):
    """Returns its operands unchanged; MLIR rewrites do not see through it."""

    OPERATION_NAME = "smalti.optimization_barrier"

    def verify_op(self) -> None:
        op = self.operation
        if len(op.operands) != len(op.results):
            raise error_at(op, f"expects as many results as operands, got {len(op.results)} "
                               f"for {len(op.operands)}")
        for i, (operand, result) in enumerate(zip(op.operands, op.results, strict=True)):
            if operand.type != result.type:
                raise error_at(op, f"result #{i} has type {result.type} but operand #{i} has "
                                   f"{operand.type}")
