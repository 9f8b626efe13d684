"""The body's shared-memory parameters: refs carved by `smalti.slice_smem` at kernel start
(one slice per stage of a staged array) and mbarrier arrays initialised there. A declared
2-D ref also has a transposed view, `ref.T`: a second slice of the same bytes, both pinned
to one swizzled tiling (`smalti.with_transforms`), as wgmma reads an N x K buffer as a
K-major K x N B operand."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dialect.attributes import transforms_to_attr
from smalti.dialect.bindings import workgroup_address_space
from smalti.dialect.ops_memory import SelectStageOp, SliceSmemOp, WithTransformsOp
from smalti.dialect.ops_sync import (
    ArriveExpectTxOp,
    ArriveOp,
    InitializeBarrierOp,
    InvalidateBarrierOp,
    WaitOp,
    WarpgroupBarrierOp,
)
from smalti.dsl.dtypes import memory_bytes, mlir_type
from smalti.dsl.index import Index, IndexLike, as_index, check_stage_index
from smalti.dsl.locations import user_error, user_location
from smalti.dsl.refs import Ref
from smalti.dsl.smem import Placement, SmemArray, SmemBarriers, SmemEntry, SmemUnion
from smalti.dsl.trace import _enclosing_region, active, create, dsl_entry, emit_value
from smalti.tiling import LayoutError, Transform, physical_shape, wgmma_operand_transforms
from smalti.tiling.smem import ElementSize, tall_tile_rows


def smem_type(shape: Sequence[int], element: ir.Type) -> ir.MemRefType:
    return ir.MemRefType.get(list(shape), element, memory_space=workgroup_address_space())


class StagedRef:
    """A staged shared-memory array: `ref[s]` is stage s, its own Ref; s is a Python int or a
    traced index whose values are stages (`ref[k % len(ref)]`), the stage then chosen at run
    time (smalti.select_stage)."""

    def __init__(self, stages: tuple[SharedRef, ...], name: str) -> None:
        self.stages = stages
        self.name = name
        self.shape = (len(stages), *stages[0].shape)
        self.dtype = stages[0].dtype

    def __len__(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        return f"StagedRef({self.name}: {self.dtype.name}{list(self.shape)})"

    def __getitem__(self, stage: object) -> SharedRef:
        if isinstance(stage, Index) and stage.static is None:
            return self._chosen(stage)
        if isinstance(stage, bool) or not hasattr(stage, "__index__"):
            raise user_error(TypeError, f"index {self.name} with a stage (a Python int), got "
                                        f"{type(stage).__name__}")
        index = stage.__index__()  # type: ignore[attr-defined]
        if not -len(self.stages) <= index < len(self.stages):
            raise user_error(IndexError, f"stage {index} is out of range for {self.name} with "
                                         f"{len(self.stages)} stages")
        return self.stages[index]

    @dsl_entry(SelectStageOp)
    def _chosen(self, stage: Index) -> ChosenStageRef:
        """The stage a traced index chooses; its values must be stages (checked here)."""
        check_stage_index(stage, len(self.stages), self.name, "k")
        return ChosenStageRef(self, stage.materialize())


SWIZZLE_SPANS = (128, 64, 32)  # bytes, widest first: wider swizzles spread banks best


class SharedRef(Ref):
    """A shared-memory ref the kernel declares. `ref.T` (2-D refs) is the same memory viewed
    transposed: what wgmma needs for a K-major B (declare B as N x K, pass `b_smem.T`)."""

    def __init__(self, value: ir.Value, name: str, transposed_of: SharedRef | None = None
                 ) -> None:
        super().__init__(value, name)
        self.transposed_of = transposed_of
        self._view: SharedRef | None = transposed_of
        self._pins: _Pins | None = None  # set on the declared ref once its view exists
        self._parts = 1  # collective copies into it split its leading dim this many ways

    @property
    def T(self) -> SharedRef:
        """The transposed view (and `ref.T.T` is `ref`)."""
        if self._view is None:
            self._view = self._transposed_view()
        return self._view

    @dsl_entry(WithTransformsOp)
    def with_transforms(self, *transforms: Transform) -> SharedRef:
        """The same memory with its tile, swizzle and transpose transforms fixed rather than
        inferred (smalti.with_transforms): how two views of one buffer agree, e.g. K that
        TMA writes in (64, d) tiles and wgmma reads as K^T. ValueError if they do not apply
        to the ref's shape."""
        if not all(isinstance(t, Transform) for t in transforms):
            raise user_error(TypeError, f"with_transforms takes smalti.tiling transforms "
                                        f"(TileTransform, SwizzleTransform, TransposeTransform), "
                                        f"got {transforms!r}")
        try:
            physical_shape(transforms, self.shape, memory_bytes(self.dtype))
        except LayoutError as error:
            raise user_error(ValueError, f"transforms {list(transforms)} do not apply to "
                                         f"{self.name} {list(self.shape)}: {error}") from None
        view = create(WithTransformsOp, source=self.value, transforms=transforms).result
        return SharedRef(view, self.name)

    def note_collective(self, parts: int) -> None:
        """A collective copy fills this ref in `parts` pieces along its leading dim: the
        pinned tiles (if any) must not straddle two pieces."""
        self._parts = math.lcm(self._parts, parts)
        if self._pins is not None:
            self._pins.retile(self._parts)

    def _transposed_view(self) -> SharedRef:
        if self.ndim != 2:
            raise user_error(ValueError, f"{self.name}.T needs a 2-D ref, {self.name} has shape "
                                         f"{self.shape}")
        rows, cols = self.shape
        row_bytes = cols * memory_bytes(self.dtype)
        span = next((s for s in SWIZZLE_SPANS if row_bytes % s == 0), None)
        if span is None or rows % 8:
            raise user_error(ValueError, f"{self.name}.T views {self.name} {list(self.shape)} "
                                         "through swizzled tiles of 8k rows: it needs a multiple "
                                         f"of 8 rows and rows of a multiple of 32 bytes (these "
                                         f"are {row_bytes})")
        source = self.value.owner.operation
        location = user_location()
        with ir.InsertionPoint.after(source), location:
            view = SliceSmemOp.build(offset=source.opview.offset,
                                     result_types=[_transposed_type(self.value.type)]).result
            pins = tuple(WithTransformsOp.build(source=v, transforms=()).operation
                         for v in (self.value, view))
        self._pins = _Pins(pins, self.shape, memory_bytes(self.dtype), span)
        self._pins.retile(self._parts)
        return SharedRef(pins[1].result, f"{self.name}.T", transposed_of=self)


