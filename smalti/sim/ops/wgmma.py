"""wgmma: `wgmma.mma_async` over shared-memory descriptors or registers, fence, groups.

PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions". One
instruction is issued by the 128 threads of a warpgroup together and computes
D (64 x N) = scale-a * A (64 x K) @ scale-b * B (K x N) + (scale-d ? D : 0), K being 32
bytes of the input type. Products are exact in float64 and summed there, then rounded once
to the accumulator type; hardware accumulates in its own order and precision, so results may
differ from it in the last bits.

An instruction runs once for all the warpgroups executing it: it is issued for all of them
in one step when nothing about it can fault, and warpgroup by warpgroup (in order, so the
first fault is the one reported) otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np

from smalti.ptx.module import Immediate, Instruction, Register, VectorOperand
from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault, NotConverged, Unsupported
from smalti.sim.geometry import Geometry
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader
from smalti.sim.ops.wgmma_batch import Spec, WgmmaBatch
from smalti.sim.ops.wgmma_operands import (
    INPUTS,
    K_OF,
    WARPGROUP,
    Descriptor,
    Layout,
    M,
    distinct,
    esize_of,
    layout,
    operand_addresses,
    union,
)
from smalti.sim.ops.wgmma_operands import a_fragment_coords as a_fragment_coords  # re-export
from smalti.sim.registry import Compute, Step, semantics


@semantics("wgmma")
def decode_wgmma(inst: Instruction, env: DecodeEnv) -> Step:
    """wgmma.fence / commit_group / wait_group N / mma_async."""
    mods = Modifiers(inst)
    mods.flag("sync")
    mods.flag("aligned")
    if mods.flag("fence"):
        mods.done()
        return Compute(lambda m, lanes: m.async_engine.tick())
    if mods.flag("commit_group"):
        mods.done()
        return Compute(_commit)
    if mods.flag("wait_group"):
        mods.done()
        [count] = expect(inst.operands, 1)
        return Compute(partial(_wait, reader(count, "u32", env)))
    if mods.flag("mma_async"):
        return _mma(inst, env, mods)
    raise Unsupported(f"unsupported wgmma operation {inst.opcode}")


@dataclass(frozen=True)
class _Warpgroups:
    """The warpgroups among an instruction's active lanes: each one's thread ids (G x 128)
    and its async-engine group (and chain) key."""

    members: np.ndarray
    groups: tuple[tuple[str, int], ...]


def _warpgroups(m: Machine, lanes: Lanes) -> _Warpgroups:
    """The warpgroups among the active lanes, checked to be whole. wgmma instructions are
    `.sync.aligned` over the warpgroup: lanes whose warpgroup has live members elsewhere
    (diverged earlier, or asleep at an mbarrier wait) wait here for them (NotConverged, held
    by the scheduler) rather than run on part of the warpgroup."""
    if lanes.index is None:
        return _launch_warpgroups(m.geometry)
    ids = thread_ids(lanes)
    _wait_for_warpgroups(m, ids)
    return _split(m.geometry, ids)


def _wait_for_warpgroups(m: Machine, ids: np.ndarray) -> None:
    """Raise NotConverged for the lanes of `ids` whose warpgroups have live threads that
    are not among them (those lanes wait for the rest of their warpgroup)."""
    geometry = m.geometry
    blocks = geometry.block_of[ids]
    first = blocks * geometry.block_threads + (ids - blocks * geometry.block_threads) \
        // WARPGROUP * WARPGROUP
    members = first[:, None] + np.arange(WARPGROUP)[None, :]
    active = np.zeros(geometry.threads, np.bool_)
    active[ids] = True
    live = np.ones(geometry.threads, np.bool_) if m.live is None else m.live
    missing = live[members] & ~active[members]
    short = missing.any(axis=1)
    if not short.any():
        return
    k = int(np.argmax(short))
    absent = int(members[k][np.argmax(missing[k])])
    fault = Fault(f"wgmma needs all {WARPGROUP} threads of a warpgroup; thread {absent} "
                  "never reached this instruction", int(ids[k]))
    waiting = np.zeros(geometry.threads, np.bool_)
    waiting[ids[short]] = True
    raise NotConverged(waiting, fault)


@lru_cache(maxsize=8)
def _launch_warpgroups(geometry: Geometry) -> _Warpgroups:
    """The warpgroups of the whole launch (every thread active: the usual case)."""
    found = _split(geometry, np.arange(geometry.threads))
    found.members.flags.writeable = False
    return found


def _split(geometry: Geometry, ids: np.ndarray) -> _Warpgroups:
    """Thread ids `ids` (sorted) by warpgroup: a warpgroup's threads have consecutive ids, so
    each is a run of one key."""
    blocks = geometry.block_of[ids]
    keys = blocks * 1024 + (ids - blocks * geometry.block_threads) // WARPGROUP
    starts = np.flatnonzero(np.diff(keys, prepend=-1))
    sizes = np.diff(starts, append=ids.size)
    short = sizes != WARPGROUP
    if short.any():
        first = int(np.argmax(short))
        raise Fault(f"wgmma needs all {WARPGROUP} threads of a warpgroup; "
                    f"{int(sizes[first])} executed it", int(ids[starts[first]]))
    return _Warpgroups(ids.reshape(-1, WARPGROUP),
                       tuple(("wgmma", key) for key in keys[starts].tolist()))


def _commit(m: Machine, lanes: Lanes) -> None:
    for group in _warpgroups(m, lanes).groups:
        m.async_engine.commit(group)
    m.async_engine.tick()


def _wait(keep, m: Machine, lanes: Lanes) -> None:
    m.async_engine.wait_groups_many(_warpgroups(m, lanes).groups, int(keep(m, lanes)))
    m.async_engine.tick()


def _shape(inst: Instruction, mods: Modifiers) -> tuple[int, int, str, str, str]:
    """(N, K, accumulator type, A type, B type) of a .m64nNkK.dtype.atype.btype opcode."""
    shape = mods.one_of(tuple(f"m64n{n}k{k}" for n in range(8, 257, 8) for k in (8, 16, 32)))
    types = [mods.items.pop(0) for _ in range(min(3, len(mods.items)))]
    mods.done()
    if shape is None or len(types) != 3:
        raise Unsupported(f"expected .m64nNkK.dtype.atype.btype in {inst.opcode}")
    dtype, atype, btype = types
    n, k = (int(x) for x in shape[4:].split("k"))
    if atype not in INPUTS or btype not in INPUTS or K_OF[atype] != k or K_OF[btype] != k:
        raise Unsupported(f"unsupported wgmma input types .{atype}.{btype} for k{k}")
    if dtype not in ("f32", "f16") or (dtype == "f16" and atype not in ("f16", "e4m3", "e5m2")):
        raise Unsupported(f"unsupported wgmma accumulator .{dtype} for .{atype}")
    return n, k, dtype, atype, btype


def _immediate(op, what: str, allowed: tuple[int, ...]) -> int:
    if not isinstance(op, Immediate) or op.value not in allowed:
        raise Unsupported(f"{what} must be an immediate in {allowed}")
    return int(op.value)


def _mma(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Step:
    n, k, dtype, atype, btype = _shape(inst, mods)
    halves = atype in ("f16", "bf16")
    ops = list(inst.operands)
    a_in_registers = isinstance(ops[1], VectorOperand) if len(ops) > 1 else False
    count = 6 + int(halves) + int(halves and not a_in_registers)
    if len(ops) != count:
        raise Unsupported(f"wgmma.mma_async with these types takes {count} operands")
    d_op, a_op, b_op, scale_d = ops[:4]
    scale_a = _immediate(ops[4], "imm-scale-a", (1, -1))
    scale_b = _immediate(ops[5], "imm-scale-b", (1, -1))
    trans = [_immediate(o, "imm-trans", (0, 1)) for o in ops[6:]]
    trans_a = 0 if a_in_registers else (trans[0] if trans else 0)
    trans_b = trans[-1] if trans else 0
    per_reg = 2 if dtype == "f32" else 4
    if not isinstance(d_op, VectorOperand) or len(d_op.elements) != n // per_reg:
        raise Unsupported(f"the accumulator of m64n{n} .{dtype} is {n // per_reg} registers")
    d_names = [_register(e) for e in d_op.elements]
    if a_in_registers:
        if len(a_op.elements) != 4:
            raise Unsupported("A in registers is four .b32 registers")
        a_names = [_register(e) for e in a_op.elements]
        read_a = None
    else:
        a_names = []
        read_a = reader(a_op, "b64", env)
    read_b = reader(b_op, "b64", env)
    read_scale = reader(scale_d, "pred", env)
    spec = Spec(n, k, dtype, atype, btype, d_names, a_names, trans_a, trans_b,
                scale_a * scale_b, f"the wgmma at line {inst.line}")

    def run(m: Machine, lanes: Lanes) -> None:
        per_lane = lambda read: np.broadcast_to(read(m, lanes), (lanes.count,))  # noqa: E731
        descs_a = None if read_a is None else per_lane(read_a)
        descs_b, scales = per_lane(read_b), per_lane(read_scale)
        found = _warpgroups(m, lanes)  # (after the reads, which fault first)
        members = found.members
        first = np.searchsorted(thread_ids(lanes), members[:, 0])  # each one's first lane
        descs_a = None if descs_a is None else descs_a[first]
        descs_b, scales = descs_b[first], scales[first].astype(np.bool_)
        if _issue_all(m, spec, found, descs_a, descs_b, scales):
            return
        for g, group in enumerate(found.groups):  # one by one: it faults somewhere
            _issue(m, spec, group, members[g], None if descs_a is None else int(descs_a[g]),
                   int(descs_b[g]), bool(scales[g]))

    return Compute(run)


def _register(op) -> str:
    if not isinstance(op, Register):
        raise Unsupported("wgmma fragments are lists of registers")
    return op.name


def _transposed_non_half(spec: Spec) -> bool:
    return spec.atype in ("tf32", "e4m3", "e5m2") and bool(spec.trans_a or spec.trans_b)


@dataclass(frozen=True)
class _Operands:
    """The shared-memory operand of each warpgroup (a row each), within its block: where
    its elements start and its distinct bytes (one layout for all warpgroups when they
    share one, else a row each)."""

    starts: np.ndarray  # (rows, K) or (G, rows, K)
    local: np.ndarray  # (n,) or (G, n)
    layouts: list[Layout]  # each warpgroup's


def _operands(m: Machine, descs: np.ndarray, rows: int, itype: str, mn_major: bool,
              count: int) -> _Operands | None:
    """The operand of each of `count` warpgroups under its descriptor; None when a
    descriptor faults or the warpgroups' operands differ in size."""
    values, inverse = np.unique(descs, return_inverse=True)
    found = [layout(int(v), rows, itype, mn_major, m.shared.size) for v in values]
    if any(f is None for f in found) or len({f.bytes.size for f in found}) > 1:
        return None
    if len(found) == 1:
        return _Operands(found[0].addresses, found[0].bytes, found * count)
    starts = np.stack([f.addresses for f in found])[inverse]
    local = np.stack([f.bytes for f in found])[inverse]
    return _Operands(starts, local, [found[i] for i in inverse])


