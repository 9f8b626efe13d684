"""Per-op inference rules, keyed by op name: each turns one op into constraints.

Rules write Equal(a=operand, b=result) so that explanations can say where a
`smalti.layout_cast` would split a class (see solver._cast_point).
"""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir

from smalti.dialect.attributes import attr_to_layout
from smalti.dialect.bindings import is_workgroup_address_space
from smalti.dialect.ops import LayoutCastOp, VectorLoadOp, VectorStoreOp
from smalti.layout_inference.equations import (
    SMEM,
    AllowedKinds,
    Derived,
    Equal,
    EquationSystem,
    Hint,
    IsLayout,
    Origin,
    RelayoutAllowed,
    Requires,
    Variable,
)
from smalti.layout_inference.expressions import Broadcast, Expression, Reduce, Reshape, Transpose
from smalti.layout_inference.solver import widest_strided_layout
from smalti.tiling import TiledLayout, WGSplatLayout, WGStridedLayout

MEMORY_LAYOUT_KINDS = frozenset({TiledLayout, WGStridedLayout})

# Hint priorities: what an op would like, over what it merely tolerates.
PREFERRED = 1
TOLERATED = 0


def is_vector(value: ir.Value) -> bool:
    return isinstance(value.type, ir.VectorType)


def is_smem_ref(value: ir.Value) -> bool:
    """A memref in shared memory (`#gpu.address_space<workgroup>`): it gets transforms."""
    if not isinstance(value.type, ir.MemRefType):
        return False
    return is_workgroup_address_space(ir.MemRefType(value.type).memory_space)


def needs_variable(value: ir.Value) -> bool:
    """Values the equations are about: vectors (layouts) and SMEM refs (transforms)."""
    return is_vector(value) or is_smem_ref(value)


def bitwidth(element_type: ir.Type) -> int:
    if isinstance(element_type, ir.IntegerType):
        return ir.IntegerType(element_type).width
    if isinstance(element_type, ir.FloatType):
        return ir.FloatType(element_type).width
    if isinstance(element_type, ir.IndexType):
        return 64
    raise TypeError(f"no bit width for element type {element_type}")


class RuleContext:
    """What a rule can say about one op: constraints on the variables of its vector values."""

    def __init__(self, system: EquationSystem) -> None:
        self.system = system
        self.variables: dict[ir.Value, Variable] = {}
        self.op: ir.Operation | None = None

    def var(self, value: ir.Value) -> Variable:
        """The variable of a vector (its layout) or an SMEM ref (its transforms)."""
        var = self.variables.get(value)
        if var is None:
            if is_smem_ref(value):
                ref = ir.MemRefType(value.type)
                var = self.system.new_variable(tuple(ref.shape), bitwidth(ref.element_type),
                                               value, SMEM)
            else:
                vector_type = ir.VectorType(value.type)
                var = self.system.new_variable(tuple(vector_type.shape),
                                               bitwidth(vector_type.element_type), value)
            self.variables[value] = var
        return var

    def origin(self, reason: str) -> Origin:
        assert self.op is not None
        return Origin(self.op.name, self.op.location, reason)

    def equal(self, operand: ir.Value, result: ir.Value, reason: str) -> None:
        self.system.add(Equal(self.var(operand), self.var(result), self.origin(reason)))

    def fix(self, value: ir.Value, layout, reason: str) -> None:
        self.system.add(IsLayout(self.var(value), layout, self.origin(reason)))

    def allow(self, value: ir.Value, kinds: frozenset[type], reason: str) -> None:
        self.system.add(AllowedKinds(self.var(value), kinds, self.origin(reason)))

    def derive(self, result: ir.Value, source: ir.Value, expression: Expression,
               reason: str) -> None:
        self.system.add(Derived(self.var(result), self.var(source), expression,
                                self.origin(reason)))

    def require(self, value: ir.Value, test: Callable[[object], str | None], reason: str
                ) -> None:
        """var's final layout or transforms must pass `test` (None = holds, else why not)."""
        self.system.add(Requires(self.var(value), test, self.origin(reason)))

    def relayout(self, source: ir.Value, result: ir.Value, reason: str) -> None:
        self.system.add(RelayoutAllowed(self.var(source), self.var(result), self.origin(reason)))

    def hint(self, value: ir.Value, layout, priority: int, reason: str) -> None:
        self.system.add(Hint(self.var(value), layout, priority, self.origin(reason)))


