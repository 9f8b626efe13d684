"""Hazard tracking for shared memory and registers owned by asynchronous operations.

Shared memory keeps, per byte: whether it was ever written, the last writing and reading
thread with the barrier epoch of the access (a race is two threads touching the same byte,
at least one writing, within one epoch of their block), which thread wrote it through the
generic proxy since that thread's last `fence.proxy.async`, and which asynchronous operation
still owns it. Epochs advance when a block passes `bar.sync` or an mbarrier phase completes.
Arrays are allocated on the first shared access, so kernels without shared memory pay nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smalti.sim.errors import Fault

NO_THREAD = -1


@dataclass(frozen=True)
class Guard:
    """Bytes or registers an in-flight asynchronous operation owns: `reads` says loads fault too."""

    op: int
    what: str  # e.g. "the TMA load at line 12"
    reads: bool


class SharedHazards:
    """Per-byte state of every block's shared memory."""

    def __init__(self, blocks: int, size: int, block_of: np.ndarray,
                 cluster_of: np.ndarray | None = None) -> None:
        self.blocks, self.size, self.block_of = blocks, size, block_of
        # With clusters of several CTAs (cluster_of: each block's cluster), threads access
        # other CTAs' shared memory; such accesses are ordered only by cluster-wide
        # synchronisation (barrier.cluster, mbarrier phases), counted per cluster.
        self.cluster_of = cluster_of
        self.clustered = cluster_of is not None
        self.cluster_epoch = np.zeros(0 if cluster_of is None else int(cluster_of.max()) + 1,
                                      np.int64)
        self.epoch = np.zeros(blocks, np.int64)
        self.guards: dict[int, Guard] = {}
        self._ready = False

    def _allocate(self) -> None:
        n = self.blocks * self.size
        self.written = np.zeros(n, np.bool_)
        self.writer = np.full(n, NO_THREAD, np.int64)
        self.write_epoch = np.zeros(n, np.int64)
        self.reader = np.full(n, NO_THREAD, np.int64)
        self.read_epoch = np.zeros(n, np.int64)
        self.dirty = np.zeros(n, np.int64)  # generic-proxy writer + 1, until it fences
        self.owner = np.zeros(n, np.int64)  # id of the async op owning the byte, 0 for none
        self.owner_reads = np.zeros(n, np.bool_)  # whether the owner forbids loads too
        if self.clustered:  # the cluster epoch of each access, and whether it was remote
            self.write_cepoch = np.zeros(n, np.int64)
            self.read_cepoch = np.zeros(n, np.int64)
            self.write_remote = np.zeros(n, np.bool_)
            self.read_remote = np.zeros(n, np.bool_)
        self._ready = True

    def _bytes(self, offsets: np.ndarray, nbytes: int) -> np.ndarray:
        if not self._ready:
            self._allocate()
        return offsets.astype(np.int64)[:, None] + np.arange(nbytes)

    def sync(self, blocks: np.ndarray | slice, cluster: bool = False) -> None:
        """Blocks (ids, a bool mask or a slice) passed a barrier: later accesses do not race
        earlier ones; `cluster`: a cluster-wide one (orders accesses between CTAs too)."""
        self.epoch[blocks] += 1
        if cluster and self.clustered:
            self.cluster_epoch[np.unique(self.cluster_of[blocks])] += 1

    def _stamp(self, idx: np.ndarray, threads: np.ndarray) -> tuple:
        """(block epoch, cluster epoch, remote) of accesses to bytes `idx` (one block per
        row) by `threads`: the epoch is that of the block owning the bytes."""
        blocks = idx[:, :1] // self.size
        if not self.clustered:
            return self.epoch[blocks], None, None
        remote = blocks != self.block_of[threads][:, None]
        return self.epoch[blocks], self.cluster_epoch[self.cluster_of[blocks]], remote

    def _unordered(self, idx: np.ndarray, stamp: tuple, write: bool) -> np.ndarray:
        """Whether the last write (or read) of each byte shares the current epoch: with no
        barrier in between. An access between CTAs is ordered only by a cluster epoch."""
        epoch, cepoch, remote = stamp
        same = (self.write_epoch if write else self.read_epoch)[idx] == epoch
        if cepoch is None:
            return same
        cross = remote | (self.write_remote if write else self.read_remote)[idx]
        csame = (self.write_cepoch if write else self.read_cepoch)[idx] == cepoch
        return np.where(cross, csame, same)

    def _record(self, idx: np.ndarray, stamp: tuple, write: bool) -> None:
        epoch, cepoch, remote = stamp
        (self.write_epoch if write else self.read_epoch)[idx] = epoch
        if cepoch is not None:
            (self.write_cepoch if write else self.read_cepoch)[idx] = cepoch
            (self.write_remote if write else self.read_remote)[idx] = remote

    def _owned(self, idx: np.ndarray, threads: np.ndarray, reading: bool) -> None:
        owner = self.owner[idx]
        if not owner.any():
            return
        hit = owner != 0
        if reading:
            hit &= self.owner_reads[idx]
            if not hit.any():
                return
        row = int(np.argmax(hit.any(axis=1)))
        guard = self.guards[int(owner[row][hit[row]][0])]
        verb = "read of" if reading else "write to"
        need = "wait for it (its mbarrier phase or wait_group)" if guard.reads else (
            "wait for it to finish reading (wait_group)")
        raise Fault(f"{verb} shared memory at shared address {self._address(idx, row, hit)} "
                    f"that {guard.what} still owns: {need} first", int(threads[row]))

    def _address(self, idx: np.ndarray, row: int, hit: np.ndarray) -> str:
        flat = int(idx[row][hit[row]][0])
        return f"{flat % self.size:#x}"

    def read(self, offsets: np.ndarray, nbytes: int, threads: np.ndarray) -> None:
        """Check and record a generic-proxy load of `nbytes` at flat offsets by `threads`."""
        idx = self._bytes(offsets, nbytes)
        threads = np.asarray(threads, np.int64)
        self._owned(idx, threads, reading=True)
        unset = ~self.written[idx]
        if unset.any():
            row = int(np.argmax(unset.any(axis=1)))
            raise Fault("read of uninitialised shared memory at shared address "
                        f"{self._address(idx, row, unset)}", int(threads[row]))
        stamp = self._stamp(idx, threads)
        writer = self.writer[idx]
        race = (writer != NO_THREAD) & (writer != threads[:, None]) & (
            self._unordered(idx, stamp, write=True))
        if race.any():
            row = int(np.argmax(race.any(axis=1)))
            other = int(writer[row][race[row]][0])
            raise Fault(f"shared-memory race: read of shared address "
                        f"{self._address(idx, row, race)} written by thread {other} of the "
                        "block with no barrier in between", int(threads[row]))
        self.reader[idx] = threads[:, None]
        self._record(idx, stamp, write=False)

    def write(self, offsets: np.ndarray, nbytes: int, threads: np.ndarray) -> None:
        """Check and record a generic-proxy store of `nbytes` at flat offsets by `threads`."""
        idx = self._bytes(offsets, nbytes)
        threads = np.asarray(threads, np.int64)
        self._owned(idx, threads, reading=False)
        stamp = self._stamp(idx, threads)
        mine = threads[:, None]
        race = ((self.writer[idx] != NO_THREAD) & (self.writer[idx] != mine)
                & self._unordered(idx, stamp, write=True))
        race |= ((self.reader[idx] != NO_THREAD) & (self.reader[idx] != mine)
                 & self._unordered(idx, stamp, write=False))
        flat = idx.reshape(-1)
        if flat.size > 1 and _repeats(flat):  # threads of this instruction storing one byte
            order = np.argsort(flat, kind="stable")
            same = flat[order][1:] == flat[order][:-1]
            owners = np.repeat(threads, nbytes)[order]
            clash = same & (owners[1:] != owners[:-1])
            if clash.any():
                race.reshape(-1)[order[1:][clash]] = True
        if race.any():
            row = int(np.argmax(race.any(axis=1)))
            raise Fault("shared-memory race: write to shared address "
                        f"{self._address(idx, row, race)} that another thread of the block "
                        "accessed with no barrier in between", int(threads[row]))
        self.written[idx] = True
        self.writer[idx] = mine
        self._record(idx, stamp, write=True)
        self.dirty[idx] = mine + 1

    def fence_proxy(self, threads: np.ndarray) -> None:
        """`fence.proxy.async` by `threads`: their generic writes become visible to async ops."""
        if not self._ready:
            return
        if self.clustered:  # their writes may have gone to any CTA of the cluster
            self.dirty[np.isin(self.dirty, threads + 1)] = 0
            return
        for block in np.unique(self.block_of[threads]):
            part = self.dirty[block * self.size:(block + 1) * self.size]
            part[np.isin(part, threads + 1)] = 0

    def async_read(self, idx: np.ndarray, thread: int, what: str) -> None:
        """Check bytes (flat indices) an async-proxy operation issued by `thread` will read."""
        if not self._ready:
            self._allocate()
        self._owned(idx[None, :], np.array([thread]), reading=True)
        unset = ~self.written[idx]
        if unset.any():
            raise Fault(f"{what} reads uninitialised shared memory at shared address "
                        f"{int(idx[np.argmax(unset)]) % self.size:#x}", thread)
        dirty = self.dirty[idx]
        if dirty.any():
            writer = int(dirty[np.argmax(dirty != 0)]) - 1
            raise Fault(f"{what} reads shared memory that thread {writer} of the block wrote "
                        "through the generic proxy with no fence.proxy.async after the write",
                        thread)

    def async_write(self, idx: np.ndarray, thread: int, what: str) -> None:
        """Check bytes an async-proxy write (a TMA load) issued by `thread` will overwrite."""
        if not self._ready:
            self._allocate()
        rows, issuer = idx[None, :], np.array([thread])
        self._owned(rows, issuer, reading=False)
        reader = self.reader[idx]
        # a multicast writes other CTAs' bytes: ordered after their reads only cluster-wide
        late = (reader != NO_THREAD) & (reader != thread) & (
            self._unordered(rows, self._stamp(rows, issuer), write=False)[0])
        if late.any():
            raise Fault(f"shared-memory race: {what} overwrites shared address "
                        f"{int(idx[np.argmax(late)]) % self.size:#x} that thread "
                        f"{int(reader[np.argmax(late)])} read with no barrier in between", thread)

    def filled(self, idx: np.ndarray) -> None:
        """An async-proxy write landed: the bytes are initialised and owned by no thread."""
        self.written[idx] = True
        self.writer[idx] = NO_THREAD
        self.dirty[idx] = 0

    def own(self, idx: np.ndarray, guard: Guard) -> None:
        """Give bytes to an in-flight operation until `release`."""
        if not self._ready:
            self._allocate()
        self.guards[guard.op] = guard
        self.owner[idx] = guard.op
        self.owner_reads[idx] = guard.reads

    def release(self, op: int, idx: np.ndarray) -> None:
        """The operation is done with its bytes."""
        part = self.owner[idx]
        mine = part == op
        self.owner[idx] = np.where(mine, 0, part)
        self.owner_reads[idx] = self.owner_reads[idx] & ~mine
        self.guards.pop(op, None)


