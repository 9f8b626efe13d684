"""Per-op inference rules, keyed by op class: each turns one op into constraints.

A rule is `fn(ctx, op)` with `op` the typed op (its OpView), read by field name. Rules write
Equal(a=operand, b=result) so that explanations can say where a `smalti.layout_cast` would
split a class (see solver._cast_point).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, memref, scf, vector
from jaxlib.mlir.dialects import math as math_ops

from smalti.dialect.checks import bitwidth, element_bytes, is_smem_type
from smalti.dialect.definition import SmaltiOp
from smalti.dialect.ops import LayoutCastOp, VectorLoadOp, VectorStoreOp
from smalti.dialect.ops_collective import (
    DeviceCountOp,
    DeviceIndexOp,
    MultimemLoadReduceOp,
    MultimemRedOp,
    MultimemStoreOp,
    RemoteRefOp,
    SemaphoreSignalOp,
    SemaphoreWaitOp,
    SliceSymmetricOp,
)
from smalti.dialect.ops_compute import BroadcastInDimOp, IotaOp, OptimizationBarrierOp
from smalti.dialect.ops_debug import DebugPrintOp
from smalti.dialect.ops_dynamic import LoadScalarOp, MaskedLoadOp, MaskedStoreOp
from smalti.dialect.ops_inline import InlinePtxOp
from smalti.dialect.ops_launch_control import RoleTilesOp
from smalti.dialect.ops_memory import (
    AsyncLoadOp,
    AsyncStoreOp,
    SelectStageOp,
    SliceSmemOp,
    WithTransformsOp,
)
from smalti.dialect.ops_mma import WgmmaOp
from smalti.dialect.ops_sync import (
    ArriveExpectTxOp,
    ArriveOp,
    InitializeBarrierOp,
    InvalidateBarrierOp,
    WaitOp,
)
from smalti.dialect.ops_tcgen05 import Tcgen05CommitOp, Tcgen05CpOp, Tcgen05MmaOp
from smalti.dialect.ops_tmem import (
    TmemAllocOp,
    TmemDeallocOp,
    TmemLoadOp,
    TmemStageOp,
    TmemStoreOp,
)
from smalti.dialect.ops_tmem_shared import TmemAllocSharedOp
from smalti.dialect.registry import OpRegistry
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
from smalti.layout_inference.expressions import (
    Broadcast,
    Expression,
    Reduce,
    Reshape,
    Transpose,
    Unbroadcast,
)
from smalti.layout_inference.solver import fits, widest_strided_layout
from smalti.tiling import (
    WGMMA_A_LAYOUTS,
    WGMMA_LAYOUT,
    WGMMA_LAYOUT_8BIT,
    WGMMA_LAYOUT_TF32_A,
    WGMMA_TRANSPOSED_LAYOUT,
    LayoutError,
    SwizzleTransform,
    TiledLayout,
    TileTransform,
    TransposeTransform,
    WGSplatLayout,
    WGStridedLayout,
    tma_incompatibility,
    tmem_accesses,
    tmem_layout,
    wgmma_operand_transforms,
)
from smalti.tiling.smem import swizzled_tiles_problem, tall_tile_rows, wgmma_stride_problem
from smalti.tiling.tmem import tmem_row_layout

MEMORY_LAYOUT_KINDS = frozenset({TiledLayout, WGStridedLayout})

# Hint priorities: what an op would like, over what it merely tolerates.
PREFERRED = 1
TOLERATED = 0


def is_vector(value: ir.Value) -> bool:
    return isinstance(value.type, ir.VectorType)


def is_smem_ref(value: ir.Value) -> bool:
    """A memref in shared memory (`#gpu.address_space<workgroup>`): it gets transforms."""
    return is_smem_type(value.type)


def needs_variable(value: ir.Value) -> bool:
    """Values the equations are about: vectors (layouts) and SMEM refs (transforms)."""
    return is_vector(value) or is_smem_ref(value)


class RuleContext:
    """What a rule can say about one op: constraints on the variables of its vector values."""

    def __init__(self, system: EquationSystem) -> None:
        self.system = system
        self.variables: dict[ir.Value, Variable] = {}
        self.op: ir.OpView | None = None

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
        return Origin(self.op.operation.name, self.op.location, reason, self.op.operation)

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


Rule = Callable[[RuleContext, Any], None]
RULES: OpRegistry[Rule] = OpRegistry("layout inference rules")
rule = RULES.register

ELEMENTWISE_OPS: tuple[type[ir.OpView], ...] = (
    arith.AddFOp, arith.SubFOp, arith.MulFOp, arith.DivFOp, arith.RemFOp, arith.NegFOp,
    arith.MaximumFOp, arith.MinimumFOp, arith.MaxNumFOp, arith.MinNumFOp, arith.AddIOp,
    arith.SubIOp, arith.MulIOp, arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp,
    arith.CeilDivSIOp, arith.CeilDivUIOp, arith.FloorDivSIOp, arith.AndIOp, arith.OrIOp,
    arith.XOrIOp, arith.ShLIOp, arith.ShRSIOp, arith.ShRUIOp, arith.MaxSIOp, arith.MaxUIOp,
    arith.MinSIOp, arith.MinUIOp, arith.CmpFOp, arith.CmpIOp, arith.SelectOp, arith.ExtFOp,
    arith.TruncFOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp, arith.SIToFPOp,
    arith.UIToFPOp, arith.FPToSIOp, arith.FPToUIOp, arith.BitcastOp,
    math_ops.AbsFOp, math_ops.AbsIOp, math_ops.AtanOp, math_ops.Atan2Op, math_ops.CbrtOp,
    math_ops.CeilOp, math_ops.CopySignOp, math_ops.CosOp, math_ops.ErfOp, math_ops.ExpOp,
    math_ops.Exp2Op, math_ops.ExpM1Op, math_ops.FloorOp, math_ops.FmaOp, math_ops.LogOp,
    math_ops.Log10Op, math_ops.Log1pOp, math_ops.Log2Op, math_ops.PowFOp, math_ops.RoundOp,
    math_ops.RoundEvenOp, math_ops.RsqrtOp, math_ops.SinOp, math_ops.SqrtOp, math_ops.TanOp,
    math_ops.TanhOp, math_ops.TruncOp, InlinePtxOp,
)


@rule(*ELEMENTWISE_OPS)
def _elementwise(ctx: RuleContext, op: ir.OpView) -> None:
    """Operands and results of an elementwise op share one layout (scalars broadcast)."""
    results = [r for r in op.operation.results if is_vector(r)]
    for operand in op.operation.operands:
        if is_vector(operand):
            ctx.equal(operand, results[0], "an elementwise op's operands and result share a "
                                           "layout")
    for result in results[1:]:
        ctx.equal(results[0], result, "an elementwise op's results share a layout")


@rule(arith.ConstantOp)
def _constant(ctx: RuleContext, op: arith.ConstantOp) -> None:
    """A splat constant can be made in any layout; a non-splat one prefers strided."""
    result, attr = op.result, op.value
    if isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat:
        ctx.hint(result, WGSplatLayout(), TOLERATED, "a splat constant is cheapest as a splat")
        return
    var = ctx.var(result)
    strided = widest_strided_layout(var.shape, var.bitwidth)
    if strided is not None:
        ctx.hint(result, strided, PREFERRED, "a non-splat constant is stored strided")
    ctx.allow(result, MEMORY_LAYOUT_KINDS, "a non-splat constant cannot be a splat")


@rule(VectorLoadOp)
def _vector_load(ctx: RuleContext, op: VectorLoadOp) -> None:
    if is_smem_ref(op.source):
        _memory_access(ctx, op.result, "loads")
        ctx.var(op.source)  # so that its in_transforms are written
    elif math.prod(ctx.var(op.result).shape) == 1:  # one element: every thread reads it
        ctx.hint(op.result, WGSplatLayout(), PREFERRED, "one element loads as a splat")
    else:
        _memory_access(ctx, op.result, "loads")


@rule(VectorStoreOp)
def _vector_store(ctx: RuleContext, op: VectorStoreOp) -> None:
    _memory_access(ctx, op.value, "stores")
    if is_smem_ref(op.destination):
        ctx.var(op.destination)


def _memory_access(ctx: RuleContext, value: ir.Value, verb: str,
                   name: str | None = None) -> None:
    """Memory ops take any distributed layout and prefer the widest strided one (an i1 is
    a byte in memory: 16 of them make the widest access, not 128; 32 4-bit elements make
    one). `name` is the op's, for explanations (default vector_load / vector_store)."""
    name = name or f"vector_{verb[:-1]}"
    var = ctx.var(value)
    strided = widest_strided_layout(var.shape, 8 if var.bitwidth == 1 else var.bitwidth)
    if strided is not None:
        ctx.hint(value, strided, PREFERRED, f"{name} prefers wide strided accesses")
    ctx.allow(value, MEMORY_LAYOUT_KINDS, f"{name} {verb} a distributed layout, not a splat")


