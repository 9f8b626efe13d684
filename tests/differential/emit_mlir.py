"""Programs as .mlir text: one `func.func @kernel` with `smalti.kernel` and `smalti.grid`,
smalti ops in generic form and upstream ops in the syntax both supported jaxlib releases
parse (generic where it changed: extract/insert_strided_slice)."""

from __future__ import annotations

import math

from tests.differential.dtypes import DTYPES, DType
from tests.differential.ops import COMPARISONS, ELEMENTWISE, LAYOUTS, REDUCTIONS
from tests.differential.program import (
    Affine,
    Apply,
    Barrier,
    BlockSelect,
    Broadcast,
    Cast,
    Compare,
    Const,
    Insert,
    Iota,
    LayoutCast,
    Load,
    Loop,
    Print,
    Program,
    Reduce,
    Reshape,
    Select,
    Slice,
    SmemRoundTrip,
    Statement,
    Store,
    Transpose,
    VType,
    When,
    walk,
)
from tests.differential.typecheck import value_types

# Bit patterns of the special values, per float type (MLIR's dense<0x...> hex form).
SPECIAL_BITS = {
    "f32": {"nan": "0x7FC00000", "inf": "0x7F800000", "-inf": "0xFF800000"},
    "bf16": {"nan": "0x7FC0", "inf": "0x7F80", "-inf": "0xFF80"},
    "f16": {"nan": "0x7E00", "inf": "0x7C00", "-inf": "0xFC00"},
}
SMEM_ALIGNMENT = 1024
SHARED = "#gpu.address_space<workgroup>"


def vector_type(vtype: VType) -> str:
    return f"vector<{'x'.join(map(str, vtype.shape))}x{vtype.dtype}>"


def memref_type(shape: tuple[int, ...], dtype: str, shared: bool = False) -> str:
    space = f", {SHARED}" if shared else ""
    return f"memref<{'x'.join(map(str, shape))}x{dtype}{space}>"


def scalar_literal(value: float | int | bool, dtype: DType) -> str:
    """A dense<...> element: decimal, or the bit pattern of NaN and infinities."""
    if dtype.is_bool:
        return "true" if value else "false"
    if dtype.is_int:
        return str(int(value))
    value = float(value)
    if math.isnan(value):
        return SPECIAL_BITS[dtype.name]["nan"]
    if math.isinf(value):
        return SPECIAL_BITS[dtype.name]["inf" if value > 0 else "-inf"]
    return f"{value:.9e}"


