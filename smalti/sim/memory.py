"""Global, shared and parameter memory as byte arrays, accessed by vectors of addresses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from smalti.sim.dtypes import UINT_OF_BITS, constant
from smalti.sim.errors import Fault
from smalti.sim.lanes import Lanes

GLOBAL_BASE = 1 << 32  # first fake device address; 0 and small addresses stay invalid
GLOBAL_ALIGN = 256
GLOBAL_GAP = 4096  # unmapped bytes between buffers, so running off one end faults
SHARED_WINDOW = 0x7F00_0000_0000  # generic addresses of the executing block's shared memory
# The kernel's parameters are one buffer (laid out as the ABI packs them): the .param-space
# address of a byte is its offset in that buffer (`mov.b32/.b64 %r, param` gives a parameter's),
# and its generic address (`cvta.param`) is PARAM_WINDOW + that offset.
PARAM_WINDOW = 0x7E00_0000_0000
# A .shared::cluster address names a CTA of the cluster and an offset into its shared memory:
# rank * CTA_SPAN + offset for the CTA of cluster rank `rank`. A CTA's own .shared::cta
# addresses are the same numbers (its variables' addresses carry its rank, as on hardware:
# CUTLASS's 2-SM kernels clear bit 24 of a local address to name the even CTA of the pair).
CTA_SPAN = 1 << 24
# Multicast (multimem) addresses of a launch over several devices (smalti.sim.multicast):
# MULTICAST_WINDOW + off names byte `off` of every device's symmetric buffer. No ordinary
# memory backs the window: only multimem.* instructions may access it (PTX ISA, "multimem").
MULTICAST_WINDOW = 0x7C00_0000_0000
MULTICAST_SPAN = 1 << 40


def param_generic(offset: int) -> int:
    """The generic address of the parameter byte at .param-space address `offset`."""
    return PARAM_WINDOW + offset


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


ELEMENT_SHIFT = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}  # log2 of an element's bytes


def _signed(offsets: np.ndarray) -> np.ndarray:
    """Byte offsets (far below 2**63) as int64 indices; unsigned ones are only re-viewed."""
    if offsets.dtype == np.uint64:
        return offsets.view(np.int64)
    return offsets.astype(np.int64, copy=False)


def _vectors(data: np.ndarray, offsets: np.ndarray, nbytes: int
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """`data` seen as `nbytes`-wide units and the unit at each offset, when every offset
    starts a unit (vector accesses are aligned to the whole vector): one unit per access
    moves faster than numpy's indexing over a small last axis; else None."""
    if nbytes & (nbytes - 1) or data.size % nbytes or (offsets & (nbytes - 1)).any():
        return None
    return data.view(f"V{nbytes}"), offsets >> (nbytes.bit_length() - 1)


def gather(data: np.ndarray, offsets: np.ndarray, elem: int, count: int) -> np.ndarray:
    """Read `count` elements of `elem` bytes at each byte offset of flat bytes `data`."""
    udt = UINT_OF_BITS[elem * 8]
    offsets = _signed(offsets)
    if count > 1 and (vectors := _vectors(data, offsets, elem * count)) is not None:
        units, idx = vectors
        return units[idx].view(udt).reshape(-1, count)
    if data.size % elem == 0:
        units = data.view(udt)
        idx = offsets >> ELEMENT_SHIFT[elem]
        return units[idx[:, None] + np.arange(count)] if count > 1 else units[idx][:, None]
    raw = data[offsets[:, None] + np.arange(elem * count)]
    return np.ascontiguousarray(raw).view(udt).reshape(-1, count)


def scatter(data: np.ndarray, offsets: np.ndarray, values: np.ndarray, elem: int) -> None:
    """Write `values` (n, count) of `elem` bytes each at the byte offsets of flat `data`."""
    udt = UINT_OF_BITS[elem * 8]
    offsets = _signed(offsets)
    count = values.shape[1]
    values = values.astype(udt, copy=False)
    if count > 1 and (vectors := _vectors(data, offsets, elem * count)) is not None:
        units, idx = vectors
        units[idx] = np.ascontiguousarray(values).view(units.dtype)[:, 0]
        return
    if data.size % elem == 0:
        units = data.view(udt)
        idx = offsets >> ELEMENT_SHIFT[elem]
        if count == 1:  # no index broadcast over a one-element axis (slow in numpy)
            units[idx] = values[:, 0]
        else:
            units[idx[:, None] + np.arange(count)] = values
        return
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(len(offsets), -1)
    data[offsets[:, None] + np.arange(elem * count)] = raw


