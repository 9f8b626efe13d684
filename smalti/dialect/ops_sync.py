"""Synchronisation ops: mbarrier arrays in shared memory, the warpgroup and cluster barriers.

    "smalti.initialize_barrier"(%bars) {arrival_count = 1 : i64}
    "smalti.invalidate_barrier"(%bars)  // before the bytes are reused
    "smalti.arrive"(%bars, %i)
    "smalti.arrive"(%bars, %i) {collective = array<i64: 0>}  // on every CTA along cluster x
    "smalti.arrive_expect_tx"(%bars, %i) {bytes = 32768 : i64}
    "smalti.wait"(%bars, %i, %parity)
    "smalti.warpgroup_barrier"()
    "smalti.cluster_barrier"()

`%bars` is a `memref<Nxi64, #gpu.address_space<workgroup>>` (from slice_smem); `%i` an
index selecting one of its N barriers; `%parity` an i1, i32 or index (its low bit counts).
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.bindings import type_name
from smalti.dialect.checks import check_index, check_smem_ref, collective_dims, constant_index
from smalti.dialect.definition import I64_ARRAY, INTEGER, Attr, Operand, SmaltiOp, Trait
from smalti.dialect.diagnostics import error_at

MAX_ARRIVAL_COUNT = (1 << 20) - 1  # PTX ISA: mbarrier.init count range
MAX_TX_BYTES = (1 << 20) - 1


def check_barriers(op: ir.Operation, value: ir.Value) -> int:
    """`value` is a 1-D SMEM array of i64 mbarriers; their number."""
    ref = check_smem_ref(op, value, "the barriers")
    if ref.rank != 1 or type_name(ref.element_type) != "i64":
        raise error_at(op, f"expects barriers as memref<Nxi64, #gpu.address_space<workgroup>>, "
                           f"got {ref}")
    return ref.shape[0]


def _check_barrier_index(op: ir.Operation, count: int, index: ir.Value) -> None:
    check_index(op, index, "the barrier index")
    value = constant_index(index)
    if value is not None and not 0 <= value < count:
        raise error_at(op, f"barrier index {value} is out of bounds for {count} barriers")


class InitializeBarrierOp(SmaltiOp):
    """Initialise every barrier of the array with `arrival_count` (one thread, then a fence
    and a block barrier)."""

    OPERATION_NAME = "smalti.initialize_barrier"
    TRAITS = Trait.BLOCK_COLLECTIVE

    barriers = Operand("the mbarrier array")
    arrival_count = Attr(INTEGER, "arrivals that complete a phase", minimum=1)

    def verify_op(self) -> None:
        check_barriers(self.operation, self.barriers)
        if self.arrival_count > MAX_ARRIVAL_COUNT:
            raise error_at(self.operation, f"'arrival_count' {self.arrival_count} exceeds "
                                           f"{MAX_ARRIVAL_COUNT}")


class InvalidateBarrierOp(SmaltiOp):
    """End the life of every barrier of the array, so that its bytes may hold other data
    (PTX ISA, mbarrier.inval: required before an mbarrier's memory is reused): the block
    meets (every wait on them is over), thread 0 invalidates each, the block meets again
    (before anyone reuses the bytes). Emitted where scoped shared memory holding barriers
    ends (`sd.scoped_smem`, `sd.emit_pipeline`)."""

    OPERATION_NAME = "smalti.invalidate_barrier"
    TRAITS = Trait.BLOCK_COLLECTIVE
    USER_FACING = False

    barriers = Operand("the mbarrier array")

    def verify_op(self) -> None:
        check_barriers(self.operation, self.barriers)


class ArriveOp(SmaltiOp):
    """Every thread of the warpgroup arrives on barrier i: 128 arrivals per warpgroup.

    With `collective = array<i64: dims>` (distinct cluster dims of size > 1 in the kernel's
    `smalti.cluster`), the warpgroup releases barrier i of every CTA along those dims, its
    own included, so that peers multicasting into this CTA learn it is done with a buffer:
    the warpgroup meets (its shared-memory reads ordered before), then one thread arrives
    on each of the n CTAs' barrier with release semantics at cluster scope. That is one
    arrival per warpgroup on each barrier reached: a barrier released this way by W
    warpgroups in each of the n CTAs needs `arrival_count` W * n. Waits on such a barrier
    acquire at cluster scope. A CTA must not exit while peers may still arrive on its
    barriers: end such kernels with a `smalti.cluster_barrier`."""

    OPERATION_NAME = "smalti.arrive"

    barriers = Operand("the mbarrier array")
    index = Operand("the barrier arrived on")
    collective = Attr(I64_ARRAY, "the cluster dims whose CTAs' barrier i it releases",
                      optional=True, default=())

    def verify_op(self) -> None:
        op = self.operation
        _check_barrier_index(op, check_barriers(op, self.barriers), self.index)
        collective_dims(op)

    def is_warpgroup_collective(self) -> bool:
        """A collective arrive: the warpgroup meets before one thread releases each peer."""
        return bool(self.collective)


class ArriveExpectTxOp(SmaltiOp):
    """One thread announces `bytes` of transactions and arrives on barrier i."""

    OPERATION_NAME = "smalti.arrive_expect_tx"

    barriers = Operand("the mbarrier array")
    index = Operand("the barrier arrived on")
    bytes = Attr(INTEGER, "the transaction bytes the phase now also waits for", minimum=1)

    def verify_op(self) -> None:
        op = self.operation
        _check_barrier_index(op, check_barriers(op, self.barriers), self.index)
        if self.bytes > MAX_TX_BYTES:
            raise error_at(op, f"'bytes' {self.bytes} exceeds the tx-count limit "
                               f"{MAX_TX_BYTES}")


class WaitOp(SmaltiOp):
    """Wait until the phase of barrier i with the given parity has completed."""

    OPERATION_NAME = "smalti.wait"

    barriers = Operand("the mbarrier array")
    index = Operand("the barrier waited on")
    parity = Operand("the phase parity (its low bit): an i1, i32 or index")

    def verify_op(self) -> None:
        op = self.operation
        _check_barrier_index(op, check_barriers(op, self.barriers), self.index)
        parity = self.parity.type
        if not (isinstance(parity, ir.IndexType) or (isinstance(parity, ir.IntegerType)
                                                     and ir.IntegerType(parity).width <= 32)):
            raise error_at(op, f"parity must be an i1, i32 or index, got {parity}")


class WarpgroupBarrierOp(SmaltiOp):
    """The 128 threads of the warpgroup meet (a named bar.sync)."""

    OPERATION_NAME = "smalti.warpgroup_barrier"
    TRAITS = Trait.WARPGROUP_COLLECTIVE


class ClusterBarrierOp(SmaltiOp):
    """Every thread of every CTA in the cluster meets (barrier.cluster arrive + wait): what
    a CTA wrote to shared memory before it, mbarrier inits included, is visible to its peers
    after it, and no CTA passes it while a peer may still be on its way."""

    OPERATION_NAME = "smalti.cluster_barrier"
    TRAITS = Trait.BLOCK_COLLECTIVE
