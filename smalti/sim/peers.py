"""Races between devices on their symmetric buffers, checked with vector clocks.

In a launch over several devices (smalti.sim.devices) each device is one agent with a vector
clock (`clock[d]`: what device d has synchronised with, per device). Only system-scope
operations order accesses between devices (PTX ISA, "Memory Consistency Model": two
operations are morally strong only when each one's scope includes the other's thread):
- a *release* (`st.release.sys`, `red`/`atom` with `.release` or `.acq_rel` and `.sys`)
  leaves the releasing device's clock at the address it writes, then advances its clock;
- an *acquire* (`ld.acquire.sys`, `atom` with `.acquire`/`.acq_rel` and `.sys`) joins the
  clock left at the address it reads into its device's clock (a plain store's release
  replaces the address's clock; atomic ones join it, as a release sequence does).
Every byte of the symmetric buffers keeps the last write and the last read: the device, its
clock then, whether the access was *strong* (`.volatile`, or `.relaxed`/`.acquire`/
`.release`/atomic with `.sys`) and its PTX line. An access by device d conflicts with one by
device e != d when at least one writes, they are not both strong, and e's access did not
happen before (its clock is above clock[d][e]): a race, reported with both devices and lines.

Multimem instructions (ops/multimem.py) access every device's copy of a location as one
access. Bulk copies, non-tensor (ops/bulk.py) and tensor (TMA, ops/tma.py), are weak
accesses that may happen any time between their issue and the program's synchronisation with
them (`PeerOrder.bulk_access`): checked at issue, and again at retirement against the clock
the device had at issue (recorded with the later clock).

Simplifications, on purpose for this first step: a device is one agent (its threads' order
among themselves, `bar.sync` and the like, is taken as given); one read per byte is kept, so
a race against an earlier reader of a byte read again since can be missed (never invented).

System-scope fences (`fence.sc.sys`, `fence.acq_rel.sys`, `membar.sys`) make the release and
acquire patterns of the memory model: a fence then a strong write releases what the device
had at the fence; a strong read then a fence acquires what that read's address carried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.errors import Fault
from smalti.sim.lanes import Lanes, thread_ids

MAX_DEVICES = 127


class PeerTable:
    """A kernel argument for a `.u64` pointer parameter: the launcher places, in each device's
    memory, a table of one `.u64` per device (entry p: device p's symmetric buffer's address)
    and passes its address (smalti.sim.devices)."""

    def __repr__(self) -> str:
        return "PeerTable()"


@dataclass(frozen=True)
class Sync:
    """How a memory instruction orders against other devices: `strong` (morally strong at
    system scope), and whether it acquires or releases at system scope."""

    strong: bool
    acquire: bool
    release: bool


def sync_of(inst: Instruction, atomic: bool) -> Sync:
    """The `Sync` of an ld/st (atomic False) or atom/red (True) instruction."""
    mods = set(inst.modifiers)
    system = "sys" in mods
    if "volatile" in mods:  # PTX ISA: ld/st.volatile are treated as .relaxed.sys
        return Sync(True, False, False)
    ordered = bool(mods & {"relaxed", "acquire", "release", "acq_rel"})
    strong = system and (atomic or ordered)
    return Sync(strong, strong and bool(mods & {"acquire", "acq_rel"}),
                strong and bool(mods & {"release", "acq_rel"}))


@dataclass(frozen=True)
class Site:
    """The PTX line and text of an access (for race reports)."""

    line: int | None
    text: str


WEAK = Sync(False, False, False)  # a plain access: a bulk copy's global side (PTX ISA: weak)


class PeerOrder:
    """Clocks of the devices and the per-byte access record of their symmetric buffers.

    `bases` are the buffers' device addresses (buffer p: device p's), `stride` the distance
    between consecutive ones, `size` their common size in bytes, `device_of` every thread's
    device.
    """

    def __init__(self, bases: list[int], stride: int, size: int, device_of: np.ndarray) -> None:
        n = len(bases)
        if n > MAX_DEVICES:
            raise ValueError(f"{n} devices: races are checked for up to {MAX_DEVICES}")
        self.devices, self.base, self.stride, self.size = n, bases[0], stride, size
        self.device_of = device_of
        self.clock = np.eye(n, dtype=np.int64)  # clock[d][d] starts at 1: nothing before it
        self.released: dict[int, np.ndarray] = {}  # address -> clock a release left there
        # Per device: the clock at its last system-scope fence (what its later strong writes
        # release), and the clocks released where its strong reads since looked (what its
        # next fence acquires).
        self.fenced = np.zeros((n, n), np.int64)
        self.has_fenced = np.zeros(n, np.bool_)
        self.observed = np.zeros((n, n), np.int64)
        # 20 bytes of record per byte of symmetric memory: compact types (a device index fits
        # int8 below MAX_DEVICES; clocks count a device's releases and fences).
        total = n * size
        self.w_dev = np.full(total, -1, np.int8)
        self.w_clock = np.zeros(total, np.int32)
        self.w_strong = np.zeros(total, np.bool_)
        self.w_site = np.zeros(total, np.int32)
        self.r_dev = np.full(total, -1, np.int8)
        self.r_clock = np.zeros(total, np.int32)
        self.r_strong = np.zeros(total, np.bool_)
        self.r_site = np.zeros(total, np.int32)
        self.sites: list[Site] = []
        self._site_ids: dict[Site, int] = {}

    def site_id(self, site: Site) -> int:
        """A small number naming `site` in the per-byte records."""
        if site not in self._site_ids:
            self._site_ids[site] = len(self.sites)
            self.sites.append(site)
        return self._site_ids[site]

    def access(self, addresses: np.ndarray, nbytes: int, lanes: Lanes, *, read: bool,
               write: bool, sync: Sync, site: int, since: np.ndarray | None = None) -> None:
        """Check and record one instruction's global accesses (per active lane) of `nbytes`;
        those outside the symmetric buffers are ignored. Devices are taken in order, as the
        instruction's lanes are. `addresses` is one row per lane, or (k, lanes): k locations
        each lane accesses in one operation (a multimem instruction reaches every device's
        copy), checked together and synchronised once (one release, one clock step).
        `since`: the accessing device's clock to check against instead of its current one (an
        access that may have happened any time since then: a bulk copy, ops/bulk.py); the
        record still carries the current clock."""
        rows_of = np.atleast_2d(addresses)
        addresses = rows_of.reshape(-1)
        offset = addresses.astype(np.uint64) - np.uint64(self.base)  # wraps below the first
        owner = offset // np.uint64(self.stride)
        within = offset % np.uint64(self.stride)
        inside = (owner < np.uint64(self.devices)) & (within + np.uint64(nbytes)
                                                      <= np.uint64(self.size))
        if not inside.any():
            return
        threads = np.broadcast_to(thread_ids(lanes), rows_of.shape).reshape(-1)[inside]
        flat = (owner[inside] * np.uint64(self.size) + within[inside]).astype(np.int64)
        where = addresses[inside]
        devices = self.device_of[threads]
        for d in np.unique(devices):
            mine = devices == d
            rows = flat[mine][:, None] + np.arange(nbytes)
            self._check(int(d), rows, threads[mine], read, write, sync, since)
            self._record(int(d), rows, read, write, sync, site)
            self._synchronise(int(d), np.unique(where[mine]), read, write, sync)

    def overlaps(self, address: int, nbytes: int) -> bool:
        """Whether bytes [address, address + nbytes) may reach a symmetric buffer (a cheap
        test before working out exactly which bytes an access touches)."""
        end = self.base + (self.devices - 1) * self.stride + self.size
        return address < end and address + nbytes > self.base

    def bulk_access(self, addresses: np.ndarray, nbytes: int, thread: int, site: Site, *,
                    read: bool, write: bool, what: str) -> Callable[[], None] | None:
        """Check a bulk copy's global bytes (`nbytes` at each of `addresses`, weak accesses
        by `thread`, a copy's `what` for messages) now, at issue, and return the check to run
        when the program synchronises with the copy (None: nothing to check). The copy may
        touch memory any time until then, so it must be ordered with nothing the device had
        not synchronised with at issue: the second check uses the clock of the issue."""
        addresses = np.asarray(addresses, np.uint64).reshape(-1, 1)  # k locations, one lane
        if nbytes == 0 or addresses.size == 0:
            return None
        mask = np.zeros(self.device_of.size, np.bool_)
        mask[thread] = True
        lanes = Lanes(mask, everyone=False)
        ident = self.site_id(site)
        at_issue = self.clock[int(self.device_of[thread])].copy()
        self.access(addresses, nbytes, lanes, read=read, write=write, sync=WEAK, site=ident)

        def at_retirement() -> None:
            try:
                self.access(addresses, nbytes, lanes, read=read, write=write, sync=WEAK,
                            site=ident, since=at_issue)
            except Fault as fault:
                raise Fault(f"{what}, synchronised with here: {fault.message}",
                            thread) from None

        return at_retirement

    def _check(self, d: int, rows: np.ndarray, threads: np.ndarray, read: bool, write: bool,
               sync: Sync, since: np.ndarray | None = None) -> None:
        known = self.clock[d] if since is None else since
        self._conflict(d, rows, threads, self.w_dev, self.w_clock, self.w_strong, self.w_site,
                       sync, "write", write, known)
        if write:
            self._conflict(d, rows, threads, self.r_dev, self.r_clock, self.r_strong,
                           self.r_site, sync, "read", write, known)

    def _conflict(self, d: int, rows: np.ndarray, threads: np.ndarray, dev: np.ndarray,
                  clock: np.ndarray, strong: np.ndarray, sites: np.ndarray, sync: Sync,
                  what: str, write: bool, known: np.ndarray) -> None:
        """Raise if an earlier `what` of these bytes by another device is unordered with
        this access (a write when `write`; device d having synchronised with `known`) and
        not both are strong."""
        other = dev[rows].astype(np.int64)
        seen = known[np.maximum(other, 0)]
        race = (other >= 0) & (other != d) & (clock[rows] > seen)
        if sync.strong:
            race &= ~strong[rows]
        if not race.any():
            return
        row, col = np.argwhere(race)[0]
        byte = int(rows[row, col])
        e, earlier = int(other[row, col]), self.sites[int(sites[byte])]
        owner, offset = divmod(byte, self.size)
        mine = f"{'strong' if sync.strong else 'plain'} {'write' if write else 'read'}"
        theirs = f"{'strong' if strong[byte] else 'plain'} {what}"
        raise Fault(f"race between devices on device {owner}'s symmetric buffer (byte offset "
                    f"{offset}): a {mine} by device {d} and the {theirs} by device {e} at line "
                    f"{earlier.line} `{earlier.text}`, with no system-scope release/acquire "
                    "(.release.sys written, .acquire.sys read) ordering them",
                    int(threads[row]))

    def _record(self, d: int, rows: np.ndarray, read: bool, write: bool, sync: Sync,
                site: int) -> None:
        now = self.clock[d][d]
        if read:
            self.r_dev[rows], self.r_clock[rows] = d, now
            self.r_strong[rows], self.r_site[rows] = sync.strong, site
        if write:
            self.w_dev[rows], self.w_clock[rows] = d, now
            self.w_strong[rows], self.w_site[rows] = sync.strong, site

    def _synchronise(self, d: int, addresses: np.ndarray, read: bool, write: bool,
                     sync: Sync) -> None:
        """An acquire joins the clocks left at `addresses`; a release leaves device d's. A
        strong read without acquire keeps them for d's next fence (the acquire pattern); a
        strong write after a fence releases the clock of the fence (the release pattern)."""
        if sync.strong and read:
            for address in addresses:
                left = self.released.get(int(address))
                if left is not None:
                    target = self.clock[d] if sync.acquire else self.observed[d]
                    np.maximum(target, left, out=target)
        if not write:
            return
        releases = self.clock[d] if sync.release else (
            self.fenced[d] if sync.strong and self.has_fenced[d] else None)
        for address in addresses:
            before = self.released.get(int(address))
            if releases is None:
                if not read:  # a store that releases nothing ends earlier releases' reach
                    self.released.pop(int(address), None)
            elif read and before is not None:  # an atomic continues the release sequence
                self.released[int(address)] = np.maximum(before, releases)
            else:
                self.released[int(address)] = releases.copy()
        if sync.release:
            self.clock[d][d] += 1

    def fence(self, lanes: Lanes) -> None:
        """A system-scope fence (`fence.sc.sys`, `fence.acq_rel.sys`, `membar.sys`) by the
        lanes' devices: strong reads before it now acquire, strong writes after it release."""
        for d in np.unique(self.device_of[thread_ids(lanes)]):
            np.maximum(self.clock[d], self.observed[d], out=self.clock[d])
            self.fenced[d] = self.clock[d]
            self.has_fenced[d] = True
            self.clock[d][d] += 1
