"""The register file: raw bits per register over all threads, with initialisation tracking.

A register a thread never wrote holds an unspecified value, which PTX lets it read. Reading one
is a fault only when the value matters (sim/poison.py): while a pure instruction (arithmetic,
moves, comparisons, selects) runs, undefined inputs make its results undefined ("poison") for
those threads instead, and any other use of an undefined value (an address, a stored value,
a branch condition, an async operand, a guard) faults, naming the line that first read it.
"""

from __future__ import annotations

import numpy as np

from smalti.sim.dtypes import storage_dtype
from smalti.sim.errors import Fault
from smalti.sim.hazards import RegisterGuards


class RegisterFile:
    """Registers as immutable numpy arrays (one row per thread) of their declared width."""

    def __init__(self, declared: dict[str, str], threads: int) -> None:
        self.declared = declared
        self.threads = threads
        self.dtypes = {name: np.dtype(storage_dtype(t)) for name, t in declared.items()}
        self._values: dict[str, np.ndarray] = {}
        # True: written for every thread; array: which threads hold a written value.
        self._written: dict[str, bool | np.ndarray] = {}
        # Checks accesses to registers in-flight wgmma ops own (sim/hazards.py), if set.
        self.guards: RegisterGuards | None = None
        # Registers whose array this file made and never handed out whole: partial writes
        # may update them in place (copy on write otherwise).
        self._private: set[str] = set()
        # The array whose rows `write_rows` last stored, and the rows (see `read_rows`).
        self._last_rows: tuple[np.ndarray, list[np.ndarray]] | None = None
        # Registers some of whose threads hold poison (not written in `_written`) -> the PTX
        # line that first read the undefined value it came from.
        self._origin: dict[str, int | None] = {}
        # While a pure instruction runs: its PTX line (sim/poison.py sets it), and the
        # threads whose inputs were undefined so far, with the line their poison came from.
        self.pure_line: int | None = None
        self.taint: np.ndarray | None = None
        self.taint_origin: int | None = None

    def read(self, name: str, index: np.ndarray | None) -> np.ndarray:
        """Raw bits of `name` for the threads in `index` (None: all threads)."""
        if self.guards is not None and self.guards.owned:
            self.guards.check(name, index, "read")
        written = self._written.get(name)
        if written is not True:
            self._check_written(name, written, index)
        value = self._values.get(name)
        if value is None:  # never written by any thread: an unspecified value
            value = np.zeros(self.threads, self.dtypes[name])
        if index is None:
            self._private.discard(name)
            return value
        return value[index]

    def _check_written(self, name: str, written: np.ndarray | None,
                       index: np.ndarray | None) -> None:
        """Fault for threads of `index` reading an undefined value of `name`, unless a pure
        instruction is running: then its results for those threads will be undefined."""
        ids = np.arange(self.threads) if index is None else index
        missing = ids if written is None else ids[~written[ids]]
        if not missing.size:
            return
        origin = self._origin.get(name)
        if self.pure_line is None:
            if origin is None:
                raise Fault(f"read of uninitialised register {name}", int(missing[0]))
            raise Fault(f"register {name} holds an undefined value here: it was computed from "
                        f"the read of an uninitialised register at line {origin}",
                        int(missing[0]))
        if self.taint is None:
            self.taint = np.zeros(self.threads, np.bool_)
            self.taint_origin = self.pure_line if origin is None else origin
        self.taint[missing] = True

    def take_taint(self) -> np.ndarray | None:
        """The threads whose inputs were undefined since the last call (None: none)."""
        taint, self.taint = self.taint, None
        return taint

    def current(self) -> dict[str, np.ndarray]:
        """Every register written so far -> its raw bits over all threads (read them only:
        a spin check compares them between loop iterations, sim/spin.py)."""
        return self._values

    def read_rows(self, names: list[str], index: np.ndarray | None) -> np.ndarray:
        """Raw bits of registers `names` (of one width) as rows, for the threads in `index`
        (read-only). Registers still holding the rows `write_rows` last wrote for every
        thread (a wgmma accumulator between instructions) are returned without a copy."""
        rows = [self.read(name, index) for name in names]
        last = self._last_rows
        if index is None and last is not None and len(rows) == len(last[1]) and all(
                row is held for row, held in zip(rows, last[1], strict=True)):
            return last[0]
        return np.stack(rows)

    def write_rows(self, names: list[str], rows: np.ndarray, index: np.ndarray | None) -> None:
        """`write` row i of `rows` to register names[i]."""
        views = list(rows)
        for name, bits in zip(names, views, strict=True):
            self.write(name, bits, index)
        if index is None and all(self._values[name] is view
                                 for name, view in zip(names, views, strict=True)):
            rows.flags.writeable = False  # the registers hold its rows
            self._last_rows = (rows, views)

    def write(self, name: str, bits: np.ndarray, index: np.ndarray | None) -> None:
        """Store raw bits for the threads in `index` (None: all threads; bits may broadcast)."""
        if self.guards is not None and self.guards.owned:
            self.guards.check(name, index, "write")
        dtype = self.dtypes[name]
        bits = np.asarray(bits)
        if bits.dtype != dtype:
            bits = bits.astype(dtype)
        if index is None:
            if bits.shape != (self.threads,):
                bits = np.broadcast_to(bits.reshape(-1) if bits.size == 1 else bits,
                                       (self.threads,))
            self._values[name] = bits
            self._written[name] = True
            self._private.discard(name)
            if self.taint is not None:
                self._poison(name, None)
            return
        if name in self._private:
            self._values[name][index] = bits
        else:
            old = self._values.get(name)
            new = np.zeros(self.threads, dtype) if old is None else np.array(old)
            new[index] = bits
            self._values[name] = new
            self._private.add(name)
        written = self._written.get(name)
        if written is not True:
            mask = np.zeros(self.threads, np.bool_) if written is None else written.copy()
            mask[index] = True
            self._written[name] = mask
        if self.taint is not None:
            self._poison(name, index)

    def _poison(self, name: str, index: np.ndarray | None) -> None:
        """Mark the threads of `index` whose inputs were undefined as holding poison."""
        taint = self.taint if index is None else self.taint[index]
        if not taint.any():
            return
        written = self._written[name]
        mask = np.ones(self.threads, np.bool_) if written is True else written
        mask[np.flatnonzero(taint) if index is None else index[taint]] = False
        self._written[name] = mask
        self._origin[name] = self.taint_origin
