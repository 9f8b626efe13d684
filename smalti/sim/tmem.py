"""Tensor memory (TMEM): each CTA's 128 lanes x 512 columns of 32-bit cells, its column
allocator, and the cells in-flight tcgen05 operations own.

PTX ISA, "Tensor Memory" (sm_100a): a TMEM address is 32 bits, the lane in bits 31-16 and the
column in bits 15-0. "Tensor Memory Allocation": `tcgen05.alloc` allocates a number of
columns that is a power of two, at least 32 and at most 512, across all 128 lanes, and writes
the address of the allocation (lane 0, its first column) to shared memory;
`tcgen05.dealloc` frees exactly such an allocation (address and column count as allocated);
after `tcgen05.relinquish_alloc_permit` the CTA may not allocate again. Accessing columns
that are not allocated is undefined: the simulator faults. All allocated columns must be
freed before the kernel exits.

"Tensor Memory access restrictions" (data-path layout): warp w of a warpgroup reaches only
lanes 32*(w % 4) .. 32*(w % 4) + 31 with tcgen05.ld / tcgen05.st.

The state hangs off the launch's async engine (one per launch), so it needs no field of its
own in the machine.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from smalti.sim.errors import Fault

LANES = 128
COLUMNS = 512
MIN_COLUMNS = 32
LANES_PER_WARP = 32  # the lanes one warp of a warpgroup reaches


def lane_of(address: int) -> int:
    """The lane of a TMEM address (bits 31-16)."""
    return (int(address) >> 16) & 0xFFFF


def column_of(address: int) -> int:
    """The column of a TMEM address (bits 15-0)."""
    return int(address) & 0xFFFF


def address(lane: int, column: int) -> int:
    """The TMEM address of (lane, column)."""
    return (lane << 16) | column


def valid_column_count(ncols: int) -> bool:
    """Whether `ncols` may be allocated: a power of two in [32, 512]."""
    return MIN_COLUMNS <= ncols <= COLUMNS and ncols & (ncols - 1) == 0


@dataclass
class _Block:
    """One CTA's tensor memory: cells, allocations (first column -> column count), whether it
    gave up its allocation permit, and which in-flight operation owns each cell (0: none)."""

    cells: np.ndarray = field(default_factory=lambda: np.zeros((LANES, COLUMNS), np.uint32))
    allocations: dict[int, int] = field(default_factory=dict)
    relinquished: bool = False
    owner: np.ndarray = field(default_factory=lambda: np.zeros((LANES, COLUMNS), np.int64))


class TensorMemory:
    """The tensor memory of every CTA of a launch (created on first use)."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.what: dict[int, str] = {}  # in-flight owner id -> its description,
        self.waits: dict[int, str] = {}  # what waits for it,
        self.kinds: dict[int, str] = {}  # and its kind ("mma", "st")
        # Per issuing thread, its asynchronous tcgen05 operations (AsyncOps) not yet retired:
        # a tcgen05.commit tracks all of them, committed before or not (ops/tcgen05_mma.py).
        self.in_flight: dict[int, list] = {}

    def block(self, block: int) -> _Block:
        found = self.blocks.get(block)
        if found is None:
            found = self.blocks[block] = _Block()
        return found

    # -- allocation ------------------------------------------------------------------------

    def alloc(self, block: int, ncols: int, thread: int) -> int:
        """tcgen05.alloc: the address (lane 0) of `ncols` newly allocated columns. Columns
        are taken at the lowest offset that is a multiple of `ncols` (any free run is one the
        ISA allows). Where none is free the hardware blocks until one is; here that is a fault
        (nothing frees columns while the allocating warp waits)."""
        state = self.block(block)
        if state.relinquished:
            raise Fault("tcgen05.alloc after tcgen05.relinquish_alloc_permit: the CTA gave up "
                        "its permit to allocate tensor memory", thread)
        if not valid_column_count(ncols):
            raise Fault(f"tcgen05.alloc of {ncols} columns: the count must be a power of two "
                        f"in [{MIN_COLUMNS}, {COLUMNS}]", thread)
        for start in range(0, COLUMNS, ncols):
            if not any(start < s + n and s < start + ncols
                       for s, n in state.allocations.items()):
                state.allocations[start] = ncols
                return address(0, start)
        used = sum(state.allocations.values())
        raise Fault(f"tcgen05.alloc of {ncols} columns: only {COLUMNS - used} of {COLUMNS} are "
                    "free (in runs too short), so the allocation would block forever", thread)

    def dealloc(self, block: int, taddr: int, ncols: int, thread: int) -> None:
        """tcgen05.dealloc: free the allocation at `taddr`, of `ncols` columns."""
        state = self.block(block)
        start = column_of(taddr)
        if lane_of(taddr) != 0 or state.allocations.get(start) is None:
            raise Fault(f"tcgen05.dealloc of TMEM address {taddr:#010x}, which no tcgen05.alloc "
                        "returned (or which was freed already)", thread)
        if state.allocations[start] != ncols:
            raise Fault(f"tcgen05.dealloc of {ncols} columns at column {start}, allocated with "
                        f"{state.allocations[start]}", thread)
        busy = state.owner[:, start:start + ncols]
        if busy.any():
            op = int(busy[busy != 0].min())
            raise Fault(f"tcgen05.dealloc of columns {start}..{start + ncols - 1} while "
                        f"{self.what.get(op, 'an operation')} still uses them", thread)
        del state.allocations[start]

    def relinquish(self, block: int) -> None:
        """tcgen05.relinquish_alloc_permit: later allocations by the CTA fault."""
        self.block(block).relinquished = True

    def leaked(self) -> list[tuple[int, int, int]]:
        """(block, first column, columns) of allocations never freed."""
        return [(b, s, n) for b, state in self.blocks.items()
                for s, n in state.allocations.items()]

    # -- access ----------------------------------------------------------------------------

    def check(self, block: int, lanes: np.ndarray, columns: np.ndarray, thread: int,
              what: str) -> None:
        """Fault unless every (lane, column) lies in tensor memory and in an allocation."""
        lanes, columns = np.asarray(lanes), np.asarray(columns)
        if lanes.size == 0:
            return
        if lanes.min() < 0 or lanes.max() >= LANES:
            raise Fault(f"{what}: lane {int(lanes.max())} is outside tensor memory's {LANES} "
                        "lanes", thread)
        if columns.min() < 0 or columns.max() >= COLUMNS:
            raise Fault(f"{what}: column {int(columns.max())} is outside tensor memory's "
                        f"{COLUMNS} columns", thread)
        allocated = np.zeros(COLUMNS, np.bool_)
        for start, n in self.block(block).allocations.items():
            allocated[start:start + n] = True
        outside = ~allocated[columns]
        if outside.any():
            column = int(np.asarray(columns)[outside].reshape(-1)[0])
            raise Fault(f"{what}: column {column} of tensor memory is not allocated "
                        "(tcgen05.alloc)", thread)

    def read(self, block: int, lanes: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """Cells (lanes, columns broadcast together), checked beforehand with `check`."""
        return self.block(block).cells[lanes, columns]

    def write(self, block: int, lanes: np.ndarray, columns: np.ndarray,
              values: np.ndarray) -> None:
        self.block(block).cells[lanes, columns] = values

    # -- cells owned by in-flight operations -----------------------------------------------

    def own(self, block: int, lanes: np.ndarray, columns: np.ndarray, op: int,
            what: str, wait: str, kind: str) -> None:
        """Cells in-flight operation `op` (of `kind`: "mma", "st", "cp") writes: other accesses
        fault until it retires; `wait` names what makes the program wait for it."""
        self.block(block).owner[lanes, columns] = op
        self.what[op] = what
        self.waits[op] = wait
        self.kinds[op] = kind

    def guard(self, block: int, lanes: np.ndarray, columns: np.ndarray, thread: int,
              what: str, pipelined: str | tuple[str, ...] | None = None) -> None:
        """Fault when an in-flight operation owns one of the cells, unless it is of a kind in
        `pipelined` (PTX ISA, "tcgen05 Memory Consistency Model": tcgen05.mma instructions
        with the same accumulator are ordered among themselves without waits, and so are
        tcgen05.cp and the tcgen05.mma after it in the same thread's pipeline)."""
        owner = self.block(block).owner[lanes, columns]
        if not owner.any():
            return
        kinds = (pipelined,) if isinstance(pipelined, str) else (pipelined or ())
        ops = [int(op) for op in np.unique(owner[owner != 0])
               if self.kinds.get(int(op)) not in kinds]
        if ops:
            op = ops[0]
            raise Fault(f"{what} touches tensor memory that {self.what.get(op, 'an operation')}"
                        f" still writes: {self.waits.get(op, 'wait for it')} first", thread)

    def release(self, ops: set[int]) -> None:
        """Operations `ops` retired: their cells are free to access."""
        if not ops:
            return
        ids = np.array(sorted(ops), np.int64)
        for state in self.blocks.values():
            if state.owner.any():
                state.owner[np.isin(state.owner, ids)] = 0
        for op in ops:
            self.what.pop(op, None)
            self.waits.pop(op, None)
            self.kinds.pop(op, None)


_MEMORIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def leak_message(machine) -> tuple[str, int] | None:
    """(message, a thread of the CTA) when a CTA exited with tensor memory still allocated
    (PTX ISA, "Tensor Memory Allocation": all allocated columns must be freed with
    tcgen05.dealloc before the kernel exits); None when nothing leaked or TMEM was unused."""
    found = _MEMORIES.get(machine.async_engine)
    leaked = [] if found is None else found.leaked()
    if not leaked:
        return None
    block, start, ncols = min(leaked)
    return (f"the kernel exited with {ncols} columns of tensor memory still allocated "
            f"(columns {start}..{start + ncols - 1}): every tcgen05.alloc needs a "
            "tcgen05.dealloc before the CTA exits",
            block * machine.geometry.block_threads)


def tensor_memory(machine) -> TensorMemory:
    """The tensor memory of the launch `machine` runs (kept with its async engine)."""
    engine = machine.async_engine
    found = _MEMORIES.get(engine)
    if found is None:
        found = _MEMORIES[engine] = TensorMemory()
    return found
