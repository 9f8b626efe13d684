"""mbarrier objects: per-block records keyed by their shared-memory address.

PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier": a phase
completes when its pending arrival count and its tx-count are both zero; the pending count is
then reset to the expected count and the phase advances. `expect-tx` raises the tx-count,
`complete-tx` (from a bulk copy) lowers it; the tx-count lies in [-(2^20-1), 2^20-1].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from smalti.sim.errors import Fault
from smalti.sim.lanes import Lanes

MAX_COUNT = (1 << 20) - 1
MAX_TX = (1 << 20) - 1
BARRIER_BYTES = 8


@dataclass
class MBarrier:
    """The state of one mbarrier object; `phase` counts completed phases."""

    expected: int
    pending: int
    tx: int = 0
    phase: int = 0
    landed: list = field(default_factory=list)  # async ops whose complete_tx hit this phase
    completed: list = field(default_factory=list)  # their ops once the phase completed
    # Arrivals by threads of other CTAs in the current phase: None (none), "cluster" (every
    # one released at .cluster scope) or the weaker semantics one of them had; and the same
    # for the last completed phase, which waits check (smalti.sim.ops.mbarrier).
    remote: str | None = None
    completed_remote: str | None = None
    # The PTX line of the arrive that set `remote` (and of the completed phase's).
    remote_line: int | None = None
    completed_remote_line: int | None = None


Key = tuple[int, int]  # (block, shared address)


class BarrierTable:
    """Every initialised mbarrier of the launch; `on_phase(block)` runs when a phase completes."""

    def __init__(self, on_phase: Callable[[int], None]) -> None:
        self.table: dict[Key, MBarrier] = {}
        self._starts: np.ndarray | None = None  # the live barriers' flat offsets, sorted
        self.on_phase = on_phase
        self.version = 0  # bumped on every state change, so waiters know to poll again

    def get(self, key: Key, thread: int) -> MBarrier:
        """The barrier at `key`; a fault when it was never initialised (or was invalidated)."""
        bar = self.table.get(key)
        if bar is None:
            raise Fault(f"mbarrier at shared address {key[1]:#x} used before mbarrier.init "
                        "(or after mbarrier.inval)", thread)
        return bar

    def init(self, key: Key, count: int, thread: int) -> None:
        """mbarrier.init: phase 0, `count` expected arrivals, tx-count 0."""
        if key[1] % 8:
            raise Fault(f"mbarrier at shared address {key[1]:#x} is not 8-byte aligned", thread)
        if not 1 <= count <= MAX_COUNT:
            raise Fault(f"mbarrier.init count {count} is outside [1, {MAX_COUNT}]", thread)
        self.table[key] = MBarrier(count, count)
        self.version += 1
        self._starts = None

    def inval(self, key: Key, thread: int) -> None:
        """mbarrier.inval: the object stops being an mbarrier."""
        self.get(key, thread)
        del self.table[key]
        self.version += 1
        self._starts = None

    def check_data_store(self, flat: np.ndarray, nbytes: int, size: int, lanes: Lanes) -> None:
        """A fault when a data store (flat byte offsets into shared memory of `size` bytes
        per block) overwrites a live mbarrier: PTX ISA, mbarrier.inval: the object's memory
        may be reused for other data only after it is invalidated."""
        hit, below = self._overlaps(flat, nbytes, size)
        if hit is not None:
            first = int(np.argmax(hit))
            raise Fault(f"a {nbytes}-byte shared store at shared address "
                        f"{int(flat[first]) % size:#x} overwrites the live mbarrier at "
                        f"{int(below[first]) % size:#x}: invalidate it (mbarrier.inval) "
                        "before reusing its memory for data", lanes.first(hit))

    def check_async_write(self, flat: np.ndarray, size: int, thread: int, what: str) -> None:
        """The same for the bytes an async copy (TMA, bulk copy) writes, by `thread`."""
        hit, below = self._overlaps(flat.astype(np.uint64), 1, size)
        if hit is not None:
            first = int(np.argmax(hit))
            raise Fault(f"{what} writes shared address {int(flat[first]) % size:#x}, in the "
                        f"live mbarrier at {int(below[first]) % size:#x}: invalidate it "
                        "(mbarrier.inval) before reusing its memory for data", thread)

    def _overlaps(self, flat: np.ndarray, nbytes: int, size: int
                  ) -> tuple[np.ndarray | None, np.ndarray]:
        """(which accesses of `nbytes` at `flat` touch a live mbarrier, or None if none;
        the start of the barrier each may touch)."""
        if not self.table:
            return None, flat
        if self._starts is None:
            self._starts = np.array(sorted(b * size + a for b, a in self.table), np.uint64)
        starts = self._starts
        after = np.searchsorted(starts, flat + np.uint64(nbytes), side="left")
        below = starts[np.maximum(after - 1, 0)]  # the last barrier starting before the end
        hit = (after > 0) & (below + np.uint64(BARRIER_BYTES) > flat)
        return (hit if hit.any() else None), below

    def expect_tx(self, key: Key, nbytes: int, thread: int) -> None:
        """Raise the tx-count of the current phase by `nbytes`."""
        bar = self.get(key, thread)
        self._tx(bar, bar.tx + nbytes, thread)

    def complete_tx(self, key: Key, nbytes: int, thread: int, op: object = None) -> None:
        """Lower the tx-count by `nbytes` (a bulk copy landed); may complete the phase."""
        bar = self.get(key, thread)
        self._tx(bar, bar.tx - nbytes, thread)
        if op is not None:
            bar.landed.append(op)
        self._settle(key, bar)

    def arrive(self, key: Key, count: int, thread: int, drop: bool = False,
               remote: str | None = None, line: int | None = None) -> int:
        """`count` arrivals (after any expect-tx); returns the phase they arrived on.
        `remote`: some came from another CTA, released at "cluster" scope or more weakly
        (the weakest is kept, with its arrive's PTX `line`)."""
        bar = self.get(key, thread)
        if remote is not None and bar.remote in (None, "cluster") and bar.remote != remote:
            bar.remote, bar.remote_line = remote, line
        if count > bar.pending:
            raise Fault(f"{count} arrivals on the mbarrier at shared address {key[1]:#x} whose "
                        f"current phase awaits only {bar.pending}", thread)
        phase = bar.phase
        bar.pending -= count
        if drop:
            bar.expected -= count
        self.version += 1
        self._settle(key, bar)
        return phase

    def _tx(self, bar: MBarrier, tx: int, thread: int) -> None:
        if not -MAX_TX <= tx <= MAX_TX:
            raise Fault(f"mbarrier tx-count {tx} is outside [-{MAX_TX}, {MAX_TX}]", thread)
        bar.tx = tx
        self.version += 1

    def _settle(self, key: Key, bar: MBarrier) -> None:
        if bar.pending == 0 and bar.tx == 0:
            bar.phase += 1
            bar.pending = bar.expected
            bar.completed.extend(bar.landed)
            bar.landed.clear()
            bar.completed_remote, bar.remote = bar.remote, None
            bar.completed_remote_line, bar.remote_line = bar.remote_line, None
            self.version += 1
            self.on_phase(key[0])

    def done(self, key: Key, parity: int | None, token: int | None, thread: int) -> bool:
        """Whether the phase a wait names has completed (by parity, or by an arrive token)."""
        bar = self.get(key, thread)
        if parity is not None:
            # PTX ISA, mbarrier.test_wait/try_wait: `.parity` waits for the completion of
            # the phase whose parity is the operand, i.e. the current phase's parity differs.
            return (bar.phase & 1) != (parity & 1)
        return bar.phase > int(token)

    def describe(self, key: Key) -> str:
        """The barrier's state, for deadlock reports."""
        bar = self.table.get(key)
        if bar is None:
            return f"the mbarrier at shared address {key[1]:#x} (not initialised)"
        return (f"the mbarrier at shared address {key[1]:#x} (phase {bar.phase}, "
                f"{bar.pending} of {bar.expected} arrivals pending, tx-count {bar.tx})")