def _claimed(a: _Operands | None, b: _Operands) -> np.ndarray | None:
    """Each warpgroup's distinct operand bytes, A's and B's together, as offsets within its
    block (one row for all, or a row each); None when their counts differ."""
    if a is None:
        return b.local
    pairs = [union(la, lb) for la, lb in zip(a.layouts, b.layouts, strict=True)]
    if all(p is pairs[0] for p in pairs):
        return pairs[0]
    if len({p.size for p in pairs}) > 1:
        return None
    return np.stack(pairs)


def _a_fragments(m: Machine, names: list[str], members: np.ndarray) -> np.ndarray | None:
    """A's registers (G x 128 x 4) of each warpgroup, read at issue (the ISA forbids changing
    them until the wgmma is done); None when a read would fault."""
    try:
        raw = np.stack([m.registers.read(name, members.reshape(-1)) for name in names], axis=1)
    except Fault:
        return None
    return raw.reshape(members.shape[0], WARPGROUP, len(names))


def _issue_all(m: Machine, spec: Spec, found: _Warpgroups, descs_a: np.ndarray | None,
               descs_b: np.ndarray, scales: np.ndarray) -> bool:
    """Issue the wgmma for every warpgroup (row) in one step, as `_issue` would one after
    another; False, having changed nothing, when any of their checks would fault."""
    if _transposed_non_half(spec):
        return False
    engine = m.async_engine
    members, groups = found.members, found.groups
    blocks = m.geometry.block_of[members[:, 0]]
    count = len(groups)
    b = _operands(m, descs_b, spec.n, spec.btype, bool(spec.trans_b), count)
    a = None if descs_a is None else _operands(m, descs_a, M, spec.atype, bool(spec.trans_a),
                                               count)
    if b is None or (descs_a is not None and a is None):
        return False
    reads = [b] if a is None else [a, b]
    if not all(engine.shared.async_reads_pass(o.local, blocks) for o in reads):
        return False
    a_registers = None
    if descs_a is None and (a_registers := _a_fragments(m, spec.a_names, members)) is None:
        return False
    claimed = _claimed(a, b)
    if claimed is None:
        return False
    first = engine.new_id(count)
    batch = WgmmaBatch(m, spec, first, members, blocks, None if a is None else a.starts,
                       a_registers, b.starts, scales)
    ops = [AsyncOp(first + g, spec.what, None, chain=key, batch=batch)
           for g, key in enumerate(groups)]
    engine.own_rows(ops, claimed, blocks, reads=False)
    engine.own_registers_many(ops, spec.d_guarded, members, reads=True)
    engine.own_registers_many(ops, spec.a_names, members, reads=False)
    engine.issue_many(ops, groups)
    return True


