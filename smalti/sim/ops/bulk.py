"""Non-tensor bulk copies: `cp.async.bulk` between global and shared memory, and
`cp.reduce.async.bulk` from shared into global memory.

PTX ISA, "cp.async.bulk" and "cp.reduce.async.bulk" (PTX 8.0, sm_90):
- `cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes{.L2::cache_hint}
  [dstMem], [srcMem], size, [mbar]{, policy}` and the `.shared::cluster` destination (any CTA
  of the cluster; with `.multicast::cluster` and a 16-bit ctaMask, the same offsets of `dstMem`
  and `mbar` in every CTA the mask names) copy `size` bytes of global memory into shared
  memory, then perform complete-tx of `size` bytes on the mbarrier;
- `cp.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint} [dstMem], [srcMem], size
  {, policy}` copies the executing CTA's shared bytes to global memory, and
  `cp.reduce.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint}.op{.noftz}.type` reduces
  them element-wise into it (.add .min .max .inc .dec .and .or .xor as the ISA's table allows;
  .add.f32 flushes subnormals, .add.f16/.bf16 need .noftz and keep them); both complete
  through the thread's bulk async-group.
`size` is a multiple of 16 and both addresses are 16-byte aligned; a violation, or a range
that runs out of its buffer (or into the multicast window, smalti.sim.multicast), is a fault
naming the line. The shared::cta -> shared::cluster forms and `.cp_mask` (sm_100) are not
supported.

Between devices (sim/peers.py), the global side may be another device's symmetric buffer (a
remote copy). The copy is a weak access (the ISA: "treated as a weak memory operation";
each element of cp.reduce is `.relaxed.gpu`, which orders nothing between devices). It may
touch global memory at any time between its issue and the program's synchronisation with it
(the mbarrier wait that observes its phase, or the wait_group that covers it), so the race
check sees it twice, conservatively: at issue, and when it is retired, both times against
what the device had synchronised with at issue (a write another device made in between is a
race even if the device acquired it since); the record left for later accesses carries the
clock at retirement (sim/peers.py, `PeerOrder.bulk_access`, which TMA shares). A
`wait_group.read` retires a store as a full `wait_group` does
(the simulator does not tell the two apart), so a release after only `.read` is not reported.
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import VIEW
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.lines import instruction_text
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader
from smalti.sim.ops.bulk_queue import (
    multicast_targets,
    queue_shared_read,
    queue_shared_write,
    reduce_elements,
)
from smalti.sim.ops.memory import _address
from smalti.sim.ops.shared_address import shared_offsets, shared_targets, thread_ids
from smalti.sim.peers import Site
from smalti.sim.registry import Compute, Step

CACHE_HINT = "L2::cache_hint"
SPACES = ("global", "shared::cta", "shared::cluster")
GRANULE = 16  # size and both addresses: multiples of 16 bytes
# cp.reduce.async.bulk into .global: operation -> element types (PTX ISA table).
GLOBAL_REDUCTIONS = {
    "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"),
    "min": ("u32", "s32", "u64", "s64", "f16", "bf16"),
    "max": ("u32", "s32", "u64", "s64", "f16", "bf16"),
    "inc": ("u32",), "dec": ("u32",),
    "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
}
ELEMENT = {**{t: VIEW[t] for t in ("u32", "s32", "u64", "s64", "b32", "b64", "f32", "f64")},
           "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def decode_bulk(inst: Instruction, mods: Modifiers, env: DecodeEnv, reduce: bool) -> Step:
    """cp{.reduce}.async.bulk.dst.src... without .tensor (`cp`, `async`, `bulk` and `reduce`
    already consumed from `mods`)."""
    if mods.flag("cp_mask"):
        raise Unsupported(".cp_mask (sm_100) is not supported")
    multicast = mods.flag("multicast::cluster")
    hinted = mods.flag(CACHE_HINT)
    spaces = [item for item in mods.items if item in SPACES]
    for space in spaces:
        mods.flag(space)
    by_mbarrier = mods.flag("mbarrier::complete_tx::bytes")
    by_group = mods.flag("bulk_group")
    op = mods.one_of(tuple(GLOBAL_REDUCTIONS)) if reduce else None
    noftz = mods.flag("noftz")
    ptx_type = mods.types()[0] if reduce else None
    mods.done()
    if spaces == ["global", "shared::cta"]:
        if not by_group or by_mbarrier:
            raise Unsupported("bulk copies to .global complete through .bulk_group")
        if multicast:
            raise Unsupported(".multicast::cluster copies into .shared::cluster")
        if reduce:
            _check_reduction(op, ptx_type, noftz)
        elif noftz:
            raise Unsupported(".noftz is for cp.reduce.async.bulk.add.f16/.bf16")
        return _store(inst, env, op, ptx_type, hinted)
    if reduce:
        raise Unsupported("cp.reduce.async.bulk is supported into .global only")
    if spaces not in (["shared::cta", "global"], ["shared::cluster", "global"]):
        raise Unsupported(f"unsupported bulk copy direction {'.'.join(spaces) or '(none)'}: "
                          "global -> shared::cta/shared::cluster and shared::cta -> global "
                          "are supported")
    if not by_mbarrier or by_group:
        raise Unsupported("bulk copies into shared memory complete through "
                          ".mbarrier::complete_tx::bytes")
    if multicast and spaces[0] != "shared::cluster":
        raise Unsupported(".multicast::cluster copies into .shared::cluster")
    if noftz:
        raise Unsupported(".noftz is for cp.reduce.async.bulk.add.f16/.bf16")
    return _load(inst, env, spaces[0] == "shared::cluster", multicast, hinted)


def _check_reduction(op: str | None, ptx_type: str, noftz: bool) -> None:
    if op is None:
        raise Unsupported("cp.reduce.async.bulk needs a reduction operation")
    if ptx_type not in GLOBAL_REDUCTIONS[op]:
        raise Unsupported(f"cp.reduce.async.bulk.{op} into .global does not take .{ptx_type}")
    half = op == "add" and ptx_type in ("f16", "bf16")
    if half != noftz:
        raise Unsupported(".add.f16/.add.bf16 need .noftz, which only they take")


def _global_region(m: Machine, address: int, size: int, thread: int, what: str) -> np.ndarray:
    """The global bytes a copy reads or writes, checked aligned and inside one buffer."""
    if address % GRANULE:
        raise Fault(f"{what}: global address {address:#x} is not {GRANULE}-byte aligned", thread)
    try:
        return m.global_memory.region(address, size)
    except Fault as fault:
        raise Fault(f"{what}: {fault.message}", thread) from None


def _shared_bytes(m: Machine, block: int, offset: int, size: int, thread: int, what: str
                  ) -> np.ndarray:
    """Flat indices of `size` shared bytes at `offset` of `block`, checked."""
    if offset % GRANULE:
        raise Fault(f"{what}: shared address {offset:#x} is not {GRANULE}-byte aligned", thread)
    if offset + size > m.shared.size:
        raise Fault(f"{what}: {size} bytes at shared address {offset:#x} overrun the block's "
                    f"{m.shared.size} bytes", thread)
    return block * m.shared.size + offset + np.arange(size, dtype=np.int64)


def _size(size: int, thread: int, what: str) -> int:
    if size % GRANULE:
        raise Fault(f"{what}: size {size} is not a multiple of {GRANULE}", thread)
    return size


def _per_lane(read, m: Machine, lanes: Lanes, dtype) -> np.ndarray:
    return np.broadcast_to(np.asarray(read(m, lanes)), (lanes.count,)).astype(dtype)


def _load(inst: Instruction, env: DecodeEnv, cluster: bool, multicast: bool,
          hinted: bool) -> Step:
    """global -> shared::cta / shared::cluster (multicast: every CTA of the ctaMask)."""
    operands = expect(inst.operands, 4 + multicast + hinted)
    if hinted:
        reader(operands[-1], "b64", env)  # the cache policy: no effect on results
    dst, src, size, bar = operands[:4]
    space = "cluster" if cluster else "shared"
    dst_of, bar_of = shared_targets(dst, space, env), shared_targets(bar, space, env)
    src_of = _address(src, "global", env)
    size_of = reader(size, "u32", env)
    mask_of = reader(operands[4], "u16", env) if multicast else None
    what = f"the bulk copy at line {inst.line}"
    site = Site(inst.line, instruction_text(inst))

    def run(m: Machine, lanes: Lanes) -> None:
        (dst_blocks, dsts), (bar_blocks, bars) = dst_of(m, lanes), bar_of(m, lanes)
        srcs = _per_lane(src_of, m, lanes, np.uint64)
        sizes = _per_lane(size_of, m, lanes, np.int64)
        masks = None if mask_of is None else _per_lane(mask_of, m, lanes, np.int64)
        for i, thread in enumerate(thread_ids(lanes)):
            thread, source, nbytes = int(thread), int(srcs[i]), _size(int(sizes[i]),
                                                                      int(thread), what)
            region = _global_region(m, source, nbytes, thread, what)
            if masks is None:
                targets = [(int(dst_blocks[i]), int(bar_blocks[i]))]
            else:
                targets = multicast_targets(m, thread, int(masks[i]), what)
            retired = None if m.peers is None else m.peers.bulk_access(
                np.array([source], np.uint64), nbytes, thread, site, read=True, write=False,
                what=what)
            for dst_block, bar_block in targets:
                idx = _shared_bytes(m, dst_block, int(dsts[i]), nbytes, thread, what)
                queue_shared_write(m, idx, (bar_block, int(bars[i])), lambda r=region: r,
                                   thread, what, retired)

    return Compute(run)


def _store(inst: Instruction, env: DecodeEnv, op: str | None, ptx_type: str | None,
           hinted: bool) -> Step:
    """shared::cta -> global, copied or (op) reduced element-wise into it."""
    dst, src, size, *hint = expect(inst.operands, 3 + hinted)
    if hint:
        reader(hint[0], "b64", env)  # the cache policy: no effect on results
    dst_of = _address(dst, "global", env)
    src_of = shared_offsets(src, "shared", env)
    size_of = reader(size, "u32", env)
    kind = "bulk store" if op is None else f"bulk reduce-{op}"
    what = f"the {kind} at line {inst.line}"
    site = Site(inst.line, instruction_text(inst))

    def run(m: Machine, lanes: Lanes) -> None:
        dsts = _per_lane(dst_of, m, lanes, np.uint64)
        srcs = src_of(m, lanes)
        sizes = _per_lane(size_of, m, lanes, np.int64)
        for i, thread in enumerate(thread_ids(lanes)):
            thread, target = int(thread), int(dsts[i])
            nbytes = _size(int(sizes[i]), thread, what)
            region = _global_region(m, target, nbytes, thread, what)
            block = int(m.geometry.block_of[thread])
            idx = _shared_bytes(m, block, int(srcs[i]), nbytes, thread, what)
            retired = None if m.peers is None else m.peers.bulk_access(
                np.array([target], np.uint64), nbytes, thread, site, read=op is not None,
                write=True, what=what)
            queue_shared_read(m, idx, _writer(region, op, ptx_type), thread, what, retired)

    return Compute(run)


def _writer(region: np.ndarray, op: str | None, ptx_type: str | None
            ) -> Callable[[np.ndarray], None]:
    """What a store does with the shared bytes when it completes: copy them over `region`,
    or reduce them element-wise into it."""
    if op is None:
        def copy(raw: np.ndarray) -> None:
            region[:] = raw
        return copy
    dtype = ELEMENT[ptx_type]
    flush = op == "add" and ptx_type == "f32"

    def combine(raw: np.ndarray) -> None:
        old = region.view(dtype)
        old[:] = reduce_elements(op, old.copy(), raw.view(dtype), flush)

    return combine