@rule(LoadScalarOp)
def _load_scalar(ctx: RuleContext, op: LoadScalarOp) -> None:
    """A scalar read from global memory has no layout: it constrains nothing."""
    del ctx, op


@rule(MaskedLoadOp)
def _masked_load(ctx: RuleContext, op: MaskedLoadOp) -> None:
    """As vector_load; the mask and `other` take the result's layout (one predicate and one
    fallback element per loaded element, in the same registers)."""
    _memory_access(ctx, op.result, "loads", "masked_load")
    ctx.equal(op.mask, op.result, "a masked load's mask has its result's layout")
    ctx.equal(op.other, op.result, "a masked load's 'other' has its result's layout")


@rule(MaskedStoreOp)
def _masked_store(ctx: RuleContext, op: MaskedStoreOp) -> None:
    """As vector_store; the mask takes the stored value's layout."""
    _memory_access(ctx, op.value, "stores", "masked_store")
    ctx.equal(op.mask, op.value, "a masked store's mask has its value's layout")


@rule(LayoutCastOp)
def _layout_cast(ctx: RuleContext, op: LayoutCastOp) -> None:
    """The result has the requested layout; the operand may differ if the lowering can
    convert it."""
    ctx.relayout(op.source, op.result, "layout_cast converts its operand's layout")
    ctx.fix(op.result, op.new_layout, "layout_cast sets its result's layout")


