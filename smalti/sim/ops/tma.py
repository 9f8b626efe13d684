"""TMA: `cp.async.bulk.tensor` tile loads and stores, `cp.reduce.async.bulk.tensor`, groups.

PTX ISA, "Data Movement: cp.async.bulk.tensor": a load copies the box at the coordinates
(innermost first, signed) into shared memory as a dense row-major tile, each byte address
permuted by the tensor map's swizzle, elements outside the tensor filled with zero (or NaN),
and signals the full box size as complete-tx bytes on the mbarrier. A store writes the box
back, skipping elements outside the tensor; a reduce combines them with what is there.
Loads complete through the mbarrier, stores and reduces through bulk groups
(`cp.async.bulk.commit_group` / `wait_group{.read} N`). `cp` without `.tensor` (non-tensor
bulk copies) is ops/bulk.py's; both queue their work with ops/bulk_queue.py.

Between devices (sim/peers.py), the tensor may lie in another device's symmetric buffer (a
tensor map over a peer's heap). As for non-tensor bulk copies, the copy's global side is a
weak access that may happen any time between issue and the program's synchronisation with it
(the mbarrier wait of a load, the wait_group of a store or reduce): the bytes of every
in-bounds element of the box are race-checked at issue and again at retirement
(`PeerOrder.bulk_access`), as runs of contiguous bytes, one per row of the box.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.ptx.module import Instruction, Register, Symbol, TensorAddress, VectorOperand
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.lines import instruction_text
from smalti.sim.machine import Machine
from smalti.sim.memory import param_generic
from smalti.sim.operands import DecodeEnv, Modifiers, address_parts, expect, reader
from smalti.sim.ops.bulk import decode_bulk
from smalti.sim.ops.bulk_queue import (
    multicast_targets,
    queue_shared_read,
    queue_shared_write,
    reduce_elements,
)
from smalti.sim.ops.cp_async import decode_cp_async
from smalti.sim.ops.shared_address import shared_offsets, shared_targets, thread_ids
from smalti.sim.peers import Site
from smalti.sim.registry import Compute, Step, semantics
from smalti.sim.swizzle import swizzle
from smalti.sim.tensormap import TENSOR_MAP_BYTES, TensorMap, lookup
from smalti.sim.tensormap_memory import DeviceMap, is_record

DIMS = {f"{n}d": n for n in range(1, 6)}
REDUCTIONS = ("add", "min", "max", "and", "or", "xor", "inc", "dec")
CACHE_HINT = "L2::cache_hint"
DST_ALIGN = 128  # PTX ISA: the shared memory of a tensor copy is 128-byte aligned


@semantics("cp")
def decode_cp(inst: Instruction, env: DecodeEnv) -> Step:
    """cp.async.bulk.tensor / cp.reduce.async.bulk.tensor / cp.async.bulk.{commit,wait}_group."""
    mods = Modifiers(inst)
    reduce = mods.flag("reduce")
    if not mods.flag("async"):
        raise Unsupported(f"unsupported copy {inst.opcode}")
    if not mods.flag("bulk"):
        if reduce:
            raise Unsupported(f"unsupported copy {inst.opcode}")
        return decode_cp_async(inst, mods, env)
    if mods.flag("commit_group"):
        mods.done()
        return Compute(_commit)
    if mods.flag("wait_group"):
        mods.flag("read")
        mods.done()
        [count] = expect(inst.operands, 1)
        keep = reader(count, "u32", env)
        return Compute(lambda m, lanes: _wait(m, lanes, int(keep(m, lanes))))
    if not mods.flag("tensor"):
        return decode_bulk(inst, mods, env, reduce)
    rank = DIMS.get(mods.one_of(tuple(DIMS)) or "")
    if rank is None:
        raise Unsupported("cp.async.bulk.tensor needs a .1d to .5d dimension modifier")
    mods.flag("tile")
    multicast = mods.flag("multicast::cluster")
    hinted = mods.flag(CACHE_HINT)  # a trailing cache-policy operand; no effect on results
    spaces = [i for i in mods.items if i in ("global", "shared", "shared::cta",
                                             "shared::cluster")]
    for space in spaces:
        mods.flag(space)
    if spaces[:1] == ["global"] and spaces[1:] in (["shared::cta"], ["shared"]):  # a store
        op = mods.one_of(REDUCTIONS) if reduce else None
        if reduce and op is None:
            raise Unsupported("cp.reduce.async.bulk.tensor needs a reduction operation")
        mods.flag("tile")
        if not mods.flag("bulk_group"):
            raise Unsupported("tensor stores complete through .bulk_group")
        mods.done()
        return _store(inst, env, rank, op, hinted)
    if reduce:
        raise Unsupported("cp.reduce.async.bulk.tensor writes to .global")
    if multicast and spaces != ["shared::cluster", "global"]:
        raise Unsupported(".multicast::cluster loads into .shared::cluster")
    if spaces not in (["shared::cluster", "global"], ["shared::cta", "global"]):
        raise Unsupported(f"unsupported direction in {inst.opcode}")
    mods.flag("tile")
    if not mods.flag("mbarrier::complete_tx::bytes"):
        raise Unsupported("tensor loads complete through .mbarrier::complete_tx::bytes")
    group = mods.one_of(("cta_group::1", "cta_group::2"))
    mods.done()
    if group is not None and spaces != ["shared::cluster", "global"]:
        raise Unsupported(f".{group} loads into .shared::cluster")
    if group == "cta_group::2" and multicast:
        raise Unsupported(".multicast::cluster with .cta_group::2 is not supported")
    return _load(inst, env, rank, multicast, hinted, group)


def _tensor_operand(op, rank: int, env: DecodeEnv):
    """A reader of the tensor map's 128 bytes' address and readers of the coordinates."""
    if not isinstance(op, TensorAddress) or not isinstance(op.coords, VectorOperand):
        raise Unsupported("expected a [tensorMap, {coordinates}] operand")
    coords = op.coords.elements
    if len(coords) != rank:
        raise Unsupported(f"{len(coords)} coordinates for a {rank}d copy")
    match op.base:
        case Symbol(name=name) if name in env.params:  # the parameter itself: its generic address
            generic = np.uint64(param_generic(env.param_offsets[name]))
            where = lambda m, lanes: generic  # noqa: E731
        case Register():
            where = reader(op.base, "u64", env)
        case _:
            raise Unsupported("the tensor map must be a parameter or a 64-bit address")
    return where, [reader(c, "s32", env) for c in coords]


def _tensor_map(m: Machine, address: int, thread: int, lanes: Lanes) -> TensorMap:
    """The tensor map whose 128 bytes are at generic `address` (a parameter, or global
    memory): a host record (tensormap.py) or fields a kernel wrote (tensormap_memory.py)."""
    if address % 64:
        raise Fault(f"tensor map address {address:#x} is not 64-byte aligned", thread)
    raw = m.params.at_generic(address, TENSOR_MAP_BYTES, thread)
    if raw is None:
        mask = np.zeros_like(lanes.mask)
        mask[thread] = True
        raw = m.global_memory.load(np.array([address], np.uint64), 1, TENSOR_MAP_BYTES,
                                   Lanes(mask, everyone=False)).reshape(-1)
    if is_record(raw):
        tm = lookup(raw)
        if tm is None:
            raise Fault(f"the {TENSOR_MAP_BYTES} bytes at {address:#x} carry the tag of a "
                        "smalti.sim.TensorMap that no longer exists", thread)
        return tm
    key = raw.tobytes()
    tm = m.device_maps.get(key)
    if tm is None:
        try:
            tm = DeviceMap.read(raw).resolve(m.global_memory.region)
        except (ValueError, Fault) as error:
            detail = error.message if isinstance(error, Fault) else str(error)
            raise Fault(f"the {TENSOR_MAP_BYTES} bytes at {address:#x} are not a valid tensor "
                        f"map: {detail} (pass a smalti.sim.TensorMap or TensorMapEncodeTiled "
                        "for a CUtensorMap parameter, or build one with tensormap.replace)",
                        thread) from None
        m.device_maps[key] = tm
    return tm


def _per_lane(read, m: Machine, lanes: Lanes, dtype) -> np.ndarray:
    return np.broadcast_to(np.asarray(read(m, lanes)), (lanes.count,)).astype(dtype)


def _box_bytes(m: Machine, tm: TensorMap, block: int, start: int, thread: int,
               what: str) -> np.ndarray:
    """Flat shared byte indices of the tile's bytes, in logical order, swizzled."""
    if start % DST_ALIGN:
        raise Fault(f"{what}: shared address {start:#x} is not {DST_ALIGN}-byte aligned", thread)
    nbytes = tm.tile_bytes
    if start + nbytes > m.shared.size:
        raise Fault(f"{what}: the {nbytes}-byte box at shared address {start:#x} overruns the "
                    f"block's {m.shared.size} bytes", thread)
    physical = swizzle(start + np.arange(nbytes, dtype=np.int64), tm.swizzle)
    return block * m.shared.size + physical


