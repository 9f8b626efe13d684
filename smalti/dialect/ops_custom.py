"""custom_primitive: per-thread code over the registers of declared layouts (escape hatch).

    %r = "smalti.custom_primitive"(%x, %smem) ({
    ^bb0(%x0: f32, %x1: f32, ..., %smem_address: i32):
      %y0 = arith.mulf %x0, %x0 : f32
      ...
      "smalti.custom_yield"(%y0, %y1, ...) : (f32, f32, ...) -> ()
    }) {in_layouts = [#smalti.tiled<...>], out_layouts = [#smalti.tiled<...>],
        in_transforms = [[#smalti.tile<[64, 64]>, #smalti.swizzle<128>]]}
       : (vector<128x64xf32>, memref<128x64xf32, #gpu.address_space<workgroup>>)
       -> vector<128x64xf32>

Like Mosaic GPU's `CustomPrimitiveOp`: the layouts and shared-memory transforms are declared,
and inference takes them as given (the rest of the kernel adapts, with relayouts). The body
runs once per thread. Its block arguments are, operand by operand, the thread's elements of
each vector in register order (the order of `Distribution.register_origins`, each register
vector's elements lowest first), one scalar each; and for each shared-memory ref, the
32-bit shared-window address of its first byte (its bytes are laid out by its transforms).
The terminator yields the thread's elements of each result, in the same order.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.attributes import (
    attr_to_layouts,
    attr_to_transforms,
    layouts_to_attr,
    transforms_to_attr,
)
from smalti.dialect.bindings import type_name
from smalti.dialect.checks import check_smem_ref, is_smem_type
from smalti.dialect.definition import (
    Attr,
    AttrKind,
    Effect,
    Operand,
    Result,
    SmaltiOp,
)
from smalti.dialect.diagnostics import error_at
from smalti.tiling import Layout, LayoutError, WGSplatLayout, check_layout_fits

# Element types a body holds one per scalar register.
SCALAR_ELEMENTS = frozenset({"f32", "f16", "bf16", "i32", "i16"})
ADDRESS_TYPE = "i32"  # a shared-memory ref's block argument: its .u32 shared address


def _is_array(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.ArrayAttr)


LAYOUTS = AttrKind("an array of #smalti layouts", _is_array, lambda a: tuple(attr_to_layouts(a)),
                   lambda v: layouts_to_attr(list(v)))
TRANSFORM_LISTS = AttrKind(
    "an array of arrays of #smalti SMEM transforms",
    lambda a: _is_array(a) and all(_is_array(x) for x in ir.ArrayAttr(a)),
    lambda a: tuple(tuple(attr_to_transforms(x)) for x in ir.ArrayAttr(a)),
    lambda v: ir.ArrayAttr.get([transforms_to_attr(list(t)) for t in v]))


def elements_per_thread(layout: Layout, shape: tuple[int, ...]) -> int:
    """How many elements of an array of `shape` in `layout` one thread holds."""
    if isinstance(layout, WGSplatLayout):
        return 1
    distribution = layout.distribution(shape)
    return distribution.num_registers * distribution.vector_length


def element_name(t: ir.Type) -> str:
    return type_name(t) or str(t)


class CustomPrimitiveOp(SmaltiOp):
    """Per-thread code over the fragments of vectors in declared layouts and of shared-memory
    refs with declared transforms (module docstring).

    Well formed: operands are vectors then shared-memory refs; `in_layouts` has one layout
    per vector operand, `out_layouts` one per (vector) result, `in_transforms` one list per
    ref, each layout fitting its shape; the one block's arguments are each vector operand's
    per-thread elements (element type, count from its layout) then each ref's i32 address;
    the body computes on scalars only and ends with a custom_yield of each result's
    per-thread elements."""

    OPERATION_NAME = "smalti.custom_primitive"
    REGIONS = 1
    # The body may read and write the refs' shared memory through the generic proxy.
    EFFECTS = (Effect.read("values"), Effect.write("values"))

    values = Operand("the vectors, then the shared-memory refs", variadic=True)
    outputs = Result("the vectors the body yields", variadic=True)
    in_layouts = Attr(LAYOUTS, "the layout of each vector operand", optional=True, default=())
    out_layouts = Attr(LAYOUTS, "the layout of each result", optional=True, default=())
    in_transforms = Attr(TRANSFORM_LISTS, "the transforms of each shared-memory ref",
                         optional=True, default=())

    @property
    def vectors(self) -> list[ir.Value]:
        return [v for v in self.values if isinstance(v.type, ir.VectorType)]

    @property
    def refs(self) -> list[ir.Value]:
        return [v for v in self.values if not isinstance(v.type, ir.VectorType)]

    @property
    def body(self) -> ir.Block:
        return self.operation.regions[0].blocks[0]

    def memory_effects(self) -> list[tuple[Effect, ir.Value]]:
        """A read and a write of each shared-memory ref (the body may do either)."""
        return [(effect, ref) for ref in self.refs for effect in self.EFFECTS]

    def register_counts(self) -> tuple[list[int], list[int]]:
        """Per-thread elements of each vector operand and of each result (after verify)."""
        def counts(values: list[ir.Value], layouts: tuple[Layout, ...]) -> list[int]:
            return [elements_per_thread(layout, tuple(ir.VectorType(v.type).shape))
                    for v, layout in zip(values, layouts, strict=True)]

        return counts(self.vectors, self.in_layouts), counts(list(self.outputs),
                                                             self.out_layouts)

    def verify_op(self) -> None:
        op = self.operation
        self._check_operands()
        for what, values, layouts in (("in_layouts", self.vectors, self.in_layouts),
                                      ("out_layouts", list(self.outputs), self.out_layouts)):
            if len(layouts) != len(values):
                raise error_at(op, f"'{what}' has {len(layouts)} layouts for {len(values)} "
                                   "vector " + ("operands" if what[:2] == "in" else "results"))
            for i, (value, layout) in enumerate(zip(values, layouts, strict=True)):
                shape = tuple(ir.VectorType(value.type).shape)
                try:
                    check_layout_fits(layout, shape)
                except LayoutError as error:
                    raise error_at(op, f"'{what}' #{i} does not fit {value.type}: {error}"
                                   ) from None
        if len(self.in_transforms) != len(self.refs):
            raise error_at(op, f"'in_transforms' has {len(self.in_transforms)} entries for "
                               f"{len(self.refs)} shared-memory refs")
        if len(op.regions[0].blocks) != 1:
            raise error_at(op, "expects a region of one block")
        operand_counts, result_counts = self.register_counts()
        self._check_arguments(operand_counts)
        self._check_body(result_counts)

    def _check_operands(self) -> None:
        op = self.operation
        seen_ref = False
        for i, value in enumerate(self.values):
            if isinstance(value.type, ir.VectorType):
                if seen_ref:
                    raise error_at(op, f"operand #{i}: vectors must come before the "
                                       "shared-memory refs")
                _check_element(op, ir.VectorType(value.type).element_type, f"operand #{i}")
            elif is_smem_type(value.type):
                check_smem_ref(op, value, f"operand #{i}")
                seen_ref = True
            else:
                raise error_at(op, f"operand #{i} must be a vector or a shared-memory ref, got "
                                   f"{value.type}")
        for i, value in enumerate(self.outputs):
            if not isinstance(value.type, ir.VectorType):
                raise error_at(op, f"result #{i} must be a vector, got {value.type}")
            _check_element(op, ir.VectorType(value.type).element_type, f"result #{i}")

    def _check_arguments(self, counts: list[int]) -> None:
        """Block arguments: each vector operand's elements, then each ref's address."""
        op = self.operation
        expected = [element_name(ir.VectorType(v.type).element_type)
                    for v, n in zip(self.vectors, counts, strict=True) for _ in range(n)]
        expected += [ADDRESS_TYPE] * len(self.refs)
        got = [element_name(a.type) for a in self.body.arguments]
        if len(got) != len(expected):
            raise error_at(op, f"expects {len(expected)} block arguments (per-thread elements "
                               f"{counts} of the vector operands, then {len(self.refs)} "
                               f"shared-memory addresses), got {len(got)}")
        for i, (want, have) in enumerate(zip(expected, got, strict=True)):
            if want != have:
                raise error_at(op, f"block argument #{i} has type {have}, expected {want}")

    def _check_body(self, counts: list[int]) -> None:
        """Scalar ops only (no vectors, refs or regions), ending in custom_yield of each
        result's per-thread elements."""
        op = self.operation
        ops = list(self.body.operations)
        for inner in ops:
            inner = inner.operation
            values = [*inner.operands, *inner.results]
            if len(inner.regions):
                raise error_at(inner, "is not allowed in a custom_primitive body: the body is "
                                      "straight-line per-thread code")
            if any(isinstance(v.type, (ir.VectorType, ir.MemRefType)) for v in values):
                raise error_at(inner, "is not allowed in a custom_primitive body: the body "
                                      "computes on scalars (the thread's registers)")
        terminator = ops[-1].operation if ops else None
        if terminator is None or terminator.name != CustomYieldOp.OPERATION_NAME:
            raise error_at(op, "expects its body to end with 'smalti.custom_yield'")
        expected = [element_name(ir.VectorType(r.type).element_type)
                    for r, n in zip(self.outputs, counts, strict=True) for _ in range(n)]
        got = [element_name(v.type) for v in terminator.operands]
        if len(got) != len(expected):
            raise error_at(terminator, f"yields {len(got)} values; the results' layouts give "
                                       f"each thread {counts} elements")
        for i, (want, have) in enumerate(zip(expected, got, strict=True)):
            if want != have:
                raise error_at(terminator, f"value #{i} has type {have}, expected {want}")


def _check_element(op: ir.Operation, element: ir.Type, what: str) -> None:
    name = element_name(element)
    if name not in SCALAR_ELEMENTS:
        raise error_at(op, f"{what} has element type {name}; a custom_primitive holds "
                           f"one of {', '.join(sorted(SCALAR_ELEMENTS))} per register")


class CustomYieldOp(SmaltiOp):
    """Ends a custom_primitive body: the thread's elements of each result, in order."""

    OPERATION_NAME = "smalti.custom_yield"
    USER_FACING = False  # sd.custom_primitive writes it from the body's return value

    values = Operand("the thread's result elements", variadic=True)

    def verify_op(self) -> None:
        parent = self.operation.parent
        if parent is None or parent.name != CustomPrimitiveOp.OPERATION_NAME:
            raise error_at(self.operation, "expects to end a 'smalti.custom_primitive' body")
        if list(parent.opview.body.operations)[-1].operation != self.operation:
            raise error_at(self.operation, "must be the last op of the body")