@rule(vector.BroadcastOp)
def _broadcast(ctx: RuleContext, op: vector.BroadcastOp) -> None:
    """A scalar broadcasts into any layout; a vector's layout is carried to the new shape."""
    source, result = op.source, op.result
    if not is_vector(source):
        ctx.hint(result, WGSplatLayout(), TOLERATED, "a broadcast scalar is cheapest as a splat")
        return
    shape = tuple(ir.VectorType(source.type).shape)
    new_shape = tuple(ir.VectorType(result.type).shape)
    added = len(new_shape) - len(shape)
    stretched = tuple(added + i for i, size in enumerate(shape)
                      if size == 1 and new_shape[added + i] != 1)
    _derive_broadcast(ctx, source, result, Broadcast(shape, new_shape, tuple(range(added)),
                                                     stretched), "vector.broadcast")


def _derive_broadcast(ctx: RuleContext, source: ir.Value, result: ir.Value,
                      broadcast: Broadcast, name: str) -> None:
    """A broadcast moves no data when every thread holds the operand elements of the
    result elements it holds: the operand's layout is then the reduction of the result's
    over the new dims. Any result layout whose reduction the operand has will do (the
    tf32 A fragment layout as well as the accumulator's), so the operand's layout is
    derived from the result's, not the other way round; a known operand layout suggests
    the canonical broadcast of it (smalti.tiling.broadcast_layout). Stretched size-1 dims
    keep the forward rule (only a splat stretches)."""
    if broadcast.stretched:
        ctx.derive(result, source, broadcast,
                   f"{name} replicates its operand's layout along the new dims")
        return
    ctx.derive(source, result, Unbroadcast(broadcast.new_shape, broadcast.axes),
               f"{name} moves no data: its operand's layout is the reduction of its "
               "result's over the new dims")


