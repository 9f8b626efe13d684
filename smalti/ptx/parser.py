"""Reads PTX text (ours or nvcc's) into a `Module`, so the simulator can run any PTX.

`parse_module(print_module(m)) == m` apart from `line`, which the parser sets on every
instruction and label. Inline-asm scopes `{ ... }` are flattened: registers and labels they
declare are renamed (`p` -> `p$1`) so the flat body means the same.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from dataclasses import dataclass, field

from smalti.ptx.lexer import Kind, LexError, RawStatement, split_statements
from smalti.ptx.module import (
    TYPE_BITS,
    Address,
    Guard,
    Immediate,
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
    RegisterDecl,
    SharedDecl,
    SourceLocation,
    Statement,
    Symbol,
    TensorAddress,
    VectorOperand,
)

__all__ = ["PtxParseError", "parse_module"]


class PtxParseError(ValueError):
    """Malformed PTX: says which 1-based line and quotes it."""

    def __init__(self, message: str, line: int, line_text: str) -> None:
        super().__init__(f"ptx:{line}: error: {message}\n  {line_text}")
        self.message = message
        self.line = line
        self.line_text = line_text


class _Error(Exception):
    """Raised deep inside the parser; carries the line once it is known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def parse_module(text: str) -> Module:
    """Parse PTX `text` into a Module; raise PtxParseError naming the offending line."""
    try:
        return _ModuleParser(split_statements(text)).parse()
    except (LexError, _Error) as error:
        line = error.line or 1
        lines = text.split("\n")
        line_text = lines[line - 1].strip() if line <= len(lines) else ""
        raise PtxParseError(error.message, line, line_text) from None


_INSTRUCTION = re.compile(r"(?:@(!?)\s*([%\w$.]+)\s+)?([A-Za-z_][\w.:]*)\s*(.*)$", re.S)
_OPERAND_DELIMITER = re.compile(r"[\[\]{}(),]")
_IDENTIFIER = re.compile(r"[A-Za-z_$%][\w$]*$")
_INTEGER = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9]\d*)U?$")
_HEX_FLOAT = re.compile(r"([+-]?)0([fF][0-9a-fA-F]{8}|[dD][0-9a-fA-F]{16})$")
_DECIMAL_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?$")
_ADDRESS = re.compile(r"\s*([%$\w.]+?)\s*(?:([+-])\s*([+-]?)\s*(0[xX][0-9a-fA-F]+|\d+))?\s*$")
_SPECIAL_REGISTER = re.compile(
    r"%(?:(?:tid|ntid|ctaid|nctaid|clusterid|nclusterid|cluster_ctaid|cluster_nctaid)"
    r"(?:\.[xyz])?|laneid|warpid|nwarpid|smid|nsmid|gridid|cluster_ctarank|cluster_nctarank"
    r"|is_explicit_cluster|clock|clock_hi|clock64|globaltimer|globaltimer_lo|globaltimer_hi"
    r"|total_smem_size|aggr_smem_size|dynamic_smem_size|current_graph_exec"
    r"|lanemask_(?:eq|le|lt|ge|gt)|envreg\d+|pm\d(?:_64)?|reserved_smem_offset_\w+)$"
)
_REG_DECL = re.compile(r"\.reg\s+(?:\.(v\d+)\s+)?\.(\w+)\s+(.+)$", re.S)
_REG_NAME = re.compile(r"\s*([A-Za-z_$%][\w$]*)\s*(?:<\s*(\d+)\s*>)?\s*$")
_VARIABLE = re.compile(
    r"((?:\.(?:visible|extern|weak|common)\s+)*)\.(shared|local|global|const|param)(?:::\w+)?\s+"
    r"(?:\.align\s+(\d+)\s+)?(?:\.(v\d+)\s+)?\.(\w+)\s+(.+)$",
    re.S,
)
_VARIABLE_NAME = re.compile(
    r"\s*([A-Za-z_$][\w$]*)\s*((?:\[\s*\d*\s*\]\s*)*)(?:=\s*(.+?))?\s*$", re.S
)
_DIMENSION = re.compile(r"\[\s*(\d*)\s*\]")
_HEADER = re.compile(
    r"((?:\.(?:visible|extern|weak)\s+)*)\.(entry|func)\s*(?:\(([^()]*)\)\s*)?"
    r"([A-Za-z_$][\w$]*)\s*(?:\(([^()]*)\))?\s*(.*)$",
    re.S,
)
_HEADER_DIRECTIVE = re.compile(r"\s*\.(\w+)((?:[\s,]*\d+)*)\s*")
_PARAM_TOKEN = re.compile(r"\.\w+|\d+|[A-Za-z_$][\w$]*|\[\s*\d+\s*\]|\S")
_STATE_SPACES = ("global", "shared", "const", "local", "param")


