"""PTX as data: the module, its builder, printer and parser, and the ptxas toolchain."""

from smalti.ptx.builder import KernelBuilder
from smalti.ptx.module import (
    Address,
    Guard,
    Immediate,
    Instruction,
    Kernel,
    Label,
    LabelDef,
    Module,
    Param,
    Register,
    RegisterDecl,
    SharedDecl,
    Symbol,
    VectorOperand,
)
from smalti.ptx.printer import format_instruction, print_module

__all__ = [
    "Address", "Guard", "Immediate", "Instruction", "Kernel", "KernelBuilder", "Label",
    "LabelDef", "Module", "Param", "Register", "RegisterDecl", "SharedDecl", "Symbol",
    "VectorOperand", "format_instruction", "print_module",
]
