"""Uniform scalars: constants, ids (of the block, its cluster, its place in the cluster),
index arithmetic (folded, with known divisors)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from smalti.dialect.bindings import gpu_dimension
from smalti.dialect.diagnostics import error_at
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import ELEMENT_TYPES, ScalarValue, element_type
from smalti.ptx import Immediate

INDEX = ELEMENT_TYPES["index"]


def constant_scalar(value: int, element=INDEX) -> ScalarValue:
    return ScalarValue(Immediate(value), element, abs(value))


def scalar_add(ctx: LoweringContext, a: ScalarValue, b: ScalarValue) -> ScalarValue:
    if a.constant is not None and b.constant is not None:
        return constant_scalar(a.constant + b.constant, a.type)
    if b.constant == 0:
        return a
    if a.constant == 0:
        return b
    reg = ctx.builder.compute(f"add.{a.type.scalar}", a.type.scalar, a.operand, b.operand)
    return ScalarValue(reg, a.type, math.gcd(a.divisor, b.divisor))


def scalar_sub(ctx: LoweringContext, a: ScalarValue, b: ScalarValue) -> ScalarValue:
    if a.constant is not None and b.constant is not None:
        return constant_scalar(a.constant - b.constant, a.type)
    if b.constant == 0:
        return a
    reg = ctx.builder.compute(f"sub.{a.type.scalar}", a.type.scalar, a.operand, b.operand)
    return ScalarValue(reg, a.type, math.gcd(a.divisor, b.divisor))


def scalar_mul(ctx: LoweringContext, a: ScalarValue, b: ScalarValue) -> ScalarValue:
    if a.constant is not None and b.constant is not None:
        return constant_scalar(a.constant * b.constant, a.type)
    if a.constant is not None:
        a, b = b, a
    if b.constant == 1:
        return a
    if b.constant == 0:
        return constant_scalar(0, a.type)
    reg = ctx.builder.compute(f"mul.lo.{a.type.scalar}", a.type.scalar, a.operand, b.operand)
    return ScalarValue(reg, a.type, a.divisor * b.divisor)


_SCALAR_INT_OPS = {"arith.addi": scalar_add, "arith.subi": scalar_sub, "arith.muli": scalar_mul}


@lowering_rule("arith.addi", "arith.subi", "arith.muli")
def _integer_binary(ctx: LoweringContext, op: ir.Operation) -> None:
    from smalti.lowering.elementwise import lower_elementwise

    if isinstance(op.results[0].type, ir.VectorType):
        lower_elementwise(ctx, op)
        return
    a, b = (ctx.scalar(op, v) for v in op.operands)
    ctx.set(op.results[0], _SCALAR_INT_OPS[op.name](ctx, a, b))


def _dimension(op: ir.Operation) -> int:
    """The axis (0 = x, 1 = y, 2 = z) of a gpu id op's `dimension` attribute."""
    try:
        return gpu_dimension(op.attributes["dimension"])
    except (KeyError, ValueError):
        raise error_at(op, "requires a #gpu.dim 'dimension' attribute") from None


def _extent(ctx: LoweringContext, name: str, axis: int) -> int:
    """How many values gpu id op `name` takes along `axis` in this kernel's launch, which
    its signature fixes (the grid, and the cluster that .reqnctapercluster demands)."""
    grid, cluster = ctx.signature.grid[axis], ctx.signature.cluster[axis]
    match name:
        case "gpu.block_id":
            return grid
        case "gpu.cluster_id" | "gpu.cluster_dim":
            return grid // cluster
        case _:  # gpu.cluster_block_id, gpu.cluster_dim_blocks
            return cluster


SPECIAL_REGISTERS = {"gpu.block_id": "%ctaid", "gpu.cluster_id": "%clusterid",
                     "gpu.cluster_block_id": "%cluster_ctaid"}
"""The PTX special register (.x, .y, .z) each gpu id op reads."""


@lowering_rule(*SPECIAL_REGISTERS)
def _launch_id(ctx: LoweringContext, op: ir.Operation) -> None:
    """The block's index in the grid, its cluster's index among the clusters, or its index
    within its cluster: 0 when the launch has one along the axis, else the special register."""
    axis = _dimension(op)
    if _extent(ctx, op.name, axis) == 1:
        ctx.set(op.results[0], constant_scalar(0))
        return
    register = ctx.builder.special(f"{SPECIAL_REGISTERS[op.name]}.{'xyz'[axis]}")
    wide = ctx.builder.compute("cvt.u64.u32", "s64", register)
    ctx.set(op.results[0], ScalarValue(wide, INDEX, 1))


@lowering_rule("gpu.cluster_dim", "gpu.cluster_dim_blocks")
def _cluster_extent(ctx: LoweringContext, op: ir.Operation) -> None:
    """Clusters per grid (%nclusterid) or blocks per cluster (%cluster_nctaid) along an
    axis: constants, as the signature fixes both."""
    ctx.set(op.results[0], constant_scalar(_extent(ctx, op.name, _dimension(op))))


@lowering_rule("arith.constant")
def _constant(ctx: LoweringContext, op: ir.Operation) -> None:
    from smalti.lowering.elementwise import splat_constant

    result = op.results[0]
    attr = op.attributes["value"]
    if isinstance(result.type, ir.VectorType):
        splat_constant(ctx, op, attr)
        return
    element = element_type(result.type)
    if element is None:
        raise error_at(op, f"constants of type {result.type} are not supported")
    if isinstance(attr, ir.IntegerAttr):
        ctx.set(result, constant_scalar(ir.IntegerAttr(attr).value, element))
    elif isinstance(attr, ir.FloatAttr):
        ctx.set(result, ScalarValue(Immediate(ir.FloatAttr(attr).value, element.scalar),
                                    element, 0))
    else:
        raise error_at(op, f"unsupported constant {attr}")


@lowering_rule("func.return")
def _return(ctx: LoweringContext, op: ir.Operation) -> None:
    if len(op.operands):
        raise error_at(op, "kernels return no values")
    ctx.builder.emit("ret")