def _repeats(flat: np.ndarray) -> bool:
    """Whether some value occurs twice among non-negative indices (a bitmap, not a sort)."""
    low = int(flat.min())
    seen = np.zeros(int(flat.max()) - low + 1, np.bool_)
    seen[flat - low] = True
    return int(np.count_nonzero(seen)) != flat.size


class RegisterGuards:
    """Registers of in-flight wgmma operations, checked on every register access."""

    def __init__(self) -> None:
        # register -> {op: (threads, guard)}; ops -> the registers they guard
        self.owned: dict[str, dict[int, tuple[np.ndarray, Guard]]] = {}
        self.names_of: dict[int, set[str]] = {}
        self.bypass = False

    def own(self, name: str, threads: np.ndarray, guard: Guard) -> None:
        """`threads` (a bool mask over the launch) may not touch `name` until `release`."""
        self.owned.setdefault(name, {})[guard.op] = (threads, guard)
        self.names_of.setdefault(guard.op, set()).add(name)

    def release(self, op: int) -> None:
        """Drop every register guard of operation `op`."""
        for name in self.names_of.pop(op, ()):
            guards = self.owned[name]
            guards.pop(op, None)
            if not guards:
                del self.owned[name]

    def check(self, name: str, index: np.ndarray | None, access: str) -> None:
        """Fault if an instruction reads (access "read") or writes an owned register."""
        if self.bypass:
            return
        for threads, guard in self.owned.get(name, {}).values():
            if access == "read" and not guard.reads:
                continue
            hit = threads if index is None else threads[index]
            if hit.any():
                ids = np.flatnonzero(threads) if index is None else index[hit]
                verb = "read of" if access == "read" else "write to"
                raise Fault(f"{verb} register {name} that {guard.what} still owns: "
                            "wgmma.wait_group first", int(ids[0]))