@dataclass
class _Scope:
    """Names a `{ ... }` block declares, mapped to their flattened names, plus a cache."""

    singles: dict[str, Register] = field(default_factory=dict)
    ranges: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # prefix->new,type,n
    labels: dict[str, str] = field(default_factory=dict)
    symbols: dict[str, str] = field(default_factory=dict)  # `.param` variables of a callseq
    suffix: str = ""
    cache: dict[str, Operand] = field(default_factory=dict)


class _ModuleParser:
    """Walks raw statements at module scope; hands function bodies to _BodyParser."""

    def __init__(self, statements: list[RawStatement]) -> None:
        self.statements = statements
        self.pos = 0
        self.files = _file_table(statements)

    def parse(self) -> Module:
        version, target, address_size = "8.0", "sm_90a", 64
        kernels: list[Kernel] = []
        globals_: list[SharedDecl] = []
        declarations: list[Kernel] = []
        statements = self.statements
        while self.pos < len(statements):
            st = statements[self.pos]
            self.pos += 1
            match st.kind:
                case Kind.HEADER:
                    kernels.append(self._function(st))
                case Kind.STATEMENT:
                    word, _, rest = st.text.replace("\t", " ").partition(" ")
                    rest = rest.strip()
                    match word:
                        case ".version":
                            version = rest
                        case ".target":
                            target = ", ".join(t.strip() for t in rest.split(","))
                        case ".address_size":
                            address_size = _integer(rest, st.line)
                        case ".file" | ".loc":
                            pass
                        case _ if _VARIABLE.match(st.text):
                            globals_.extend(_variables(st.text, st.line))
                        case _ if ".func" in st.text:  # a prototype, for `call`
                            header = RawStatement(Kind.HEADER, st.text, st.line)
                            declarations.append(_kernel(header, _Body((), (), (), ())))
                        case _ if ".entry" in st.text:
                            raise _Error("an .entry declared without a body", st.line)
                        case _:
                            raise _Error(f"unexpected module-level statement '{word}'", st.line)
                case Kind.LABEL:
                    raise _Error(f"label '{st.text}' outside a function", st.line)
                case Kind.OPEN | Kind.CLOSE:
                    raise _Error(f"unexpected '{st.text}' outside a function", st.line)
        return Module(version, target, address_size, tuple(kernels), tuple(globals_),
                      tuple(declarations))

    def _function(self, header: RawStatement) -> Kernel:
        opened = self.statements[self.pos]
        start = self.pos + 1
        depth = 0
        for index in range(start, len(self.statements)):
            kind = self.statements[index].kind
            if kind is Kind.OPEN:
                depth += 1
            elif kind is Kind.CLOSE:
                if depth == 0:
                    self.pos = index + 1
                    body = _BodyParser(self.statements[start:index], self.files).parse()
                    return _kernel(header, body)
                depth -= 1
        raise _Error("function body is never closed with '}'", opened.line)


@dataclass(frozen=True)
class _Body:
    registers: tuple[RegisterDecl, ...]
    statements: tuple[Statement, ...]
    shared: tuple[SharedDecl, ...]
    local: tuple[SharedDecl, ...]