Rule = Callable[[RuleContext, ir.Operation], None]
RULES: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn

    return register


ELEMENTWISE_OPS = (
    *(f"arith.{n}" for n in (
        "addf", "subf", "mulf", "divf", "remf", "negf", "maximumf", "minimumf", "maxnumf",
        "minnumf", "addi", "subi", "muli", "divsi", "divui", "remsi", "remui", "ceildivsi",
        "ceildivui", "floordivsi", "andi", "ori", "xori", "shli", "shrsi", "shrui", "maxsi",
        "maxui", "minsi", "minui", "cmpf", "cmpi", "select", "extf", "truncf", "extsi",
        "extui", "trunci", "sitofp", "uitofp", "fptosi", "fptoui", "bitcast")),
    *(f"math.{n}" for n in (
        "absf", "absi", "atan", "atan2", "cbrt", "ceil", "copysign", "cos", "erf", "exp",
        "exp2", "expm1", "floor", "fma", "log", "log10", "log1p", "log2", "powf", "round",
        "roundeven", "rsqrt", "sin", "sqrt", "tan", "tanh", "trunc")),
)


@rule(*ELEMENTWISE_OPS)
def _elementwise(ctx: RuleContext, op: ir.Operation) -> None:
    """Operands and results of an elementwise op share one layout (scalars broadcast)."""
    results = [r for r in op.results if is_vector(r)]
    for operand in op.operands:
        if is_vector(operand):
            ctx.equal(operand, results[0], "an elementwise op's operands and result share a "
                                           "layout")
    for result in results[1:]:
        ctx.equal(results[0], result, "an elementwise op's results share a layout")


@rule("arith.constant")
def _constant(ctx: RuleContext, op: ir.Operation) -> None:
    """A splat constant can be made in any layout; a non-splat one prefers strided."""
    result = op.results[0]
    attr = op.attributes["value"]
    if isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat:
        ctx.hint(result, WGSplatLayout(), TOLERATED, "a splat constant is cheapest as a splat")
        return
    var = ctx.var(result)
    strided = widest_strided_layout(var.shape, var.bitwidth)
    if strided is not None:
        ctx.hint(result, strided, PREFERRED, "a non-splat constant is stored strided")
    ctx.allow(result, MEMORY_LAYOUT_KINDS, "a non-splat constant cannot be a splat")


@rule(VectorLoadOp.OPERATION_NAME)
def _vector_load(ctx: RuleContext, op: ir.Operation) -> None:
    _memory_access(ctx, op.results[0], "loads")


@rule(VectorStoreOp.OPERATION_NAME)
def _vector_store(ctx: RuleContext, op: ir.Operation) -> None:
    _memory_access(ctx, op.operands[0], "stores")


def _memory_access(ctx: RuleContext, value: ir.Value, verb: str) -> None:
    """Memory ops take any distributed layout and prefer the widest strided one."""
    var = ctx.var(value)
    strided = widest_strided_layout(var.shape, var.bitwidth)
    if strided is not None:
        ctx.hint(value, strided, PREFERRED, f"vector_{verb[:-1]} prefers wide strided accesses")
    ctx.allow(value, MEMORY_LAYOUT_KINDS, f"vector_{verb[:-1]} {verb} a distributed layout, "
                                          "not a splat")


@rule(LayoutCastOp.OPERATION_NAME)
def _layout_cast(ctx: RuleContext, op: ir.Operation) -> None:
    """The result has the requested layout; the operand may differ if the lowering can
    convert it."""
    ctx.relayout(op.operands[0], op.results[0], "layout_cast converts its operand's layout")
    ctx.fix(op.results[0], attr_to_layout(op.attributes["new_layout"]),
            "layout_cast sets its result's layout")


