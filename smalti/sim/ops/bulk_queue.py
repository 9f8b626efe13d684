"""What bulk copies (`cp.async.bulk`, tensor or not, and their `cp.reduce` forms) share: queueing
a write into shared memory that completes tx bytes on an mbarrier, queueing a read of shared
memory in the issuing thread's bulk async-group, the CTAs of a `.multicast::cluster` ctaMask,
and the element-wise reductions.

PTX ISA, "cp.async.bulk" / "cp.async.bulk.tensor": a copy into shared memory performs a
complete-tx of the bytes it wrote on its mbarrier; a copy out of shared memory completes
through bulk async-groups (`cp.async.bulk.commit_group`, `cp.async.bulk.wait_group`). Until
the program synchronises with it (a wait that observes the mbarrier phase, a wait_group), the
bytes it writes must not be read and the bytes it reads must not be written (sim/hazards.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault
from smalti.sim.machine import Machine
from smalti.sim.rounding import flush_subnormals

Landing = Callable[[], np.ndarray]  # the bytes a queued write puts in shared memory


def queue_shared_write(m: Machine, idx: np.ndarray, key: tuple[int, int], data: Landing,
                       thread: int, what: str, on_retire: Callable[[], None] | None = None
                       ) -> None:
    """Queue a write of `data()` (computed when it lands) to flat shared bytes `idx`, which
    then performs complete-tx of len(idx) bytes on mbarrier `key` (block, offset)."""
    engine = m.async_engine
    engine.barriers.get(key, thread)
    engine.barriers.check_async_write(idx, m.shared.size, thread, what)
    engine.shared.async_write(idx, thread, what)
    op = AsyncOp(engine.new_id(), what, lambda: None, on_retire=on_retire)

    def land() -> None:
        m.shared.data[idx] = data()
        engine.shared.filled(idx)
        engine.barriers.complete_tx(key, idx.size, thread, op)

    op.run = land
    engine.own(op, idx, reads=True)
    engine.issue(op)


def queue_shared_read(m: Machine, idx: np.ndarray, write: Callable[[np.ndarray], None],
                      thread: int, what: str, on_retire: Callable[[], None] | None = None
                      ) -> None:
    """Queue a read of flat shared bytes `idx` in `thread`'s bulk async-group: when it
    completes, `write` gets the bytes (and puts them where the copy goes)."""
    engine = m.async_engine
    engine.shared.async_read(idx, thread, what)
    op = AsyncOp(engine.new_id(), what, lambda: write(m.shared.data[idx]), on_retire=on_retire)
    engine.own(op, idx, reads=False)
    engine.issue(op, group=("bulk", thread))


def multicast_targets(m: Machine, thread: int, mask: int, what: str) -> list[tuple[int, int]]:
    """(block, block) of each CTA in the ctaMask of a multicast issued by `thread`: the copy
    lands, and signals the mbarrier, at the same offsets in each."""
    geometry = m.geometry
    size = geometry.cluster_size
    if mask == 0 or mask >> size:
        raise Fault(f"{what}: ctaMask {mask:#x} must name CTAs among the cluster's {size}",
                    thread)
    block = int(geometry.block_of[thread])
    ranks = [r for r in range(size) if mask >> r & 1]
    blocks = [int(geometry.peer(block, r)) for r in ranks]
    for rank, target in zip(ranks, blocks, strict=True):
        if target != block and m.shared.exited(np.array([target]))[0]:
            raise Fault(f"{what}: ctaMask {mask:#x} names CTA rank {rank} of the cluster, "
                        "which has exited: a CTA's peers must be done with its shared memory "
                        "before it exits (barrier.cluster)", thread)
    return [(target, target) for target in blocks]


def reduce_elements(op: str, old: np.ndarray, new: np.ndarray, flush: bool = False
                    ) -> np.ndarray:
    """old (op) new element-wise, rounded once to the element type (PTX ISA,
    cp.reduce.async.bulk{.tensor}); `flush`: subnormal inputs and results of an f32 add are
    flushed to sign-preserving zero (cp.reduce.async.bulk.add.f32)."""
    dtype = old.dtype
    if op == "add":
        if dtype.kind in "iu":
            return (old + new).astype(dtype)
        if flush:
            return flush_subnormals(flush_subnormals(old) + flush_subnormals(new))
        return (old.astype(np.float64) + new.astype(np.float64)).astype(dtype)
    if op in ("min", "max"):
        return (np.minimum if op == "min" else np.maximum)(old, new)
    if dtype.kind not in "iu":
        raise Fault(f"reduce-{op} needs an integer type, not {dtype}")
    match op:
        case "and":
            return old & new
        case "or":
            return old | new
        case "xor":
            return old ^ new
        case "inc":  # PTX ISA: (old >= new) ? 0 : old + 1
            return np.where(old >= new, 0, old + 1).astype(dtype)
    return np.where((old == 0) | (old > new), new, old - 1).astype(dtype)  # dec