@rule(vector.MultiDimReductionOp)
def _multi_reduction(ctx: RuleContext, op: vector.MultiDimReductionOp) -> None:
    """The result is laid out as the reduction of the source's layout; acc matches it."""
    source, accumulator, result = op.source, op.acc, op.dest
    if not is_vector(result):
        ctx.var(source)
        return
    shape = tuple(ir.VectorType(source.type).shape)
    axes = tuple(int(a) for a in ir.DenseI64ArrayAttr(op.reduction_dims))
    ctx.derive(result, source, Reduce(shape, axes),
               "a reduction's result takes the reduced layout of its source")
    ctx.equal(accumulator, result, "a reduction's accumulator and result share a layout")


@rule(vector.ShapeCastOp)
def _shape_cast(ctx: RuleContext, op: vector.ShapeCastOp) -> None:
    source, result = op.source, op.result
    ctx.derive(result, source, Reshape(tuple(ir.VectorType(source.type).shape),
                                       tuple(ir.VectorType(result.type).shape)),
               "vector.shape_cast keeps the row-major distribution of elements")


@rule(vector.TransposeOp)
def _transpose(ctx: RuleContext, op: vector.TransposeOp) -> None:
    source, result = op.vector, op.result
    permutation = tuple(int(p) for p in ir.DenseI64ArrayAttr(op.permutation))
    ctx.derive(result, source, Transpose(tuple(ir.VectorType(source.type).shape), permutation),
               "vector.transpose permutes its operand's layout")


def _yielded(block: ir.Block) -> list[ir.Value]:
    """The operands of the scf.yield ending `block`."""
    return list(list(block.operations)[-1].operation.operands)


@rule(scf.ForOp)
def _for(ctx: RuleContext, op: scf.ForOp) -> None:
    """A loop-carried vector has one layout: initial value, iteration argument, yielded
    value and result."""
    for init, argument, value, result in zip(op.initArgs, op.inner_iter_args,
                                             _yielded(op.body), op.results, strict=True):
        if is_vector(result):
            reason = "a loop-carried value keeps its layout across iterations"
            ctx.equal(init, result, reason)
            ctx.equal(argument, result, reason)
            ctx.equal(value, result, reason)


@rule(scf.IfOp)
def _if(ctx: RuleContext, op: scf.IfOp) -> None:
    """Each result shares its layout with the values both branches yield for it."""
    branches = [_yielded(region.blocks[0]) for region in (op.thenRegion, op.elseRegion)
                if len(region.blocks)]
    for i, result in enumerate(op.results):
        if is_vector(result):
            for yielded in branches:
                ctx.equal(yielded[i], result, "scf.if yields one layout from both branches")


@rule(scf.YieldOp)
def _yield(ctx: RuleContext, op: scf.YieldOp) -> None:
    """Constrained by the parent op (scf.for, scf.if)."""
    for operand in op.operation.operands:
        if is_vector(operand):
            ctx.var(operand)


@rule(memref.SubViewOp, memref.CastOp)
def _smem_view(ctx: RuleContext, op: memref.SubViewOp | memref.CastOp) -> None:
    """A view of an SMEM ref keeps its transforms (views select whole tiles)."""
    source, result = op.source, op.result
    if is_smem_ref(source) and is_smem_ref(result):
        ctx.equal(source, result, "a view of a shared-memory ref keeps its transforms")


# Shared memory, barriers, TMA and wgmma.

@rule(SliceSymmetricOp, RemoteRefOp, DeviceIndexOp, DeviceCountOp, SemaphoreSignalOp,
      SemaphoreWaitOp)
def _collective_scalars(ctx: RuleContext, op: SmaltiOp) -> None:
    """Symmetric refs are global memory (no transforms) and device indices are scalars:
    these ops constrain nothing."""
    del ctx, op


@rule(MultimemStoreOp)
def _multimem_store(ctx: RuleContext, op: MultimemStoreOp) -> None:
    _memory_access(ctx, op.value, "stores", "multimem_store")


@rule(MultimemRedOp)
def _multimem_red(ctx: RuleContext, op: MultimemRedOp) -> None:
    _memory_access(ctx, op.value, "reduces", "multimem_red")


@rule(MultimemLoadReduceOp)
def _multimem_load_reduce(ctx: RuleContext, op: MultimemLoadReduceOp) -> None:
    _memory_access(ctx, op.result, "loads", "multimem_load_reduce")