def _check_coords(tm: TensorMap, rank: int, thread: int, what: str) -> None:
    if tm.rank != rank:
        raise Fault(f"{what} is {rank}d but its tensor map has rank {tm.rank}", thread)


def _load(inst: Instruction, env: DecodeEnv, rank: int, multicast: bool, hinted: bool,
          group: str | None = None) -> Step:
    """A tensor load into the CTA `dst` names, or with .multicast::cluster into the same
    CTA-relative offsets of `dst` and `bar` in every CTA of the cluster whose rank is set in
    the 16-bit ctaMask (PTX ISA, cp.async.bulk.tensor): one queued copy per destination.
    With .L2::cache_hint a last operand is the 64-bit cache policy, read and ignored.
    `.cta_group::1` wants the mbarrier in the destination CTA; `.cta_group::2` lets it be in
    the destination CTA's peer (cluster ranks 2i and 2i + 1), as CUTLASS's 2-SM mainloop
    signals the leader CTA's barrier for both CTAs' halves of a stage."""
    operands = expect(inst.operands, 3 + multicast + hinted)
    if hinted:
        reader(operands[-1], "b64", env)  # decodes (so a bad operand is reported), unused
    dst, tensor, bar = operands[:3]
    where, coords = _tensor_operand(tensor, rank, env)
    dst_of = shared_targets(dst, "cluster", env)
    bar_of = shared_targets(bar, "cluster", env)
    mask_of = reader(operands[3], "u16", env) if multicast else None
    what = f"the TMA load at line {inst.line}"
    site = Site(inst.line, instruction_text(inst))

    def run(m: Machine, lanes: Lanes) -> None:
        (dst_blocks, dsts), (bar_blocks, bars) = dst_of(m, lanes), bar_of(m, lanes)
        maps = _per_lane(where, m, lanes, np.uint64)
        cs = [_per_lane(c, m, lanes, np.int64) for c in coords]
        masks = None if mask_of is None else _per_lane(mask_of, m, lanes, np.int64)
        for i, thread in enumerate(thread_ids(lanes)):
            thread = int(thread)
            tm = _tensor_map(m, int(maps[i]), thread, lanes)
            _check_coords(tm, rank, thread, what)
            point = tuple(int(c[i]) for c in cs)
            if masks is None:
                targets = [(int(dst_blocks[i]), int(bar_blocks[i]))]
                if group is not None:
                    _check_group(m, group, *targets[0], thread, what)
            else:
                targets = multicast_targets(m, thread, int(masks[i]), what)
            retired = _peer_checked(m, tm, point, thread, site, what, read=True, write=False)
            for dst_block, bar_block in targets:
                _issue_load(m, tm, point, (dst_block, int(dsts[i])),
                            (bar_block, int(bars[i])), thread, what, retired)

    return Compute(run)