@rule("vector.broadcast", "vector.splat")
def _broadcast(ctx: RuleContext, op: ir.Operation) -> None:
    """A scalar broadcasts into any layout; a vector's layout is carried to the new shape."""
    source, result = op.operands[0], op.results[0]
    if not is_vector(source):
        ctx.hint(result, WGSplatLayout(), TOLERATED, "a broadcast scalar is cheapest as a splat")
        return
    shape = tuple(ir.VectorType(source.type).shape)
    new_shape = tuple(ir.VectorType(result.type).shape)
    added = len(new_shape) - len(shape)
    stretched = tuple(added + i for i, size in enumerate(shape)
                      if size == 1 and new_shape[added + i] != 1)
    ctx.derive(result, source, Broadcast(shape, new_shape, tuple(range(added)), stretched),
               "vector.broadcast replicates its operand's layout along the new dims")


@rule("vector.multi_reduction")
def _multi_reduction(ctx: RuleContext, op: ir.Operation) -> None:
    """The result is laid out as the reduction of the source's layout; acc matches it."""
    source, accumulator, result = op.operands[0], op.operands[1], op.results[0]
    if not is_vector(result):
        ctx.var(source)
        return
    shape = tuple(ir.VectorType(source.type).shape)
    axes = tuple(int(a) for a in ir.DenseI64ArrayAttr(op.attributes["reduction_dims"]))
    ctx.derive(result, source, Reduce(shape, axes),
               "a reduction's result takes the reduced layout of its source")
    ctx.equal(accumulator, result, "a reduction's accumulator and result share a layout")


@rule("vector.shape_cast")
def _shape_cast(ctx: RuleContext, op: ir.Operation) -> None:
    source, result = op.operands[0], op.results[0]
    ctx.derive(result, source, Reshape(tuple(ir.VectorType(source.type).shape),
                                       tuple(ir.VectorType(result.type).shape)),
               "vector.shape_cast keeps the row-major distribution of elements")