@rule(SliceSmemOp)
def _slice_smem(ctx: RuleContext, op: SliceSmemOp) -> None:
    """A slice takes whatever transforms its users agree on (none by default)."""
    ctx.var(op.result)


@rule(WithTransformsOp)
def _with_transforms(ctx: RuleContext, op: WithTransformsOp) -> None:
    """The ref (and so the memory it views) has exactly the given transforms."""
    ctx.equal(op.source, op.result, "with_transforms views the same memory")
    ctx.fix(op.result, op.transforms, "with_transforms sets the transforms")


@rule(SelectStageOp)
def _select_stage(ctx: RuleContext, op: SelectStageOp) -> None:
    """The chosen stage may be any of them: every stage, and it, have one set of transforms."""
    for stage in op.stages:
        ctx.equal(stage, op.result, "the stages of a staged array share their transforms "
                                    "(select_stage chooses one at run time)")


@rule(InitializeBarrierOp, InvalidateBarrierOp, ArriveOp, ArriveExpectTxOp, WaitOp)
def _barriers(ctx: RuleContext, op: InitializeBarrierOp | InvalidateBarrierOp | ArriveOp
              | ArriveExpectTxOp | WaitOp) -> None:
    ctx.fix(op.barriers, (), "an mbarrier array is a plain array of 8-byte objects")


@rule(RoleTilesOp)
def _role_tiles(ctx: RuleContext, op: RoleTilesOp) -> None:
    """The response ring and its barriers are plain arrays (16-byte responses, mbarriers)."""
    for ref in (op.responses, op.full, op.empty):
        ctx.fix(ref, (), "a try_cancel response ring and its mbarriers are plain arrays")


def tma_hint(shape: tuple[int, ...], element_bytes: int) -> tuple:
    """The widest swizzle whose tiles TMA can write for this shape, as tall as a box allows
    (few boxes per copy), or no transforms."""
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
    shape, size = tuple(ir.MemRefType(ref.type).shape), element_bytes(ref.type)
    part = part or shape
    ctx.hint(ref, tma_hint(part, size), TOLERATED, f"TMA {verb} swizzled tiles fastest")
    ctx.require(ref, lambda t: tma_incompatibility(t, size, shape),
                f"TMA {verb} this shared-memory ref")
    if part != shape:
        ctx.require(ref, lambda t: tma_incompatibility(t, size, part),
                    f"TMA {verb} each collective part {list(part)} of this shared-memory ref")


@rule(AsyncLoadOp)
def _async_load(ctx: RuleContext, op: AsyncLoadOp) -> None:
    ctx.fix(op.barriers, (), "an mbarrier array is a plain array of 8-byte objects")
    _tma_ref(ctx, op.destination, "writes", op.part_shape())


@rule(AsyncStoreOp)
def _async_store(ctx: RuleContext, op: AsyncStoreOp) -> None:
    _tma_ref(ctx, op.source, "reads")


def wgmma_operand_problem(transforms: tuple, shape: tuple[int, ...], element_bytes: int,
                          k_major: str | None = None, operand: str | None = None) -> str | None:
    """Why wgmma cannot read an operand stored with `transforms`, or None if it can: 8-row
    tiles one swizzle span wide, swizzled, optionally after a 2-D transpose. `k_major`, for
    an operand wgmma cannot transpose (f32, f8), is "A" or "B": then the transpose is
    required (B) or forbidden (A), so K is contiguous in memory. With `operand` ("A" or
    "B"), also that one descriptor per instruction describes it (`wgmma_stride_problem`)."""
    body = tuple(transforms)
    transposed = bool(body) and body[0] == TransposeTransform((1, 0))
    if transposed:
        body = body[1:]
    if k_major is not None and transposed != (k_major == "B"):
        return (f"wgmma reads this {k_major} only K-major (it transposes only bf16/f16): "
                + ("store B as N x K and view it transposed" if k_major == "B"
                   else "store A as M x K, not transposed"))
    problem = swizzled_tiles_problem(transforms, body, shape, element_bytes, "wgmma")
    if problem is not None:
        return problem
    if operand is not None:
        return wgmma_stride_problem(transforms, shape, element_bytes, operand)
    return None


