"""inline_ptx: the escape hatch, elementwise PTX text over a vector's registers.

    %r = "smalti.inline_ptx"(%a, %b, %c) {ptx = "fma.rn.f32 $0, $1, $2, $3;",
                                          constraints = "=f,f,f,f", pack = 1 : i64}
        : (vector<128x64xf32>, vector<128x64xf32>, vector<128x64xf32>) -> vector<128x64xf32>

Like Triton's `inline_asm_elementwise`: the text runs once per register group (`pack`
elements of every operand and result), `$i` naming the group's register of result i, then
of operand i - #results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.definition import INTEGER, STRING, Attr, Operand, Result, SmaltiOp
from smalti.dialect.diagnostics import error_at

PLACEHOLDER = re.compile(r"\$(\d+)")
# Constraint letter: (register bits, the register's PTX type).
CONSTRAINTS = {"r": (32, "b32"), "h": (16, "b16"), "l": (64, "b64"), "f": (32, "f32")}
# Element bits of each element type an operand or result may have.
ELEMENT_BITS = {"i8": 8, "f8E4M3FN": 8, "f8E5M2": 8, "i16": 16, "f16": 16, "bf16": 16,
                "i32": 32, "f32": 32, "i64": 64, "f64": 64}


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


def check_signature(constraints: list[Constraint], results: list[str], operands: list[str],
                    pack: int, ptx: str) -> None:
    """A ValueError unless the constraints list the results (`=`) then the operands, each a
    register as wide as `pack` of its element type (element type names), and every `$i` of
    `ptx` names one of them."""
    outputs = [c for c in constraints if c.output]
    if constraints[:len(outputs)] != outputs:
        raise ValueError("result constraints ('=') must come before operand constraints")
    if (len(outputs), len(constraints) - len(outputs)) != (len(results), len(operands)):
        raise ValueError(f"{len(outputs)} result and {len(constraints) - len(outputs)} "
                         f"operand constraints for {len(results)} results and "
                         f"{len(operands)} operands")
    for i, (constraint, element) in enumerate(zip(constraints, results + operands,
                                                  strict=True)):
        what = f"result #{i}" if i < len(results) else f"operand #{i - len(results)}"
        if element not in ELEMENT_BITS:
            raise ValueError(f"{what} has element type {element}; expects one of "
                             + ", ".join(ELEMENT_BITS))
        bits = ELEMENT_BITS[element] * pack
        if bits != constraint.bits or (constraint.kind == "f" and element != "f32"):
            raise ValueError(f"{what} (${i}) has {pack} x {element} per register ({bits} "
                             f"bits), which constraint '{constraint.kind}' "
                             f"({constraint.ptx_type}) cannot hold")
    count = len(constraints)
    for match in PLACEHOLDER.finditer(ptx):
        if int(match.group(1)) >= count:
            raise ValueError(f"placeholder ${match.group(1)} is out of range: there are "
                             f"{count} registers ($0..${count - 1})")


class InlinePtxOp(SmaltiOp):
    """Runs `ptx` once per register group: `pack` elements of each operand and result in one
    register of its constraint's kind (r: .b32, h: .b16, l: .b64, f: .f32).

    Well formed: operands and results are vectors of one shape; `constraints` lists the
    results ("=r") then the operands, each as wide as `pack` of its element type; `$i` in
    `ptx` is below their count. Inference gives operands and results one layout."""

    OPERATION_NAME = "smalti.inline_ptx"

    values = Operand("the vectors the text reads", variadic=True)
    outputs = Result("the vectors the text writes", variadic=True)
    ptx = Attr(STRING, "PTX text with $0.. for results then operands")
    constraints = Attr(STRING, 'one register kind per result ("=r") then operand ("r")')
    pack = Attr(INTEGER, "elements per register", optional=True, default=1, minimum=1)

    def verify_op(self) -> None:
        op = self.operation
        if not self.outputs:
            raise error_at(op, "expects at least one result")
        values = [*self.outputs, *self.values]
        shapes = set()
        for value in values:
            if not isinstance(value.type, ir.VectorType):
                raise error_at(op, f"expects vector operands and results, got {value.type}")
            shapes.add(tuple(ir.VectorType(value.type).shape))
        if len(shapes) != 1:
            raise error_at(op, "operands and results must have one shape, got "
                               + ", ".join(str(list(s)) for s in sorted(shapes)))
        if self.pack not in (1, 2, 4):
            raise error_at(op, f"'pack' must be 1, 2 or 4, got {self.pack}")

        def element(value: ir.Value) -> str:
            element_type = ir.VectorType(value.type).element_type
            return type_name(element_type) or str(element_type)

        try:
            check_signature(parse_constraints(self.constraints),
                            [element(v) for v in self.outputs],
                            [element(v) for v in self.values], self.pack, self.ptx)
        except ValueError as error:
            raise error_at(op, str(error)) from None
