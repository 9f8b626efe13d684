"""State of lowering one kernel: the PTX builder, what each MLIR value became, what rules
share across the kernel; and lowering a block of ops through the rule registry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import scf

from smalti.dialect.attributes import attr_to_layouts
from smalti.dialect.bindings import file_line_col
from smalti.dialect.diagnostics import error_at
from smalti.dialect.kernel import KernelSignature, TensorMapRecord
from smalti.dialect.ops_debug import DebugPrintRecord
from smalti.dialect.verifier import verify_op
from smalti.lowering.registry import RULES
from smalti.lowering.values import BufferValue, FragmentedArray, LoweredValue, ScalarValue
from smalti.ptx import Guard, KernelBuilder, Register, Symbol
from smalti.ptx.module import SourceLocation
from smalti.tiling import WARPGROUP_SIZE, Distribution, Layout

# (argument, symmetric offset, box, swizzle): one tensor map each
TensorMapKey = tuple[int, int | None, tuple[int, ...], int | None]


@dataclass(frozen=True)
class SmemAccess:
    """Generic (ld/st.shared) accesses of the warpgroup to bytes [start, stop) of shared
    memory not yet ordered by a barrier. `owner` identifies accesses in which every thread
    touches only elements it accessed itself (a ref and a layout without replication);
    None when threads may touch each other's elements."""

    start: int
    stop: float  # math.inf: unknown extent
    write: bool
    owner: object | None = None


@dataclass(frozen=True)
class ScratchBuffer:
    """A static shared buffer that lowering rules of one kind share across a kernel (ops of
    a warpgroup run one after another): `stride` bytes per copy, one copy per warpgroup of
    `warpgroups` (the warpgroups that may use it, in order)."""

    symbol: Symbol
    stride: int
    warpgroups: tuple[int, ...]


@dataclass(frozen=True)
class DebugBuffer:
    """The kernel's debug buffer: global address, this thread's instance, ops and records."""

    base: Register
    instance: Register | None  # None: one block of one warpgroup (instance 0)
    ops: tuple[ir.Operation, ...]
    records: tuple[DebugPrintRecord, ...]


@dataclass(frozen=True)
class CollectiveParams:
    """A collective kernel's hidden parameters, read once at its entry: the device's index
    along the mesh axis (.u32), the global address of the peer table, of the device's own
    symmetric heap, and the multicast address of the heap (smalti.lowering.collective)."""

    device: Register
    peers: Register
    own_heap: Register
    multicast: Register


HANDOFF_KEEPING_DIALECTS = ("arith", "index")
"""Dialects whose ops only compute registers: they leave a tcgen05 hand-off standing."""
HANDOFF_KEEPERS: set[type[ir.OpView]] = set()
"""Op classes that leave a tcgen05 hand-off standing (what only thread 0 issues, like
tcgen05.mma / cp / commit); lowering modules register theirs (smalti.lowering.tcgen05)."""


def keeps_handoff(op: ir.OpView) -> bool:
    """Whether `op` neither writes memory nor syncs, so that a tcgen05 hand-off before it
    still orders everything the warpgroup did before the next tcgen05 issue."""
    return type(op) in HANDOFF_KEEPERS \
        or op.operation.name.split(".", 1)[0] in HANDOFF_KEEPING_DIALECTS


def _source(location: ir.Location) -> SourceLocation | None:
    """Where an op comes from, for the `.loc` of the instructions it lowers to."""
    position = file_line_col(location)
    return None if position is None else SourceLocation(*position)