class ChosenStageRef(SharedRef):
    """A stage of a StagedRef chosen at run time: a ref like each stage, and its `.T` the
    chosen stage's transposed view."""

    def __init__(self, staged: StagedRef, index: ir.Value,
                 transposed_of: ChosenStageRef | None = None) -> None:
        stages = [s.T for s in staged.stages] if transposed_of is not None else staged.stages
        value = create(SelectStageOp, index=index, stages=[s.value for s in stages],
                       result_types=[stages[0].value.type]).result
        suffix = ".T" if transposed_of is not None else ""
        super().__init__(value, f"{staged.name}[<traced>]{suffix}", transposed_of)
        self.staged = staged
        self.index = index

    @property
    def T(self) -> SharedRef:
        if self._view is None:
            self._view = ChosenStageRef(self.staged, self.index, transposed_of=self)
            self._view._view = self
        return self._view

    def note_collective(self, parts: int) -> None:
        for stage in self.staged.stages:
            stage.note_collective(parts)


def _transposed_type(memref: ir.Type) -> ir.MemRefType:
    ref = ir.MemRefType(memref)
    return ir.MemRefType.get(list(reversed(ref.shape)), ref.element_type,
                             memory_space=ref.memory_space)


class _Pins:
    """The with_transforms ops pinning a ref (N x K) and its transposed view to one tiling,
    one swizzle span wide: as tall as TMA boxes go when the tiles form one column (the bytes
    are the same for any height) or when no collective copy splits the ref; else 8 rows. (A
    wgmma instruction steps through B's N rows with one stride between 8-row groups: tiles
    taller than 8 rows but shorter than N break that stride when K spans several tiles.)"""

    def __init__(self, ops: tuple[ir.Operation, ...], shape: tuple[int, ...],
                 element_bytes: ElementSize, span: int) -> None:
        self.ops = ops
        self.shape = shape
        self.element_bytes = element_bytes
        self.span = span

    def transforms(self, parts: int) -> tuple[Transform, ...]:
        """The transposed view's transforms (the ref's: the same without the transpose)."""
        rows, cols = self.shape
        part = rows // parts
        one_column = cols * self.element_bytes == self.span
        tile_rows = tall_tile_rows(part) if one_column or part == rows else 8
        return wgmma_operand_transforms((cols, rows), self.element_bytes, self.span,
                                        transposed=True, tile_rows=tile_rows)

    def retile(self, parts: int) -> None:
        try:
            view = self.transforms(parts)
        except LayoutError as error:
            raise user_error(ValueError, f"cannot view a {list(self.shape)} ref transposed: "
                                         f"{error}") from None
        with self.ops[0].context:
            for op, transforms in zip(self.ops, (view[1:], view), strict=True):
                op.attributes["transforms"] = transforms_to_attr(list(transforms))


