"""How a smalti op is declared: once, on its class.

    class AsyncStoreOp(SmaltiOp):
        OPERATION_NAME = "smalti.async_store"
        TRAITS = Trait.WARPGROUP_COLLECTIVE
        EFFECTS = (Effect.read("source", Proxy.ASYNC), Effect.write("destination"))

        source = Operand("the shared-memory ref")
        destination = Operand("the global ref")
        indices = Operand("the box's start in the global ref", variadic=True)

Operands, results and attributes are fields (descriptors, in declaration order): reading
one on an op gives the value (`op.source`, a decoded `op.pending`), and the class gets from
them a builder (`AsyncStoreOp.build(source=..., destination=..., indices=[...])`) and the
structural checks (counts, required attributes and their kinds) the verifier runs before
the op's own `verify_op`. Traits and memory effects are what passes ask of an op (whether
its warpgroup meets, whether it writes shared memory through the generic proxy, ...).
Registering the class (by subclassing) makes parsed ops of its name come back as it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from jaxlib.mlir import ir

from smalti.dialect.attributes import (
    LayoutAttrError,
    attr_to_layout,
    attr_to_transforms,
    layout_to_attr,
    transforms_to_attr,
)
from smalti.dialect.bindings import register_python_dialect, register_python_operation
from smalti.dialect.diagnostics import error_at


@register_python_dialect
class SmaltiDialect(ir.Dialect):
    DIALECT_NAMESPACE = "smalti"


# ---- traits and memory effects ------------------------------------------------------------

class Trait(enum.Flag):
    """What passes must know of an op beyond its fields."""

    NONE = 0
    # The 128 threads of the warpgroup meet in it (named barriers, `.sync.aligned` wgmma,
    # shuffles): every thread of the warpgroup must reach it. (Ops with vector operands or
    # results are collective by being warpgroup-owned; they need not say so.)
    WARPGROUP_COLLECTIVE = enum.auto()
    # Every thread of the block meets in it (bar.sync 0; barrier.cluster: the cluster too).
    BLOCK_COLLECTIVE = enum.auto()
    # No effect but its results: smalti-cse merges identical ones and drops unused ones
    # (MLIR's cse cannot: smalti ops are unregistered, so it assumes any effect).
    PURE = enum.auto()


class Proxy(enum.Enum):
    """Which memory proxy an access goes through (PTX ISA, memory consistency model)."""

    GENERIC = "generic"  # ld/st.shared by the threads
    ASYNC = "async"  # TMA and wgmma


@dataclass(frozen=True)
class Effect:
    """An op reads or writes the memory operand `operand` names, through `proxy`."""

    kind: Literal["read", "write"]
    operand: str
    proxy: Proxy = Proxy.GENERIC

    @staticmethod
    def read(operand: str, proxy: Proxy = Proxy.GENERIC) -> Effect:
        return Effect("read", operand, proxy)

    @staticmethod
    def write(operand: str, proxy: Proxy = Proxy.GENERIC) -> Effect:
        return Effect("write", operand, proxy)


# ---- attribute kinds ----------------------------------------------------------------------

@dataclass(frozen=True)
class AttrKind:
    """How one kind of attribute is checked, decoded and built."""

    expected: str  # what the attribute must be, for messages: "an integer"
    accepts: Callable[[ir.Attribute], bool]  # of the right attribute class
    decode: Callable[[ir.Attribute], Any]  # may raise LayoutAttrError saying what is wrong
    encode: Callable[[Any], ir.Attribute]


def _is_i64_array(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.DenseI64ArrayAttr)


def _is_smalti_attr(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.OpaqueAttr) and attr.dialect_namespace == "smalti"


def _is_smalti_array(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.ArrayAttr) and all(_is_smalti_attr(a) for a in attr)


INTEGER = AttrKind(
    "an integer", lambda a: isinstance(a, ir.IntegerAttr), lambda a: ir.IntegerAttr(a).value,
    lambda v: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v)))
I64_ARRAY = AttrKind(
    "an array<i64: ...>", _is_i64_array, lambda a: tuple(int(x) for x in ir.DenseI64ArrayAttr(a)),
    lambda v: ir.DenseI64ArrayAttr.get([int(x) for x in v]))
STRING = AttrKind(
    "a string", lambda a: isinstance(a, ir.StringAttr), lambda a: ir.StringAttr(a).value,
    lambda v: ir.StringAttr.get(v))
LAYOUT = AttrKind("a #smalti layout", _is_smalti_attr, attr_to_layout,
                  lambda v: layout_to_attr(v))
TRANSFORMS = AttrKind("an array of #smalti SMEM transforms", _is_smalti_array,
                      lambda a: tuple(attr_to_transforms(a)),
                      lambda v: transforms_to_attr(list(v)))
BOOL = AttrKind(
    "a bool", lambda a: isinstance(a, ir.BoolAttr), lambda a: ir.BoolAttr(a).value,
    lambda v: ir.BoolAttr.get(bool(v)))
# One integer or an array of them (e.g. the warpgroups running a region), read as a tuple.
INTEGERS = AttrKind(
    "an i64 or array<i64: ...>", lambda a: isinstance(a, ir.IntegerAttr) or _is_i64_array(a),
    lambda a: ((ir.IntegerAttr(a).value,) if isinstance(a, ir.IntegerAttr)
               else tuple(int(x) for x in ir.DenseI64ArrayAttr(a))),
    lambda v: (ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v[0]) if len(v) == 1
               else ir.DenseI64ArrayAttr.get([int(x) for x in v])))


# ---- fields -------------------------------------------------------------------------------

class Field:
    """A named part of an op, declared as a class attribute of its OpView class."""

    name: str = ""

    def __init__(self, doc: str = "") -> None:
        self.doc = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name


class Operand(Field):
    """One operand, or (variadic) the run of operands in its place: at most one per op."""

    def __init__(self, doc: str = "", *, variadic: bool = False) -> None:
        super().__init__(doc)
        self.variadic = variadic

    def __get__(self, op: SmaltiOp | None, owner: type) -> Any:
        if op is None:
            return self
        return op._values(op.operation.operands, type(op).OPERANDS, self)


class Result(Field):
    """One result, or (variadic) all results in its place. `same_type_as` names an operand
    whose type the result has, so the builder needs no result type for it."""

    def __init__(self, doc: str = "", *, variadic: bool = False,
                 same_type_as: str | None = None) -> None:
        super().__init__(doc)
        self.variadic = variadic
        self.same_type_as = same_type_as

    def __get__(self, op: SmaltiOp | None, owner: type) -> Any:
        if op is None:
            return self
        return op._values(op.operation.results, type(op).RESULTS, self)


class Attr(Field):
    """An attribute of `kind`: required, or `optional` (then reading it gives `default`).
    It is named in the IR as the field is, unless `attr_name` says otherwise."""

    def __init__(self, kind: AttrKind, doc: str = "", *, optional: bool = False,
                 default: Any = None, minimum: int | None = None,
                 attr_name: str | None = None) -> None:
        super().__init__(doc)
        self.kind = kind
        self.optional = optional
        self.default = default
        self.minimum = minimum
        self._attr_name = attr_name

    @property
    def attr_name(self) -> str:
        return self._attr_name or self.name

    def __get__(self, op: SmaltiOp | None, owner: type) -> Any:
        if op is None:
            return self
        attributes = op.operation.attributes
        if self.attr_name not in attributes:
            return self.default
        return self.kind.decode(attributes[self.attr_name])

    def check(self, op: ir.Operation) -> None:
        """A located DiagnosticError unless `op` carries this attribute as declared."""
        name, attributes = self.attr_name, op.attributes
        if name not in attributes:
            if self.optional:
                return
            raise error_at(op, f"requires {self.kind.expected} '{name}' attribute"
                               + (f": {self.doc}" if self.doc else ""))
        attr = attributes[name]
        if not self.kind.accepts(attr):
            raise error_at(op, f"'{name}' must be {self.kind.expected}, got {attr}")
        try:
            value = self.kind.decode(attr)
        except LayoutAttrError as error:
            raise error_at(op, f"'{name}' {error}") from None
        if self.minimum is not None and value < self.minimum:
            raise error_at(op, f"'{name}' must be at least {self.minimum}, got {value}")


# ---- ops ----------------------------------------------------------------------------------

OP_CLASSES: dict[str, type[SmaltiOp]] = {}
"""Every smalti op class, by name (the registry the verifier and the checks walk)."""


class SmaltiOp(ir.OpView):
    """Base of smalti's ops. A subclass declares OPERATION_NAME, its fields, and where apt
    TRAITS, EFFECTS, REGIONS, USER_FACING and ARCHES; defining it registers it."""

    OPERATION_NAME: ClassVar[str]
    TRAITS: ClassVar[Trait] = Trait.NONE
    EFFECTS: ClassVar[tuple[Effect, ...]] = ()
    REGIONS: ClassVar[int] = 0
    # Whether users reach the op from the DSL (then it needs a DSL entry); ops that only
    # passes or the DSL's own machinery create say False.
    USER_FACING: ClassVar[bool] = True
    # The targets that have the op (None: every one), and what an error on another target
    # calls the missing feature (see kernel.check_ops_for_arch).
    ARCHES: ClassVar[tuple[str, ...] | None] = None
    ARCH_FEATURE: ClassVar[str] = ""
    # Filled from the fields when the class is defined.
    OPERANDS: ClassVar[tuple[Operand, ...]] = ()
    RESULTS: ClassVar[tuple[Result, ...]] = ()
    ATTRIBUTES: ClassVar[tuple[Attr, ...]] = ()

    _ODS_REGIONS = (0, True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = [f for c in reversed(cls.__mro__) for f in vars(c).values()
                  if isinstance(f, Field)]
        cls.OPERANDS = tuple(f for f in fields if isinstance(f, Operand))
        cls.RESULTS = tuple(f for f in fields if isinstance(f, Result))
        cls.ATTRIBUTES = tuple(f for f in fields if isinstance(f, Attr))
        for group in (cls.OPERANDS, cls.RESULTS):
            if sum(f.variadic for f in group) > 1:
                raise TypeError(f"{cls.__name__}: at most one variadic operand and result")
        if cls.OPERATION_NAME in OP_CLASSES:
            raise TypeError(f"{cls.OPERATION_NAME} is defined twice: by "
                            f"{OP_CLASSES[cls.OPERATION_NAME].__name__} and {cls.__name__}")
        OP_CLASSES[cls.OPERATION_NAME] = cls
        cls._ODS_REGIONS = (cls.REGIONS, True)
        register_python_operation(SmaltiDialect, cls)

    # -- reading fields ----------------------------------------------------------------

    @staticmethod
    def _values(values: Sequence[ir.Value], fields: tuple[Any, ...], field: Any) -> Any:
        """The value(s) of `field` among `values`, laid out as `fields` declare."""
        position = fields.index(field)
        variadic = next((i for i, f in enumerate(fields) if f.variadic), None)
        values = list(values)
        if variadic is None or position < variadic:
            return values[position]
        extra = len(values) - len(fields)  # how many more than one the variadic holds
        if position == variadic:
            return values[variadic:variadic + extra + 1]
        return values[position + extra]

    # -- checking ----------------------------------------------------------------------

    def check_structure(self) -> None:
        """Located DiagnosticError unless the op has its declared operands, results,
        regions and attributes (the op's own verify_op then checks what they mean)."""
        op = self.operation
        for what, values, fields in (("operands", op.operands, self.OPERANDS),
                                     ("results", op.results, self.RESULTS)):
            fixed = sum(not f.variadic for f in fields)
            variadic = any(f.variadic for f in fields)
            count = len(values)
            if count < fixed or (not variadic and count != fixed):
                expected = f"at least {fixed}" if variadic else f"{fixed}"
                names = ", ".join(f.name + ("..." if f.variadic else "") for f in fields)
                raise error_at(op, f"expects {expected} {what}, got {count}"
                                   + (f" (its {what}: {names})" if names else ""))
        if len(op.regions) != self.REGIONS:
            raise error_at(op, f"expects {self.REGIONS} regions, got {len(op.regions)}")
        for attr in self.ATTRIBUTES:
            attr.check(op)

    def verify_op(self) -> None:
        """The op's own checks, after check_structure (default: none)."""

    # -- traits ------------------------------------------------------------------------

    def is_warpgroup_collective(self) -> bool:
        """Whether every thread of the warpgroup must reach the op."""
        return Trait.WARPGROUP_COLLECTIVE in self.TRAITS

    def is_block_collective(self) -> bool:
        """Whether every thread of the block must reach the op."""
        return Trait.BLOCK_COLLECTIVE in self.TRAITS

    def is_pure(self) -> bool:
        """Whether the op has no effect but its results (Trait.PURE; an op whose purity
        depends on its attributes says so here)."""
        return Trait.PURE in self.TRAITS

    def memory_effects(self) -> list[tuple[Effect, ir.Value]]:
        """Each declared effect with the operand it touches."""
        return [(effect, getattr(self, effect.operand)) for effect in self.EFFECTS]

    # -- building ----------------------------------------------------------------------

    @classmethod
    def build(cls, *, result_types: Sequence[ir.Type] = (), loc: ir.Location | None = None,
              **fields: Any) -> Self:
        """Create the op at the current insertion point: operands and attributes by field
        name (a variadic operand takes a list; optional attributes may be left out or
        None), the types of results not declared `same_type_as` an operand in order."""
        unknown = set(fields) - {f.name for f in (*cls.OPERANDS, *cls.ATTRIBUTES)}
        if unknown:
            raise TypeError(f"{cls.__name__}.build: no field {', '.join(sorted(unknown))}")
        operands: list[ir.Value] = []
        for operand in cls.OPERANDS:
            if operand.name not in fields:
                raise TypeError(f"{cls.__name__}.build: missing operand {operand.name}")
            value = fields[operand.name]
            operands.extend(value if operand.variadic else [value])
        attributes = {}
        for attr in cls.ATTRIBUTES:
            value = fields.get(attr.name)
            if value is None:
                if not attr.optional:
                    raise TypeError(f"{cls.__name__}.build: missing attribute {attr.name}")
                continue
            attributes[attr.attr_name] = (value if isinstance(value, ir.Attribute)
                                          else attr.kind.encode(value))
        types = list(result_types)
        results: list[ir.Type] = []
        for result in cls.RESULTS:
            if result.same_type_as is not None:
                results.append(fields[result.same_type_as].type)
            elif result.variadic:
                results.extend(types)
                types = []
            elif types:
                results.append(types.pop(0))
            else:
                raise TypeError(f"{cls.__name__}.build: missing the type of result "
                                f"{result.name}")
        if types:
            raise TypeError(f"{cls.__name__}.build: {len(types)} result types too many")
        op = ir.Operation.create(cls.OPERATION_NAME, results=results, operands=operands,
                                 attributes=attributes, regions=cls.REGIONS, loc=loc)
        return op.opview  # type: ignore[return-value]
