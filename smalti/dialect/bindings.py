"""jaxlib's MLIR Python bindings as smalti uses them: the one module that reaches into their
private paths, and typed readers of what other modules would otherwise parse from text.

Private paths (dialect registration, OpView registration) change between jaxlib releases:
each is looked up here once and fails with a message naming the installed jaxlib. Enum
attributes (`#gpu.dim<x>`, `#vector.kind<add>`, ...) print differently from one release to
the next, so they are compared with the attributes that the installed dialects' own
generated builders make, never parsed. Types and locations are read through their typed
classes (`ir.IntegerType`, `ir.FileLineColLoc`, ...).
"""

from __future__ import annotations

import enum
import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jaxlib
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import gpu, vector

SUPPORTED_JAXLIB = "jaxlib 0.10.2 to 0.12"


class BindingsError(ImportError):
    """The installed jaxlib lacks a binding smalti needs."""


def _private(module_path: str, name: str) -> Any:
    """`module_path.name`, or a BindingsError naming the installed jaxlib."""
    try:
        module: ModuleType = importlib.import_module(module_path)
        return getattr(module, name)
    except (ImportError, AttributeError) as error:
        raise BindingsError(
            f"smalti needs {module_path}.{name}, which jaxlib {jaxlib.__version__} lacks "
            f"({error}); smalti supports {SUPPORTED_JAXLIB}") from None


_register_dialects: Callable[[ir.DialectRegistry], None] = _private(
    "jaxlib.mlir._mlir_libs._jax_mlir_ext", "register_dialects")
_cext: Any = _private("jaxlib.mlir.dialects._ods_common", "_cext")


def register_jax_dialects(registry: ir.DialectRegistry) -> None:
    """Add jaxlib's dialects (arith, func, gpu, math, memref, scf, vector, ...) to `registry`."""
    _register_dialects(registry)


def register_python_dialect(cls: type[ir.Dialect]) -> type[ir.Dialect]:
    """Make `cls` (with DIALECT_NAMESPACE) the Python class of its dialect's ops.

    The bindings look for `jaxlib.mlir.dialects.<namespace>` whenever they build an op's
    OpView and do not remember a failed import, so a dialect defined outside jaxlib would
    cost a module search (~60 µs) per `op.opview`: an empty module stands in for it."""
    name = f"jaxlib.mlir.dialects.{cls.DIALECT_NAMESPACE}"
    sys.modules.setdefault(name, ModuleType(name, f"smalti's {cls.DIALECT_NAMESPACE} ops "
                                                  "(registered from Python)"))
    return _cext.register_dialect(cls)


def register_python_operation(dialect: type[ir.Dialect], cls: type[ir.OpView]
                              ) -> type[ir.OpView]:
    """Make parsed ops named `cls.OPERATION_NAME` come back as instances of `cls`."""
    return _cext.register_operation(dialect)(cls)


# ---- enum attributes ---------------------------------------------------------------------

def _enum_attribute(builder: str, member: enum.Enum) -> ir.Attribute:
    """The attribute the installed dialect's generated builder makes for `member`."""
    return ir.AttrBuilder.get(builder)(member, ir.Context.current)


def _decode(builder: str, members: type[enum.Enum], attr: ir.Attribute, what: str
            ) -> enum.Enum:
    with attr.context:
        for member in members:
            if _enum_attribute(builder, member) == attr:
                return member
    raise ValueError(f"not a {what} attribute: {attr}")


_DIMENSION = "gpu.GPU_DimensionAttr"
_COMBINING_KIND = "vector.Vector_CombiningKindAttr"
_ADDRESS_SPACE = "gpu.GPU_AddressSpaceAttr"


def gpu_dimension_attr(axis: int) -> ir.Attribute:
    """`#gpu.dim<x|y|z>` for axis 0, 1 or 2 (in the current context)."""
    return _enum_attribute(_DIMENSION, gpu.Dimension(axis))


