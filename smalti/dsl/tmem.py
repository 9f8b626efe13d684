"""Tensor memory (TMEM, sm_100a) in the DSL: `sd.TMEM((128, C), dtype)` declared among a
kernel's scratch buffers (`smem=[...]`), and the `TmemRef` the body gets for it.

    @sd.kernel(..., arch="sm_100a", smem=[sd.Barriers(1), sd.TMEM((128, 128), jnp.float32)])
    def body(x_ref, out_ref, bars, acc_tmem):
        acc_tmem[:, 0:64] = x_ref[:, 0:64]        # tcgen05.st
        out_ref[:, 0:64] = acc_tmem[:, 0:64]      # tcgen05.ld

Each declaration is one TMEM region of 128 lanes (row r is lane r): at kernel start the
warpgroup allocates it (`smalti.tmem_alloc`, a power of two of 32-bit columns, the largest
regions first so they pack without gaps), gives up the CTA's permit to allocate more
(`smalti.tmem_relinquish_alloc_permit`, one warpgroup only), and frees it at the end of the
body (`smalti.tmem_dealloc`). A TMEM declaration is one more body parameter, in its place in
the list; it takes no shared memory.

In a warp-specialised kernel, `sd.TMEM(shape, dtype, owner=w)` is one region for the whole
block (`smalti.tmem_alloc_shared`): warpgroup w allocates it before the roles branch off,
every role uses it (an MMA role writes the accumulator an epilogue role reads), and w frees
it at the end of its warpgroup_region, so the roles may set register budgets. w's role must
be the last to touch it: e.g. the epilogue, once it has waited for the last MMA."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from jaxlib.mlir import ir

from smalti.dialect.checks import tmem_memory_space, tmem_unpacked_type
from smalti.dialect.ops_tmem import (
    TMEM_ACCESS_BITS,
    TmemAllocOp,
    TmemDeallocOp,
    TmemLoadOp,
    TmemRelinquishAllocPermitOp,
    TmemStageOp,
    TmemStoreOp,
)
from smalti.dialect.ops_tmem_shared import TmemAllocSharedOp
from smalti.dsl.array import Array, scalar_array, vector_type
from smalti.dsl.dtypes import bit_width, mlir_name, mlir_type
from smalti.dsl.index import Index, check_stage_index, constant_index
from smalti.dsl.locations import SourcePosition, user_error, user_position
from smalti.dsl.trace import active, create, dsl_entry
from smalti.tiling.tmem import TMEM_ALLOCATION_COLUMNS, TMEM_CELL_BITS, TMEM_COLUMNS, TMEM_LANES

TMEM_UNPACKED_BITS = 16  # sd.TMEM(..., unpacked=True): 16-bit elements one per column


@dataclass(frozen=True)
class TmemArray:
    """A (128, C) array in tensor memory; it spans `columns` 32-bit columns, allocated as
    the power of two `allocated` (at least 32)."""

    shape: tuple[int, int]
    dtype: np.dtype
    where: SourcePosition
    owner: int | None = None  # the warpgroup that allocates it for the block (None: each)
    unpacked: bool = False  # 16-bit elements one per 32-bit column (a 16-bit MMA D)
    stages: int | None = None  # a staged array: `stages` arrays of `shape`, chosen at run time

    @property
    def per_cell(self) -> int:
        """Elements in one 32-bit TMEM cell: packed `32 // bits`, unpacked 1."""
        return 1 if self.unpacked else TMEM_CELL_BITS // bit_width(self.dtype)

    def memref_type(self) -> ir.MemRefType:
        """memref<128 x allocated columns' elements x T, "tmem"> (strided<[2C, 2]> when
        unpacked)."""
        shape = [TMEM_LANES, self.allocated * self.per_cell]
        if self.unpacked:
            return tmem_unpacked_type(shape, mlir_type(self.dtype))
        return ir.MemRefType.get(shape, mlir_type(self.dtype), memory_space=tmem_memory_space())

    @property
    def stage_columns(self) -> int:
        """32-bit columns of one (128, C) array (of each stage)."""
        return -(-self.shape[1] // self.per_cell)

    @property
    def columns(self) -> int:
        return self.stage_columns * (self.stages or 1)

    @property
    def allocated(self) -> int:
        return next(c for c in TMEM_ALLOCATION_COLUMNS if c >= self.columns)


# allocated at kernel start, freed at the end (of the body, or of the owner's region)
@dsl_entry(TmemAllocOp, TmemAllocSharedOp, TmemRelinquishAllocPermitOp, TmemDeallocOp)
def TMEM(shape: Sequence[int], dtype: object, *, owner: int | None = None,
         unpacked: bool = False) -> TmemArray:
    """A (128, C) array of `dtype` in tensor memory (sm_100a): row r is TMEM lane r, and
    elements narrower than 32 bits pack `32 // bits` to a column. `owner` (a warpgroup of a
    warp-specialised kernel) makes it one region shared by every role, allocated by that
    warpgroup and freed at the end of its warpgroup_region. `unpacked=True` (16-bit
    dtypes) puts one element in each 32-bit column, as tcgen05_mma writes a float16
    accumulator (C columns instead of C / 2). A shape (S, 128, C) declares S stages of
    (128, C), S a power of two: the body gets a StagedTmemRef whose `ref[i]` (i a Python
    int or a traced index, like n % 2) is stage i, chosen at run time (a double-buffered
    accumulator)."""
    if owner is not None and (isinstance(owner, bool) or not isinstance(owner, int)
                              or owner < 0):
        raise user_error(TypeError, f"TMEM's owner must be a warpgroup index (an int >= 0), "
                                    f"got {owner!r}")
    shape = tuple(shape) if isinstance(shape, Sequence) else (shape,)
    if (len(shape) not in (2, 3) or any(isinstance(s, bool) or not isinstance(s, int)
                                        or s < 1 for s in shape)):
        raise user_error(ValueError, f"TMEM needs a 2-D shape of positive Python ints "
                                     f"(lanes, columns), or (stages, lanes, columns), got "
                                     f"{shape!r}")
    stages = shape[0] if len(shape) == 3 else None
    shape = shape[-2:]
    if stages is not None and stages & (stages - 1):
        raise user_error(ValueError, f"TMEM stages are a power of two (they split a "
                                     f"power-of-two allocation evenly), got {stages}")
    if shape[0] != TMEM_LANES:
        raise user_error(ValueError, f"TMEM arrays span all {TMEM_LANES} lanes: the shape "
                                     f"must be ({TMEM_LANES}, C), got {shape!r}")
    if (mlir_name(dtype) is None or np.dtype(dtype) == np.bool_
            or TMEM_CELL_BITS % bit_width(np.dtype(dtype))):
        raise user_error(TypeError, f"TMEM: unsupported dtype {dtype!r} (elements of 32, 16, "
                                    "8 or 4 bits)")
    if unpacked and bit_width(np.dtype(dtype)) != TMEM_UNPACKED_BITS:
        raise user_error(TypeError, f"TMEM(..., unpacked=True) holds 16-bit elements one per "
                                    f"32-bit column, not {np.dtype(dtype).name}")
    decl = TmemArray(shape, np.dtype(dtype), user_position(), owner,  # type: ignore[arg-type]
                     bool(unpacked), stages)
    if stages is not None and shape[1] % decl.per_cell:
        raise user_error(ValueError, f"TMEM stages start at a 32-bit column: {shape[1]} "
                                     f"{decl.dtype.name} columns are not whole columns")
    if decl.columns > TMEM_COLUMNS:
        raise user_error(ValueError, f"TMEM array {shape} of {decl.dtype.name} spans "
                                     f"{decl.columns} 32-bit columns; a CTA has "
                                     f"{TMEM_COLUMNS}")
    return decl


@dataclass(frozen=True)
class TmemPlan:
    """The TMEM declarations of a kernel's scratch list, each with its body parameter's
    position among the scratch parameters."""

    decls: tuple[TmemArray, ...] = ()
    positions: tuple[int, ...] = ()

    def split(self, params: Sequence[object]) -> tuple[list[object], list[object]]:
        """Scratch parameters (names, refs) into (shared-memory ones, TMEM ones)."""
        tmem = set(self.positions)
        return ([p for i, p in enumerate(params) if i not in tmem],
                [p for i, p in enumerate(params) if i in tmem])

    def merge(self, shared: Sequence[object], tensor: Sequence[object]) -> list[object]:
        """The inverse of `split`: parameters in declaration order."""
        rest, tmem = iter(shared), dict(zip(self.positions, tensor, strict=True))
        return [tmem[i] if i in tmem else next(rest)
                for i in range(len(shared) + len(tensor))]


NO_TMEM = TmemPlan()
"""The plan of a kernel that declares no tensor memory."""


def plan_tmem(entries: object, kernel: str, warpgroups: int) -> tuple[object, TmemPlan]:
    """The shared-memory entries of a scratch list (for plan_smem) and its TMEM plan; a
    ValueError naming the declaration that does not fit in the 512 columns (every
    warpgroup allocates its own regions)."""
    if not isinstance(entries, list | tuple):
        return entries, NO_TMEM
    shared, decls, positions = [], [], []
    position = 0
    for entry in entries:
        if isinstance(entry, TmemArray):
            decls.append(entry)
            positions.append(position)
            position += 1
            continue
        shared.append(entry)
        position += len(getattr(entry, "members", (entry,)))
    used = 0
    for decl in decls:
        if decl.owner is not None and decl.owner >= warpgroups:
            raise ValueError(f"{decl.where}: TMEM owner {decl.owner} is not a warpgroup of "
                             f"kernel {kernel}, which has {warpgroups}")
        used += decl.allocated * (warpgroups if decl.owner is None else 1)
        if used > TMEM_COLUMNS:
            each = " (every warpgroup allocates its own)" if warpgroups > 1 else ""
            raise ValueError(f"{decl.where}: kernel {kernel} allocates {used} columns of tensor "
                             f"memory up to this array{each}, more than the {TMEM_COLUMNS} "
                             "a CTA has")
    return tuple(shared), TmemPlan(tuple(decls), tuple(positions))


@dataclass(frozen=True)
class TmemWindow:
    """Columns [start, stop) of every lane of a TMEM array, not loaded: what
    `tmem.at[:, a:b]` names for sd.tcgen05_mma's accumulator or sd.tcgen05_copy."""

    ref: TmemRef
    start: int
    stop: int

    @property
    def width(self) -> int:
        return self.stop - self.start

    def __repr__(self) -> str:
        return f"{self.ref.name}.at[:, {self.start}:{self.stop}]"


