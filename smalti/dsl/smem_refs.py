"""The body's shared-memory parameters: refs carved by `smalti.slice_smem` at kernel start
(one slice per stage of a staged array) and mbarrier arrays initialised there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dsl.dtypes import mlir_type
from smalti.dsl.index import Index, IndexLike, as_index
from smalti.dsl.locations import user_error
from smalti.dsl.refs import Ref
from smalti.dsl.smem import Placement, SmemArray, SmemBarriers
from smalti.dsl.trace import emit, emit_value

_WORKGROUP = "#gpu.address_space<workgroup>"


def smem_type(shape: Sequence[int], element: ir.Type) -> ir.MemRefType:
    return ir.MemRefType.get(list(shape), element, memory_space=ir.Attribute.parse(_WORKGROUP))


class StagedRef:
    """A staged shared-memory array: `ref[s]` (s a Python int) is stage s, its own Ref."""

    def __init__(self, stages: tuple[Ref, ...], name: str) -> None:
        self.stages = stages
        self.name = name
        self.shape = (len(stages), *stages[0].shape)
        self.dtype = stages[0].dtype

    def __len__(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        return f"StagedRef({self.name}: {self.dtype.name}{list(self.shape)})"

    def __getitem__(self, stage: object) -> Ref:
        if isinstance(stage, Index) and stage.static is None:
            raise user_error(TypeError, f"the stage of {self.name} must be a Python int (each "
                                        "stage is its own shared-memory slice); unroll the "
                                        "loop over stages")
        if isinstance(stage, bool) or not hasattr(stage, "__index__"):
            raise user_error(TypeError, f"index {self.name} with a stage (a Python int), got "
                                        f"{type(stage).__name__}")
        index = stage.__index__()  # type: ignore[attr-defined]
        if not -len(self.stages) <= index < len(self.stages):
            raise user_error(IndexError, f"stage {index} is out of range for {self.name} with "
                                         f"{len(self.stages)} stages")
        return self.stages[index]


@dataclass(frozen=True)
class Barrier:
    """One mbarrier of a BarrierArray: arrive, expect TMA bytes, wait for a phase."""

    array: BarrierArray
    index: Index

    def arrive(self) -> None:
        """Every thread of the warpgroup arrives."""
        emit("smalti.arrive", [self.array.value, self.index.materialize()])

    def arrive_expect_tx(self, nbytes: int) -> None:
        """One thread announces `nbytes` of TMA transactions and arrives."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
            raise user_error(ValueError, "arrive_expect_tx needs a positive Python int of "
                                         f"bytes, got {nbytes!r}")
        i64 = ir.IntegerType.get_signless(64)
        emit("smalti.arrive_expect_tx", [self.array.value, self.index.materialize()],
             attributes={"bytes": ir.IntegerAttr.get(i64, nbytes)})

    def wait(self, parity: IndexLike) -> None:
        """Wait until the phase of this barrier with `parity` (its low bit) has completed."""
        phase = as_index(parity, "a barrier phase parity").materialize()
        emit("smalti.wait", [self.array.value, self.index.materialize(), phase])


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


SmemParam = Ref | StagedRef | BarrierArray


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
                Ref(_slice(placement.offset + s * decl.stage_stride, decl.shape[1:], element,
                           decl), f"{name}[{s}]")
                for s in range(decl.shape[0]))
            params.append(StagedRef(stages, name))
        else:
            params.append(Ref(_slice(placement.offset, decl.shape, mlir_type(decl.dtype), decl),
                              name))
    for placement, param in zip(placements, params, strict=True):
        if isinstance(placement.decl, SmemBarriers):
            i64 = ir.IntegerType.get_signless(64)
            emit("smalti.initialize_barrier", [param.value],  # type: ignore[union-attr]
                 attributes={"arrival_count": ir.IntegerAttr.get(
                     i64, placement.decl.arrival_count)},
                 location=placement.decl.where.location())
    return params


def _slice(offset: int, shape: Sequence[int], element: ir.Type,
           decl: SmemArray | SmemBarriers) -> ir.Value:
    location = decl.where.location()
    index = ir.IndexType.get()
    start = emit_value("arith.constant", [], index, {"value": ir.IntegerAttr.get(index, offset)},
                       location=location)
    return emit_value("smalti.slice_smem", [start], smem_type(shape, element),
                      location=location)