def gpu_dimension(attr: ir.Attribute) -> int:
    """The axis (0, 1, 2) of a `#gpu.dim` attribute."""
    return int(_decode(_DIMENSION, gpu.Dimension, attr, "gpu dimension").value)


def combining_kind_attr(kind: str) -> ir.Attribute:
    """`#vector.kind<kind>` for a kind spelled as MLIR prints it ("add", "maximumf", ...)."""
    member = next((m for m in vector.CombiningKind if str(m) == kind), None)
    if member is None:
        raise ValueError(f"unknown vector combining kind {kind!r}")
    return _enum_attribute(_COMBINING_KIND, member)


def combining_kind(attr: ir.Attribute) -> str:
    """The kind of a `#vector.kind` attribute, as MLIR spells it ("add", "maximumf", ...)."""
    return str(_decode(_COMBINING_KIND, vector.CombiningKind, attr, "vector combining kind"))


def workgroup_address_space() -> ir.Attribute:
    """`#gpu.address_space<workgroup>`: the memory space of shared-memory memrefs."""
    return _enum_attribute(_ADDRESS_SPACE, gpu.AddressSpace.Workgroup)


def is_workgroup_address_space(space: ir.Attribute | None) -> bool:
    """Whether a memref's memory space is `#gpu.address_space<workgroup>`."""
    if space is None:
        return False
    with space.context:
        return space == workgroup_address_space()


# ---- types --------------------------------------------------------------------------------

_FLOAT_TYPES: tuple[tuple[type[ir.Type], str], ...] = (
    (ir.F16Type, "f16"), (ir.BF16Type, "bf16"), (ir.F32Type, "f32"), (ir.F64Type, "f64"),
    (ir.Float8E4M3FNType, "f8E4M3FN"), (ir.Float8E5M2Type, "f8E5M2"),
    (ir.Float6E2M3FNType, "f6E2M3FN"), (ir.Float6E3M2FNType, "f6E3M2FN"),
    (ir.Float4E2M1FNType, "f4E2M1FN"), (ir.Float8E8M0FNUType, "f8E8M0FNU"))


def type_name(t: ir.Type) -> str | None:
    """smalti's name of a scalar type ("f32", "bf16", "i32", "index", "f8E4M3FN", ...), as
    MLIR spells it; None for any other type (vectors, memrefs, unsigned integers...)."""
    for cls, name in _FLOAT_TYPES:
        if isinstance(t, cls):
            return name
    if isinstance(t, ir.IntegerType):
        integer = ir.IntegerType(t)
        return f"i{integer.width}" if integer.is_signless else None
    if isinstance(t, ir.IndexType):
        return "index"
    return None


def scalar_type(name: str) -> ir.Type:
    """The type `type_name` calls `name` (in the current context); ValueError if none."""
    for cls, float_name in _FLOAT_TYPES:
        if name == float_name:
            return cls.get()
    if name == "index":
        return ir.IndexType.get()
    if name.startswith("i") and name[1:].isdigit():
        return ir.IntegerType.get_signless(int(name[1:]))
    raise ValueError(f"unknown scalar type {name!r}")


# ---- locations ----------------------------------------------------------------------------

def file_line_col(location: ir.Location) -> tuple[str, int, int] | None:
    """(file, line, column) of a location, looking through names, call sites (the callee)
    and fusions (the first with a file position); None for unknown locations."""
    match location:
        case ir.FileLineColLoc():
            return location.filename, location.start_line, location.start_col
        case ir.NameLoc():
            return file_line_col(location.child_loc)
        case ir.CallSiteLoc():
            return file_line_col(location.callee)
        case ir.FusedLoc():
            for inner in location.locations:
                found = file_line_col(inner)
                if found is not None:
                    return found
    return None


def nested_ops(root: ir.Operation) -> list[ir.OpView]:
    """Every op under `root` (itself included), in post-order, as its op view."""
    found: list[ir.OpView] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op.opview)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found