@rule(WgmmaOp)
def _wgmma(ctx: RuleContext, op: WgmmaOp) -> None:
    """The accumulator lives in the WGMMA layout, A in registers in the A fragment layout of
    its bit width; SMEM operands in canonical swizzled tiles."""
    acc, a, b = op.accumulator, op.a, op.b
    ctx.fix(acc, WGMMA_LAYOUT, "wgmma accumulates in the WGMMA register layout")
    ctx.equal(acc, op.result, "wgmma's result replaces its accumulator")
    if is_vector(a):
        bits = bitwidth(ir.VectorType(a.type).element_type)
        if bits in WGMMA_A_LAYOUTS:  # other types: the verifier reports them
            ctx.fix(a, WGMMA_A_LAYOUTS[bits], f"wgmma reads {bits}-bit A from registers in "
                                              f"the {bits}-bit A fragment layout")
    for name, ref in (("A", a), ("B", b)):
        if not is_smem_ref(ref):
            continue
        shape, size = tuple(ir.MemRefType(ref.type).shape), element_bytes(ref.type)
        k_major = None if size == 2 else name  # wgmma transposes only 16-bit operands
        transposed = k_major == "B"
        major = "" if k_major is None else (f"; {k_major} only K-major"
                                            + (" (stored N x K)" if transposed else ""))
        _hint_canonical_tiles(ctx, ref, shape, size, transposed, "wgmma reads swizzled tiles "
                              "fastest (tall ones, for few TMA boxes)" + major)
        ctx.require(ref, lambda t, s=shape, e=size, k=k_major, n=name:
                    wgmma_operand_problem(t, s, e, k, operand=n),
                    "wgmma reads this operand from shared memory")


@rule(BroadcastInDimOp)
def _broadcast_in_dim(ctx: RuleContext, op: BroadcastInDimOp) -> None:
    """The operand's layout carried to the result, the unlisted dims being the new ones."""
    source, result = op.source, op.result
    shape = tuple(ir.VectorType(source.type).shape)
    new_shape = tuple(ir.VectorType(result.type).shape)
    dims = op.broadcast_dimensions
    added = tuple(d for d in range(len(new_shape)) if d not in dims)
    stretched = tuple(d for i, d in enumerate(dims) if shape[i] == 1 and new_shape[d] != 1)
    _derive_broadcast(ctx, source, result, Broadcast(shape, new_shape, added, stretched),
                      "broadcast_in_dim")


@rule(IotaOp)
def _iota(ctx: RuleContext, op: IotaOp) -> None:
    """Any distributed layout works (each thread computes its indices); strided is widest."""
    result = op.result
    var = ctx.var(result)
    strided = widest_strided_layout(var.shape, var.bitwidth)
    if strided is not None:
        ctx.hint(result, strided, TOLERATED, "iota is cheapest in a wide strided layout")
    ctx.allow(result, MEMORY_LAYOUT_KINDS, "iota holds distinct values, not a splat")


@rule(OptimizationBarrierOp)
def _optimization_barrier(ctx: RuleContext, op: OptimizationBarrierOp) -> None:
    """Each result is its operand: one layout."""
    for operand, result in zip(op.values, op.outputs, strict=True):
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


# Tiled layouts a sliced value may take, besides those the search tries anyway: the
# canonical fragment layouts, whose first-level tiles are 8, 4 or 16 columns wide.
SLICEABLE_LAYOUTS: tuple[TiledLayout, ...] = (
    WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, WGMMA_LAYOUT_TF32_A, WGMMA_LAYOUT_8BIT,
)


def _hint_sliceable(ctx: RuleContext, value: ir.Value, test: Callable[[object], str | None],
                    name: str) -> None:
    """Propose for a sliced value the tiled layouts whose tiles the slice boundaries
    respect (x[:, 4:12] of a 64x16 f32 value is whole [64, 4] tiles of the tf32 A layout,
    which the search's defaults do not include)."""
    var = ctx.var(value)
    for layout in SLICEABLE_LAYOUTS:
        if fits(layout, var.shape) and test(layout) is None:
            ctx.hint(value, layout, TOLERATED, f"{name} takes whole tiles of this layout")


