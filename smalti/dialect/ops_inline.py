"""inline_ptx: the escape hatch, elementwise PTX text over a vector's registers.

    %r = "smalti.inline_ptx"(%a, %b, %c) {ptx = "fma.rn.f32 $0, $1, $2, $3;",
                                          constraints = "=f,f,f,f", pack = 1 : i64}
        : (vector<128x64xf32>, vector<128x64xf32>, vector<128x64xf32>) -> vector<128x64xf32>

Like Triton's `inline_asm_elementwise`: the text runs once per register group (`pack`
elements of every operand and result), `$i` naming the group's register of result i, then
of operand i - #results. Scalar operands (an index, an i32, ...) are the same register in
every group. In a custom_primitive body (per-thread code) operands and results are scalars
and the text runs once per thread.

The op is pure unless `has_side_effects = true`: smalti-cse merges identical pure ones and
drops unused ones; side-effecting ones (text that writes memory, fences, reads clocks) are
kept, each, in program order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.definition import BOOL, INTEGER, STRING, Attr, Operand, Result, SmaltiOp
from smalti.dialect.diagnostics import error_at

PLACEHOLDER = re.compile(r"\$(\d+)")
# Constraint letter: (register bits, the register's PTX type).
CONSTRAINTS = {"r": (32, "b32"), "h": (16, "b16"), "l": (64, "b64"), "f": (32, "f32")}
# Element bits of each element type an operand or result may have.
ELEMENT_BITS = {"i8": 8, "f8E4M3FN": 8, "f8E5M2": 8, "i16": 16, "f16": 16, "bf16": 16,
                "i32": 32, "f32": 32, "i64": 64, "f64": 64, "index": 64}
CUSTOM_PRIMITIVE = "smalti.custom_primitive"  # whose body is per-thread code


@dataclass(frozen=True)
class Slot:
    """An operand or result of the text: its element type, and whether it is one scalar
    (the same register in every group) rather than `pack` elements of a vector."""

    element: str
    scalar: bool = False


@dataclass(frozen=True)
class Constraint:
    """One entry of the constraint string: an output (`=`) or input register of `kind`."""

    output: bool
    kind: str

    @property
    def bits(self) -> int:
        return CONSTRAINTS[self.kind][0]

    @property
    def ptx_type(self) -> str:
        return CONSTRAINTS[self.kind][1]


def parse_constraints(text: str) -> list[Constraint]:
    """The entries of "=r,r,r"; a ValueError naming the bad entry otherwise."""
    parsed = []
    for entry in text.split(","):
        entry = entry.strip()
        output = entry.startswith("=")
        kind = entry.removeprefix("=")
        if kind not in CONSTRAINTS:
            raise ValueError(f"constraint {entry!r} is not one of "
                             + ", ".join(f"'{k}'" for k in CONSTRAINTS)
                             + " (optionally '=' for a result)")
        parsed.append(Constraint(output, kind))
    return parsed


def check_signature(constraints: list[Constraint], results: list[Slot], operands: list[Slot],
                    pack: int, ptx: str) -> None:
    """A ValueError unless the constraints list the results (`=`) then the operands, each a
    register as wide as `pack` of its element type (one element for a scalar; an index
    may be read as its low 32 bits, 'r'), and every `$i` of `ptx` names one of them."""
    outputs = [c for c in constraints if c.output]
    if constraints[:len(outputs)] != outputs:
        raise ValueError("result constraints ('=') must come before operand constraints")
    if (len(outputs), len(constraints) - len(outputs)) != (len(results), len(operands)):
        raise ValueError(f"{len(outputs)} result and {len(constraints) - len(outputs)} "
                         f"operand constraints for {len(results)} results and "
                         f"{len(operands)} operands")
    for i, (constraint, slot) in enumerate(zip(constraints, results + operands, strict=True)):
        what = f"result #{i}" if i < len(results) else f"operand #{i - len(results)}"
        element = slot.element
        if element not in ELEMENT_BITS or (element == "index" and not slot.scalar):
            raise ValueError(f"{what} has element type {element}; expects one of "
                             + ", ".join(ELEMENT_BITS))
        if slot.scalar and element == "index" and constraint.kind in ("r", "l"):
            continue
        count = 1 if slot.scalar else pack
        bits = ELEMENT_BITS[element] * count
        if bits != constraint.bits or (constraint.kind == "f" and element != "f32"):
            held = f"a scalar {element}" if slot.scalar else f"{pack} x {element} per register"
            raise ValueError(f"{what} (${i}) has {held} ({bits} bits), which constraint "
                             f"'{constraint.kind}' ({constraint.ptx_type}) cannot hold")
    count = len(constraints)
    for match in PLACEHOLDER.finditer(ptx):
        if int(match.group(1)) >= count:
            raise ValueError(f"placeholder ${match.group(1)} is out of range: there are "
                             f"{count} registers ($0..${count - 1})")


def in_custom_primitive(op: ir.Operation) -> bool:
    """Whether `op` is (nested) in a custom_primitive body, where code is per thread."""
    parent = op.parent
    while parent is not None:
        if parent.name == CUSTOM_PRIMITIVE:
            return True
        parent = parent.parent
    return False


class InlinePtxOp(SmaltiOp):
    """Runs `ptx` once per register group: `pack` elements of each vector operand and result
    in one register of its constraint's kind (r: .b32, h: .b16, l: .b64, f: .f32); scalar
    operands are one register in every group. In a custom_primitive body, on scalars only,
    once per thread.

    Well formed: vector operands and results have one shape; results are vectors, or (in a
    custom_primitive body, with no vector operands) scalars; only side-effecting text may
    have no results; `constraints` lists the results ("=r") then the operands, each as wide
    as `pack` of its element type (scalars: one); `$i` in `ptx` is below their count.
    Inference gives vector operands and results one layout."""

    OPERATION_NAME = "smalti.inline_ptx"

    values = Operand("the vectors and scalars the text reads", variadic=True)
    outputs = Result("the vectors (scalars, per thread) the text writes", variadic=True)
    ptx = Attr(STRING, "PTX text with $0.. for results then operands")
    constraints = Attr(STRING, 'one register kind per result ("=r") then operand ("r")')
    pack = Attr(INTEGER, "elements per register", optional=True, default=1, minimum=1)
    has_side_effects = Attr(BOOL, "whether the text does more than compute its results (then "
                                  "it is neither merged nor dropped)", optional=True,
                            default=False)

    def is_pure(self) -> bool:
        return not self.has_side_effects

    def verify_op(self) -> None:
        op = self.operation
        vectors = [v for v in [*self.outputs, *self.values] if isinstance(v.type, ir.VectorType)]
        shapes = {tuple(ir.VectorType(v.type).shape) for v in vectors}
        if len(shapes) > 1:
            raise error_at(op, "operands and results must have one shape, got "
                               + ", ".join(str(list(s)) for s in sorted(shapes)))
        per_thread = in_custom_primitive(op)
        for value in [*self.outputs, *self.values]:
            if isinstance(value.type, ir.VectorType) or type_name(value.type) is not None:
                continue
            raise error_at(op, f"expects vector or scalar operands and results, got "
                               f"{value.type}")
        scalar_results = [r for r in self.outputs if not isinstance(r.type, ir.VectorType)]
        if scalar_results and not per_thread:
            raise error_at(op, "expects vector results (scalar results, per thread, only in a "
                               f"custom_primitive body), got {scalar_results[0].type}")
        if scalar_results and vectors:
            raise error_at(op, "in a custom_primitive body takes scalars only, got "
                               f"{vectors[0].type}")
        if not self.outputs and (vectors or not self.has_side_effects):
            raise error_at(op, "expects at least one result" + (
                "" if vectors else " unless it has side effects (has_side_effects = true)"))
        if not vectors and not per_thread:
            raise error_at(op, "expects a vector operand or result outside a "
                               "custom_primitive body (it runs once per register group)")
        if self.pack not in (1, 2, 4):
            raise error_at(op, f"'pack' must be 1, 2 or 4, got {self.pack}")
        if not vectors and self.pack != 1:
            raise error_at(op, f"'pack' must be 1 on scalars, got {self.pack}")

        def slot(value: ir.Value) -> Slot:
            if isinstance(value.type, ir.VectorType):
                element_type = ir.VectorType(value.type).element_type
                return Slot(type_name(element_type) or str(element_type))
            return Slot(type_name(value.type) or str(value.type), scalar=True)

        try:
            check_signature(parse_constraints(self.constraints),
                            [slot(v) for v in self.outputs],
                            [slot(v) for v in self.values], self.pack, self.ptx)
        except ValueError as error:
            raise error_at(op, str(error)) from None
