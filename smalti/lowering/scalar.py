"""Uniform scalars: constants, ids (of the block, its cluster, its place in the cluster),
index arithmetic (folded, with known divisors)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, gpu

from smalti.dialect.bindings import gpu_dimension
from smalti.dialect.diagnostics import error_at
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import ELEMENT_TYPES, ScalarValue
from smalti.ptx import Address, Immediate, Register

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


def element_address(ctx: LoweringContext, op: ir.OpView, index: ir.Value, stride: int,
                    base: Register) -> Address:
    """Entry `index` of a table of `stride`-byte entries at `base`: a constant index is the
    address's offset, a traced one is narrowed to .u32 and scaled by mad.wide.u32."""
    scalar = ctx.scalar(op, index)
    if scalar.constant is not None:
        return Address(base, stride * int(scalar.constant))
    low = (scalar.operand if scalar.type.bits == 32
           else ctx.builder.compute("cvt.u32.u64", "u32", scalar.operand))
    return Address(ctx.builder.compute("mad.wide.u32", "u64", low, stride, base))


def _dimension(op: GpuIdOp) -> int:
    """The axis (0 = x, 1 = y, 2 = z) of a gpu id op's `dimension` attribute."""
    try:
        return gpu_dimension(op.dimension)
    except ValueError:
        raise error_at(op, "requires a #gpu.dim 'dimension' attribute") from None


GpuIdOp = (gpu.BlockIdOp | gpu.ClusterIdOp | gpu.ClusterBlockIdOp | gpu.ClusterDimOp
           | gpu.ClusterDimBlocksOp)


def _extent(ctx: LoweringContext, op: GpuIdOp, axis: int) -> int:
    """How many values gpu id op `op` takes along `axis` in this kernel's launch, which its
    signature fixes (the grid, and the cluster that .reqnctapercluster demands)."""
    grid, cluster = ctx.signature.grid[axis], ctx.signature.cluster[axis]
    match op:
        case gpu.BlockIdOp():
            return grid
        case gpu.ClusterIdOp() | gpu.ClusterDimOp():
            return grid // cluster
        case _:  # gpu.cluster_block_id, gpu.cluster_dim_blocks
            return cluster


SPECIAL_REGISTERS: dict[type[ir.OpView], str] = {
    gpu.BlockIdOp: "%ctaid", gpu.ClusterIdOp: "%clusterid",
    gpu.ClusterBlockIdOp: "%cluster_ctaid"}
"""The PTX special register (.x, .y, .z) each gpu id op reads."""


@lowering_rule(*SPECIAL_REGISTERS)
def _launch_id(ctx: LoweringContext, op: gpu.BlockIdOp | gpu.ClusterIdOp | gpu.ClusterBlockIdOp
               ) -> None:
    """The block's index in the grid, its cluster's index among the clusters, or its index
    within its cluster: 0 when the launch has one along the axis, else the special register."""
    axis = _dimension(op)
    if _extent(ctx, op, axis) == 1:
        ctx.set(op.result, constant_scalar(0))
        return
    register = ctx.builder.special(f"{SPECIAL_REGISTERS[type(op)]}.{'xyz'[axis]}")
    wide = ctx.builder.compute("cvt.u64.u32", "s64", register)
    ctx.set(op.result, ScalarValue(wide, INDEX, 1))


@lowering_rule(gpu.ClusterDimOp, gpu.ClusterDimBlocksOp)
def _cluster_extent(ctx: LoweringContext, op: gpu.ClusterDimOp | gpu.ClusterDimBlocksOp
                    ) -> None:
    """Clusters per grid (%nclusterid) or blocks per cluster (%cluster_nctaid) along an
    axis: constants, as the signature fixes both."""
    ctx.set(op.result, constant_scalar(_extent(ctx, op, _dimension(op))))


@lowering_rule(func.ReturnOp)
def _return(ctx: LoweringContext, op: func.ReturnOp) -> None:
    if len(op.operation.operands):
        raise error_at(op, "kernels return no values")
    ctx.builder.emit("ret")