def _slice_geometry(op: vector.ExtractStridedSliceOp | vector.InsertStridedSliceOp,
                    large: ir.Value) -> tuple[tuple[int, ...], ...]:
    shape = tuple(ir.VectorType(large.type).shape)
    offsets = tuple(int(ir.IntegerAttr(a).value) for a in op.offsets)
    offsets = offsets + (0,) * (len(shape) - len(offsets))
    return shape, offsets


@rule(vector.ExtractStridedSliceOp)
def _extract_strided_slice(ctx: RuleContext, op: vector.ExtractStridedSliceOp) -> None:
    """The slice keeps the layout of its source; it must be made of whole tiles."""
    source, result = op.source, op.result
    shape, offsets = _slice_geometry(op, source)
    sizes = tuple(ir.VectorType(result.type).shape)
    ctx.equal(source, result, "a slice keeps its source's layout")
    test = _slice_alignment(offsets, sizes, shape)
    ctx.require(source, test, "vector.extract_strided_slice takes whole tiles")
    _hint_sliceable(ctx, source, test, "vector.extract_strided_slice")


@rule(vector.InsertStridedSliceOp)
def _insert_strided_slice(ctx: RuleContext, op: vector.InsertStridedSliceOp) -> None:
    """The inserted value, the destination and the result share a layout; whole tiles."""
    source, destination, result = op.valueToStore, op.dest, op.result
    shape, offsets = _slice_geometry(op, destination)
    sizes = tuple(ir.VectorType(source.type).shape)
    ctx.equal(source, result, "an inserted slice has its destination's layout")
    ctx.equal(destination, result, "insert_strided_slice keeps the destination's layout")
    ctx.allow(result, MEMORY_LAYOUT_KINDS, "insert_strided_slice makes a value whose "
                                           "elements differ, not a splat")
    test = _slice_alignment(offsets, sizes, shape)
    ctx.require(destination, test, "vector.insert_strided_slice writes whole tiles")
    _hint_sliceable(ctx, destination, test, "vector.insert_strided_slice")


@rule(DebugPrintOp)
def _debug_print(ctx: RuleContext, op: DebugPrintOp) -> None:
    """A printed vector may have any layout, splat included: the host reassembles it."""
    ctx.var(op.value)


# Tensor memory (sm_100a).

@rule(TmemAllocOp, TmemAllocSharedOp, TmemDeallocOp, TmemStageOp)
def _tmem_refs(ctx: RuleContext, op: TmemAllocOp | TmemDeallocOp | TmemStageOp) -> None:
    """TMEM refs have no transforms (their layout is the lanes x columns of the memory):
    these ops constrain nothing."""
    del ctx, op


STORE_VECTOR_BITS = 128  # a register vector a row-major store writes at once: st.v4.b32


def _stored_bits(value: ir.Value) -> int | None:
    """The narrowest element width at which `value`, directly or through elementwise ops
    (an astype, a scaling), is written by a vector store; None if it never is."""
    seen, pending, widths = set(), [value], []
    while pending:
        current = pending.pop()
        for use in current.uses:
            user = use.owner.opview if isinstance(use.owner, ir.Operation) else use.owner
            if isinstance(user, VectorStoreOp) and use.operand_number == 0:
                widths.append(bitwidth(ir.VectorType(current.type).element_type))
            elif isinstance(user, ELEMENTWISE_OPS):
                for result in user.operation.results:
                    if is_vector(result) and result not in seen:
                        seen.add(result)
                        pending.append(result)
    return min(widths, default=None)