class _At:
    """`tmem.at[:, a:b]`: index expressions give TmemWindows."""

    def __init__(self, ref: TmemRef) -> None:
        self._ref = ref

    def __getitem__(self, key: object) -> TmemWindow:
        return TmemWindow(self._ref, *self._ref._columns(key))


class TmemRef:
    """A TMEM array of the kernel: `ref[:, a:b]` loads those columns of every lane into an
    Array (tcgen05.ld), `ref[:, a:b] = x` stores an Array (or a scalar) there
    (tcgen05.st), `ref.at[:, a:b]` names them for sd.tcgen05_mma / sd.tcgen05_copy;
    columns are static Python ints. `value` is the TMEM memref."""

    def __init__(self, value: ir.Value, decl: TmemArray, name: str) -> None:
        self.value = value
        self.name = name
        self.shape = decl.shape
        self.dtype = decl.dtype
        self.columns = decl.columns  # 32-bit TMEM columns
        self.unpacked = decl.unpacked
        self.per_cell = decl.per_cell  # elements in one 32-bit column

    @property
    def ndim(self) -> int:
        return 2

    @property
    def at(self) -> _At:
        """`tmem.at[:, a:b]`: a TmemWindow of those columns (nothing is loaded)."""
        return _At(self)

    @property
    def window(self) -> TmemWindow:
        """All of the array's columns."""
        return TmemWindow(self, 0, self.shape[1])

    def __repr__(self) -> str:
        form = ", unpacked" if self.unpacked else ""
        return f"TmemRef({self.name}: {self.dtype.name}{list(self.shape)}, tmem{form})"

    def _columns(self, key: object) -> tuple[int, int]:
        """[start, stop) of the columns `key` names: every lane (`:`), then a static slice
        of columns (`ref[...]`, `ref[:]`: all of them)."""
        key = key if isinstance(key, tuple) else (key,)
        if Ellipsis in key:
            at = key.index(Ellipsis)
            key = (*key[:at], *([slice(None)] * (3 - len(key))), *key[at + 1:])
        key = (*key, *([slice(None)] * (2 - len(key))))
        if len(key) != 2 or Ellipsis in key:
            raise user_error(IndexError, f"index {self.name} with [:, start:stop] (every "
                                         f"lane, a static slice of columns), got {key!r}")
        rows, cols = key
        if not (isinstance(rows, slice) and rows.step in (None, 1)
                and (_static(rows.start, 0), _static(rows.stop, TMEM_LANES)) in (
                    (0, TMEM_LANES), (-TMEM_LANES, TMEM_LANES))):
            raise user_error(IndexError, f"{self.name} is read and written across all "
                                         f"{TMEM_LANES} lanes: its first index must be ':', "
                                         f"got {_text(rows)}")
        if not isinstance(cols, slice) or cols.step not in (None, 1):
            raise user_error(IndexError, f"the columns of {self.name} must be a slice "
                                         f"start:stop (step 1), got {_text(cols)}")
        size = self.shape[1]
        start, stop = _static(cols.start, 0), _static(cols.stop, size)
        if start is None or stop is None:
            raise user_error(IndexError, f"the columns of {self.name} must be static Python "
                                         "ints (tcgen05.ld/st take a fixed column), got "
                                         f"{_text(cols)}")
        start, stop = (v + size if v < 0 else v for v in (start, stop))
        if not 0 <= start < stop <= size:
            raise user_error(IndexError, f"columns [{start}:{stop}] are out of bounds (or "
                                         f"empty) for {self.name} of shape {self.shape}")
        if start % self.per_cell:
            raise user_error(IndexError, f"columns of {self.name} ({self.dtype.name}) start "
                                         f"at a 32-bit TMEM column, a multiple of "
                                         f"{self.per_cell}; got {start}")
        return start, stop

    def _check_dtype(self, verb: str) -> None:
        if bit_width(self.dtype) not in TMEM_ACCESS_BITS:
            raise user_error(TypeError, f"{verb} {self.name}: tcgen05.ld/st move 32- or "
                                        f"16-bit elements, not {self.dtype.name} (fill it "
                                        "with sd.tcgen05_copy)")

    @dsl_entry(TmemLoadOp)
    def __getitem__(self, key: object) -> Array:
        start, stop = self._columns(key)
        self._check_dtype("loading from")
        return Array(create(TmemLoadOp, source=self.value, column=start,
                            result_types=[vector_type((TMEM_LANES, stop - start),
                                                      self.dtype)]).result)

    @dsl_entry(TmemStoreOp)
    def __setitem__(self, key: object, value: object) -> None:
        start, stop = self._columns(key)
        self._check_dtype("storing into")
        shape = (TMEM_LANES, stop - start)
        if not isinstance(value, Array):
            value = scalar_array(value, shape, self.dtype)
        if value.dtype != self.dtype:
            raise user_error(TypeError, f"storing a {value.dtype.name} array into {self.name} "
                                        f"of dtype {self.dtype.name}; cast it with .astype")
        if value.shape != shape:
            value = value.broadcast_to(shape)
        create(TmemStoreOp, value=value.value, destination=self.value, column=start)