def check_aligned(addresses: np.ndarray, nbytes: int, lanes: Lanes, what: str) -> None:
    """PTX requires naturally aligned accesses (vectors: aligned to the whole vector)."""
    if nbytes & (nbytes - 1) == 0:  # a power of two: a mask, cheaper than a division
        bad = addresses & np.uint64(nbytes - 1)
    else:
        bad = addresses % np.uint64(nbytes)
    if bad.any():
        bad = bad != 0
        first = int(np.argmax(bad))
        raise Fault(f"misaligned {what} of {nbytes} bytes at address {int(addresses[first]):#x}",
                    lanes.first(bad))


class GlobalMemory:
    """The launch's device buffers, each at a fake 256-byte aligned address range."""

    def __init__(self, buffers: Sequence[np.ndarray], names: Sequence[str]) -> None:
        self.buffers = [b.reshape(-1).view(np.uint8) for b in buffers]
        self.names = list(names)
        bases, cursor = [], GLOBAL_BASE
        for data in self.buffers:
            bases.append(cursor)
            cursor = _align(cursor + data.size + GLOBAL_GAP, GLOBAL_ALIGN)
        self.bases = np.array(bases, dtype=np.uint64)
        self.ends = self.bases + np.array([d.size for d in self.buffers], dtype=np.uint64)

    def address(self, i: int) -> int:
        """The device address of buffer `i`."""
        return int(self.bases[i])

    def _locate(self, addresses: np.ndarray, nbytes: int, lanes: Lanes,
                what: str) -> list[tuple[int, np.ndarray | None, np.ndarray]]:
        """Split accesses by buffer: (buffer, positions or None for all, byte offsets)."""
        if not len(self.buffers):
            raise Fault(f"{what} at address {int(addresses[0]):#x} with no buffers",
                        lanes.first())
        lo, hi = addresses.min(), addresses.max()
        k = int(np.searchsorted(self.bases, lo, side="right")) - 1
        if k >= 0 and lo >= self.bases[k] and hi + np.uint64(nbytes) <= self.ends[k]:
            return [(k, None, addresses - self.bases[k])]
        which = np.searchsorted(self.bases, addresses, side="right").astype(np.int64) - 1
        clamped = np.maximum(which, 0)
        valid = (which >= 0) & (addresses + np.uint64(nbytes) <= self.ends[clamped])
        if not valid.all():
            first = int(np.argmax(~valid))
            raise Fault(self._describe_oob(int(addresses[first]), nbytes, what),
                        lanes.first(~valid))
        parts = []
        for k in np.unique(which):
            positions = np.flatnonzero(which == k)
            parts.append((int(k), positions, addresses[positions] - self.bases[k]))
        return parts

    def _describe_oob(self, address: int, nbytes: int, what: str) -> str:
        if 0 <= address - MULTICAST_WINDOW < MULTICAST_SPAN:
            return (f"global {what} of {nbytes} bytes at multicast address {address:#x} "
                    f"(smalti.sim.Multicast() + {address - MULTICAST_WINDOW}): a multicast "
                    "address is accessed only by multimem.ld_reduce/st/red (PTX ISA, "
                    "\"multimem\"), never by ld, st, atom, red or bulk copies")
        k = int(np.searchsorted(self.bases, np.uint64(address), side="right")) - 1
        where = "below every buffer"
        if k >= 0:
            size = int(self.ends[k] - self.bases[k])
            offset = address - int(self.bases[k])
            where = f"at byte offset {offset} of {self.names[k]} ({size} bytes)"
        return f"out-of-bounds global {what} of {nbytes} bytes at address {address:#x}, {where}"

    def region(self, address: int, nbytes: int) -> np.ndarray:
        """Bytes [address, address + nbytes) of device memory as a writable uint8 view; a
        Fault when they are not all inside one buffer."""
        k = int(np.searchsorted(self.bases, np.uint64(address), side="right")) - 1
        if k < 0 or address < int(self.bases[k]) or address + nbytes > int(self.ends[k]):
            raise Fault(self._describe_oob(address, nbytes, "access"))
        start = address - int(self.bases[k])
        return self.buffers[k][start:start + nbytes]

    def device_address(self, array: np.ndarray) -> int | None:
        """The device address of `array`'s first element, when its memory lies in one of the
        launch's buffers (a view of a kernel argument, say); else None."""
        pointer = array.__array_interface__["data"][0]
        for k, data in enumerate(self.buffers):
            host = data.__array_interface__["data"][0]
            if host <= pointer < host + data.size:
                return int(self.bases[k]) + pointer - host
        return None

    def load(self, addresses: np.ndarray, elem: int, count: int, lanes: Lanes) -> np.ndarray:
        """(n, count) raw elements loaded at `addresses` (one per active thread)."""
        check_aligned(addresses, elem * count, lanes, "global load")
        parts = self._locate(addresses, elem * count, lanes, "load")
        if len(parts) == 1 and parts[0][1] is None:
            k, _, offsets = parts[0]
            return gather(self.buffers[k], offsets, elem, count)
        out = np.empty((addresses.size, count), UINT_OF_BITS[elem * 8])
        for k, positions, offsets in parts:
            out[positions] = gather(self.buffers[k], offsets, elem, count)
        return out

    def store(self, addresses: np.ndarray, values: np.ndarray, elem: int, lanes: Lanes) -> None:
        """Store raw elements `values` (n, count) at `addresses`."""
        count = values.shape[1]
        check_aligned(addresses, elem * count, lanes, "global store")
        for k, positions, offsets in self._locate(addresses, elem * count, lanes, "store"):
            part = values if positions is None else values[positions]
            scatter(self.buffers[k], offsets, part, elem)