def _tmem_value(ctx: RuleContext, value: ir.Value, name: str, stored: int | None = None
                ) -> None:
    """A value tcgen05.ld / tcgen05.st moves: its layout must be one they move register
    for register (`smalti.tiling.tmem_accesses`, PTX ISA 9.7.16.2.3). Preferred: the
    .32x32b layout (TMEM_LAYOUT: thread t holds row t), with, when the value is stored
    with `stored`-bit elements, 16 bytes of a row to a register vector (the same threads
    and the same tcgen05.ld, but one st.v4 per 16 bytes instead of one store per 32-bit
    column or element)."""
    var = ctx.var(value)
    shape, bits = var.shape, var.bitwidth

    def test(layout: object) -> str | None:
        try:
            if tmem_accesses(layout, shape, bits):
                return None
        except LayoutError as error:
            return f"{name}: {error}"
        return f"{name} needs a layout a tcgen05 data movement shape realises, not {layout}"

    ctx.allow(value, frozenset({TiledLayout}), f"{name} moves a tcgen05.ld/st layout")
    ctx.require(value, test, f"{name} moves values in tcgen05.ld/st layouts")
    if stored is not None and len(shape) == 2:
        vector = min(STORE_VECTOR_BITS // stored, shape[1] & -shape[1])
        try:
            rows = tmem_row_layout(vector, bits)
        except LayoutError:
            rows = None
        if rows is not None and fits(rows, shape) and test(rows) is None:
            ctx.hint(value, rows, PREFERRED, f"{name} is stored: a row per thread (.32x32b), "
                                             f"{vector} columns to a register vector")
    try:
        hint = tmem_layout("32x32b", bitwidth=bits)
    except LayoutError:
        return
    if fits(hint, shape):
        ctx.hint(value, hint, PREFERRED, f"{name} prefers the .32x32b layout (a row per "
                                         "thread)")


@rule(TmemLoadOp)
def _tmem_load(ctx: RuleContext, op: TmemLoadOp) -> None:
    _tmem_value(ctx, op.result, "tmem_load", _stored_bits(op.result))


@rule(TmemStoreOp)
def _tmem_store(ctx: RuleContext, op: TmemStoreOp) -> None:
    _tmem_value(ctx, op.value, "tmem_store")


# tcgen05 MMA (sm_100a).

def _hint_canonical_tiles(ctx: RuleContext, ref: ir.Value, shape: tuple[int, ...], size: int,
                          transposed: bool, reason: str) -> None:
    """Hints an MMA's shared-memory operand into its widest canonical swizzled (tall) tiles."""
    rows = shape[1] if transposed else shape[0]
    for span in (128, 64, 32):
        try:
            canonical = wgmma_operand_transforms(shape, size, span, transposed=transposed,
                                                 tile_rows=tall_tile_rows(rows))
        except LayoutError:
            continue
        ctx.hint(ref, canonical, PREFERRED, reason)
        return


@rule(Tcgen05MmaOp)
def _tcgen05_mma(ctx: RuleContext, op: Tcgen05MmaOp) -> None:
    """Shared-memory operands in the canonical swizzled tiles wgmma reads (the sm_100
    descriptor expresses the same layouts), each 8-row group of the M rows one instruction
    reads one stride apart; TMEM refs and the i1 take nothing."""
    rows = ir.ShapedType(op.a.type).shape[0]
    for name, ref in (("A", op.a), ("B", op.b)):
        if not is_smem_ref(ref):
            continue
        shape, size = tuple(ir.MemRefType(ref.type).shape), element_bytes(ref.type)
        k_major = None if size == 2 else name  # only 16-bit operands may be MN-major here
        _hint_canonical_tiles(ctx, ref, shape, size, k_major == "B",
                              "tcgen05_mma reads swizzled tiles fastest"
                              + ("" if k_major is None else f"; {k_major} only K-major"))
        ctx.require(ref, lambda t, s=shape, e=size, k=k_major, n=name:
                    wgmma_operand_problem(t, s, e, k)
                    or wgmma_stride_problem(t, s, e, n, a_rows=rows),
                    "tcgen05_mma reads this operand through a shared memory descriptor")


@rule(Tcgen05CommitOp)
def _tcgen05_commit(ctx: RuleContext, op: Tcgen05CommitOp) -> None:
    ctx.fix(op.barriers, (), "an mbarrier array is a plain array of 8-byte objects")


@rule(Tcgen05CpOp)
def _tcgen05_cp(ctx: RuleContext, op: Tcgen05CpOp) -> None:
    ctx.fix(op.source, (), "tcgen05_cp reads rows of 16 bytes row-major (no tiles or swizzle)")