def _check_group(m: Machine, group: str, dst_block: int, bar_block: int, thread: int,
                 what: str) -> None:
    """The mbarrier of a .cta_group::N load lies in the destination CTA (or, N = 2, in its
    peer)."""
    if bar_block == dst_block:
        return
    rank = int(m.geometry.cluster_rank[dst_block])
    if group == "cta_group::2" and bar_block == int(m.geometry.peer(dst_block, rank ^ 1)):
        return
    allowed = "the destination CTA" + (" or its peer" if group == "cta_group::2" else "")
    raise Fault(f"{what}: with .{group} the mbarrier must be in {allowed} (cluster rank "
                f"{rank}); it is in cluster rank {int(m.geometry.cluster_rank[bar_block])}",
                thread)


def _issue_load(m: Machine, tm: TensorMap, point: tuple[int, ...], dst: tuple[int, int],
                key: tuple[int, int], thread: int, what: str,
                retired: Callable[[], None] | None) -> None:
    """Queue one tile copy into shared memory of block dst[0] at offset dst[1]; `retired`
    runs when the program synchronises with it."""
    idx = _box_bytes(m, tm, dst[0], dst[1], thread, what)
    queue_shared_write(m, idx, key, lambda: np.ascontiguousarray(_gather(tm, point)).view(
        np.uint8).reshape(-1), thread, what, retired)


def _gather(tm: TensorMap, coords: tuple[int, ...]) -> np.ndarray:
    """The box at `coords` with out-of-bounds elements filled."""
    index, inside = tm.indices(coords)
    clipped = [np.clip(i, 0, n - 1) for i, n in zip(index, tm.array.shape, strict=True)]
    tile = tm.array[np.ix_(*clipped)]
    fill = np.array(np.nan if tm.oob_fill == "nan" else 0, dtype=tm.array.dtype)
    return np.where(inside, tile, fill)


