"""The register file: raw bits per register over all threads, with initialisation tracking."""

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

    def read(self, name: str, index: np.ndarray | None) -> np.ndarray:
        """Raw bits of `name` for the threads in `index` (None: all threads)."""
        if self.guards is not None and self.guards.owned:
            self.guards.check(name, index, "read")
        written = self._written.get(name)
        if written is not True:
            self._check_written(name, written, index)
        value = self._values[name]
        if index is None:
            self._private.discard(name)
            return value
        return value[index]

    def _check_written(self, name: str, written: np.ndarray | None,
                       index: np.ndarray | None) -> None:
        ids = np.arange(self.threads) if index is None else index
        missing = ids if written is None else ids[~written[ids]]
        if missing.size:
            raise Fault(f"read of uninitialised register {name}", int(missing[0]))

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
