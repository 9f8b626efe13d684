"""The one place PTX text is written."""

from __future__ import annotations

import struct

from smalti.ptx.module import (
    Address,
    Immediate,
    InlineBlock,
    Instruction,
    Kernel,
    Label,
    LabelDef,
    Module,
    Operand,
    Param,
    ParamList,
    PredicatePair,
    Register,
    SharedDecl,
    Symbol,
    TensorAddress,
    VectorOperand,
)


def format_operand(operand: Operand) -> str:
    match operand:
        case Register(name=name) | Symbol(name=name) | Label(name=name):
            return name
        case Immediate(value=float() as v, type="f64"):
            return "0d" + struct.pack(">d", v).hex().upper()
        case Immediate(value=float() as v):
            return "0f" + struct.pack(">f", v).hex().upper()
        case Immediate(value=v):
            return str(v)
        case Address(base=base, offset=0):
            return f"[{format_operand(base)}]"
        case Address(base=base, offset=offset):
            sign = "+" if offset >= 0 else "-"
            return f"[{format_operand(base)}{sign}{abs(offset)}]"
        case VectorOperand(elements=elements):
            return "{" + ", ".join(format_operand(e) for e in elements) + "}"
        case TensorAddress(base=base, coords=coords):
            return f"[{format_operand(base)}, {format_operand(coords)}]"
        case PredicatePair(first=first, second=second):
            return f"{format_operand(first)}|{format_operand(second)}"
        case ParamList(elements=elements):
            return "(" + ", ".join(format_operand(e) for e in elements) + ")"
    raise TypeError(f"not a PTX operand: {operand!r}")


def format_instruction(inst: Instruction) -> str:
    guard = ""
    if inst.guard is not None:
        guard = f"@{'!' if inst.guard.negated else ''}{inst.guard.predicate.name} "
    operands = ", ".join(format_operand(o) for o in inst.operands)
    return f"{guard}{inst.opcode}{' ' + operands if operands else ''};"


def _format_param(p: Param) -> str:
    align = f" .align {p.align}" if p.align is not None else ""
    ptr = " .ptr" if p.ptr else ""
    ptr += f" .{p.ptr_space}" if p.ptr_space is not None else ""
    ptr += f" .align {p.ptr_align}" if p.ptr_align is not None else ""
    array = f"[{p.array}]" if p.array is not None else ""
    return f".param{align} .{p.type}{ptr} {p.name}{array}"


def _format_value(value: int | float, ptx_type: str) -> str:
    if isinstance(value, float):
        return format_operand(Immediate(value, "f64" if ptx_type == "f64" else "f32"))
    return str(value)


def _format_shared(s: SharedDecl) -> str:
    """A variable declaration: .shared/.local/.global/.const, with its initializer if any."""
    linkage = f".{s.linkage} " if s.linkage else (".extern " if s.size is None else "")
    size = "" if s.size is None else str(s.size)
    init = ""
    if s.initializer is not None:
        init = " = {" + ", ".join(_format_value(v, s.type) for v in s.initializer) + "}"
    return f"{linkage}.{s.state} .align {s.align} .{s.type} {s.name}[{size}]{init};"


def source_files(module: Module) -> dict[str, int]:
    """The `.file` index of every source file the module's instructions come from, in first-
    use order (from 1)."""
    files: dict[str, int] = {}
    for kernel in module.kernels:
        for statement in kernel.body:
            source = getattr(statement, "source", None)
            if source is not None and source.file not in files:
                files[source.file] = len(files) + 1
    return files


def _signature(kernel: Kernel) -> list[str]:
    """`.visible .entry name(...)` (or a .func's, with its return parameters)."""
    linkage = f".{kernel.linkage} " if kernel.linkage else ""
    returns = ""
    if kernel.returns:
        returns = "(" + ", ".join(_format_param(p) for p in kernel.returns) + ") "
    lines = [f"{linkage}{'.entry' if kernel.is_entry else '.func'} {returns}{kernel.name}("]
    for i, p in enumerate(kernel.params):
        lines.append(f"\t{_format_param(p)}{',' if i + 1 < len(kernel.params) else ''}")
    lines.append(")")
    return lines


def print_kernel(kernel: Kernel, files: dict[str, int] | None = None) -> list[str]:
    """The kernel's lines; with `files`, a `.loc` before each instruction whose source
    location differs from the previous one's (profilers and the simulator map PTX back to
    the user's lines through them)."""
    lines = _signature(kernel)
    if kernel.maxntid is not None:
        lines.append(".maxntid " + ", ".join(map(str, kernel.maxntid)))
    if kernel.reqntid is not None:
        lines.append(".reqntid " + ", ".join(map(str, kernel.reqntid)))
    lines.extend(kernel.extra_directives)
    lines.append("{")
    for decl in kernel.registers:
        count = f"<{decl.count}>" if decl.count is not None else ""
        lines.append(f"\t.reg .{decl.type} {decl.name}{count};")
    lines.extend("\t" + _format_shared(s) for s in kernel.shared)
    lines.extend("\t" + _format_shared(s) for s in kernel.local)
    lines.append("")
    current = None
    for statement in kernel.body:
        if isinstance(statement, LabelDef):
            lines.append(f"{statement.name}:")
            continue
        source = statement.source if files else None
        if source is not None and source != current:
            lines.append(f"\t.loc {files[source.file]} {source.line} {source.column}")
            current = source
        if isinstance(statement, InlineBlock):
            lines.extend(["\t{", *(f"\t\t{t.strip()}" for t in statement.text.splitlines()
                                   if t.strip()), "\t}"])
            continue
        lines.append("\t" + format_instruction(statement))
    lines.append("}")
    return lines


def _escaped(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', '\\"')


def print_module(module: Module) -> str:
    lines = [
        "//",
        "// Generated by smalti",
        "//",
        "",
        f".version {module.version}",
        f".target {module.target}",
        f".address_size {module.address_size}",
        "",
    ]
    files = source_files(module)
    lines.extend(f'.file {index} "{_escaped(name)}"' for name, index in files.items())
    if files:
        lines.append("")
    for declaration in module.declarations:
        lines.extend([*_signature(declaration), ";"])
    lines.extend(_format_shared(g) for g in module.globals)
    for kernel in module.kernels:
        lines.extend(print_kernel(kernel, files))
        lines.append("")
    return "\n".join(lines)
