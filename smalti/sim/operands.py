"""Decoding operands once into readers and writers of typed values for the active lanes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from smalti.ptx.module import (
    Address,
    Immediate,
    Instruction,
    Label,
    Operand,
    Register,
    Symbol,
    VectorOperand,
)
from smalti.ptx.printer import format_operand
from smalti.sim.dtypes import (
    BITS,
    TYPES,
    UINT_OF_BITS,
    VIEW,
    as_bits,
    bits_as,
    constant,
    resize_bits,
)
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.memory import SharedLayout

Reader = Callable[[Machine, Lanes], np.ndarray]
Writer = Callable[[Machine, Lanes, np.ndarray], None]

SPECIAL_PREFIXES = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid",
                    "%lanemask", "%cluster", "%nclusterid", "%is_explicit_cluster", "%clock",
                    "%globaltimer")


@dataclass(frozen=True)
class DecodeEnv:
    """What decoding needs to know about the kernel around an instruction."""

    kernel: str
    registers: dict[str, str]  # name -> declared type
    labels: dict[str, int]  # label -> index of the next instruction
    shared: SharedLayout
    params: dict[str, str]  # name -> PTX type
    local: dict[str, int] = field(default_factory=dict)  # .local variable -> offset
    variables: frozenset[str] = frozenset()  # module-scope .global / .const variables
    param_offsets: dict[str, int] = field(default_factory=dict)  # name -> .param address
    call_params: frozenset[str] = frozenset()  # `.param` variables of call sequences
    functions: dict = field(default_factory=dict)  # declared functions (Kernel), by name
    target: str = "sm_90a"  # the module's .target (the first one: "sm_100a", ...)
    version: str = "8.0"  # the module's PTX ISA .version

    def __hash__(self) -> int:
        return hash((self.kernel, self.shared))

    def register_bits(self, reg: Register) -> int:
        """Declared width of `reg` in bits (1 for predicates)."""
        declared = self.registers.get(reg.name)
        if declared is None:
            raise Unsupported(f"register {reg.name} is not declared")
        return BITS[declared]


class Modifiers:
    """An opcode's modifiers, consumed by a decoder; leftovers are reported as unsupported."""

    def __init__(self, inst: Instruction) -> None:
        self.opcode = inst.opcode
        self.items = list(inst.modifiers)

    def flag(self, name: str) -> bool:
        """Consume modifier `name` if present."""
        if name in self.items:
            self.items.remove(name)
            return True
        return False

    def one_of(self, names: tuple[str, ...] | frozenset[str],
               default: str | None = None) -> str | None:
        """Consume the first modifier in `names`, or return `default`."""
        for item in self.items:
            if item in names:
                self.items.remove(item)
                return item
        return default

    def types(self) -> list[str]:
        """Consume and return the trailing type modifiers (e.g. ['f32', 's32'] for cvt)."""
        found = []
        while self.items and self.items[-1] in TYPES:
            found.insert(0, self.items.pop())
        if not found:
            raise Unsupported("missing instruction type")
        return found

    def hints(self) -> None:
        """Drop cache and eviction hints that have no functional effect."""
        keep = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "volatile", "weak"}
        self.items = [i for i in self.items if i not in keep and "::" not in i]

    def done(self) -> None:
        """Fail if a modifier was not understood."""
        if self.items:
            raise Unsupported(f"unsupported modifier .{self.items[0]}")


def expect(operands: tuple[Operand, ...], count: int) -> tuple[Operand, ...]:
    """The operands, checked to be exactly `count` of them."""
    if len(operands) != count:
        raise Unsupported(f"expected {count} operands, found {len(operands)}")
    return operands


def reader(op: Operand, ptx_type: str, env: DecodeEnv) -> Reader:
    """A function giving operand `op` as values of `ptx_type` for the active lanes."""
    match op:
        case Register(name=name):
            if env.register_bits(op) == BITS[ptx_type] >= 16:  # same width: only a view
                view = VIEW[ptx_type]
                return lambda m, lanes: m.registers.read(name, lanes.index).view(view)

            def read_register(m: Machine, lanes: Lanes) -> np.ndarray:
                return bits_as(m.registers.read(name, lanes.index), ptx_type)
            return read_register
        case Immediate(value=value):
            value_const = constant(value, ptx_type)
            return lambda m, lanes: value_const
        case Symbol(name=name) if name.startswith(SPECIAL_PREFIXES):
            width = max(32, BITS[ptx_type])

            def read_special(m: Machine, lanes: Lanes) -> np.ndarray:
                return bits_as(resize_bits(m.special(name, lanes), width, False), ptx_type)
            return read_special
        case Symbol(name=name) if name in env.shared.offsets:
            address = constant(env.shared.offsets[name], ptx_type)
            return lambda m, lanes: m.shared.cta_address(address, lanes)
        case Symbol(name=name) if name in env.local:
            offset = constant(env.local[name], ptx_type)  # an address in the .local space
            return lambda m, lanes: offset
        case Symbol(name=name) if name in env.variables and BITS[ptx_type] == 64:
            # a module variable's device address, known once the launch placed it
            return lambda m, lanes: m.symbol(name, lanes).view(VIEW[ptx_type])
        case Symbol(name=name) if name in env.params and BITS[ptx_type] >= 32:
            # `mov.b64 %rd, param` / `mov.b32 %r, param`: the parameter's .param-space address
            # (e.g. a __grid_constant__ struct's, or a CUtensorMap's); cvta.param makes it generic
            address = constant(env.param_offsets[name], ptx_type)
            return lambda m, lanes: address
    raise Unsupported(f"operand {_show(op)} cannot be read as .{ptx_type}")


def writer(op: Operand, ptx_type: str, env: DecodeEnv) -> Writer:
    """A function storing values of `ptx_type` into destination `op` for the active lanes."""
    match op:
        case Register(name=name):
            bits = env.register_bits(op)
            if bits != 1 and bits < BITS[ptx_type]:
                raise Unsupported(f"register {name} is narrower than .{ptx_type}")
            if (bits == 1) != (ptx_type == "pred"):
                raise Unsupported(f"register {name} cannot hold .{ptx_type}")

            if bits == BITS[ptx_type] >= 16:  # same width: a cast to the type, then a view
                view, raw = VIEW[ptx_type], UINT_OF_BITS[bits]
                return lambda m, lanes, values: m.registers.write(
                    name, np.asarray(values).astype(view, copy=False).view(raw), lanes.index)

            def write_register(m: Machine, lanes: Lanes, values: np.ndarray) -> None:
                m.registers.write(name, as_bits(values, ptx_type, bits), lanes.index)
            return write_register
        case Symbol(name="_"):
            return lambda m, lanes, values: None
    raise Unsupported(f"operand {_show(op)} cannot be written")


def label_target(op: Operand, env: DecodeEnv) -> int:
    """The instruction index a branch to `op` continues at."""
    match op:
        case Label(name=name) | Symbol(name=name) if name in env.labels:
            return env.labels[name]
    raise Unsupported(f"unknown branch target {_show(op)}")


def vector_elements(op: Operand) -> tuple[Operand, ...]:
    """The registers of a brace list, or the operand alone."""
    return op.elements if isinstance(op, VectorOperand) else (op,)


def address_parts(op: Operand) -> tuple[Register | Symbol | Immediate, int]:
    """Base and byte offset of a memory operand `[base+offset]`."""
    if not isinstance(op, Address):
        raise Unsupported(f"expected a memory operand, found {_show(op)}")
    return op.base, op.offset


def _show(op: Operand) -> str:
    return format_operand(op)