def _text(index: object) -> str:
    """An index as the user wrote it (`a:b`, `3`)."""
    if not isinstance(index, slice):
        return repr(index)
    bounds = [index.start, index.stop] + ([] if index.step is None else [index.step])
    return ":".join("" if v is None else str(v) if isinstance(v, int) else "<traced>"
                    for v in bounds)


def _static(bound: object, default: int) -> int | None:
    """A slice bound as a Python int (`default` for None); None if it is not static."""
    if bound is None:
        return default
    if isinstance(bound, Index):  # traced: static when known while tracing
        return bound.static
    if isinstance(bound, bool) or not hasattr(bound, "__index__"):
        return None
    return bound.__index__()  # type: ignore[attr-defined]


class StagedTmemRef:
    """A staged TMEM array (`sd.TMEM((S, 128, C), ...)`): `ref[i]` is stage i, a TmemRef of
    (128, C), i a Python int or a traced index whose values the tracer proves lie in
    [0, S) (take it modulo S, like n % 2), chosen at run time (`smalti.tmem_stage`: the
    address plus i times the stage's columns). `value` is the whole region's TMEM memref."""

    def __init__(self, value: ir.Value, decl: TmemArray, name: str) -> None:
        self.value = value
        self.name = name
        self.decl = decl
        self.stages = decl.stages or 1

    def __len__(self) -> int:
        return self.stages

    def __repr__(self) -> str:
        return (f"StagedTmemRef({self.name}: {self.stages} x "
                f"{self.decl.dtype.name}{list(self.decl.shape)}, tmem)")

    @dsl_entry(TmemStageOp)
    def __getitem__(self, stage: object) -> TmemRef:
        if isinstance(stage, Index) and stage.static is None:
            check_stage_index(stage, self.stages, self.name, "n")
            index, text = stage.materialize(), "<traced>"
        else:
            if isinstance(stage, bool) or not hasattr(stage, "__index__"):
                raise user_error(TypeError, f"index {self.name} with a stage (a Python int or "
                                            f"a traced index), got {type(stage).__name__}")
            number = stage.__index__()  # type: ignore[attr-defined]
            if not 0 <= number < self.stages:
                raise user_error(IndexError, f"stage {number} is out of range for {self.name} "
                                             f"with {self.stages} stages")
            index, text = constant_index(number), str(number)
        whole = ir.MemRefType(self.value.type)
        width = whole.shape[1] // self.stages
        stage_type = (tmem_unpacked_type([TMEM_LANES, width], whole.element_type)
                      if self.decl.unpacked else
                      ir.MemRefType.get([TMEM_LANES, width], whole.element_type,
                                        memory_space=tmem_memory_space()))
        view = create(TmemStageOp, source=self.value, index=index, stages=self.stages,
                      result_types=[stage_type]).result
        return TmemRef(view, replace(self.decl, stages=None), f"{self.name}[{text}]")


