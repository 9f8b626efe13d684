"""An in-memory PTX module: the one representation that lowering builds, the printer writes,
the parser reads back and the simulator executes.

Instructions keep their opcode as PTX spells it (`ld.global.v4.f32`); `base` and `modifiers`
split it. Operands are small frozen values, so a module can be compared and hashed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# Register classes: the PTX type a register is declared with and its name prefix.
REGISTER_PREFIX = {
    "pred": "%p",
    "b16": "%rs",
    "b32": "%r",
    "b64": "%rd",
    "f32": "%f",
    "f64": "%fd",
    "b128": "%q",
}

TYPE_BITS = {
    "pred": 1,
    "b8": 8, "u8": 8, "s8": 8, "e4m3x2": 16, "e5m2x2": 16,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64,
    "b128": 128,
}


def register_class(ptx_type: str) -> str:
    """The declared register type used for values of `ptx_type` (f32 and f64 keep theirs)."""
    if ptx_type in ("pred", "f32", "f64"):
        return ptx_type
    bits = TYPE_BITS.get(ptx_type)
    if bits is None:
        raise ValueError(f"unknown PTX type .{ptx_type}")
    return f"b{max(bits, 16)}"


@dataclass(frozen=True)
class Register:
    name: str  # with its leading '%', e.g. "%f3"
    type: str  # the declared type, e.g. "f32"


@dataclass(frozen=True)
class Immediate:
    value: int | float
    type: str | None = None  # for floats: "f32" prints 0fXXXXXXXX, "f64" prints 0dXXXXXXXXXXXXXXXX

    def __post_init__(self) -> None:
        """Give floats their printed type (f32 unless said) and f32 values f32 precision."""
        if isinstance(self.value, float):
            if self.type is None:
                object.__setattr__(self, "type", "f32")
            if self.type == "f32":
                f32 = struct.unpack(">f", struct.pack(">f", self.value))[0]
                object.__setattr__(self, "value", f32)


@dataclass(frozen=True)
class Symbol:
    """A name used as an operand: a parameter, a special register (%tid.x), a global."""

    name: str


@dataclass(frozen=True)
class Label:
    name: str


@dataclass(frozen=True)
class Address:
    """A memory operand: [base+offset]."""

    base: Register | Symbol | Immediate
    offset: int = 0


@dataclass(frozen=True)
class VectorOperand:
    """A brace list of registers, e.g. {%f1, %f2, %f3, %f4}; '_' elements are Symbol('_')."""

    elements: tuple[Operand, ...]


@dataclass(frozen=True)
class TensorAddress:
    """A tensor-map operand of cp.async.bulk.tensor: [tmap, {x, y}]."""

    base: Register | Symbol
    coords: VectorOperand


@dataclass(frozen=True)
class ParamList:
    """A parenthesised list of `call`: its return parameters or its arguments, (a, b)."""

    elements: tuple[Operand, ...]


@dataclass(frozen=True)
class PredicatePair:
    """The two predicate destinations of setp: %p1|%p2 ('_' for a sink is Symbol('_'))."""

    first: Register | Symbol
    second: Register | Symbol


Operand = (
    Register | Immediate | Symbol | Label | Address | VectorOperand | TensorAddress | PredicatePair
    | ParamList
)


@dataclass(frozen=True)
class Guard:
    """The @%p / @!%p predicate of an instruction."""

    predicate: Register
    negated: bool = False


@dataclass(frozen=True)
class Instruction:
    opcode: str
    operands: tuple[Operand, ...] = ()
    guard: Guard | None = None
    line: int | None = None  # line in the PTX text it was printed at or parsed from
    # The source line it comes from (.loc): the user's .mlir or Python file for smalti's PTX,
    # the compiler's input for others'. Not part of the instruction's meaning.
    source: SourceLocation | None = field(default=None, compare=False)

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])


@dataclass(frozen=True)
class SourceLocation:
    """A position in a source file, as `.file`/`.loc` give it (line and column from 1; 0
    when unknown)."""

    file: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f":{self.column}" if self.column else "")


@dataclass(frozen=True)
class LabelDef:
    name: str
    line: int | None = None


@dataclass(frozen=True)
class InlineBlock:
    """Verbatim PTX text (an inline_ptx op's, registers substituted), printed in its own
    `{ }` scope; the text is the user's, so nothing here inspects it."""

    text: str
    source: SourceLocation | None = field(default=None, compare=False)


Statement = Instruction | LabelDef | InlineBlock


@dataclass(frozen=True)
class RegisterDecl:
    """`.reg .TYPE NAME<COUNT>;` (count given) or `.reg .TYPE NAME;` (count None)."""

    type: str
    name: str
    count: int | None = None

    def names(self) -> list[str]:
        if self.count is None:
            return [self.name]
        return [f"{self.name}{i}" for i in range(self.count)]


@dataclass(frozen=True)
class Param:
    """A kernel parameter: `.param .u64 NAME` or `.param .align A .b8 NAME[N]`.

    `.param .u64 .ptr .global .align 8 NAME` sets ptr, ptr_space and ptr_align (the pointee's).
    """

    name: str
    type: str
    align: int | None = None
    array: int | None = None
    ptr: bool = False
    ptr_space: str | None = None
    ptr_align: int | None = None


@dataclass(frozen=True)
class SharedDecl:
    """`.shared .align A .b8 NAME[N];` (size None: `.extern .shared` dynamic memory).

    Also any other variable: state "local" (in a kernel), "global" or "const" (module scope,
    optionally with an initializer, one value per element). A scalar declaration has size 1.
    """

    name: str
    align: int
    size: int | None
    type: str = "b8"
    state: str = "shared"
    initializer: tuple[int | float, ...] | None = None
    linkage: str | None = None  # "visible", "extern", "weak", "common"; size None implies extern


VariableDecl = SharedDecl


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    registers: tuple[RegisterDecl, ...]
    body: tuple[Statement, ...]
    maxntid: tuple[int, ...] | None = None
    reqntid: tuple[int, ...] | None = None
    shared: tuple[SharedDecl, ...] = ()
    is_entry: bool = True
    extra_directives: tuple[str, ...] = ()  # e.g. ".maxnreg 168", kept verbatim
    returns: tuple[Param, ...] = ()  # a .func's return parameters: .func (.param .b32 r) f(...)
    linkage: str | None = "visible"  # "visible", "weak", or None (no linkage directive)
    local: tuple[SharedDecl, ...] = ()  # `.local` variables, and `.param` ones of call sequences

    def labels(self) -> dict[str, int]:
        """Label name -> index of the statement it marks."""
        return {s.name: i for i, s in enumerate(self.body) if isinstance(s, LabelDef)}


@dataclass(frozen=True)
class Module:
    version: str = "8.0"
    target: str = "sm_90a"
    address_size: int = 64
    kernels: tuple[Kernel, ...] = ()
    globals: tuple[SharedDecl, ...] = field(default_factory=tuple)
    # Functions declared without a body (`.extern .func __assertfail (...);`), for `call`.
    declarations: tuple[Kernel, ...] = ()

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        names = ", ".join(k.name for k in self.kernels) or "none"
        raise KeyError(f"no kernel named {name!r} in the PTX module (kernels: {names})")
