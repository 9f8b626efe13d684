"""A kernel decoded once into steps the scheduler runs, with its parameter and shared layouts."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from smalti.ptx.module import (
    Guard,
    Instruction,
    Kernel,
    LabelDef,
    Module,
    Param,
    SharedDecl,
    SourceLocation,
)
from smalti.sim import ops  # noqa: F401  (defining the decoders registers them)
from smalti.sim.errors import SimError, Unsupported
from smalti.sim.lines import instruction_text, statement_lines
from smalti.sim.memory import SharedLayout, layout_shared, layout_variables
from smalti.sim.operands import DecodeEnv
from smalti.sim.poison import propagating
from smalti.sim.registry import Step, decode


@dataclass(frozen=True)
class Decoded:
    """One instruction ready to run: its step, guard, and where it came from."""

    step: Step
    guard: Guard | None
    line: int | None
    text: str
    source: SourceLocation | None = None  # the `.loc` in force: the compiler's input line


@dataclass(frozen=True)
class Program:
    """A decoded kernel."""

    kernel: Kernel
    steps: tuple[Decoded, ...]
    shared: SharedLayout
    param_offsets: tuple[int, ...]
    param_bytes: int
    local_bytes: int = 0  # .local bytes per thread
    variables: tuple[SharedDecl, ...] = ()  # module-scope .global / .const variables


def param_size(param: Param) -> tuple[int, int]:
    """(size, alignment) in bytes of a kernel parameter."""
    digits = "".join(ch for ch in param.type if ch.isdigit())
    elem = max(1, int(digits) // 8) if digits else 8
    size = elem * (param.array or 1)
    return size, param.align or elem


def _param_layout(params: tuple[Param, ...]) -> tuple[tuple[int, ...], int]:
    offsets, cursor = [], 0
    for p in params:
        size, align = param_size(p)
        cursor = -(-cursor // align) * align
        offsets.append(cursor)
        cursor += size
    return tuple(offsets), cursor


def load_program(module: Module, name: str) -> Program:
    """Decode kernel `name` of `module` (cached per kernel and line numbering)."""
    try:
        kernel = module.kernel(name)
    except KeyError as e:
        raise SimError(str(e.args[0])) from None
    # Instructions compare without their source lines, which a Program keeps: they are keyed
    # apart, so kernels alike but traced from other lines do not share a decoding.
    sources = tuple(getattr(statement, "source", None) for statement in kernel.body)
    return _decode(kernel, sources, module.globals, statement_lines(module, kernel),
                   module.declarations, module.target, module.version)


@lru_cache(maxsize=64)
def _decode(kernel: Kernel, sources: tuple[SourceLocation | None, ...], globals_: tuple,
            lines: tuple[int | None, ...], declarations: tuple[Kernel, ...] = (),
            target: str = "sm_90a", version: str = "8.0") -> Program:
    registers = {}
    for decl in kernel.registers:
        for reg_name in decl.names():
            registers[reg_name] = decl.type
    labels: dict[str, int] = {}
    instructions: list[tuple[Instruction, int | None]] = []
    for statement, line in zip(kernel.body, lines, strict=True):
        if isinstance(statement, LabelDef):
            labels[statement.name] = len(instructions)
        else:
            instructions.append((statement, line))
    shared = layout_shared((*globals_, *kernel.shared))
    # A call sequence's .param variables are the calling thread's: they live with .local ones.
    local, local_bytes = layout_variables(kernel.local, ("local", "param"))
    variables = tuple(g for g in globals_ if g.state in ("global", "const"))
    offsets, size = _param_layout(kernel.params)
    env = DecodeEnv(kernel.name, registers, labels, shared, {p.name: p.type for p in kernel.params},
                    local, frozenset(v.name for v in variables),
                    {p.name: o for p, o in zip(kernel.params, offsets, strict=True)},
                    frozenset(d.name for d in kernel.local if d.state == "param"),
                    {f.name: f for f in declarations}, target, version)
    steps = []
    for inst, line in instructions:
        text = instruction_text(inst)
        try:
            step = decode(inst, env)
        except Unsupported as e:
            raise SimError(f"unsupported PTX instruction '{inst.opcode}'", kernel=kernel.name,
                           line=line, text=text, detail=e.detail, source=inst.source) from None
        step, guard = propagating(step, inst, line)
        steps.append(Decoded(step, guard, line, text, inst.source))
    return Program(kernel, tuple(steps), shared, offsets, size, local_bytes, variables)