def allocate_tmem(plan: TmemPlan, names: Sequence[str], warpgroups: int) -> list[TmemRef]:
    """Allocate the plan's regions at kernel start, the widest first (so power-of-two
    regions pack without gaps), each located at its declaration; one warpgroup then gives
    up the CTA's permit to allocate more. The refs, in declaration order."""
    refs: dict[int, TmemRef] = {}
    order = sorted(range(len(plan.decls)), key=lambda i: -plan.decls[i].allocated)
    for i in order:
        decl = plan.decls[i]
        memref = decl.memref_type()
        if decl.owner is None:
            value = create(TmemAllocOp, columns=decl.allocated, result_types=[memref],
                           location=decl.where.location()).result
        else:
            value = create(TmemAllocSharedOp, columns=decl.allocated, warpgroup=decl.owner,
                           result_types=[memref], location=decl.where.location()).result
        refs[i] = (TmemRef(value, decl, names[i]) if decl.stages is None
                   else StagedTmemRef(value, decl, names[i]))
    if plan.decls and warpgroups == 1 and all(d.owner is None for d in plan.decls):
        # with more warpgroups, one's permit would stop another's alloc
        create(TmemRelinquishAllocPermitOp, location=plan.decls[-1].where.location())
    return [refs[i] for i in range(len(plan.decls))]


