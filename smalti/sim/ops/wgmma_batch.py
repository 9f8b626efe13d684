"""The effect of one wgmma.mma_async for any number of warpgroups at once.

One instruction is issued for every warpgroup that runs it; each gets its own asynchronous
operation (their completion is tracked one by one), but operations completing together
compute together: one batched matmul and one register write per accumulator register,
instead of one of each per warpgroup. Products are exact in float64 and summed there (one
BLAS product per warpgroup, as for a single one), then rounded once to the accumulator type.
D is formed as tiles (S x 64 x N) and transposed into the registers; the tiles are kept, so
the next wgmma of a chain finds its old D without transposing it back.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from smalti.sim.async_engine import AsyncOp
from smalti.sim.machine import Machine
from smalti.sim.ops.wgmma_operands import (
    WARPGROUP,
    M,
    a_fragment_coords,
    accumulator_units,
    esize_of,
    load,
    values,
)


@dataclass(frozen=True)
class Spec:
    """What one wgmma.mma_async instruction does, decoded."""

    n: int
    k: int
    dtype: str  # accumulator type
    atype: str
    btype: str
    d_names: list[str]
    a_names: list[str]  # empty: A comes from shared memory
    trans_a: int
    trans_b: int
    sign: int  # imm-scale-a * imm-scale-b
    what: str  # e.g. "the wgmma at line 12", for hazard reports

    @property
    def d_guarded(self) -> list[str]:
        """Accumulator registers guarded against reads too: a register that is also an A
        register is guarded as A (reads allowed), as the A guard is the one set last."""
        return [name for name in self.d_names if name not in self.a_names]


@dataclass(eq=False)
class WgmmaBatch:
    """One wgmma issued for warpgroups `members` (a row of 128 thread ids each, in blocks
    `blocks`): row g is operation `first + g`. A and B are where their elements start
    within a block (rows x K: one layout for all, or G x rows x K), or A's registers as
    read at issue; `scales`: each row's scale-d."""

    m: Machine
    spec: Spec
    first: int
    members: np.ndarray  # (G, 128)
    blocks: np.ndarray  # (G,)
    a_local: np.ndarray | None  # None when A is in registers
    a_registers: np.ndarray | None  # (G, 128, 4) uint32
    b_local: np.ndarray
    scales: np.ndarray  # (G,) bool

    def run(self, ops: list[AsyncOp]) -> None:
        """Complete the rows of `ops`: D = A @ B (+ D where scale-d is set)."""
        rows = np.array([op.id for op in ops], np.int64) - self.first
        guards = self.m.async_engine.registers
        guards.bypass = True  # the accumulators are the operations' own registers
        try:
            for scaled in (False, True):
                part = rows[self.scales[rows] == scaled]
                if part.size:
                    self._update(part, scaled)
        finally:
            guards.bypass = False

    def _update(self, rows: np.ndarray, scale_d: bool) -> None:
        """D of warpgroups `rows`, rounded (with the old D if `scale_d`) into the registers.

        D is formed tile by tile (`natural`: S x 64 x N of the accumulator type), STEP
        warpgroups at a time so their float64 products stay in cache, then transposed into
        the registers. The old D comes from the natural D this left last time when the
        registers still hold it (a wgmma chain), else from the registers."""
        spec, m = self.spec, self.m
        threads = self.members[_selection(rows)].reshape(-1)
        index = None if _everyone(threads, m.geometry.threads) else threads
        old = None
        if scale_d:
            held = m.registers.read_rows(spec.d_names, index)
            old = _natural_from(m.registers, held, spec)
        natural = np.empty((rows.size, M, spec.n), _DTYPE[spec.dtype])
        for start in range(0, rows.size, STEP):
            step = slice(start, min(start + STEP, rows.size))
            product = self._product(_selection(rows[step]))
            if old is None:
                np.copyto(natural[step], product, casting="same_kind")
            else:  # float64 sum inside the ufunc, one rounding on output
                np.add(product, old[step], out=natural[step], dtype=np.float64,
                       casting="same_kind")
        units = accumulator_units(natural)
        registers = np.empty((len(spec.d_names), threads.size), np.uint32)
        registers.reshape(units.shape)[...] = units
        m.registers.write_rows(spec.d_names, registers, index)
        if index is None:
            _NATURAL[m.registers] = (registers, natural)

    def _product(self, rows: np.ndarray | slice) -> np.ndarray:
        """A @ B (float64, S x 64 x N) of warpgroups `rows`: one BLAS product each."""
        spec = self.spec
        size, data, blocks = self.m.shared.size, self.m.shared.data, self.blocks[rows]
        b = load(data, _pick(self.b_local, rows), blocks, spec.btype, size)  # (S, N, K)
        if self.a_local is not None:
            a = load(data, _pick(self.a_local, rows), blocks, spec.atype, size)  # (S, 64, K)
        else:
            a = _a_from_registers(self.a_registers[rows], spec)
        product = np.matmul(a, b.transpose(0, 2, 1))
        if spec.sign != 1:
            np.multiply(product, spec.sign, out=product)
        return product


STEP = 16  # warpgroups whose products are computed and rounded together
_DTYPE = {"f32": np.float32, "f16": np.float16}  # of the accumulator


def _pick(local: np.ndarray, rows: np.ndarray | slice) -> np.ndarray:
    """An operand layout for warpgroups `rows`: the one for all, or theirs."""
    return local if local.ndim == 2 else local[rows]


def _selection(rows: np.ndarray) -> np.ndarray | slice:
    """Rows as a slice when they are consecutive (indexing by it copies nothing)."""
    if rows.size and int(rows[-1]) - int(rows[0]) == rows.size - 1 and (
            rows.size < 3 or bool((np.diff(rows) == 1).all())):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def _everyone(threads: np.ndarray, count: int) -> bool:
    """Whether `threads` are exactly 0..count-1 in order (then registers are written whole)."""
    return threads.size == count and bool((threads[1:] > threads[:-1]).all())


# The natural D last written into each register file, with the register rows it went to.
_NATURAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _natural_from(file, held: np.ndarray, spec: Spec) -> np.ndarray:
    """The old D (S x 64 x N) of registers whose rows are `held`: the natural D kept for
    them, or their values put back in tile order."""
    shape, dtype = (held.shape[1] // WARPGROUP, M, spec.n), _DTYPE[spec.dtype]
    kept = _NATURAL.get(file)
    if kept is not None and kept[0] is held and kept[1].shape == shape and (
            kept[1].dtype == dtype):
        return kept[1]
    natural = np.empty(shape, dtype)
    units = accumulator_units(natural)
    units[...] = held.reshape(units.shape)
    return natural


def _a_from_registers(registers: np.ndarray, spec: Spec) -> np.ndarray:
    """A tiles (S x 64 x K) from the A fragments (S x 128 threads x 4 registers)."""
    esize = esize_of(spec.atype)
    tiles = registers.shape[0]
    raw = registers.astype(np.uint32).view(np.uint8).reshape(
        tiles, WARPGROUP, 4, 4 // esize, esize)
    rows, ks = a_fragment_coords(esize)
    a = np.zeros((tiles, M, spec.k))
    a[:, rows, ks] = values(raw, spec.atype)
    return a