class LoweringContext:
    def __init__(self, builder: KernelBuilder, signature: KernelSignature) -> None:
        self.builder = builder
        self.signature = signature
        self.values: dict[ir.Value, LoweredValue] = {}
        self._thread_index: Register | None = None
        self.cache: dict[object, object] = {}  # per-kernel memo of values rules share
        # Memo of values that are cheaper to recompute than to keep live into nested regions
        # (addresses from the shared-memory symbol): each region starts it afresh.
        self.block_cache: dict[object, object] = {}
        # Whether the threads may have stored to shared memory since the last
        # fence.proxy.async (smalti.lowering.proxy); a region can only set it for what follows.
        self.unpublished_smem_writes = False
        # The warpgroup's shared-memory accesses since its last barrier (smalti.lowering.
        # smem_order); a region can only add to them for what follows.
        self.smem_pending: tuple[SmemAccess, ...] = ()
        # Whether a tcgen05 hand-off (smalti.lowering.tcgen05) was the last thing that
        # mattered: the warpgroup met, fenced, and nothing since wrote memory or synced, so
        # the next tcgen05 issue needs none. Reset by every other op and at region bounds.
        self.handoff_done = False
        # Per kernel, kept across regions:
        self.tensor_maps: dict[TensorMapKey, Register] = {}  # generic address of each map
        self.tensor_map_records: tuple[TensorMapRecord, ...] = ()  # the maps it takes
        self.symmetric_stores = False  # whether TMA stores write symmetric buffers
        self.debug_buffer: DebugBuffer | None = None
        self.collective: CollectiveParams | None = None
        self.smem_declared = False  # the dynamic shared buffer's .extern .shared
        # Byte ranges of the barrier arrays other CTAs signal (None: not computed yet).
        self.peer_barriers: tuple[tuple[int, float], ...] | None = None
        self._scratch_counts: dict[str, int] = {}
        # The scratch of relayouts through shared memory (smalti.lowering.relayout_smem).
        self.relayout_scratch: ScratchBuffer | None = None

    def lower_block(self, block: ir.Block) -> tuple[LoweredValue, ...]:
        """Lower `block`'s ops in order; an `scf.yield` ends it and its lowered operands are
        returned (the enclosing scf rule moves them where the region's results live)."""
        for op in block.operations:
            view = op.operation.opview
            if isinstance(view, scf.YieldOp):
                return tuple(self.get(v) for v in view.operation.operands)
            rule = RULES.get(view)
            if rule is None:
                raise error_at(view.operation, "has no PTX lowering rule")
            verify_op(view.operation)  # rules read fields: malformed ops stop here, located
            self.builder.source = _source(view.location)
            self.handoff_done &= keeps_handoff(view)
            rule(self, view)
            if self.unpublished_smem_writes or self.smem_pending:
                self.handoff_done = False  # a generic shared-memory access since
        return ()

    def set(self, value: ir.Value, lowered: LoweredValue) -> None:
        self.values[value] = lowered

    def get(self, value: ir.Value) -> LoweredValue:
        return self.values[value]

    def collective_params(self, op: ir.Operation) -> CollectiveParams:
        """The collective kernel's hidden parameters; a located error in any other kernel."""
        if self.collective is None:
            raise error_at(op, "is in a kernel without 'smalti.devices'")
        return self.collective

    def scalar(self, op: ir.Operation, value: ir.Value) -> ScalarValue:
        lowered = self.values.get(value)
        if not isinstance(lowered, ScalarValue):
            raise error_at(op, f"expects a scalar operand, got {value.type}")
        return lowered

    def array(self, op: ir.Operation, value: ir.Value) -> FragmentedArray:
        lowered = self.values.get(value)
        if not isinstance(lowered, FragmentedArray):
            raise error_at(op, f"expects a vector operand, got {value.type}")
        return lowered

    def buffer(self, op: ir.Operation, value: ir.Value) -> BufferValue:
        lowered = self.values.get(value)
        if not isinstance(lowered, BufferValue):
            raise error_at(op, f"expects a kernel buffer argument, got {value.type}")
        return lowered

    def scratch_shared(self, name_hint: str, size_bytes: int, align: int = 16) -> Symbol:
        """A fresh static `.shared .align A .b8 NAME[size]` buffer for one rule's scratch."""
        index = self._scratch_counts.get(name_hint, 0)
        self._scratch_counts[name_hint] = index + 1
        return self.builder.shared(f"__smalti_{name_hint}_{index}", size_bytes, align=align)

    @contextmanager
    def region(self) -> Iterator[None]:
        """Lower a nested region: values it memoises (thread offsets, special registers) are
        forgotten afterwards, because the region's code may not run (or run zero times);
        `block_cache` values are not carried in, so loops do not keep them live."""
        saved, thread_index = dict(self.cache), self._thread_index
        saved_block, self.block_cache = self.block_cache, {}
        unpublished, pending = self.unpublished_smem_writes, self.smem_pending
        self.handoff_done = False  # a loop body also follows its own last iteration
        with self.builder.scope():
            try:
                yield
            finally:
                self.cache, self._thread_index = saved, thread_index
                self.block_cache = saved_block
                # the region may not have run: what was pending before still is
                self.unpublished_smem_writes |= unpublished
                self.smem_pending = tuple(dict.fromkeys((*pending, *self.smem_pending)))
                self.handoff_done = False  # the region may have written or synced

    def first_copy(self, distribution: Distribution) -> Guard | None:
        """The guard of a store from a replicated layout: only the thread holding the first
        copy of each element writes it (None when every element has one holder)."""
        mask = distribution.replica_mask
        if not mask:
            return None
        key = ("first_copy", mask)
        if key not in self.cache:
            bits = self.builder.compute("and.b32", "b32", self.thread_index(), mask)
            self.cache[key] = self.builder.compute("setp.eq.b32", "pred", bits, 0)
        return Guard(self.cache[key])

    def thread_index(self) -> Register:
        """The thread's index within its warpgroup (0..127), as .u32."""
        if self._thread_index is None:
            tid = self.builder.special("%tid.x")
            if self.signature.warpgroups > 1:
                tid = self.builder.compute("and.b32", "u32", tid, WARPGROUP_SIZE - 1)
            self._thread_index = tid
        return self._thread_index


def layouts_of(op: ir.Operation, attr: str, count: int) -> list[Layout]:
    """The op's inferred layouts; a located error if inference has not run."""
    if attr not in op.attributes:
        raise error_at(op, f"has no '{attr}': run smalti-infer-layouts before lowering")
    layouts = attr_to_layouts(op.attributes[attr])
    if len(layouts) != count:
        raise error_at(op, f"'{attr}' has {len(layouts)} layouts for {count} vector values")
    return layouts
