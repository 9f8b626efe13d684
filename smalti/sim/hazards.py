"""Hazard tracking for shared memory and registers owned by asynchronous operations.

Shared memory keeps, per byte: a write stamp and a read stamp -- the barrier epoch of the
byte's block at its last write (read) and the thread that made it, packed in one int64 as
(epoch + 1) << 32 | thread + 1 (0: never; an async-proxy write leaves no thread) -- so a race
(two threads touching the same byte within one epoch of its block, at least one writing) is
found with one gather and two comparisons; whether its last generic-proxy write is unfenced
(the writer ran no `fence.proxy.async` since); and which asynchronous operation claimed it
last: the byte is that operation's while it is in flight, so releasing one costs nothing per
byte. Epochs advance when a block passes `bar.sync` or an mbarrier phase completes. In clusters,
accesses between CTAs are ordered by cluster epochs instead, which advance at `barrier.cluster`
and when a wait acquires at .cluster scope a phase other CTAs' arrives released at .cluster
scope (sim/ops/mbarrier.py): a weaker remote arrive orders nothing, which a race then reports.
Arrays are allocated on the first shared access, so kernels without shared memory pay nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from smalti.sim.errors import Fault

LOW = np.int64(0xFFFFFFFF)  # the thread + 1 part of a stamp
FILLED = np.int64(1 << 32)  # the write stamp of bytes an async-proxy copy landed in
IDLE, WRITES_FAULT, LOADS_FAULT = 0, 1, 2  # an operation's state: what its bytes forbid
UNIT_BYTES = (1, 2, 4, 8, 16)  # access sizes whose aligned rows are read through a view


@dataclass(frozen=True)
class Guard:
    """Bytes or registers an in-flight asynchronous operation owns: `reads` says loads fault too."""

    op: int
    what: str  # e.g. "the TMA load at line 12"
    reads: bool


@dataclass(frozen=True, eq=False)
class _BlockClaim:
    """Bytes `covers` (a bitmap over one block) of many blocks, claimed at once by one
    operation per block (op_of_block: its id, 0 for blocks not claimed; ids first..last):
    a wgmma issued across the launch, with no per-byte write."""

    first: int
    last: int
    op_of_block: np.ndarray
    covers: np.ndarray


class _Access:
    """One instruction's accesses: a row of `nbytes` consecutive bytes per thread from flat
    `starts` (or given byte indices), the block owning each row, and the stamps (per byte)
    they compare with and record. Rows aligned to their size are `units`: per-byte arrays
    are then read and written a row at a time through a view, with no per-byte indices."""

    def __init__(self, hazards: SharedHazards, starts: np.ndarray, nbytes: int,
                 threads: np.ndarray, idx: np.ndarray | None = None) -> None:
        self.starts, self.nbytes, self.threads, self._idx = starts, nbytes, threads, idx
        self._size, self._blocks = hazards.size, None
        self.epoch = hazards.uniform_epoch  # the epoch of every block, when all are in one
        if self.epoch is not None:  # blocks in step (the usual case): one base for all
            self.base = np.int64((self.epoch + 1) << 32)
            mine = threads + (self.base + 1)
        else:
            base = (hazards.epoch[self.blocks] + 1) << 32
            self.base = _per_byte(base, nbytes)  # (epoch + 1) << 32 of the owning block
            mine = threads + base
            mine += 1
        self.mine = _per_byte(mine, nbytes)  # and this thread
        self.cepoch = self.remote = None
        if hazards.clustered:  # (n, 1): cluster epochs, whether the bytes are another CTA's
            self.remote = (self.blocks != hazards.block_of[threads])[:, None]
            self.cepoch = hazards.cluster_epoch[hazards.cluster_of[self.blocks]][:, None]
        self.units = None
        if idx is None and nbytes in UNIT_BYTES and hazards.size % nbytes == 0 and not (
                starts & (nbytes - 1)).any():
            self.units = _divide(starts, nbytes)

    @property
    def blocks(self) -> np.ndarray:
        """The block owning each row's bytes."""
        if self._blocks is None:
            self._blocks = _divide(self.starts, self._size)
        return self._blocks

    @property
    def idx(self) -> np.ndarray:
        """(n, nbytes) flat byte indices."""
        if self._idx is None:
            steps = _byte_steps(self.starts.size, self.nbytes)
            self._idx = (np.repeat(self.starts, self.nbytes) + steps).reshape(-1, self.nbytes)
        return self._idx

    def take(self, array: np.ndarray) -> np.ndarray:
        """The accessed bytes' entries of a per-byte array, (n, nbytes)."""
        if self.units is None:
            return array[self.idx]
        rows = array.view(f"V{array.itemsize * self.nbytes}")[self.units]
        return rows.view(array.dtype).reshape(-1, self.nbytes)

    def put(self, array: np.ndarray, values: np.ndarray | bool) -> None:
        """Set the accessed bytes' entries of a per-byte array to `values` ((n, nbytes))."""
        if self.units is None:
            array[self.idx] = values
            return
        unit = f"V{array.itemsize * self.nbytes}"
        if np.ndim(values) == 0:  # one row's worth, repeated
            rows = np.full(self.nbytes, values, array.dtype).view(unit)[0]
        else:
            rows = np.ascontiguousarray(values, array.dtype).view(unit)[:, 0]
        array.view(unit)[self.units] = rows