@dataclass(frozen=True)
class Barrier:
    """One mbarrier of a BarrierArray: arrive, expect TMA bytes, wait for a phase."""

    array: BarrierArray
    index: Index

    @dsl_entry(ArriveOp)
    def arrive(self, *, collective: int | tuple[int, ...] = ()) -> None:
        """Every thread of the warpgroup arrives; with `collective` (a cluster axis or a
        tuple of them) the warpgroup instead arrives once on this barrier in every CTA along
        those axes, its own included (e.g. an epilogue telling the CTA pair's MMA issuer it
        is done with the accumulator)."""
        axes = collective if isinstance(collective, tuple | list) else (collective,)
        info = active()
        for axis in axes:
            if isinstance(axis, bool) or axis not in (0, 1, 2) or info.cluster[axis] == 1:
                raise user_error(ValueError, f"arrive's collective axis must be a cluster axis "
                                             f"of size > 1 (cluster {info.cluster}), got "
                                             f"{axis!r}")
        create(ArriveOp, barriers=self.array.value, index=self.index.materialize(),
               collective=tuple(axes) or None)

    @dsl_entry(ArriveExpectTxOp)
    def arrive_expect_tx(self, nbytes: int) -> None:
        """One thread announces `nbytes` of TMA transactions and arrives."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
            raise user_error(ValueError, "arrive_expect_tx needs a positive Python int of "
                                         f"bytes, got {nbytes!r}")
        create(ArriveExpectTxOp, barriers=self.array.value, index=self.index.materialize(),
               bytes=nbytes)

    @dsl_entry(WaitOp)
    def wait(self, parity: IndexLike) -> None:
        """Wait until the phase of this barrier with `parity` (its low bit) has completed."""
        phase = as_index(parity, "a barrier phase parity").materialize()
        create(WaitOp, barriers=self.array.value, index=self.index.materialize(), parity=phase)


class BarrierArray:
    """`count` mbarriers in shared memory; `bars[i]` is one of them (i static or traced)."""

    def __init__(self, value: ir.Value, count: int, name: str) -> None:
        self.value = value
        self.count = count
        self.name = name

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"BarrierArray({self.name}: {self.count})"

    def __getitem__(self, i: IndexLike) -> Barrier:
        index = as_index(i, f"an index of {self.name}")
        if index.static is not None:
            if not -self.count <= index.static < self.count:
                raise user_error(IndexError, f"barrier {index.static} is out of range for "
                                             f"{self.name} with {self.count} barriers")
            index = Index((), index.static % self.count)
        return Barrier(self, index)


SmemParam = SharedRef | StagedRef | BarrierArray


@dsl_entry(WarpgroupBarrierOp)
def warpgroup_barrier() -> None:
    """The 128 threads of the warpgroup meet (a named barrier): their shared-memory stores
    before it are visible to their loads after it, e.g. reading back, in another layout,
    an array the warpgroup just stored."""
    create(WarpgroupBarrierOp)


def allocate(placements: Sequence[Placement], names: Sequence[str]) -> list[SmemParam]:
    """Emit the slices (and barrier initialisations) of `placements`, located at their
    declarations; the refs the body takes for them."""
    params: list[SmemParam] = []
    for placement, name in zip(placements, names, strict=True):
        decl = placement.decl
        if isinstance(decl, SmemBarriers):
            i64 = ir.IntegerType.get_signless(64)
            value = _slice(placement.offset, [decl.count], i64, decl)
            params.append(BarrierArray(value, decl.count, name))
        elif decl.staged:
            element = mlir_type(decl.dtype)
            stages = tuple(
                SharedRef(_slice(placement.offset + s * decl.stage_stride, decl.shape[1:],
                                 element, decl), f"{name}[{s}]")
                for s in range(decl.shape[0]))
            params.append(StagedRef(stages, name))
        else:
            params.append(SharedRef(_slice(placement.offset, decl.shape,
                                           mlir_type(decl.dtype), decl), name))
    for placement, param in zip(placements, params, strict=True):
        if isinstance(placement.decl, SmemBarriers):
            create(InitializeBarrierOp, barriers=param.value,  # type: ignore[union-attr]
                   arrival_count=placement.decl.arrival_count,
                   location=placement.decl.where.location())
    return params


def scoped_smem(*entries: SmemEntry, names: Sequence[str] | None = None) -> ScopedSmem:
    """Shared memory for part of the kernel body: `with sd.scoped_smem(sd.SMEM(...), ...) as
    refs:` places the declarations above everything live, gives their refs (barriers
    initialised at this line, by the whole block) and frees them when the block ends, so
    later scopes reuse the bytes. `names` name the refs in messages. Not inside a
    warpgroup_region (concurrent regions would share the bytes)."""
    if not entries or not all(isinstance(e, SmemArray | SmemBarriers | SmemUnion)
                              for e in entries):
        raise user_error(TypeError, "scoped_smem takes sd.SMEM, sd.Barriers and sd.Union "
                                    f"declarations, got {entries!r}")
    if _enclosing_region(ir.InsertionPoint.current.block) is not None:
        raise user_error(ValueError, "scoped_smem cannot stand inside a warpgroup_region: "
                                     "other regions run at the same time and their scopes "
                                     "would share its bytes; allocate it before the regions")
    return ScopedSmem(tuple(entries), None if names is None else tuple(names))


@dataclass
class ScopedSmem:
    """The context manager of `scoped_smem`: allocates on entry, frees on exit."""

    entries: tuple[SmemEntry, ...]
    names: tuple[str, ...] | None
    below: int | None = None  # the stack's top before this scope, while it is live
    refs: list[SmemParam] = field(default_factory=list)  # what __enter__ gave, while live
    placements: tuple[Placement, ...] = ()
    regions: int = 0  # warpgroup_regions traced before this scope

    def __enter__(self) -> list[SmemParam]:
        count = sum(len(e.members) if isinstance(e, SmemUnion) else 1 for e in self.entries)
        names = self.names or tuple(f"scoped_smem[{i}]" for i in range(count))
        if len(names) != count:
            raise user_error(ValueError, f"scoped_smem: {len(names)} names for {count} refs")
        info = active()
        # Over 227 KiB: a ValueError at the line of the declaration that passes it.
        self.placements, self.below = info.smem.push(self.entries, info.name)
        self.regions = len(info.roles)
        self.refs = allocate(self.placements, names)
        return self.refs

    def __exit__(self, kind: object, *exc: object) -> None:
        info = active()
        stack = info.smem
        # PTX ISA: an mbarrier's bytes are reused only once it is invalid. After warpgroup
        # regions nothing but regions may follow (and they take no scoped memory): no reuse.
        if kind is None and len(info.roles) == self.regions:
            for placement, ref in zip(self.placements, self.refs, strict=True):
                if isinstance(ref, BarrierArray):
                    op = create(InvalidateBarrierOp, barriers=ref.value).operation
                    start = placement.offset
                    stack.retired.append((start, start + placement.decl.nbytes, op))
        stack.pop(self.below)


def _slice(offset: int, shape: Sequence[int], element: ir.Type,
           decl: SmemArray | SmemBarriers) -> ir.Value:
    location = decl.where.location()
    index = ir.IndexType.get()
    start = emit_value(arith.ConstantOp, [], index,
                       {"value": ir.IntegerAttr.get(index, offset)}, location=location)
    return create(SliceSmemOp, offset=start, result_types=[smem_type(shape, element)],
                  location=location).result