@dataclass(frozen=True)
class SharedLayout:
    """Offsets of a kernel's shared variables; dynamic (`extern`) memory follows the static."""

    offsets: dict[str, int]
    static_bytes: int
    dynamic_offset: int

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.offsets.items())), self.static_bytes, self.dynamic_offset))


def layout_shared(decls: Sequence) -> SharedLayout:
    """Lay out `SharedDecl`s: static ones in order, then every extern one at one offset."""
    offsets: dict[str, int] = {}
    cursor = 0
    externs = []
    for decl in decls:
        if getattr(decl, "state", "shared") != "shared":
            continue
        if decl.size is None:
            externs.append(decl)
            continue
        cursor = _align(cursor, decl.align)
        offsets[decl.name] = cursor
        cursor += decl.size * max(1, _type_bytes(decl.type))
    dynamic = _align(cursor, max([16, *(d.align for d in externs)]))
    for decl in externs:
        offsets[decl.name] = dynamic
    return SharedLayout(offsets, cursor, dynamic)


def _type_bytes(ptx_type: str) -> int:
    digits = "".join(ch for ch in ptx_type if ch.isdigit())
    return max(1, int(digits) // 8) if digits else 1


def cluster_address(rank: int, offset: int) -> int:
    """The .shared::cluster address of `offset` in the CTA of cluster rank `rank`."""
    return rank * CTA_SPAN + offset


class SharedMemory:
    """One byte array per block; addresses are offsets into the block's shared window, or
    (`cluster=True` accesses) .shared::cluster addresses naming a CTA of the block's cluster.

    `peer(blocks, ranks)` gives the block of each rank in each block's cluster and
    `cluster_size` how many ranks there are (the launch's geometry).
    """

    def __init__(self, blocks: int, size: int, block_of: np.ndarray, peer=None,
                 cluster_size: int = 1, cluster_rank: np.ndarray | None = None) -> None:
        self.size = size
        self.data = np.zeros(blocks * size, np.uint8)
        self.block_of = block_of
        self.peer = peer
        self.cluster_size = cluster_size
        self.blocks = blocks
        self.live: np.ndarray | None = None  # which threads run; the scheduler shares it
        # checks a data store's flat offsets (the launch's live mbarriers: BarrierTable)
        self.data_guard = None
        # each thread's block's first flat byte, for its own (.shared::cta) addresses
        self.block_base = block_of.astype(np.uint64) * np.uint64(size)
        # each thread's CTA's first .shared::cta address (rank * CTA_SPAN); None: all 0
        self.rank_base = None if cluster_size == 1 or cluster_rank is None else (
            cluster_rank[block_of].astype(np.uint64) * np.uint64(CTA_SPAN))

    def exited(self, blocks: np.ndarray) -> np.ndarray:
        """Which of `blocks` have no running thread left (none while nothing is scheduled)."""
        if self.live is None:
            return np.zeros(np.shape(blocks), np.bool_)
        running = np.bincount(self.block_of[self.live], minlength=self.blocks) > 0
        return ~running[blocks]

    def in_window(self, generic: np.ndarray) -> np.ndarray:
        """Which generic addresses fall in the shared window (own CTA or a cluster CTA)."""
        offset = generic - np.uint64(SHARED_WINDOW)  # wraps to huge values below the window
        if self.peer is None or self.cluster_size == 1:
            return offset < np.uint64(self.size)
        return (offset < np.uint64(self.cluster_size * CTA_SPAN)) & (
            offset % np.uint64(CTA_SPAN) < np.uint64(self.size))

    def cta_address(self, offset, lanes: Lanes):
        """The .shared::cta address of byte `offset` of each lane's own CTA (its rank's)."""
        if self.rank_base is None:
            return offset
        base = self.rank_base if lanes.index is None else self.rank_base[lanes.index]
        return (base + np.uint64(offset)).astype(np.asarray(offset).dtype)

    def flat(self, addresses: np.ndarray, nbytes: int, lanes: Lanes, what: str,
             cluster: bool = False) -> np.ndarray:
        """Flat byte offsets into `data` of per-lane shared addresses, bounds-checked."""
        base = self.block_base if lanes.index is None else self.block_base[lanes.index]
        if cluster and self.peer is not None and (
                self.rank_base is not None or (addresses >= np.uint64(CTA_SPAN)).any()):
            blocks = self.block_of if lanes.index is None else self.block_of[lanes.index]
            blocks, addresses = self._resolve(blocks, addresses, lanes, what)
            base = blocks.astype(np.uint64) * np.uint64(self.size)
        elif self.rank_base is not None:  # .shared::cta: the executing CTA's own addresses
            own = self.rank_base if lanes.index is None else self.rank_base[lanes.index]
            outside = (addresses // np.uint64(CTA_SPAN)) != (own // np.uint64(CTA_SPAN))
            if outside.any():
                first = int(np.argmax(outside))
                raise Fault(f"shared {what} at {int(addresses[first]):#x} is not in the "
                            f"executing CTA's shared memory (cluster rank "
                            f"{int(own[first]) // CTA_SPAN}): use .shared::cluster",
                            lanes.first(outside))
            addresses = addresses - own
        bad = addresses + np.uint64(nbytes) > np.uint64(self.size)
        if bad.any():
            first = int(np.argmax(bad))
            raise Fault(f"out-of-bounds shared {what} of {nbytes} bytes at shared address "
                        f"{int(addresses[first]):#x} (the block has {self.size} bytes)",
                        lanes.first(bad))
        return base + addresses

    def _resolve(self, blocks: np.ndarray, addresses: np.ndarray, lanes: Lanes,
                 what: str) -> tuple[np.ndarray, np.ndarray]:
        """(target blocks, offsets) of .shared::cluster addresses (PTX ISA, "mapa")."""
        addresses = np.broadcast_to(addresses, blocks.shape)
        ranks = (addresses // np.uint64(CTA_SPAN)).astype(np.int64)
        bad = ranks >= self.cluster_size
        if bad.any():
            raise Fault(f"shared::cluster {what} at {int(addresses[np.argmax(bad)]):#x} names "
                        f"a CTA outside the cluster of {self.cluster_size}", lanes.first(bad))
        target = self.peer(blocks, ranks)
        remote = target != blocks
        gone = remote & self.exited(target)
        if gone.any():  # PTX ISA: a CTA's shared memory lives only while the CTA runs
            first = int(np.argmax(gone))
            raise Fault(f"shared::cluster {what} at {int(addresses[first]):#x} reaches CTA rank "
                        f"{int(ranks[first])} of the cluster, which has exited: its peers must "
                        "be done with its shared memory before it exits (barrier.cluster)",
                        lanes.first(gone))
        return target, addresses % np.uint64(CTA_SPAN)

    def locate(self, addresses: np.ndarray, nbytes: int, lanes: Lanes, what: str,
               cluster: bool = False) -> np.ndarray:
        """Flat byte offsets of a shared `what` ("load" or "store") of `nbytes` per lane at
        `addresses`, checked to be aligned and in bounds."""
        check_aligned(addresses, nbytes, lanes, f"shared {what}")
        return self.flat(addresses, nbytes, lanes, what, cluster)

    def load(self, addresses: np.ndarray, elem: int, count: int, lanes: Lanes,
             cluster: bool = False) -> np.ndarray:
        """(n, count) raw elements loaded at shared `addresses` of each thread's block."""
        return gather(self.data, self.locate(addresses, elem * count, lanes, "load", cluster),
                      elem, count)

    def store(self, addresses: np.ndarray, values: np.ndarray, elem: int, lanes: Lanes,
              cluster: bool = False) -> None:
        """Store raw elements `values` (n, count) at shared `addresses`."""
        self.write(self.locate(addresses, elem * values.shape[1], lanes, "store", cluster),
                   values, elem, lanes)

    def write(self, flat: np.ndarray, values: np.ndarray, elem: int, lanes: Lanes) -> None:
        """Store raw elements at checked flat offsets; a fault when they overwrite a live
        mbarrier (`data_guard`, the launch's barrier table)."""
        if self.data_guard is not None:
            self.data_guard(flat, elem * values.shape[1], self.size, lanes)
        scatter(self.data, flat, values, elem)


class ParamSpace:
    """Kernel parameters as one byte buffer, uniform across the threads of a device.

    A launch over several devices (smalti.sim.devices) gives each device its own parameter
    bytes (`data` a sequence, one per device, of one size) and `device_of` (each thread's
    device): loads then read, per lane, the bytes of the lane's device.
    """

    def __init__(self, data: bytes | Sequence[bytes], offsets: dict[str, int],
                 device_of: np.ndarray | None = None) -> None:
        rows = [data] if isinstance(data, bytes | bytearray) else list(data)
        self.rows = np.stack([np.frombuffer(bytes(r), np.uint8) for r in rows])
        self.data = self.rows[0]
        self.offsets = offsets
        self.device_of = device_of if len(rows) > 1 else None

    def _devices(self, lanes: Lanes) -> np.ndarray:
        """The device of each active lane (a launch over several devices)."""
        return self.device_of if lanes.index is None else self.device_of[lanes.index]

    def at_generic(self, address: int, nbytes: int, thread: int | None = None
                   ) -> np.ndarray | None:
        """`nbytes` at a generic address in the parameter window (of `thread`'s device);
        None outside it."""
        offset = address - PARAM_WINDOW
        if not 0 <= offset < max(self.data.size, 1):
            return None
        if offset + nbytes > self.data.size:
            raise Fault(f"parameter read of {nbytes} bytes at .param address {offset:#x} runs "
                        f"past the kernel's {self.data.size} parameter bytes")
        row = 0 if self.device_of is None or thread is None else int(self.device_of[thread])
        return self.rows[row, offset:offset + nbytes].copy()

    def in_window(self, generic: np.ndarray) -> np.ndarray:
        """Which generic addresses fall in the parameter window."""
        return (generic - np.uint64(PARAM_WINDOW)) < np.uint64(max(self.data.size, 1))

    def load_at(self, addresses: np.ndarray, elem: int, count: int, lanes: Lanes
                ) -> np.ndarray:
        """(n, count) raw elements at per-lane .param-space `addresses` (byte offsets into
        the parameter buffer), e.g. `ld.param.u32 %r, [%rd+640]` through a struct's address."""
        nbytes = elem * count
        check_aligned(addresses, elem, lanes, "parameter load")
        bad = addresses + np.uint64(nbytes) > np.uint64(self.data.size)
        if bad.any():
            raise Fault(f"parameter load of {nbytes} bytes at .param address "
                        f"{int(addresses[np.argmax(bad)]):#x} runs past the kernel's "
                        f"{self.data.size} parameter bytes", lanes.first(bad))
        starts = addresses.astype(np.int64)
        if self.device_of is not None:
            starts = starts + self._devices(lanes) * self.data.size
        raw = self.rows.reshape(-1)[starts[:, None] + np.arange(nbytes)]
        return np.ascontiguousarray(raw).view(UINT_OF_BITS[elem * 8]).reshape(-1, count)

    def load(self, name: str, offset: int, elem: int, count: int,
             lanes: Lanes | None = None) -> np.ndarray:
        """(1, count) raw elements read at `offset` bytes into parameter `name`; (n, count),
        one row per active lane of `lanes`, when the devices' parameters differ."""
        start = self.offsets[name] + offset
        end = start + elem * count
        if offset < 0 or end > self.data.size:
            raise Fault(f"parameter read of {elem * count} bytes at {name}+{offset} "
                        "is out of bounds")
        udt = UINT_OF_BITS[elem * 8]
        if self.device_of is None or lanes is None:
            return self.data[start:end].copy().view(udt).reshape(1, count)
        rows = self.rows[self._devices(lanes), start:end]
        return np.ascontiguousarray(rows).view(udt).reshape(-1, count)


LOCAL_WINDOW = 0x7D00_0000_0000  # generic addresses of the executing thread's local memory


def layout_variables(decls: Sequence, state: str | tuple[str, ...]
                     ) -> tuple[dict[str, int], int]:
    """Offsets of the variables of some state spaces (e.g. a kernel's .local ones), and size."""
    states = (state,) if isinstance(state, str) else state
    offsets: dict[str, int] = {}
    cursor = 0
    for decl in decls:
        if decl.state not in states:
            continue
        cursor = _align(cursor, decl.align)
        offsets[decl.name] = cursor
        cursor += (decl.size or 1) * _type_bytes(decl.type)
    return offsets, cursor


def variable_bytes(decl) -> np.ndarray:
    """The initial bytes of a module-scope .global/.const variable (zero where not given)."""
    elem = _type_bytes(decl.type)
    data = np.zeros((decl.size or 1) * elem, np.uint8)
    for i, value in enumerate(decl.initializer or ()):
        raw = constant(value, decl.type if decl.type in UNSIGNED_OR_TYPED else f"b{elem * 8}")
        data[i * elem:(i + 1) * elem] = np.frombuffer(raw.tobytes(), np.uint8)
    return data


UNSIGNED_OR_TYPED = frozenset({"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8",
                               "s16", "s32", "s64", "f16", "bf16", "f32", "f64"})


class LocalMemory:
    """Each thread's private .local bytes; addresses are offsets into the thread's window."""

    def __init__(self, threads: int, size: int) -> None:
        self.size = size
        # Threads' windows lie end to end, accessed in units of up to 16 bytes: a stride that
        # is a multiple of 16 keeps each thread's aligned accesses aligned in the array.
        self.stride = _align(size, 16)
        self.data = np.zeros(threads * self.stride, np.uint8)
        self.written = np.zeros(threads * self.stride, np.bool_)

    def _flat(self, addresses: np.ndarray, nbytes: int, lanes: Lanes, what: str) -> np.ndarray:
        bad = addresses + np.uint64(nbytes) > np.uint64(self.size)
        if bad.any():
            raise Fault(f"out-of-bounds local {what} of {nbytes} bytes at local address "
                        f"{int(addresses[np.argmax(bad)]):#x} (each thread has {self.size} "
                        "bytes)", lanes.first(bad))
        ids = np.flatnonzero(lanes.mask) if lanes.index is None else lanes.index
        return ids.astype(np.uint64) * np.uint64(self.stride) + addresses

    def load(self, addresses: np.ndarray, elem: int, count: int, lanes: Lanes) -> np.ndarray:
        """(n, count) raw elements loaded at each thread's local `addresses`."""
        check_aligned(addresses, elem * count, lanes, "local load")
        flat = self._flat(addresses, elem * count, lanes, "load")
        unset = ~self.written[flat.astype(np.int64)[:, None] + np.arange(elem * count)]
        if unset.any():
            raise Fault("read of uninitialised local memory at local address "
                        f"{int(addresses[np.argmax(unset.any(axis=1))]):#x}",
                        lanes.first(unset.any(axis=1)))
        return gather(self.data, flat, elem, count)

    def store(self, addresses: np.ndarray, values: np.ndarray, elem: int, lanes: Lanes) -> None:
        """Store raw elements `values` (n, count) at each thread's local `addresses`."""
        nbytes = elem * values.shape[1]
        check_aligned(addresses, nbytes, lanes, "local store")
        flat = self._flat(addresses, nbytes, lanes, "store")
        scatter(self.data, flat, values, elem)
        self.written[flat.astype(np.int64)[:, None] + np.arange(nbytes)] = True