@lru_cache(maxsize=8)
def _byte_steps(rows: int, nbytes: int) -> np.ndarray:
    """0, 1, .., nbytes-1 repeated for `rows` rows: added to repeated row starts, it gives
    byte indices without numpy's slow broadcasting over a tiny last axis."""
    steps = np.tile(np.arange(nbytes, dtype=np.int64), rows)
    steps.flags.writeable = False
    return steps


def _per_byte(rows: np.ndarray, nbytes: int) -> np.ndarray:
    """A per-row value repeated over the row's bytes, (n, nbytes)."""
    if nbytes == 1:
        return rows.reshape(-1, 1)
    return np.repeat(rows, nbytes).reshape(-1, nbytes)


def _divide(values: np.ndarray, by: int) -> np.ndarray:
    """values // by for non-negative values; a shift when `by` is a power of two."""
    if by & (by - 1) == 0:
        return values >> (by.bit_length() - 1)
    return values // by


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
        self.uniform_epoch: int | None = 0  # every block's epoch, while they are all equal
        self.read_epoch = np.full(blocks, -1, np.int64)  # epoch of each block's last load
        self.guards: dict[int, Guard] = {}  # in claim order, so by increasing id
        self.block_claims: list[_BlockClaim] = []  # oldest first
        self.load_guards = 0  # how many in-flight guards forbid loads too
        self.op_state = np.zeros(64, np.int8)  # per operation id: IDLE or what it forbids
        # Per cluster: the last mbarrier wait that observed another CTA's arrive without a
        # release and acquire at cluster scope, which orders nothing between the CTAs (text
        # for the race that shows it mattered), with the cluster epoch it happened in.
        self.weak_waits: dict[int, tuple[int, str]] = {}
        self._ready = False

    def _allocate(self) -> None:
        n = self.blocks * self.size
        self.wstamp = np.zeros(n, np.int64)
        self.rstamp = np.zeros(n, np.int64)
        self.unfenced = np.zeros(n, np.bool_)
        # id of the async op that claimed the byte last (block claims aside)
        self.owner = np.zeros(n, np.int64)
        # Per block: whether it may hold unfenced bytes, and whether every byte was written
        # (summaries that let wgmma issue skip per-byte checks).
        self.unfenced_blocks = np.zeros(self.blocks, np.bool_)
        self.all_written = np.zeros(self.blocks, np.bool_)
        if self.clustered:  # the cluster epoch of each access, and whether it was remote
            self.write_cepoch = np.zeros(n, np.int64)
            self.read_cepoch = np.zeros(n, np.int64)
            self.write_remote = np.zeros(n, np.bool_)
            self.read_remote = np.zeros(n, np.bool_)
            self.write_line = np.zeros(n, np.int32)  # PTX line of the access (0: unknown)
            self.read_line = np.zeros(n, np.int32)
        self._ready = True

    def _starts(self, offsets: np.ndarray) -> np.ndarray:
        """Flat offsets as int64 (unsigned ones, far below 2**63, are only re-viewed)."""
        if not self._ready:
            self._allocate()
        offsets = np.asarray(offsets)
        if offsets.dtype == np.uint64:
            return offsets.view(np.int64)
        return offsets.astype(np.int64)

    def sync(self, blocks: np.ndarray | slice, cluster: bool = False) -> None:
        """Blocks (ids, a bool mask or a slice) passed a barrier: later accesses do not race
        earlier ones; `cluster`: a cluster-wide one (orders accesses between CTAs too)."""
        self.epoch[blocks] += 1
        low, high = int(self.epoch.min()), int(self.epoch.max())
        self.uniform_epoch = low if low == high else None
        if cluster and self.clustered:
            self.cluster_epoch[np.unique(self.cluster_of[blocks])] += 1

    def _others_unordered(self, seen: np.ndarray, access: _Access, write: bool) -> np.ndarray:
        """Which bytes another thread last wrote (or read, `write=False`) in the current
        epoch, from their stamps `seen`: with no barrier in between. An access between CTAs
        is ordered only by a cluster epoch."""
        if not self.clustered:  # same epoch and some thread <=> above base; not this thread
            return (seen > access.base) & (seen != access.mine)
        thread = seen & LOW
        other = (thread != 0) & (thread != (access.mine & LOW))
        same = (seen >> 32) == (access.base >> 32)
        cross = access.remote | (self.write_remote if write else self.read_remote)[access.idx]
        csame = (self.write_cepoch if write else self.read_cepoch)[access.idx] == access.cepoch
        return other & np.where(cross, csame, same)

    def _record(self, access: _Access, write: bool, line: int | None) -> None:
        access.put(self.wstamp if write else self.rstamp, access.mine)
        if self.clustered:
            (self.write_cepoch if write else self.read_cepoch)[access.idx] = access.cepoch
            (self.write_remote if write else self.read_remote)[access.idx] = access.remote
            (self.write_line if write else self.read_line)[access.idx] = line or 0

    def weak_wait(self, block: int, note: str) -> None:
        """A wait of `block` observed a remote arrive that does not order across CTAs."""
        if self.clustered:
            cluster = int(self.cluster_of[block])
            self.weak_waits[cluster] = (int(self.cluster_epoch[cluster]), note)

    def _across_ctas(self, access: _Access, row: int, race: np.ndarray, write: bool) -> str:
        """For a race between CTAs: the other access's PTX line and the mbarrier wait that
        was meant to order it (text appended to the race's message; empty otherwise)."""
        if not self.clustered:
            return ""
        flat = access.idx[row][race[row]][0]
        if not (access.remote[row, 0] or (self.write_remote if write else self.read_remote)[flat]):
            return ""
        line = int((self.write_line if write else self.read_line)[flat])
        text = f" (another CTA's {'write' if write else 'read'}"
        text += f" at line {line})" if line else ")"
        cluster = int(self.cluster_of[access.blocks[row]])
        epoch, note = self.weak_waits.get(cluster, (-1, ""))
        if epoch != self.cluster_epoch[cluster]:  # a cluster-wide sync came after it
            return text
        return f"{text}; {note}"

    def _owned(self, access: _Access, reading: bool) -> None:
        if not self.guards or (reading and not self.load_guards):
            return  # no operation in flight owns a byte (that loads may not touch)
        idx, threads = access.idx, access.threads
        owner = self.owner[idx]
        if not reading:  # block claims never forbid loads, nor hide a claim that does
            owner = self._with_block_claims(idx, owner)
        hit = self.op_state[owner] >= (LOADS_FAULT if reading else WRITES_FAULT)
        if not hit.any():
            return
        row = int(np.argmax(hit.any(axis=1)))
        guard = self.guards[int(owner[row][hit[row]][0])]
        verb = "read of" if reading else "write to"
        need = "wait for it (its mbarrier phase or wait_group)" if guard.reads else (
            "wait for it to finish reading (wait_group)")
        raise Fault(f"{verb} shared memory at shared address {self._address(idx, row, hit)} "
                    f"that {guard.what} still owns: {need} first", int(threads[row]))

    def _with_block_claims(self, idx: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """The last claimer of each byte, block claims included (ids grow with claims)."""
        self._prune()
        if not self.block_claims:
            return owner
        blocks, local = np.divmod(idx, self.size)
        for claim in self.block_claims:
            mine = np.where(claim.covers[local], claim.op_of_block[blocks], 0)
            owner = np.maximum(owner, mine)
        return owner

    def _prune(self) -> None:
        """Forget the oldest block claims whose operations all finished once no older
        operation is in flight (only then can their claim not hide an older one's)."""
        while self.block_claims:
            claim = self.block_claims[0]
            if self.op_state[claim.first:claim.last + 1].any():
                return
            if self.guards and next(iter(self.guards)) < claim.first:
                return
            self.block_claims.pop(0)

    def _address(self, idx: np.ndarray, row: int, hit: np.ndarray) -> str:
        flat = int(idx[row][hit[row]][0])
        return f"{flat % self.size:#x}"

    def read(self, offsets: np.ndarray, nbytes: int, threads: np.ndarray,
             line: int | None = None) -> None:
        """Check and record a generic-proxy load of `nbytes` at flat offsets by `threads`
        (the instruction at PTX `line`)."""
        access = _Access(self, self._starts(offsets), nbytes, np.asarray(threads, np.int64))
        self._owned(access, reading=True)
        seen = access.take(self.wstamp)
        unset = seen == 0
        if unset.any():
            row = int(np.argmax(unset.any(axis=1)))
            raise Fault("read of uninitialised shared memory at shared address "
                        f"{self._address(access.idx, row, unset)}", int(access.threads[row]))
        race = self._others_unordered(seen, access, write=True)
        if race.any():
            row = int(np.argmax(race.any(axis=1)))
            other = int(seen[row][race[row]][0] & LOW) - 1
            raise Fault(f"shared-memory race: read of shared address "
                        f"{self._address(access.idx, row, race)} written by thread {other} of "
                        "the block with no barrier in between"
                        f"{self._across_ctas(access, row, race, True)}",
                        int(access.threads[row]))
        self._record(access, write=False, line=line)
        self.read_epoch[access.blocks] = self.epoch[access.blocks]

    def write(self, offsets: np.ndarray, nbytes: int, threads: np.ndarray,
              line: int | None = None) -> bool:
        """Check and record a generic-proxy store of `nbytes` at flat offsets by `threads`
        (one instruction, at PTX `line`); True when several of its threads stored to one byte.

        A race is reported only between different instructions: PTX ISA, "A Set of SIMT
        Multiprocessors": when a non-atomic instruction executed by a warp writes one
        location for several of its threads, one of the writes succeeds (which one is
        undefined). Threads of *different* warps storing one byte in the same simulated step
        are different executions of the instruction, unordered by anything: a race.
        """
        access = _Access(self, self._starts(offsets), nbytes, np.asarray(threads, np.int64))
        self._owned(access, reading=False)
        race = self._others_unordered(access.take(self.wstamp), access, write=True)
        read_race = None
        if self._maybe_read(access):
            read_race = self._others_unordered(access.take(self.rstamp), access, write=False)
        if race.any() or (read_race is not None and read_race.any()):
            self._write_race(access, race, read_race)
        self._record(access, write=True, line=line)
        # Several threads storing one byte: all but one read another's stamp back.
        collided = access.starts.size > 1 and bool(
            (access.take(self.wstamp) != access.mine).any())
        if collided:
            self._across_warps(access)
        access.put(self.unfenced, True)
        if not self.clustered and access.threads.size == self.block_of.size:
            self.unfenced_blocks[:] = True  # every thread wrote in its own block
        else:
            self.unfenced_blocks[access.blocks] = True
        return collided

    def _across_warps(self, access: _Access) -> None:
        """Fault when threads of different warps stored one byte in this step."""
        warps = self._warp_of(access.threads)
        clash = _overlaps(access.idx, warps)
        if clash.any():
            row = int(np.argmax(clash.any(axis=1)))
            flat = int(access.idx[row][clash[row]][0])
            touching = (access.idx == flat).any(axis=1)
            other = int(access.threads[touching & (warps != warps[row])][0])
            raise Fault("shared-memory race: write to shared address "
                        f"{flat % self.size:#x} by threads of different warps in one step "
                        f"(also thread {other % self.block_threads} of the block) with no "
                        "barrier in between", int(access.threads[row]))

    @property
    def block_threads(self) -> int:
        return self.block_of.size // self.blocks

    def _warp_of(self, threads: np.ndarray) -> np.ndarray:
        """A launch-wide warp number of each thread (warps do not straddle blocks)."""
        per_block = self.block_threads
        warps_per_block = -(-per_block // 32)
        return threads // per_block * warps_per_block + threads % per_block // 32

    def _maybe_read(self, access: _Access) -> bool:
        """Whether a load of this epoch may have touched the accessed blocks (else no read
        stamp can race; between CTAs of a cluster only cluster epochs order, so maybe)."""
        if self.clustered:
            return True
        if access.epoch is not None:
            return int(self.read_epoch.max()) >= access.epoch
        return bool((self.read_epoch[access.blocks] == self.epoch[access.blocks]).any())

    def _write_race(self, access: _Access, race: np.ndarray,
                    read_race: np.ndarray | None) -> None:
        """Report the first row of a store racing with earlier writes (`race`) or reads."""
        idx = access.idx
        after_write = race.any()
        if not after_write:
            race = read_race
        row = int(np.argmax(race.any(axis=1)))
        raise Fault("shared-memory race: write to shared address "
                    f"{self._address(idx, row, race)} that another thread of the block "
                    "accessed with no barrier in between"
                    f"{self._across_ctas(access, row, race, after_write)}",
                    int(access.threads[row]))

    def fence_proxy(self, threads: np.ndarray) -> None:
        """`fence.proxy.async` by `threads`: their generic writes become visible to async ops."""
        if not self._ready:
            return
        threads = np.asarray(threads, np.int64)
        if threads.size == self.block_of.size:  # every thread of the launch: nothing is left
            self.unfenced[:] = False
            self.unfenced_blocks[:] = False
            return
        if self.clustered:  # their writes may have gone to any CTA of the cluster
            self.unfenced &= ~np.isin((self.wstamp & LOW) - 1, threads)
            return
        fencing = np.bincount(self.block_of[threads], minlength=self.blocks)
        whole = self.block_of.size // self.blocks
        for block in np.flatnonzero(fencing):
            part = slice(block * self.size, (block + 1) * self.size)
            if fencing[block] == whole:  # only its own threads write a block's bytes
                self.unfenced[part] = False
                self.unfenced_blocks[block] = False
            else:
                self.unfenced[part] &= ~np.isin((self.wstamp[part] & LOW) - 1, threads)

    def async_read(self, idx: np.ndarray, thread: int, what: str) -> None:
        """Check bytes (flat indices) an async-proxy operation issued by `thread` will read."""
        if not self._ready:
            self._allocate()
        self._owned(self._row(idx, thread), reading=True)
        seen = self.wstamp[idx]
        unset = seen == 0
        if unset.any():
            raise Fault(f"{what} reads uninitialised shared memory at shared address "
                        f"{int(idx[np.argmax(unset)]) % self.size:#x}", thread)
        dirty = self.unfenced[idx]
        if dirty.any():
            writer = int(seen[np.argmax(dirty)] & LOW) - 1
            raise Fault(f"{what} reads shared memory that thread {writer} of the block wrote "
                        "through the generic proxy with no fence.proxy.async after the write",
                        thread)

    def _rows(self, local: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        """Flat byte indices of offsets `local` (one row for all, or a row each) in each of
        `blocks`, a row per block."""
        return local + (blocks * self.size)[:, None]

    def async_reads_pass(self, local: np.ndarray, blocks: np.ndarray) -> bool:
        """Whether `async_read` accepts bytes `local` (offsets within a block; one row for
        all or a row each) of each of `blocks`: per-block summaries first, so the bytes of a
        wgmma issued across the launch are gathered only where a block is not known to be
        fully written and fenced."""
        if not self._ready:
            self._allocate()
        if self.load_guards:
            owners = self.owner[self._rows(local, blocks)]
            if (self.op_state[owners] >= LOADS_FAULT).any():
                return False
        unknown = ~self.all_written[blocks]
        if unknown.any():
            for block in np.unique(blocks[unknown]):
                part = self.wstamp[block * self.size:(block + 1) * self.size]
                self.all_written[block] = bool(part.all())
            unknown = ~self.all_written[blocks]
            if unknown.any() and not self.wstamp[self._rows(local, blocks)[unknown]].all():
                return False
        dirty = self.unfenced_blocks[blocks]
        return not (dirty.any() and self.unfenced[self._rows(local, blocks)[dirty]].any())

    def _row(self, idx: np.ndarray, thread: int) -> _Access:
        """The bytes `idx` (of one block) of an async operation issued by `thread`."""
        idx = np.asarray(idx, np.int64)
        return _Access(self, idx[:1], idx.size, np.array([thread], np.int64), idx[None, :])

    def async_write(self, idx: np.ndarray, thread: int, what: str) -> None:
        """Check bytes an async-proxy write (a TMA load) issued by `thread` will overwrite."""
        if not self._ready:
            self._allocate()
        access = self._row(idx, thread)
        self._owned(access, reading=False)
        seen = self.rstamp[idx]
        # a multicast writes other CTAs' bytes: ordered after their reads only cluster-wide
        late = self._others_unordered(seen[None, :], access, write=False)[0]
        if late.any():
            first = int(np.argmax(late))
            raise Fault(f"shared-memory race: {what} overwrites shared address "
                        f"{int(idx[first]) % self.size:#x} that thread "
                        f"{int(seen[first] & LOW) - 1} read with no barrier in between", thread)

    def filled(self, idx: np.ndarray) -> None:
        """An async-proxy write landed: the bytes are initialised and owned by no thread."""
        self.wstamp[idx] = FILLED
        self.unfenced[idx] = False

    def own(self, idx: np.ndarray, guard: Guard) -> None:
        """Give bytes to an in-flight operation until `release`."""
        self._enlist(guard)
        self.owner[idx] = guard.op

    def own_rows(self, local: np.ndarray, ids: np.ndarray, what: str, reads: bool,
                 blocks: np.ndarray) -> None:
        """`own` bytes `local` (offsets within a block; one row for all or a row each) of
        blocks[i] for operation ids[i] (new ones, increasing, all doing `what`), in order."""
        self._enlist_new(ids, what, reads)
        distinct_blocks = np.unique(blocks).size == blocks.size
        if local.ndim == 1 and distinct_blocks and ids.size and (np.diff(ids) == 1).all():
            self._prune()
            op_of_block = np.zeros(self.blocks, np.int64)
            op_of_block[blocks] = ids
            covers = np.zeros(self.size, np.bool_)
            covers[local] = True
            self.block_claims.append(_BlockClaim(int(ids[0]), int(ids[-1]), op_of_block,
                                                 covers))
            return
        rows = self._rows(local, blocks)
        if distinct_blocks or np.unique(rows).size == rows.size:  # rows share no byte
            self.owner[rows] = ids[:, None]
            return
        for row, op in zip(rows, ids.tolist(), strict=True):  # a later claim wins
            self.owner[row] = op

    def _enlist(self, guard: Guard) -> None:
        self.release(guard.op)
        self._enlist_new(np.array([guard.op]), guard.what, guard.reads)

    def _enlist_new(self, ids: np.ndarray, what: str, reads: bool) -> None:
        """Operations `ids` (none in flight yet) are in flight."""
        if not self._ready:
            self._allocate()
        top = int(ids.max()) if ids.size else 0
        if top >= self.op_state.size:
            grown = np.zeros(max(top + 1, 2 * self.op_state.size), np.int8)
            grown[:self.op_state.size] = self.op_state
            self.op_state = grown
        if ids.size:  # operations issued together share one guard (its op: the first)
            self.guards.update(dict.fromkeys(ids.tolist(), Guard(int(ids[0]), what, reads)))
        self.load_guards += reads * ids.size
        self.op_state[ids] = LOADS_FAULT if reads else WRITES_FAULT

    def release(self, op: int) -> None:
        """The operation is done with its bytes (those it claimed last are nobody's now)."""
        guard = self.guards.pop(op, None)
        if guard is not None:
            self.load_guards -= guard.reads
            self.op_state[op] = IDLE


def _overlaps(idx: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """Bytes of one store (rows x bytes) that an earlier row of another owner (a thread or a
    warp, one per row) also stores."""
    flat = idx.reshape(-1)
    order = np.argsort(flat, kind="stable")
    same = flat[order][1:] == flat[order][:-1]
    owners = np.repeat(owners, idx.shape[1])[order]
    clash = same & (owners[1:] != owners[:-1])
    out = np.zeros(flat.size, np.bool_)
    out[order[1:][clash]] = True
    return out.reshape(idx.shape)


@dataclass(eq=False)
class RegisterClaim:
    """Registers `names` that in-flight operations own: `owner[t]` is the operation owning
    thread t's copies (0: none); `ops` are those that still own some."""

    names: tuple[str, ...]
    owner: np.ndarray
    ops: set[int]
    what: str
    reads: bool  # whether reads fault too
    wait: str = "wgmma.wait_group"  # the instruction that releases them


class RegisterGuards:
    """Registers of in-flight operations (wgmma, tcgen05.ld), checked on every register
    access."""

    def __init__(self) -> None:
        # register -> its claims, oldest first (so by increasing operation ids)
        self.owned: dict[str, list[RegisterClaim]] = {}
        self.claims: list[RegisterClaim] = []
        self.bypass = False

    def own(self, names: list[str], owner: np.ndarray, ops: set[int], what: str,
            reads: bool, wait: str = "wgmma.wait_group") -> None:
        """Thread t may not touch registers `names` (reads only fault if `reads`) until
        operation owner[t] is released (owner: op ids over the launch, 0 for none; `ops`
        those it holds) by `wait`."""
        names = tuple(dict.fromkeys(names))
        if not names or not ops:
            return
        claim = RegisterClaim(names, owner.copy(), set(ops), what, reads, wait)
        self.claims.append(claim)
        for name in names:
            self.owned.setdefault(name, []).append(claim)

    def release(self, ops: set[int]) -> None:
        """Drop every register guard of operations `ops`."""
        for claim in [c for c in self.claims if not c.ops.isdisjoint(ops)]:
            gone = claim.ops & ops
            claim.ops -= gone
            if claim.ops:
                claim.owner[np.isin(claim.owner, list(gone))] = 0
                continue
            self.claims.remove(claim)
            for name in claim.names:
                claims = self.owned[name]
                claims.remove(claim)
                if not claims:
                    del self.owned[name]

    def check(self, name: str, index: np.ndarray | None, access: str) -> None:
        """Fault if an instruction reads (access "read") or writes an owned register; the
        operation named is the oldest that owns it for one of the threads."""
        if self.bypass:
            return
        for claim in self.owned.get(name, ()):
            if access == "read" and not claim.reads:
                continue
            owner = claim.owner if index is None else claim.owner[index]
            hit = owner != 0
            if hit.any():
                oldest = owner == owner[hit].min()
                ids = np.flatnonzero(oldest) if index is None else index[oldest]
                verb = "read of" if access == "read" else "write to"
                raise Fault(f"{verb} register {name} that {claim.what} still owns: "
                            f"{claim.wait} first", int(ids[0]))
