"""Compute ops on register values: broadcast_in_dim, iota, optimization_barrier.

    %b = "smalti.broadcast_in_dim"(%v) {broadcast_dimensions = array<i64: 0>}
           : (vector<128xf32>) -> vector<128x64xf32>
    %i = "smalti.iota"() {dimension = 1 : i64} : () -> vector<64x128xi32>
    %x, %y = "smalti.optimization_barrier"(%a, %b) : (vector<..>, f32) -> (vector<..>, f32)
"""

from __future__ import annotations

import itertools

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import check_vector
from smalti.dialect.definition import I64_ARRAY, INTEGER, Attr, Operand, Result, SmaltiOp
from smalti.dialect.diagnostics import error_at


class BroadcastInDimOp(SmaltiOp):
    """Operand dim i becomes result dim broadcast_dimensions[i] (increasing); the other
    result dims are new, and operand dims of size 1 may stretch."""

    OPERATION_NAME = "smalti.broadcast_in_dim"

    source = Operand("the vector broadcast")
    broadcast_dimensions = Attr(I64_ARRAY, "the result dim of each operand dim")
    result = Result("the broadcast vector")

    def verify_op(self) -> None:
        op = self.operation
        source = check_vector(op, self.source, "the operand")
        result = check_vector(op, self.result, "the result")
        if source.element_type != result.element_type:
            raise error_at(op, f"result element type {result.element_type} differs from "
                               f"operand element type {source.element_type}")
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


class IotaOp(SmaltiOp):
    """Each element holds its index along `dimension` (i32)."""

    OPERATION_NAME = "smalti.iota"

    dimension = Attr(INTEGER, "the dim whose index each element holds")
    result = Result("the i32 vector")

    def verify_op(self) -> None:
        op = self.operation
        result = check_vector(op, self.result, "the result")
        if type_name(result.element_type) != "i32":
            raise error_at(op, f"expects an i32 result, got {result.element_type}")
        dim = self.dimension
        if not 0 <= dim < result.rank:
            raise error_at(op, f"'dimension' {dim} is not a dim of a rank-{result.rank} result")
        if result.shape[dim] > 2**31:
            raise error_at(op, f"dim {dim} of size {result.shape[dim]} overflows i32")


class OptimizationBarrierOp(SmaltiOp):
    """Returns its operands unchanged; MLIR rewrites do not see through it."""

    OPERATION_NAME = "smalti.optimization_barrier"
    USER_FACING = False  # written in .mlir; the DSL has no use for it yet

    values = Operand("the values passed through", variadic=True)
    outputs = Result("the same values", variadic=True)

    def verify_op(self) -> None:
        op = self.operation
        if len(self.values) != len(self.outputs):
            raise error_at(op, f"expects as many results as operands, got "
                               f"{len(self.outputs)} for {len(self.values)}")
        for i, (operand, result) in enumerate(zip(self.values, self.outputs, strict=True)):
            if operand.type != result.type:
                raise error_at(op, f"result #{i} has type {result.type} but operand #{i} has "
                                   f"{operand.type}")