def smem_slots(program: Program) -> dict[int, tuple[int, int]]:
    """slot -> (byte offset, bytes): each slot as large as its largest round trip, at
    1024-byte offsets (as the DSL places its buffers)."""
    types = value_types(program)
    sizes: dict[int, int] = {}
    for s in walk(program.body):
        if isinstance(s, SmemRoundTrip):
            vtype = types[s.value]
            nbytes = math.prod(vtype.shape) * max(DTYPES[vtype.dtype].bits, 8) // 8
            sizes[s.slot] = max(sizes.get(s.slot, 0), nbytes)
    slots, offset = {}, 0
    for slot in sorted(sizes):
        slots[slot] = (offset, sizes[slot])
        offset += -(-sizes[slot] // SMEM_ALIGNMENT) * SMEM_ALIGNMENT
    return slots


class _Emitter:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.types = value_types(program)
        self.lines: list[str] = []
        self.names: dict[str, str] = {}  # program value -> SSA name
        self.index_constants: dict[int, str] = {}
        self.fresh = 0
        self.slots = smem_slots(program)

    def temp(self, hint: str = "t") -> str:
        self.fresh += 1
        return f"%{hint}_{self.fresh}"  # program values have no "_": no clash

    def emit(self, line: str, depth: int) -> None:
        self.lines.append("  " * depth + line)

    def index_constant(self, value: int) -> str:
        if value not in self.index_constants:
            self.index_constants[value] = f"%n_{value}" if value >= 0 else f"%n_m{-value}"
        return self.index_constants[value]

    def index(self, affine: Affine, depth: int) -> str:
        """The SSA index of `affine` (arith on index)."""
        terms = []
        if affine.block:
            terms.append(self.scaled("%block", affine.block, depth))
        if affine.dynamic:
            terms.append(self.scaled("%dynamic", affine.dynamic, depth))
        for counter, coefficient in affine.counters:
            if coefficient:
                terms.append(self.scaled(self.names[counter], coefficient, depth))
        if affine.const or not terms:
            terms.append(self.index_constant(affine.const))
        total = terms[0]
        for term in terms[1:]:
            result = self.temp("i")
            self.emit(f"{result} = arith.addi {total}, {term} : index", depth)
            total = result
        return total

    def scaled(self, value: str, factor: int, depth: int) -> str:
        if factor == 1:
            return value
        result = self.temp("i")
        self.emit(f"{result} = arith.muli {value}, {self.index_constant(factor)} : index", depth)
        return result

    def constant(self, value: float | int | bool, vtype: VType, depth: int) -> str:
        result = self.temp("k")
        literal = scalar_literal(value, DTYPES[vtype.dtype])
        self.emit(f"{result} = arith.constant dense<{literal}> : {vector_type(vtype)}", depth)
        return result

    def text(self) -> str:
        program = self.program
        params = ", ".join(f"%{r.name}: {memref_type(r.shape, r.dtype)}" for r in program.refs)
        if program.dynamic is not None:
            params += ", %dyn: i32"
            self.emit("%dynamic = arith.index_cast %dyn : i32 to index", 1)
        grid = ", ".join(map(str, program.grid))
        if len(program.grid) == 2:  # the linear id, x major (as the reference numbers blocks)
            self.emit("%bx = gpu.block_id x", 1)
            self.emit("%by = gpu.block_id y", 1)
            self.emit(f"%brow = arith.muli %bx, {self.index_constant(program.grid[1])} : index",
                      1)
            self.emit("%block = arith.addi %brow, %by : index", 1)
        else:
            self.emit("%block = gpu.block_id x", 1)
        self.body(program.body, 1)
        self.emit("return", 1)
        constants = [f"  {name} = arith.constant {value} : index"
                     for value, name in sorted(self.index_constants.items())]
        head = [f"func.func @kernel({params})",
                f"    attributes {{smalti.kernel, smalti.grid = array<i64: {grid}>}} {{"]
        return "\n".join([*head, *constants, *self.lines, "}"]) + "\n"

    def body(self, statements: tuple[Statement, ...], depth: int) -> None:
        for statement in statements:
            self.statement(statement, depth)

    def define(self, value: str) -> str:
        name = f"%{value}"
        self.names[value] = name
        return name

    def statement(self, s: Statement, depth: int) -> None:
        n, types = self.names, self.types
        match s:
            case Load():
                ref = self.program.ref(s.ref)
                indices = [self.index(a, depth) for a in s.starts]
                self.emit(f'{self.define(s.out)} = "smalti.vector_load"(%{s.ref}, '
                          f"{', '.join(indices)}) : ({memref_type(ref.shape, ref.dtype)}, "
                          f"{', '.join(['index'] * len(indices))}) -> {vector_type(s.type)}",
                          depth)
            case Store():
                ref = self.program.ref(s.ref)
                indices = [self.index(a, depth) for a in s.starts]
                self.emit(f'"smalti.vector_store"({n[s.value]}, %{s.ref}, {", ".join(indices)})'
                          f" : ({vector_type(types[s.value])}, "
                          f"{memref_type(ref.shape, ref.dtype)}, "
                          f"{', '.join(['index'] * len(indices))}) -> ()", depth)
            case Print():
                self.emit(f'"smalti.debug_print"({n[s.value]}) {{format = "p{s.label} = {{}}"}} : '
                          f"({vector_type(types[s.value])}) -> ()", depth)
            case Const():
                literal = scalar_literal(s.value, DTYPES[s.type.dtype])
                self.emit(f"{self.define(s.out)} = arith.constant dense<{literal}> : "
                          f"{vector_type(s.type)}", depth)
            case Iota():
                self.emit(f'{self.define(s.out)} = "smalti.iota"() {{dimension = {s.dimension} '
                          f": i64}} : () -> {vector_type(s.type)}", depth)
            case Apply():
                self.apply(s, depth)
            case Compare():
                predicate = COMPARISONS[s.predicate]
                op = "arith.cmpf" if predicate.kind == "float" else "arith.cmpi"
                self.emit(f"{self.define(s.out)} = {op} {predicate.mlir}, {n[s.lhs]}, "
                          f"{n[s.rhs]} : {vector_type(types[s.lhs])}", depth)
            case Select():
                self.emit(f"{self.define(s.out)} = arith.select {n[s.condition]}, {n[s.true]}, "
                          f"{n[s.false]} : {vector_type(types[s.condition])}, "
                          f"{vector_type(types[s.true])}", depth)
            case Cast():
                self.cast(s, depth)
            case Reduce():
                self.reduce(s, depth)
            case Broadcast():
                source, result = vector_type(types[s.value]), vector_type(types[s.out])
                if s.dim == 1 and s.style == 0:
                    self.emit(f"{self.define(s.out)} = vector.broadcast {n[s.value]} : {source} "
                              f"to {result}", depth)
                else:
                    self.emit(f'{self.define(s.out)} = "smalti.broadcast_in_dim"({n[s.value]}) '
                              f"{{broadcast_dimensions = array<i64: {s.dim}>}} : ({source}) -> "
                              f"{result}", depth)
            case Transpose():
                self.emit(f"{self.define(s.out)} = vector.transpose {n[s.value]}, [1, 0] : "
                          f"{vector_type(types[s.value])} to {vector_type(types[s.out])}", depth)
            case Reshape():
                self.emit(f"{self.define(s.out)} = vector.shape_cast {n[s.value]} : "
                          f"{vector_type(types[s.value])} to {vector_type(types[s.out])}", depth)
            case Slice():
                ones = ", ".join(["1"] * len(s.sizes))
                self.emit(f'{self.define(s.out)} = "vector.extract_strided_slice"({n[s.value]}) '
                          f"<{{offsets = [{', '.join(map(str, s.offsets))}], sizes = "
                          f"[{', '.join(map(str, s.sizes))}], strides = [{ones}]}}> : "
                          f"({vector_type(types[s.value])}) -> {vector_type(types[s.out])}",
                          depth)
            case Insert():
                ones = ", ".join(["1"] * len(s.offsets))
                self.emit(f'{self.define(s.out)} = "vector.insert_strided_slice"({n[s.small]}, '
                          f"{n[s.big]}) <{{offsets = [{', '.join(map(str, s.offsets))}], "
                          f"strides = [{ones}]}}> : ({vector_type(types[s.small])}, "
                          f"{vector_type(types[s.big])}) -> {vector_type(types[s.out])}", depth)
            case BlockSelect():
                condition = self.temp("w")
                self.emit(f"{condition} = arith.cmpi slt, %block, "
                          f"{self.index_constant(s.cutoff)} : index", depth)
                self.emit(f"{self.define(s.out)} = arith.select {condition}, {n[s.true]}, "
                          f"{n[s.false]} : {vector_type(types[s.true])}", depth)
            case Barrier():
                vtype = vector_type(types[s.value])
                self.emit(f'{self.define(s.out)} = "smalti.optimization_barrier"({n[s.value]}) : '
                          f"({vtype}) -> {vtype}", depth)
            case LayoutCast():
                vtype = vector_type(types[s.value])
                self.emit(f'{self.define(s.out)} = "smalti.layout_cast"({n[s.value]}) '
                          f"{{new_layout = #smalti.{LAYOUTS[s.layout].text}}} : ({vtype}) -> "
                          f"{vtype}", depth)
            case SmemRoundTrip():
                self.round_trip(s, depth)
            case Loop():
                self.loop(s, depth)
            case When():
                self.branch(s, depth)
            case _:
                raise TypeError(s)

    def apply(self, s: Apply, depth: int) -> None:
        op = ELEMENTWISE[s.op]
        vtype = self.types[s.out]
        args = [self.names[a] for a in s.args]
        match op.mlir:
            case "negi":
                zero = self.constant(0, vtype, depth)
                line = f"arith.subi {zero}, {args[0]}"
            case "noti":
                ones = self.constant(-1, vtype, depth)
                line = f"arith.xori {args[0]}, {ones}"
            case "notb":
                true = self.constant(True, vtype, depth)
                line = f"arith.xori {args[0]}, {true}"
            case _:
                line = f"{op.mlir} {', '.join(args)}"
        self.emit(f"{self.define(s.out)} = {line} : {vector_type(vtype)}", depth)

    def branch(self, s: When, depth: int) -> None:
        condition = self.temp("w")
        self.emit(f"{condition} = arith.cmpi slt, %block, {self.index_constant(s.cutoff)} : "
                  "index", depth)
        types = ", ".join(vector_type(self.types[v]) for v in s.outs)
        head = f"scf.if {condition}"
        if len(s.outs) == 1:
            head = f"{self.define(s.outs[0])} = {head} -> ({types})"
        elif s.outs:
            name = self.temp("if")
            for k, out in enumerate(s.outs):
                self.names[out] = f"{name}#{k}"
            head = f"{name}:{len(s.outs)} = {head} -> ({types})"
        self.emit(f"{head} {{", depth)
        for body, yields, close in ((s.then, s.then_yields, "} else {"),
                                    (s.otherwise, s.otherwise_yields, "}")):
            self.body(body, depth + 1)
            if yields:
                self.emit(f"scf.yield {', '.join(self.names[v] for v in yields)} : {types}",
                          depth + 1)
            self.emit(close, depth)

    def cast(self, s: Cast, depth: int) -> None:
        source_type, target_type = self.types[s.value], self.types[s.out]
        source, target = DTYPES[source_type.dtype], DTYPES[s.dtype]
        value, out = self.names[s.value], self.define(s.out)
        special = {"bitcast": "arith.bitcast"}
        if s.how == "unsigned":
            special["unsigned"] = ("arith.uitofp" if target.is_float else "arith.fptoui"
                                   if source.is_float else "arith.extui")
        if s.how == "bits":
            special["bits"] = ("arith.trunci" if source.is_int else "arith.fptosi"
                               if source.is_float else "arith.sitofp" if target.is_float
                               else "arith.extsi")
        if s.how in special:
            self.emit(f"{out} = {special[s.how]} {value} : {vector_type(source_type)} to "
                      f"{vector_type(target_type)}", depth)
            return
        if target.is_bool:
            zero = self.constant(0.0 if source.is_float else 0, source_type, depth)
            op = "arith.cmpf une" if source.is_float else "arith.cmpi ne"
            self.emit(f"{out} = {op}, {value}, {zero} : {vector_type(source_type)}", depth)
            return
        if source.is_bool:
            op = "arith.uitofp" if target.is_float else "arith.extui"
        elif source.is_float and target.is_float:
            op = "arith.extf" if target.bits > source.bits else "arith.truncf"
        elif target.is_float:
            op = "arith.sitofp"
        elif source.is_float:
            op = "arith.fptosi"
        else:
            op = "arith.extsi" if target.bits > source.bits else "arith.trunci"
        self.emit(f"{out} = {op} {value} : {vector_type(source_type)} to "
                  f"{vector_type(target_type)}", depth)

    def reduce(self, s: Reduce, depth: int) -> None:
        source, result = self.types[s.value], self.types[s.out]
        dtype = DTYPES[source.dtype]
        reduction = REDUCTIONS[s.kind]
        kind = reduction.mlir_float if dtype.is_float else reduction.mlir_int
        if s.acc is not None:
            acc = self.names[s.acc]
        else:
            if dtype.is_float:
                identity: float | int = reduction.float_identity
            else:  # the identities of the signed ones, in this width
                half = 1 << (dtype.bits - 1)
                identity = max(-half, min(half - 1, reduction.int_identity))
            acc = self.constant(identity, result, depth)
        self.emit(f"{self.define(s.out)} = vector.multi_reduction <{kind}>, {self.names[s.value]}"
                  f", {acc} [{s.axis}] : {vector_type(source)} to {vector_type(result)}", depth)

    def round_trip(self, s: SmemRoundTrip, depth: int) -> None:
        vtype = self.types[s.value]
        offset, _ = self.slots[s.slot]
        ref = self.temp("smem")
        shared = memref_type(vtype.shape, vtype.dtype, shared=True)
        zeros = ", ".join([self.index_constant(0)] * len(vtype.shape))
        indices = ", ".join(["index"] * len(vtype.shape))
        self.emit(f'{ref} = "smalti.slice_smem"({self.index_constant(offset)}) : (index) -> '
                  f"{shared}", depth)
        self.emit(f'"smalti.vector_store"({self.names[s.value]}, {ref}, {zeros}) : '
                  f"({vector_type(vtype)}, {shared}, {indices}) -> ()", depth)
        self.emit(f'{self.define(s.out)} = "smalti.vector_load"({ref}, {zeros}) : ({shared}, '
                  f"{indices}) -> {vector_type(vtype)}", depth)

    def loop(self, s: Loop, depth: int) -> None:
        upper = self.index(s.upper, depth)
        counter = self.define(s.counter)
        carried = [self.define(c) for c in s.carried]
        types = [vector_type(self.types[v]) for v in s.inits]
        iter_args = ", ".join(f"{c} = {self.names[v]}" for c, v in
                              zip(carried, s.inits, strict=True))
        if len(s.outs) == 1:
            head = self.define(s.outs[0])
        else:
            head = self.temp("loop")
            for k, out in enumerate(s.outs):
                self.names[out] = f"{head}#{k}"
            head = f"{head}:{len(s.outs)}"
        self.emit(f"{head} = scf.for {counter} = {self.index_constant(s.lower)} to {upper} step "
                  f"{self.index_constant(s.step)} iter_args({iter_args}) -> ({', '.join(types)}) "
                  "{", depth)
        self.body(s.body, depth + 1)
        self.emit(f"scf.yield {', '.join(self.names[y] for y in s.yields)} : "
                  f"{', '.join(types)}", depth + 1)
        self.emit("}", depth)


def emit_mlir(program: Program) -> str:
    """The program's kernel as .mlir text."""
    assert program.kind == "mlir", program.kind
    return _Emitter(program).text()


__all__ = ["emit_mlir", "memref_type", "scalar_literal", "smem_slots", "vector_type"]
