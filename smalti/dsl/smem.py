"""Shared-memory declarations of a kernel (`smem=[...]`): arrays, mbarrier arrays and unions,
placed at aligned byte offsets of the one dynamic shared-memory buffer.

    smem=[sd.Barriers(2),
          sd.Union(sd.SMEM((2, 128, 64), jnp.bfloat16), sd.SMEM((128, 128), jnp.bfloat16)),
          sd.SMEM((2, 64, 128), jnp.bfloat16)]

Each array or barrier array is one more parameter of the body, after the outputs (a union's
members are consecutive parameters that share memory)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from smalti.dialect.ops_memory import MAX_SMEM_BYTES, SMEM_ALIGNMENT
from smalti.dialect.ops_sync import InitializeBarrierOp
from smalti.dsl.dtypes import memory_bytes, mlir_name
from smalti.dsl.locations import SourcePosition, user_error, user_position
from smalti.dsl.trace import dsl_entry

ARRAY_ALIGNMENT = 1024  # a 128-byte swizzle pattern repeats every 8 rows of 128 bytes
BARRIER_BYTES = 8  # one mbarrier is a 64-bit word


class SharedMemoryLimitError(ValueError):
    """Declared shared memory exceeds what one block may use (MAX_SMEM_BYTES, 227 KiB)."""


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class SmemArray:
    """An array in shared memory; rank >= 3 means stages: one 2-D (or more) buffer each."""

    shape: tuple[int, ...]
    dtype: np.dtype
    where: SourcePosition
    alignment = ARRAY_ALIGNMENT  # a class constant, not a field

    @property
    def staged(self) -> bool:
        return len(self.shape) >= 3

    @property
    def stage_bytes(self) -> int:
        """Bytes of one stage (of the whole array when it is not staged)."""
        shape = self.shape[1:] if self.staged else self.shape
        return math.ceil(math.prod(shape) * memory_bytes(self.dtype))

    @property
    def stage_stride(self) -> int:
        """Bytes from one stage to the next: every stage starts swizzle-aligned."""
        return round_up(self.stage_bytes, ARRAY_ALIGNMENT)

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.stage_stride if self.staged else self.stage_bytes


@dataclass(frozen=True)
class SmemBarriers:
    """`count` mbarriers, each initialised at kernel start with `arrival_count`."""

    count: int
    arrival_count: int
    where: SourcePosition
    alignment = SMEM_ALIGNMENT  # a class constant, not a field

    @property
    def nbytes(self) -> int:
        return self.count * BARRIER_BYTES


SmemDecl = SmemArray | SmemBarriers


@dataclass(frozen=True)
class SmemUnion:
    """Declarations that share memory (reuse: the caller makes sure their lives don't overlap)."""

    members: tuple[SmemDecl, ...]
    where: SourcePosition

    @property
    def nbytes(self) -> int:
        return max(m.nbytes for m in self.members)

    @property
    def alignment(self) -> int:
        return max(m.alignment for m in self.members)


SmemEntry = SmemDecl | SmemUnion


def SMEM(shape: Sequence[int], dtype: object) -> SmemArray:
    """A shared-memory array of `shape` and `dtype` (a leading dim of rank-3+ arrays counts
    stages: the body indexes a stage with a Python int)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not shape or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in shape):
        raise user_error(ValueError, f"SMEM needs a shape of positive Python ints, got {shape!r}")
    if mlir_name(dtype) is None:
        raise user_error(TypeError, f"SMEM: unsupported dtype {dtype!r}")
    return SmemArray(shape, np.dtype(dtype), user_position())


@dsl_entry(InitializeBarrierOp)  # declared barriers are initialised at kernel start
def Barriers(count: int, arrival_count: int = 1) -> SmemBarriers:
    """`count` mbarriers in shared memory, initialised with `arrival_count` arrivals per phase."""
    for what, value in (("count", count), ("arrival_count", arrival_count)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise user_error(ValueError, f"Barriers: {what} must be a positive int, got "
                                         f"{value!r}")
    return SmemBarriers(count, arrival_count, user_position())


def Union(*members: SmemDecl) -> SmemUnion:
    """Declarations placed at the same offset (memory reused by buffers with disjoint lives)."""
    if not members or not all(isinstance(m, SmemArray | SmemBarriers) for m in members):
        raise user_error(TypeError, "Union takes one or more sd.SMEM(...) or sd.Barriers(...) "
                                    "declarations")
    return SmemUnion(tuple(members), user_position())


@dataclass(frozen=True)
class Placement:
    """Where one declaration lives: its byte offset in dynamic shared memory."""

    decl: SmemDecl
    offset: int


def plan_smem(entries: object, kernel: str, start: int = 0
              ) -> tuple[tuple[Placement, ...], int]:
    """Offsets of the declarations (in body-parameter order), placed from byte `start` on,
    and the bytes used in all; a ValueError naming the declaration's line when they exceed
    what a block may use."""
    if not isinstance(entries, list | tuple) or not all(
            isinstance(e, SmemArray | SmemBarriers | SmemUnion) for e in entries):
        raise TypeError(f"kernel {kernel}: smem must be a list of sd.SMEM, sd.Barriers and "
                        f"sd.Union declarations, got {entries!r}")
    placements: list[Placement] = []
    end = start
    for entry in entries:
        offset = round_up(end, entry.alignment)
        members = entry.members if isinstance(entry, SmemUnion) else (entry,)
        placements.extend(Placement(m, offset) for m in members)
        end = offset + entry.nbytes
        if end > MAX_SMEM_BYTES:
            raise SharedMemoryLimitError(
                f"{entry.where}: kernel {kernel} declares {end} bytes of shared "
                f"memory up to this buffer ({end / 1024:.1f} KiB), more than the "
                f"{MAX_SMEM_BYTES} bytes (227 KiB) a block may use")
    return tuple(placements), end


@dataclass
class SmemStack:
    """Shared memory a kernel body takes while it is traced: the declared buffers (`top`
    starts above them), then scoped allocations (sd.scoped_smem) stacked above those, each
    freed when its scope ends; `peak` is the most bytes in use at once."""

    top: int
    peak: int = 0
    # Barriers whose scope ended: (first byte, end, the smalti.invalidate_barrier op emitted
    # there). The PTX ISA wants mbarrier.inval only before the bytes are reused, and ptxas
    # schedules a pipeline's loop worse when one follows it, so `finish` erases the ops of
    # barriers no later scope reused.
    retired: list[tuple[int, int, object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.peak = max(self.peak, self.top)

    def push(self, entries: Sequence[SmemEntry], kernel: str
             ) -> tuple[tuple[Placement, ...], int]:
        """Place `entries` above the live allocations; (their placements, the top to pop
        back to when their scope ends)."""
        placements, end = plan_smem(entries, kernel, self.top)
        self.retired = [r for r in self.retired if r[1] <= self.top or r[0] >= end]
        below, self.top = self.top, end
        self.peak = max(self.peak, end)
        return placements, below

    def pop(self, top: int) -> None:
        self.top = top

    def finish(self) -> None:
        """The body is traced: drop the invalidations of barriers whose bytes stayed unused."""
        for _, _, op in self.retired:
            op.erase()  # type: ignore[attr-defined]
        self.retired.clear()