def _smem_bytes(m: Machine, block: int, desc_value: int, rows: int, itype: str,
                mn_major: bool, thread: int, what: str) -> np.ndarray:
    """Flat shared byte indices (rows x K x esize) of an operand."""
    desc = Descriptor.decode(desc_value)
    if desc.base_offset:
        raise Fault(f"{what}: a non-zero matrix base offset ({desc.base_offset}) is not "
                    "supported; align the operand to its swizzle pattern", thread)
    esize = esize_of(itype)
    addresses = operand_addresses(desc, rows, esize, mn_major)
    idx = addresses[..., None] + np.arange(esize)
    if idx.max() >= m.shared.size:
        raise Fault(f"{what}: operand bytes up to shared address {int(idx.max()):#x} lie "
                    f"beyond the block's {m.shared.size} bytes", thread)
    return block * m.shared.size + idx


def _issue(m: Machine, spec: Spec, key: tuple, members: np.ndarray, desc_a: int | None,
           desc_b: int, scale_d: bool) -> None:
    """Issue the wgmma for one warpgroup, checking as it goes."""
    engine = m.async_engine
    thread = int(members[0])
    block = int(m.geometry.block_of[thread])
    if _transposed_non_half(spec):
        raise Fault(f"{spec.what}: transposes exist only for .f16/.bf16", thread)
    b_idx = _smem_bytes(m, block, desc_b, spec.n, spec.btype, bool(spec.trans_b), thread,
                        spec.what)
    a_idx = None
    if desc_a is not None:
        a_idx = _smem_bytes(m, block, desc_a, M, spec.atype, bool(spec.trans_a), thread,
                            spec.what)
        engine.shared.async_read(distinct(a_idx), thread, spec.what)
    engine.shared.async_read(distinct(b_idx), thread, spec.what)
    a_registers = None
    if desc_a is None:  # registers are read at issue: the ISA forbids changing them until done
        a_registers = np.stack([m.registers.read(name, members) for name in spec.a_names],
                               axis=1)[None]
    op = AsyncOp(engine.new_id(), spec.what, None, chain=key)
    base = block * m.shared.size  # the batch sees offsets within the block
    op.batch = WgmmaBatch(m, spec, op.id, members[None], np.array([block]),
                          None if a_idx is None else a_idx[..., 0] - base, a_registers,
                          b_idx[..., 0] - base, np.array([scale_d]))
    owned = b_idx.reshape(-1) if a_idx is None else np.concatenate(
        [a_idx.reshape(-1), b_idx.reshape(-1)])
    engine.own(op, distinct(owned), reads=False)
    threads = np.zeros(m.geometry.threads, np.bool_)
    threads[members] = True
    engine.own_registers(op, spec.d_guarded, threads, reads=True)
    engine.own_registers(op, spec.a_names, threads, reads=False)
    engine.issue(op, group=key)
