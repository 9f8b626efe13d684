"""debug_print: print a register value (or a uniform scalar) from inside a kernel.

    "smalti.debug_print"(%acc) {format = "acc = {}"} : (vector<64x64xf32>) -> ()
    "smalti.debug_print"(%i) {format = "i = {}"} : (index) -> ()

How it runs (see `DebugPrintRecord`): the lowering gives the kernel one hidden global
buffer parameter after its arguments and tensor maps; each warpgroup that executes the op
stores its registers of the value there, and the host prints it after the launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.attributes import LayoutAttrError, attr_to_layouts
from smalti.dialect.bindings import file_line_col, type_name
from smalti.dialect.definition import STRING, Attr, Operand, SmaltiOp
from smalti.dialect.diagnostics import error_at
from smalti.tiling import WARPGROUP_SIZE, Layout, LayoutError, WGSplatLayout

PLACEHOLDER = "{}"
# Element types a debug_print can show, and their bytes in the debug buffer (i1: one byte).
PRINTABLE_BYTES = {"i1": 1, "i8": 1, "f8E4M3FN": 1, "f8E5M2": 1, "i16": 2, "f16": 2,
                   "bf16": 2, "i32": 4, "f32": 4, "i64": 8, "f64": 8, "index": 8}
HEADER_BYTES = 16  # per instance: a u32 count of executions, padded to 16 bytes


class DebugPrintOp(SmaltiOp):
    """Prints `format` with its one `{}` replaced by the operand: a vector (any register
    layout, splat included) or a uniform scalar of a printable type (index, i32, f32, ...).

    On the simulator path `run_simulated` prints `file:line: <format>` (to stderr or its
    `print_fn`) once per block, in launch order, for each block whose warpgroup reached the
    op; a prefix names the block and warpgroup when the launch has more than one. The value
    shown is the last one the op stored (an op in a loop notes how many times it ran).
    Well formed: one operand (a vector or scalar of a PRINTABLE_BYTES type), no results, a
    string `format` with exactly one `{}`. Inference accepts any layout of the vector."""

    OPERATION_NAME = "smalti.debug_print"

    value = Operand("the vector or uniform scalar printed")
    format = Attr(STRING, "the text printed, with one {} where the value goes")

    def verify_op(self) -> None:
        op = self.operation
        placeholders = self.format.count(PLACEHOLDER)
        if placeholders != 1:
            raise error_at(op, f"'format' must contain exactly one '{{}}' (where the value "
                               f"goes), found {placeholders}")
        value_type = self.value.type
        element = (ir.VectorType(value_type).element_type
                   if isinstance(value_type, ir.VectorType) else value_type)
        name = type_name(element)
        if name not in PRINTABLE_BYTES:
            what = "element type" if isinstance(value_type, ir.VectorType) else "operand type"
            raise error_at(op, f"cannot print {what} {element}: expects a vector or a scalar "
                               "of " + ", ".join(PRINTABLE_BYTES))
        if PRINTABLE_BYTES[name] == 1 and name != "i1" and not isinstance(
                value_type, ir.VectorType):
            raise error_at(op, f"cannot print operand type {element}: 8-bit values print as "
                               "vectors only (scalars live in 16-bit registers)")


@dataclass(frozen=True)
class DebugPrintRecord:
    """One debug_print of a kernel and its region of the hidden debug buffer.

    The region holds one instance per (block in launch order, warpgroup): a u32 count of
    executions (16-byte header), then `values` elements of `dtype`. A vector is stored in
    register order, thread t's registers at t * values_per_thread + register * vector_length
    + slot, so `layout.element_index(shape)` reassembles the array; a scalar is one value
    stored by thread 0 of the warpgroup. On a GPU the same buffer (`KernelSignature.
    debug_buffer_bytes`) is an extra result of the launcher's custom call, zeroed on the
    stream and passed as the last parameter; jax_integration prints it after the launch."""

    format: str
    file: str
    line: int
    dtype: str  # MLIR spelling of the element type
    shape: tuple[int, ...]  # () for a scalar
    vector: bool  # a vector value, else a uniform scalar
    layout: Layout | None  # None for a scalar, or before infer-layouts has run
    offset: int  # bytes from the start of the debug buffer to this record's region
    instances: int  # blocks * warpgroups

    @property
    def element_bytes(self) -> int:
        return PRINTABLE_BYTES[self.dtype]

    @property
    def values(self) -> int:
        """Elements stored per instance."""
        if not self.vector:
            return 1
        return WARPGROUP_SIZE * self.values_per_thread

    @property
    def values_per_thread(self) -> int:
        match self.layout:
            case None:
                return 0
            case WGSplatLayout():
                return 1
            case layout:
                distribution = layout.distribution(self.shape)
                return distribution.num_registers * distribution.vector_length

    @property
    def instance_bytes(self) -> int:
        data = self.values * self.element_bytes
        return HEADER_BYTES + -(-data // HEADER_BYTES) * HEADER_BYTES

    @property
    def size_bytes(self) -> int:
        return self.instances * self.instance_bytes


def debug_print_ops(func: ir.Operation) -> list[ir.Operation]:
    """The kernel's debug_print ops in pre-order (the order of its records)."""
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if isinstance(op.operation.opview, DebugPrintOp):
            ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops


def debug_print_records(func: ir.Operation, instances: int) -> tuple[DebugPrintRecord, ...]:
    """A record per debug_print of `func`, regions laid out one after another."""
    records, offset = [], 0
    for op in debug_print_ops(func):
        record = _record(op, offset, instances)
        records.append(record)
        offset += record.size_bytes
    return tuple(records)


def _record(op: ir.Operation, offset: int, instances: int) -> DebugPrintRecord:
    value = op.operands[0] if len(op.operands) == 1 else None
    fmt = op.attributes.get("format", None)
    fmt = ir.StringAttr(fmt).value if isinstance(fmt, ir.StringAttr) else ""
    file, line = _file_line(op.location)
    shape: tuple[int, ...] = ()
    dtype = "i32"
    layout = None
    vector = value is not None and isinstance(value.type, ir.VectorType)
    if vector:
        vector_type = ir.VectorType(value.type)
        shape, dtype = tuple(vector_type.shape), type_name(vector_type.element_type)
        layout = _inferred_layout(op, shape)
    elif value is not None:
        dtype = type_name(value.type)
    if dtype not in PRINTABLE_BYTES:  # malformed: the verifier reports it
        dtype = "i32"
    return DebugPrintRecord(fmt, file, line, dtype, shape, vector, layout, offset, instances)


def _inferred_layout(op: ir.Operation, shape: tuple[int, ...]) -> Layout | None:
    """The operand's layout from `in_layouts`, None while it is missing or does not fit."""
    if "in_layouts" not in op.attributes:
        return None
    try:
        layouts = attr_to_layouts(op.attributes["in_layouts"])
        if len(layouts) != 1:
            return None
        if not isinstance(layouts[0], WGSplatLayout):
            layouts[0].distribution(shape)
    except (LayoutAttrError, LayoutError):
        return None
    return layouts[0]


def _file_line(location: ir.Location) -> tuple[str, int]:
    file, line, _ = file_line_col(location) or ("<unknown>", 0, 0)
    return file, line