def _store(inst: Instruction, env: DecodeEnv, rank: int, reduction: str | None,
           hinted: bool) -> Step:
    tensor, src, *hint = expect(inst.operands, 2 + hinted)
    if hint:
        reader(hint[0], "b64", env)  # the cache policy: no effect on results
    address_parts(src)
    where, coords = _tensor_operand(tensor, rank, env)
    src_of = shared_offsets(src, "shared", env)
    kind = "TMA store" if reduction is None else f"TMA reduce-{reduction}"
    what = f"the {kind} at line {inst.line}"
    site = Site(inst.line, instruction_text(inst))

    def run(m: Machine, lanes: Lanes) -> None:
        srcs = src_of(m, lanes)
        maps = _per_lane(where, m, lanes, np.uint64)
        cs = [_per_lane(c, m, lanes, np.int64) for c in coords]
        for i, thread in enumerate(thread_ids(lanes)):
            thread = int(thread)
            tm = _tensor_map(m, int(maps[i]), thread, lanes)
            _check_coords(tm, rank, thread, what)
            block = int(m.geometry.block_of[thread])
            idx = _box_bytes(m, tm, block, int(srcs[i]), thread, what)
            point = tuple(int(c[i]) for c in cs)
            retired = _peer_checked(m, tm, point, thread, site, what,
                                    read=reduction is not None, write=True)
            queue_shared_read(m, idx, _writing(tm, point, reduction), thread, what, retired)

    return Compute(run)


def _peer_checked(m: Machine, tm: TensorMap, point: tuple[int, ...], thread: int, site: Site,
                  what: str, *, read: bool, write: bool) -> Callable[[], None] | None:
    """The race check between devices of the global bytes the box at `point` touches (a
    load reads them, a store writes them, a reduce reads and writes them), run now at issue;
    the check to run at retirement (None in a launch over one device, or when the tensor is
    not in a symmetric buffer)."""
    if m.peers is None:
        return None
    base = tm.address if tm.address is not None else m.global_memory.device_address(tm.array)
    if base is None or not m.peers.overlaps(base, _span(tm.array)):
        return None
    addresses, nbytes = _box_runs(tm, point, base)
    return m.peers.bulk_access(addresses, nbytes, thread, site, read=read, write=write,
                               what=what)


def _span(array: np.ndarray) -> int:
    """Bytes from the first element of a (non-negatively strided) array past its last."""
    return array.itemsize + sum((n - 1) * s for n, s in zip(array.shape, array.strides,
                                                            strict=True))


def _box_runs(tm: TensorMap, point: tuple[int, ...], base: int) -> tuple[np.ndarray, int]:
    """(device addresses, bytes of each) of the runs of contiguous global bytes holding the
    in-bounds elements of the box at `point`, the tensor's first element at `base`: a run
    per row of the box (per element when the innermost element stride skips elements)."""
    index, _ = tm.indices(point)
    kept = [i[(i >= 0) & (i < n)] for i, n in zip(index, tm.array.shape, strict=True)]
    if any(k.size == 0 for k in kept):
        return np.empty(0, np.uint64), 0
    inner = kept[-1].astype(np.int64) * tm.elem
    if tm.element_strides[-1] == 1:  # the row's in-bounds elements are consecutive
        offsets, nbytes = inner[:1], inner.size * tm.elem
    else:
        offsets, nbytes = inner, tm.elem
    for k, stride in zip(reversed(kept[:-1]), reversed(tm.array.strides[:-1]), strict=True):
        offsets = (k.astype(np.int64)[:, None] * stride + offsets).reshape(-1)
    return np.uint64(base) + offsets.astype(np.uint64), nbytes


def _writing(tm: TensorMap, coords: tuple[int, ...], reduction: str | None):
    """Where a tile store's shared bytes go: the box at `coords`, in bounds, (reduced)."""
    def write(raw: np.ndarray) -> None:
        tile = raw.view(tm.array.dtype).reshape(tm.tile_shape)
        index, inside = tm.indices(coords)
        where = np.nonzero(inside)
        target = tuple(i[w] for i, w in zip(index, where, strict=True))
        values = tile[where]
        if reduction is not None:
            values = reduce_elements(reduction, tm.array[target], values)
        tm.array[target] = values

    return write


def _commit(m: Machine, lanes: Lanes) -> None:
    for thread in thread_ids(lanes):
        m.async_engine.commit(("bulk", int(thread)))
    m.async_engine.tick()


def _wait(m: Machine, lanes: Lanes, keep: int) -> None:
    for thread in thread_ids(lanes):
        m.async_engine.wait_groups(("bulk", int(thread)), keep)
