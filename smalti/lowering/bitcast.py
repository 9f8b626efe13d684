"""arith.bitcast of vectors: the same bits read as another type of the same width.

Registers are reused where both types pack the same number of elements per register (f32
and i32 need only a `mov` between .f32 and .b32 registers); 16-bit floats, which pack in
pairs, and i16, one per register, are split or joined (`mov.b32 {lo, hi}`, free in SASS).
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dialect.diagnostics import error_at
from smalti.lowering import packing
from smalti.lowering.context import LoweringContext
from smalti.lowering.registry import lowering_rule
from smalti.lowering.values import (
    FragmentedArray,
    elements_per_register,
    register_bits,
    register_type,
    vector_element_type,
)
from smalti.ptx import Register
from smalti.ptx.module import register_class


@lowering_rule(arith.BitcastOp)
def _bitcast(ctx: LoweringContext, op: arith.BitcastOp) -> None:
    if not isinstance(op.out.type, ir.VectorType):
        raise error_at(op, "bitcasts of scalars are not supported; bitcast a vector")
    source = ctx.array(op, op.in_)
    target = vector_element_type(ir.VectorType(op.out.type).element_type)
    if target is None or target.bits != source.element.bits:
        raise error_at(op, f"vectors of {op.out.type} are not supported")
    pack = elements_per_register(target, source.vector_length)
    declared = register_class(register_type(target, pack))
    b = ctx.builder
    vectors = []
    for vector in source.vectors:
        registers: list[Register] = list(vector)
        if pack != source.pack:
            elements = [e for r in vector
                        for e in packing.elements(ctx, source.element, r, source.pack)]
            registers = [packing.join(ctx, target, elements[i:i + pack], 1)
                         for i in range(0, len(elements), pack)]
        vectors.append(tuple(
            r if r.type == declared else
            b.compute(f"mov.b{register_bits(target, pack)}", declared, r) for r in registers))
    ctx.set(op.out, FragmentedArray(source.layout, source.shape, target, tuple(vectors),
                                    source.vector_length))