_FILE = re.compile(r'\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_LOC = re.compile(r"\.loc\s+(\d+)\s+(\d+)(?:\s+(\d+))?")


def _file_table(statements: list[RawStatement]) -> dict[int, str]:
    """The `.file N "name"` directives of a module (wherever they stand), by index."""
    files = {}
    for st in statements:
        if st.kind is Kind.STATEMENT and st.text.startswith(".file"):
            match = _FILE.match(st.text)
            if match is None:
                raise _Error("malformed .file directive (expected .file N \"name\")", st.line)
            files[int(match.group(1))] = re.sub(r"\\(.)", r"\1", match.group(2))
    return files


def _source_location(text: str, files: dict[int, str], line: int) -> SourceLocation | None:
    """The position a `.loc FILE LINE [COLUMN][, ...]` names (line 0: none)."""
    match = _LOC.match(text)
    if match is None:
        raise _Error("malformed .loc directive (expected .loc FILE LINE [COLUMN])", line)
    index, source_line = int(match.group(1)), int(match.group(2))
    if index not in files:
        raise _Error(f".loc names file {index}, which no .file directive declares", line)
    if source_line == 0:
        return None
    return SourceLocation(files[index], source_line, int(match.group(3) or 0))


class _BodyParser:
    """Parses one function body: declarations, labels, instructions, flattened scopes; `.loc`
    directives give the following instructions their source location."""

    def __init__(self, statements: list[RawStatement], files: dict[int, str]) -> None:
        self.raw = statements
        self.files = files
        self.source: SourceLocation | None = None
        self.registers: list[RegisterDecl] = []
        self.body: list[Statement] = []
        self.shared: list[SharedDecl] = []
        self.local: list[SharedDecl] = []
        self.scopes: list[_Scope] = [_Scope()]
        self.taken: set[str] = set()  # every register and label name in the flat body
        self.scope_labels = self._labels_by_scope()
        self.scope_count = 0

    def _labels_by_scope(self) -> list[list[str]]:
        """Labels each scope declares directly; index 0 is the function's own."""
        found: list[list[str]] = [[]]
        stack = [0]
        for st in self.raw:
            if st.kind is Kind.OPEN:
                found.append([])
                stack.append(len(found) - 1)
            elif st.kind is Kind.CLOSE:
                stack.pop()
            elif st.kind is Kind.LABEL:
                found[stack[-1]].append(st.text)
        self.taken.update(found[0])
        self.scopes[0].labels = {name: name for name in found[0]}
        return found

    def parse(self) -> _Body:
        statement = Kind.STATEMENT
        for st in self.raw:
            kind = st.kind
            if kind is statement:
                text = st.text
                if text[0] == ".":
                    self._directive(st)
                else:
                    instruction = self._instruction(text, st.line)
                    if self.source is not None:
                        instruction = dataclasses.replace(instruction, source=self.source)
                    self.body.append(instruction)
            elif kind is Kind.LABEL:
                self.body.append(LabelDef(self.scopes[-1].labels[st.text], st.line))
            elif kind is Kind.OPEN:
                self._push_scope()
            elif kind is Kind.CLOSE:
                self.scopes.pop()
            else:
                raise _Error("function header inside a function body", st.line)
        return _Body(tuple(self.registers), tuple(self.body), tuple(self.shared),
                      tuple(self.local))

    # Scopes.
    def _push_scope(self) -> None:
        self.scope_count += 1
        labels = self.scope_labels[self.scope_count]
        suffix_number = self.scope_count
        while any(f"{name}${suffix_number}" in self.taken for name in labels):
            suffix_number += 1
        scope = _Scope(suffix=f"${suffix_number}")
        scope.labels = {name: f"{name}{scope.suffix}" for name in labels}
        self.taken.update(scope.labels.values())
        self.scopes.append(scope)

    def _flat_name(self, name: str, is_range: bool) -> str:
        """The name a register declared in the current scope gets in the flat body."""
        if len(self.scopes) == 1:
            return name
        flat = f"{name}{self.scopes[-1].suffix}{'_' if is_range else ''}"
        while flat in self.taken:
            flat += "_"
        return flat

    # Declarations.
    def _directive(self, st: RawStatement) -> None:
        text = st.text
        word = text.split(None, 1)[0]
        match word:
            case ".reg":
                self._registers(text, st.line)
            case ".shared" | ".local":
                for decl in _variables(text, st.line):
                    (self.shared if decl.state == "shared" else self.local).append(decl)
            case ".loc":
                self.source = _source_location(text, self.files, st.line)
            case ".file":
                pass
            case ".pragma":
                pragma = text[len(".pragma"):].strip()
                self.body.append(Instruction(".pragma", (Symbol(pragma),), None, st.line))
            case ".param":  # an argument or return value of a call sequence
                scope = self.scopes[-1]
                for decl in _variables(text, st.line):
                    flat = self._flat_name(decl.name, False)
                    self.taken.add(flat)
                    scope.symbols[decl.name] = flat
                    scope.cache.clear()
                    self.local.append(dataclasses.replace(decl, name=flat))
            case _:
                raise _Error(f"unsupported directive '{word}' inside a function body", st.line)

    def _registers(self, text: str, line: int) -> None:
        match = _REG_DECL.match(text)
        if match is None:
            raise _Error("malformed .reg declaration", line)
        vector, ptx_type, names = match.groups()
        if vector is not None:
            raise _Error(f"vector registers (.{vector}) are not supported", line)
        _check_type(ptx_type, line)
        scope = self.scopes[-1]
        for item in names.split(","):
            name_match = _REG_NAME.match(item)
            if name_match is None:
                raise _Error(f"malformed register name '{item.strip()}'", line)
            name, count = name_match.group(1), name_match.group(2)
            flat = self._flat_name(name, count is not None)
            if count is None:
                scope.singles[name] = Register(flat, ptx_type)
                self.taken.add(flat)
                self.registers.append(RegisterDecl(ptx_type, flat))
            else:
                scope.ranges[name] = (flat, ptx_type, int(count))
                self.taken.add(flat)
                self.registers.append(RegisterDecl(ptx_type, flat, int(count)))
            scope.cache.clear()

    # Instructions.
    def _instruction(self, text: str, line: int) -> Instruction:
        match = _INSTRUCTION.match(text)
        if match is None:
            raise _Error("cannot parse instruction", line)
        negated, predicate, opcode, rest = match.groups()
        guard = None
        if predicate is not None:
            register = self._register(predicate)
            if register is None:
                raise _Error(f"guard '{predicate}' is not a declared predicate register", line)
            guard = Guard(register, bool(negated))
        if not rest:
            return Instruction(opcode, (), guard, line)
        texts = _split_operands(rest, line)
        operands = [self._cached(t, line) for t in texts]
        if opcode.startswith("bra"):
            operands[-1] = self._label(texts[-1].strip(), line)
        return Instruction(opcode, tuple(operands), guard, line)

    def _label(self, name: str, line: int) -> Label:
        for scope in reversed(self.scopes):
            flat = scope.labels.get(name)
            if flat is not None:
                return Label(flat)
        if not _IDENTIFIER.match(name):
            raise _Error(f"branch target '{name}' is not a label", line)
        return Label(name)

    def _register(self, name: str) -> Register | None:
        """The declared register `name` means in the current scope, if any."""
        prefix = name.rstrip("0123456789")
        for scope in reversed(self.scopes):
            register = scope.singles.get(name)
            if register is not None:
                return register
            if prefix == name or not scope.ranges:
                continue
            entry = scope.ranges.get(prefix)
            if entry is not None:
                found = _in_range(entry, name[len(prefix):])
                if found is not None:
                    return found
            # A declared prefix may itself end in digits: `%x1<3>` declares %x10, %x11, %x12.
            for cut in range(len(prefix) + 1, len(name)):
                entry = scope.ranges.get(name[:cut])
                if entry is not None and (found := _in_range(entry, name[cut:])) is not None:
                    return found
        return None

    def _cached(self, text: str, line: int) -> Operand:
        """The operand `text` (untrimmed) means, remembered per scope: most names repeat."""
        cache = self.scopes[-1].cache
        operand = cache.get(text)
        if operand is None:
            operand = cache[text] = self._operand(text.strip(), line)
        return operand

    def _operand(self, text: str, line: int) -> Operand:
        if not text:
            raise _Error("empty operand", line)
        first = text[0]
        if first == "[":
            return self._address(text, line)
        if first == "(":  # the return or argument list of a call
            if text[-1] != ")":
                raise _Error(f"malformed parameter list '{text}'", line)
            inner = text[1:-1].strip()
            return ParamList(tuple(self._cached(t, line) for t in _split_operands(inner, line))
                             if inner else ())
        if first == "{":
            if text[-1] != "}":
                raise _Error(f"malformed vector operand '{text}'", line)
            inner = text[1:-1]
            return VectorOperand(tuple(
                self._cached(t, line) for t in _split_operands(inner, line)))
        if "|" in text:
            first_text, _, second_text = text.partition("|")
            return PredicatePair(self._predicate(first_text.strip(), line),
                                 self._predicate(second_text.strip(), line))
        if first == "!":
            raise _Error(f"negated operand '{text}' is not supported", line)
        if first in "+-0123456789.":
            return _immediate(text, line)
        register = self._register(text)
        if register is not None:
            return register
        if first == "%":
            if _SPECIAL_REGISTER.match(text):
                return Symbol(text)
            raise _Error(f"use of undeclared register '{text}'", line)
        if _IDENTIFIER.match(text):
            for scope in reversed(self.scopes):
                if text in scope.symbols:
                    return Symbol(scope.symbols[text])
            return Symbol(text)
        raise _Error(f"cannot parse operand '{text}'", line)

    def _predicate(self, text: str, line: int) -> Register | Symbol:
        if text == "_":
            return Symbol("_")
        register = self._register(text)
        if register is None:
            raise _Error(f"'{text}' is not a declared predicate register", line)
        return register

    def _address(self, text: str, line: int) -> Address | TensorAddress:
        if text[-1] != "]":
            raise _Error(f"malformed address '{text}'", line)
        inner = text[1:-1]
        if "," in inner:
            base_text, _, coords_text = inner.partition(",")
            base = self._operand(base_text.strip(), line)
            coords = self._operand(coords_text.strip(), line)
            if not isinstance(base, Register | Symbol) or not isinstance(coords, VectorOperand):
                raise _Error(f"malformed tensor address '{text}'", line)
            return TensorAddress(base, coords)
        match = _ADDRESS.match(inner)
        if match is None:
            raise _Error(f"malformed address '{text}'", line)
        base_text, sign, sign2, offset_text = match.groups()
        base = self._cached(base_text, line)
        if not isinstance(base, Register | Symbol | Immediate):
            raise _Error(f"malformed address '{text}'", line)
        offset = 0
        if offset_text is not None:
            offset = int(offset_text, 0) * (-1 if sign == "-" else 1) * (-1 if sign2 == "-" else 1)
        return Address(base, offset)


def _in_range(entry: tuple[str, str, int], index: str) -> Register | None:
    """Register `index` of a `.reg .T prefix<count>` declaration, if it declares one."""
    flat, ptx_type, count = entry
    if (index == "0" or index[0] != "0") and int(index) < count:
        return Register(flat + index, ptx_type)
    return None


def _split_operands(text: str, line: int) -> list[str]:
    """Split at top-level commas (not those inside [...] or {...})."""
    if "[" not in text and "{" not in text and "(" not in text:
        return text.split(",")
    parts: list[str] = []
    depth = 0
    start = 0
    for match in _OPERAND_DELIMITER.finditer(text):
        char = match.group()
        if char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
            if depth < 0:
                raise _Error(f"unbalanced '{char}'", line)
        elif depth == 0:
            parts.append(text[start:match.start()])
            start = match.end()
    if depth != 0:
        raise _Error("unbalanced brackets in operands", line)
    parts.append(text[start:])
    return parts


def _immediate(text: str, line: int) -> Immediate:
    match = _HEX_FLOAT.match(text)
    if match is not None:
        sign, digits = match.groups()
        is_f32 = digits[0] in "fF"
        raw = bytes.fromhex(digits[1:])
        value = struct.unpack(">f" if is_f32 else ">d", raw)[0]
        return Immediate(-value if sign == "-" else value, "f32" if is_f32 else "f64")
    match = _INTEGER.match(text)
    if match is not None:
        sign, digits = match.groups()
        if digits[:2] in ("0x", "0X", "0b", "0B"):
            value = int(digits, 0)
        elif len(digits) > 1 and digits[0] == "0":
            value = int(digits, 8)
        else:
            value = int(digits)
        return Immediate(-value if sign == "-" else value)
    if _DECIMAL_FLOAT.match(text):
        return Immediate(float(text), "f64")
    raise _Error(f"cannot parse immediate '{text}'", line)


def _integer(text: str, line: int) -> int:
    value = _immediate(text.strip(), line).value
    if not isinstance(value, int):
        raise _Error(f"expected an integer, got '{text.strip()}'", line)
    return value


def _check_type(ptx_type: str, line: int) -> None:
    if ptx_type not in TYPE_BITS:
        raise _Error(f"unknown PTX type '.{ptx_type}'", line)


def _variables(text: str, line: int) -> list[SharedDecl]:
    """The variables a `.shared/.local/.global/.const` declaration statement declares."""
    match = _VARIABLE.match(text)
    if match is None:
        raise _Error("malformed variable declaration", line)
    linkages, state, align_text, vector, ptx_type, names = match.groups()
    if vector is not None:
        raise _Error(f"vector variables (.{vector}) are not supported", line)
    _check_type(ptx_type, line)
    linkage = linkages.split()[-1][1:] if linkages.strip() else None
    align = int(align_text) if align_text else max(1, TYPE_BITS[ptx_type] // 8)
    items = [names] if "=" in names else names.split(",")
    decls = []
    for item in items:
        name_match = _VARIABLE_NAME.match(item)
        if name_match is None:
            raise _Error(f"malformed variable '{item.strip()}'", line)
        name, dims_text, init_text = name_match.groups()
        dims = _DIMENSION.findall(dims_text)
        size: int | None = 1
        for position, dim in enumerate(dims):
            if dim == "":
                if position != 0 or len(dims) != 1:
                    raise _Error("only a one-dimensional array may be unsized", line)
                size = None
            else:
                assert size is not None
                size *= int(dim)
        initializer = None
        if init_text is not None:
            initializer = _initializer(init_text, line)
        decl_linkage = None if linkage == "extern" and size is None else linkage
        decls.append(SharedDecl(name, align, size, ptx_type, state, initializer, decl_linkage))
    return decls


def _initializer(text: str, line: int) -> tuple[int | float, ...]:
    flat = text.replace("{", " ").replace("}", " ")
    values: list[int | float] = []
    for item in flat.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            values.append(_immediate(item, line).value)
        except _Error:
            raise _Error(f"unsupported initializer value '{item}'", line) from None
    return tuple(values)


def _kernel(header: RawStatement, body: _Body) -> Kernel:
    match = _HEADER.match(header.text)
    if match is None:
        raise _Error("malformed function header", header.line)
    linkages, kind, returns_text, name, params_text, rest = match.groups()
    is_entry = kind == "entry"
    if is_entry and returns_text is not None:
        raise _Error("an .entry cannot return values", header.line)
    returns = _params(returns_text or "", header.line)
    params = _params(params_text or "", header.line)
    maxntid = reqntid = None
    extra: list[str] = []
    pos = 0
    while pos < len(rest):
        directive = _HEADER_DIRECTIVE.match(rest, pos)
        if directive is None or directive.end() == pos:
            raise _Error(f"unsupported function directive '{rest[pos:].strip()}'",
                         header.line)
        pos = directive.end()
        word, args_text = directive.groups()
        args = tuple(int(a) for a in re.findall(r"\d+", args_text))
        match word:
            case "maxntid":
                maxntid = args
            case "reqntid":
                reqntid = args
            case _:
                extra.append(f".{word}" + (" " + ", ".join(map(str, args)) if args else ""))
    linkage = linkages.split()[-1][1:] if linkages.strip() else None
    return Kernel(
        name=name,
        params=params,
        registers=body.registers,
        body=body.statements,
        maxntid=maxntid,
        reqntid=reqntid,
        shared=body.shared,
        is_entry=is_entry,
        extra_directives=tuple(extra),
        returns=returns,
        linkage=linkage,
        local=body.local,
    )


def _params(text: str, line: int) -> tuple[Param, ...]:
    if not text.strip():
        return ()
    return tuple(_param(item, line) for item in text.split(","))


def _param(text: str, line: int) -> Param:
    """One `.param [.align A] .TYPE [.ptr [.SPACE] [.align A]] NAME[[N]]`."""
    tokens = _PARAM_TOKEN.findall(text)
    if not tokens or tokens[0] != ".param":
        raise _Error(f"unsupported parameter '{text.strip()}' (only .param)", line)
    align = array = ptr_space = ptr_align = None
    ptx_type = None
    ptr = False
    index = 1
    while index < len(tokens) and tokens[index].startswith("."):
        token = tokens[index][1:]
        index += 1
        if token == "align":
            if index == len(tokens) or not tokens[index].isdigit():
                raise _Error("'.align' needs a number", line)
            if ptr:
                ptr_align = int(tokens[index])
            else:
                align = int(tokens[index])
            index += 1
        elif token == "ptr":
            ptr = True
        elif ptr and token in _STATE_SPACES:
            ptr_space = token
        elif ptx_type is None and token in TYPE_BITS:
            ptx_type = token
        else:
            raise _Error(f"unexpected '.{token}' in parameter '{text.strip()}'", line)
    if ptx_type is None or index == len(tokens) or not _IDENTIFIER.match(tokens[index]):
        raise _Error(f"malformed parameter '{text.strip()}'", line)
    name = tokens[index]
    index += 1
    if index < len(tokens) and tokens[index].startswith("["):
        array = int(tokens[index][1:-1])
        index += 1
    if index != len(tokens):
        raise _Error(f"unexpected '{tokens[index]}' in parameter '{text.strip()}'", line)
    return Param(name, ptx_type, align, array, ptr, ptr_space, ptr_align)