def free_tmem(refs: Sequence[TmemRef], plan: TmemPlan) -> None:
    """Free the regions (in reverse order of allocation): a shared one at the end of its
    owner's warpgroup_region, the others at the end of the body; a ValueError at the
    declaration if an owner has no region of its own, or if warpgroup_regions with register
    budgets ended the body."""
    roles = active().roles
    budgeted = next((role for role in roles if role.registers is not None), None)
    pairs = sorted(zip(refs, plan.decls, strict=True), key=lambda pair: pair[1].allocated)
    for ref, decl in pairs:
        if decl.owner is not None:
            role = next((r for r in roles if decl.owner in r.warpgroups), None)
            if role is None or role.warpgroups != (decl.owner,):
                raise ValueError(f"{decl.where}: TMEM owned by warpgroup {decl.owner} is freed "
                                 "at the end of that warpgroup's own warpgroup_region "
                                 f"(warpgroups={decl.owner}), which kernel has none")
            with ir.InsertionPoint(role.op.regions[0].blocks[0]):
                create(TmemDeallocOp, ref=ref.value, location=decl.where.location())
            continue
        if budgeted is not None:
            raise ValueError(f"{decl.where}: TMEM arrays are freed by every warpgroup at the "
                             "end of the kernel body, which cannot follow the "
                             f"warpgroup_region at {budgeted.where} (it sets a register "
                             "budget); declare it sd.TMEM(..., owner=w) to have warpgroup w "
                             "allocate it for every role and free it in its region")
        create(TmemDeallocOp, ref=ref.value, location=decl.where.location())
