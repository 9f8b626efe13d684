"""Stores that write one address from several threads of one instruction.

PTX ISA, "A Set of SIMT Multiprocessors": when a non-atomic instruction executed by a warp
writes the same location for more than one of its threads, one of the writes succeeds; which
one is undefined. That is not an error: kernels do it on purpose, and usually every thread
writes the same value (all lanes storing a warp-reduction result, the four lanes of a quad
storing one row statistic with `st.shared.v2`). When the values differ, the result depends on
the hardware: the program is well defined, but its output is not, which is worth knowing
rather than fatal. The simulator keeps one of the values (numpy's: the highest thread's) and
issues a `NondeterministicStoreWarning` naming the address and the threads, once per
instruction and launch. (Threads of different warps storing one shared byte in one step are a
race, reported as an error by the hazard tracker: nothing orders them. Global memory has no
race tracker; its stores are checked within each warp, the case the ISA defines.)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from smalti.ptx.module import SourceLocation
from smalti.sim.errors import NondeterministicStoreWarning
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine

SHOWN_THREADS = 4


@dataclass(frozen=True)
class Site:
    """Where an instruction is, for messages: kernel, PTX line and text, source location."""

    kernel: str
    line: int | None
    text: str
    source: SourceLocation | None = None

    def describe(self) -> str:
        where = f" at line {self.line}" if self.line is not None else ""
        source = f" ({self.source})" if self.source is not None else ""
        return f"{where}{source}: `{self.text}` (kernel '{self.kernel}'"


def may_overlap(m: Machine, addresses: np.ndarray, nbytes: int, lanes: Lanes) -> bool:
    """Whether two lanes of one warp may store to a common byte (cheap: False when, within
    each warp, the addresses rise by at least `nbytes` from lane to lane). Global memory has
    no race tracker: lanes of different warps storing one address are not looked for."""
    if addresses.size < 2:
        return False
    rising = np.diff(addresses.astype(np.int64, copy=False)) >= nbytes
    if rising.all():
        return False
    threads = thread_ids(lanes)
    per_block = m.geometry.block_threads
    warp = threads // per_block * -(-per_block // 32) + threads % per_block // 32
    return not bool((rising | (warp[1:] != warp[:-1])).all())


def check_one_value(m: Machine, site: Site, addresses: np.ndarray, values: np.ndarray,
                    landed: np.ndarray, lanes: Lanes) -> None:
    """Warn when a store's threads wrote different values to one address: `values` (n,
    count) are what each thread stored at `addresses`, `landed` what memory holds now."""
    differs = (np.asarray(landed).reshape(values.shape) != values).any(axis=1)
    if not differs.any() or site in m.warned:
        return
    m.warned.add(site)
    threads = thread_ids(lanes)
    row = int(np.argmax(differs))
    address = int(addresses[row])
    nbytes = values.dtype.itemsize * values.shape[1]
    starts = addresses.astype(np.int64)
    sharing = (starts < address + nbytes) & (starts + nbytes > address)
    writers = threads[sharing]
    kept = writers[(np.asarray(landed).reshape(values.shape)[sharing] == values[sharing]).all(
        axis=1)]
    names = ", ".join(m.geometry.describe(int(t)) for t in writers[:SHOWN_THREADS])
    more = f" and {writers.size - SHOWN_THREADS} more" if writers.size > SHOWN_THREADS else ""
    which = (f"; the simulator kept the value of {m.geometry.describe(int(kept[-1]))}"
             if kept.size else "")
    warnings.warn(NondeterministicStoreWarning(
        f"nondeterministic store{site.describe()}): {writers.size} threads wrote different "
        f"values to address {address:#x} ({names}{more}); the PTX ISA lets one of them land "
        f"and does not say which{which}"), stacklevel=2)