@rule("vector.transpose")
def _transpose(ctx: RuleContext, op: ir.Operation) -> None:
    source, result = op.operands[0], op.results[0]
    permutation = tuple(int(p) for p in ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    ctx.derive(result, source, Transpose(tuple(ir.VectorType(source.type).shape), permutation),
               "vector.transpose permutes its operand's layout")


@rule("scf.for")
def _for(ctx: RuleContext, op: ir.Operation) -> None:
    """A loop-carried vector has one layout: initial value, iteration argument, yielded
    value and result."""
    body = op.regions[0].blocks[0]
    yielded = list(body.operations)[-1].operands
    carried = list(op.operands)[3:]
    for init, argument, value, result in zip(carried, list(body.arguments)[1:], yielded,
                                             op.results, strict=True):
        if is_vector(result):
            reason = "a loop-carried value keeps its layout across iterations"
            ctx.equal(init, result, reason)
            ctx.equal(argument, result, reason)
            ctx.equal(value, result, reason)


@rule("scf.if")
def _if(ctx: RuleContext, op: ir.Operation) -> None:
    """Each result shares its layout with the values both branches yield for it."""
    branches = [list(region.blocks[0].operations)[-1].operands for region in op.regions
                if len(region.blocks)]
    for i, result in enumerate(op.results):
        if is_vector(result):
            for yielded in branches:
                ctx.equal(yielded[i], result, "scf.if yields one layout from both branches")


@rule("scf.yield")
def _yield(ctx: RuleContext, op: ir.Operation) -> None:
    """Constrained by the parent op (scf.for, scf.if)."""
    for operand in op.operands:
        if is_vector(operand):
            ctx.var(operand)


@rule("memref.subview", "memref.cast")
def _smem_view(ctx: RuleContext, op: ir.Operation) -> None:
    """A view of an SMEM ref keeps its transforms (views select whole tiles)."""
    source, result = op.operands[0], op.results[0]
    if is_smem_ref(source) and is_smem_ref(result):
        ctx.equal(source, result, "a view of a shared-memory ref keeps its transforms")


# Shared memory, barriers, TMA and wgmma. (Imports stay local: this section is appended.)

def _element_bytes(value: ir.Value) -> int:
    return max(bitwidth(ir.ShapedType(value.type).element_type) // 8, 1)


@rule("smalti.slice_smem")
def _slice_smem(ctx: RuleContext, op: ir.Operation) -> None:
    """A slice takes whatever transforms its users agree on (none by default)."""
    ctx.var(op.results[0])


@rule("smalti.with_transforms")
def _with_transforms(ctx: RuleContext, op: ir.Operation) -> None:
    """The ref (and so the memory it views) has exactly the given transforms."""
    from smalti.dialect.attributes import attr_to_transforms

    ctx.equal(op.operands[0], op.results[0], "with_transforms views the same memory")
    ctx.fix(op.results[0], tuple(attr_to_transforms(op.attributes["transforms"])),
            "with_transforms sets the transforms")


def _with_smem_ref(register_rule: Rule, position: int) -> Rule:
    """`register_rule`, plus a variable for an SMEM ref operand (so in_transforms are written)."""

    def extended(ctx: RuleContext, op: ir.Operation) -> None:
        register_rule(ctx, op)
        if is_smem_ref(op.operands[position]):
            ctx.var(op.operands[position])

    return extended


RULES[VectorLoadOp.OPERATION_NAME] = _with_smem_ref(_vector_load, 0)
RULES[VectorStoreOp.OPERATION_NAME] = _with_smem_ref(_vector_store, 1)


@rule("smalti.initialize_barrier", "smalti.arrive", "smalti.arrive_expect_tx", "smalti.wait")
def _barriers(ctx: RuleContext, op: ir.Operation) -> None:
    ctx.fix(op.operands[0], (), "an mbarrier array is a plain array of 8-byte objects")


def tma_hint(shape: tuple[int, ...], element_bytes: int) -> tuple:
    """The widest swizzle whose tiles TMA can write for this shape, as tall as a box allows
    (few boxes per copy), or no transforms."""
    from smalti.tiling import SwizzleTransform, TileTransform
    from smalti.tiling.smem import tall_tile_rows

    if len(shape) < 2 or shape[-2] % 8:
        return ()
    for span in (128, 64, 32):
        if span % element_bytes == 0 and shape[-1] % (span // element_bytes) == 0:
            return (TileTransform((tall_tile_rows(shape[-2]), span // element_bytes)),
                    SwizzleTransform(span))
    return ()


def _tma_ref(ctx: RuleContext, ref: ir.Value, verb: str,
             part: tuple[int, ...] | None = None) -> None:
    """TMA-compatible transforms for `ref`; with `part` (what one CTA of a collective load
    copies), tiles that the part also divides into."""
    from smalti.tiling import tma_incompatibility

    shape, size = tuple(ir.MemRefType(ref.type).shape), _element_bytes(ref)
    part = part or shape
    ctx.hint(ref, tma_hint(part, size), TOLERATED, f"TMA {verb} swizzled tiles fastest")
    ctx.require(ref, lambda t: tma_incompatibility(t, size, shape),
                f"TMA {verb} this shared-memory ref")
    if part != shape:
        ctx.require(ref, lambda t: tma_incompatibility(t, size, part),
                    f"TMA {verb} each collective part {list(part)} of this shared-memory ref")


@rule("smalti.async_load")
def _async_load(ctx: RuleContext, op: ir.Operation) -> None:
    from smalti.dialect.ops_memory import collective_part_shape

    ctx.fix(op.operands[2], (), "an mbarrier array is a plain array of 8-byte objects")
    _tma_ref(ctx, op.operands[1], "writes", collective_part_shape(op))


@rule("smalti.async_store")
def _async_store(ctx: RuleContext, op: ir.Operation) -> None:
    _tma_ref(ctx, op.operands[0], "reads")


def wgmma_operand_problem(transforms: tuple, shape: tuple[int, ...], element_bytes: int,
                          k_major: str | None = None, operand: str | None = None) -> str | None:
    """Why wgmma cannot read an operand stored with `transforms`, or None if it can: 8-row
    tiles one swizzle span wide, swizzled, optionally after a 2-D transpose. `k_major`, for
    an operand wgmma cannot transpose (f32, f8), is "A" or "B": then the transpose is
    required (B) or forbidden (A), so K is contiguous in memory. With `operand` ("A" or
    "B"), also that one descriptor per instruction describes it (`wgmma_stride_problem`)."""
    from smalti.tiling import (
        LayoutError,
        SwizzleTransform,
        TileTransform,
        TransposeTransform,
        physical_shape,
    )
    from smalti.tiling.smem import wgmma_stride_problem

    body = tuple(transforms)
    transposed = bool(body) and body[0] == TransposeTransform((1, 0))
    if transposed:
        body = body[1:]
    if k_major is not None and transposed != (k_major == "B"):
        return (f"wgmma reads this {k_major} only K-major (it transposes only bf16/f16): "
                + ("store B as N x K and view it transposed" if k_major == "B"
                   else "store A as M x K, not transposed"))
    match body:
        case (TileTransform(tiling=(rows, cols)), SwizzleTransform(swizzle_bytes=span)):
            if rows % 8 or cols * element_bytes != span:
                return (f"wgmma reads tiles of 8k rows and one {span}-byte swizzle span, not "
                        f"{rows}x{cols}")
        case _:
            return ("wgmma reads shared memory as 2-D tiles then a swizzle, optionally "
                    "transposed first")
    try:
        physical_shape(transforms, shape, element_bytes)
    except LayoutError as error:
        return str(error)
    if operand is not None:
        return wgmma_stride_problem(transforms, shape, element_bytes, operand)
    return None


@rule("smalti.wgmma")
def _wgmma(ctx: RuleContext, op: ir.Operation) -> None:
    """The accumulator lives in the WGMMA layout, A in registers in the A fragment layout of
    its bit width; SMEM operands in canonical swizzled tiles."""
    from smalti.tiling import WGMMA_A_LAYOUTS, WGMMA_LAYOUT, LayoutError, wgmma_operand_transforms
    from smalti.tiling.smem import tall_tile_rows

    acc, a, b = op.operands
    ctx.fix(acc, WGMMA_LAYOUT, "wgmma accumulates in the WGMMA register layout")
    ctx.equal(acc, op.results[0], "wgmma's result replaces its accumulator")
    if is_vector(a):
        bits = bitwidth(ir.VectorType(a.type).element_type)
        if bits in WGMMA_A_LAYOUTS:  # other types: the verifier reports them
            ctx.fix(a, WGMMA_A_LAYOUTS[bits], f"wgmma reads {bits}-bit A from registers in "
                                              f"the {bits}-bit A fragment layout")
    for name, ref in (("A", a), ("B", b)):
        if not is_smem_ref(ref):
            continue
        shape, size = tuple(ir.MemRefType(ref.type).shape), _element_bytes(ref)
        k_major = None if size == 2 else name  # wgmma transposes only 16-bit operands
        transposed = k_major == "B"
        rows = shape[1] if transposed else shape[0]
        for span in (128, 64, 32):
            try:
                canonical = wgmma_operand_transforms(shape, size, span, transposed=transposed,
                                                     tile_rows=tall_tile_rows(rows))
            except LayoutError:
                continue
            ctx.hint(ref, canonical, PREFERRED, "wgmma reads swizzled tiles fastest (tall "
                     "ones, for few TMA boxes)" + ("" if k_major is None else
                     f"; {k_major} only K-major" + (" (stored N x K)" if transposed else "")))
            break
        ctx.require(ref, lambda t, s=shape, e=size, k=k_major, n=name:
                    wgmma_operand_problem(t, s, e, k, operand=n),
                    "wgmma reads this operand from shared memory")


@rule("smalti.broadcast_in_dim")
def _broadcast_in_dim(ctx: RuleContext, op: ir.Operation) -> None:
    """The operand's layout carried to the result, the unlisted dims being the new ones."""
    source, result = op.operands[0], op.results[0]
    shape = tuple(ir.VectorType(source.type).shape)
    new_shape = tuple(ir.VectorType(result.type).shape)
    dims = tuple(int(d) for d in ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
    added = tuple(d for d in range(len(new_shape)) if d not in dims)
    stretched = tuple(d for i, d in enumerate(dims) if shape[i] == 1 and new_shape[d] != 1)
    ctx.derive(result, source, Broadcast(shape, new_shape, added, stretched),
               "broadcast_in_dim replicates its operand's layout along the new dims")


@rule("smalti.iota")
def _iota(ctx: RuleContext, op: ir.Operation) -> None:
    """Any distributed layout works (each thread computes its indices); strided is widest."""
    result = op.results[0]
    var = ctx.var(result)
    strided = widest_strided_layout(var.shape, var.bitwidth)
    if strided is not None:
        ctx.hint(result, strided, TOLERATED, "iota is cheapest in a wide strided layout")
    ctx.allow(result, MEMORY_LAYOUT_KINDS, "iota holds distinct values, not a splat")


@rule("smalti.optimization_barrier")
def _optimization_barrier(ctx: RuleContext, op: ir.Operation) -> None:
    """Each result is its operand: one layout."""
    for operand, result in zip(op.operands, op.results, strict=True):
        if is_vector(result):
            ctx.equal(operand, result, "optimization_barrier passes values through")


# Strided slices: whole register vectors of a tiled layout (or a splat) move as they are.

def _slice_alignment(offsets: tuple[int, ...], sizes: tuple[int, ...], shape: tuple[int, ...]
                     ) -> Callable[[object], str | None]:
    """A test that a slice consists of whole tiles of the layout's first tiling level."""

    def test(layout: object) -> str | None:
        if isinstance(layout, WGSplatLayout):
            return None
        if not isinstance(layout, TiledLayout):
            return "only tiled and splat layouts can be sliced without moving data"
        tile = layout.tiling.tiles[0]
        for dim, size in zip(range(len(shape) - len(tile), len(shape)), tile, strict=True):
            if offsets[dim] % size or sizes[dim] % size:
                return (f"the slice [{offsets[dim]}, {offsets[dim] + sizes[dim]}) of dim {dim} "
                        f"cuts through the layout's {list(tile)} tiles")
        return None

    return test


def _slice_geometry(op: ir.Operation, large: ir.Value) -> tuple[tuple[int, ...], ...]:
    shape = tuple(ir.VectorType(large.type).shape)
    offsets = tuple(int(ir.IntegerAttr(a).value) for a in op.attributes["offsets"])
    offsets = offsets + (0,) * (len(shape) - len(offsets))
    return shape, offsets


@rule("vector.extract_strided_slice")
def _extract_strided_slice(ctx: RuleContext, op: ir.Operation) -> None:
    """The slice keeps the layout of its source; it must be made of whole tiles."""
    source, result = op.operands[0], op.results[0]
    shape, offsets = _slice_geometry(op, source)
    sizes = tuple(ir.VectorType(result.type).shape)
    ctx.equal(source, result, "a slice keeps its source's layout")
    ctx.require(source, _slice_alignment(offsets, sizes, shape),
                "vector.extract_strided_slice takes whole tiles")


@rule("vector.insert_strided_slice")
def _insert_strided_slice(ctx: RuleContext, op: ir.Operation) -> None:
    """The inserted value, the destination and the result share a layout; whole tiles."""
    source, destination, result = op.operands[0], op.operands[1], op.results[0]
    shape, offsets = _slice_geometry(op, destination)
    sizes = tuple(ir.VectorType(source.type).shape)
    ctx.equal(source, result, "an inserted slice has its destination's layout")
    ctx.equal(destination, result, "insert_strided_slice keeps the destination's layout")
    ctx.require(destination, _slice_alignment(offsets, sizes, shape),
                "vector.insert_strided_slice writes whole tiles")


@rule("smalti.debug_print")
def _debug_print(ctx: RuleContext, op: ir.Operation) -> None:
    """A printed vector may have any layout, splat included: the host reassembles it."""
    ctx.var(op.operands[0])
