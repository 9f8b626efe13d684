"""tcgen05 (sm_100a): tensor-memory allocation, tcgen05.ld / st / wait, fences; tcgen05.mma
and tcgen05.commit are decoded by `tcgen05_mma`, tcgen05.cp by `tcgen05_copy`.

PTX ISA, "TensorCore 5th Generation Family Instructions":
- `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols` (a warp) allocates
  columns of tensor memory and writes their address to shared memory at `dst`;
  `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, ncols` frees them;
  `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned` gives up the right to allocate
  (sim/tmem.py holds the rules).
- `tcgen05.ld.sync.aligned.shape.num{.pack::16b}.b32 r, [taddr]{, immHalfSplitoff}` and
  `tcgen05.st.sync.aligned.shape.num{.unpack::16b}.b32 [taddr]{, immHalfSplitoff}, r` move
  data between a warp's registers and tensor memory (layouts: tcgen05_fragments.py). Every
  thread of the warp executes them with the same address; warp w of a warpgroup reaches only
  lanes 32*(w%4) to 32*(w%4)+31 ("Tensor Memory access restrictions").
- Both are asynchronous: `tcgen05.wait::ld` waits for the executing thread's prior loads,
  `tcgen05.wait::st` for its prior stores (the cells they wrote may not be read by
  tcgen05.ld or tcgen05.mma until then). A load's destination registers are ordinary data
  dependencies, readable right after it: NVVM's tcgen05.ld intrinsic returns its values and
  the wait is a separate intrinsic with no data tie to them, so ptxas must guard the reads,
  and CUTLASS 4.2's sm100 epilogue reads every subtile's registers before its one
  tcgen05.wait::ld (which orders the tensor memory reads before releasing the accumulator).
- `tcgen05.fence::before_thread_sync` / `::after_thread_sync` order tcgen05 operations
  around thread synchronisation; the simulator's ordering is already that strong.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from smalti.ptx.module import Address, Immediate, Instruction, Register, VectorOperand
from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, address_parts, expect, reader
from smalti.sim.ops import tcgen05_copy, tcgen05_mma
from smalti.sim.ops.shared_address import shared_offsets
from smalti.sim.ops.tcgen05_fragments import (
    MAX_NUM,
    SHAPES,
    fragment,
    lanes_spanned,
    register_count,
)
from smalti.sim.ops.warp import require_whole_warp, warp_view
from smalti.sim.registry import Compute, Step, semantics
from smalti.sim.tmem import LANES_PER_WARP, column_of, lane_of, tensor_memory

WARP = 32
NUMS = tuple(f"x{1 << i}" for i in range(8))


@semantics("tcgen05")
def decode_tcgen05(inst: Instruction, env: DecodeEnv) -> Step:
    """Dispatch on the tcgen05 operation."""
    mods = Modifiers(inst)
    operation = mods.items.pop(0) if mods.items else ""
    match operation:
        case "alloc" | "dealloc" | "relinquish_alloc_permit":
            return _allocation(inst, env, mods, operation)
        case "ld" | "st":
            return _transfer(inst, env, mods, operation == "ld")
        case "wait::ld" | "wait::st":
            _aligned(mods)
            mods.done()
            return Compute(partial(_wait, operation[-2:]))
        case "fence::before_thread_sync" | "fence::after_thread_sync":
            mods.done()
            return Compute(lambda m, lanes: m.async_engine.tick())
        case "mma":
            return tcgen05_mma.decode_mma(inst, env, mods)
        case "commit":
            return tcgen05_mma.decode_commit(inst, env, mods)
        case "cp":
            return tcgen05_copy.decode_cp(inst, env, mods)
    raise Unsupported(f"unsupported tcgen05 operation .{operation}")


def _aligned(mods: Modifiers) -> None:
    if not (mods.flag("sync") and mods.flag("aligned")):
        raise Unsupported("this tcgen05 instruction is .sync.aligned")


def _cta_group(mods: Modifiers) -> None:
    """`.cta_group::1` or `::2`. For allocation, `.cta_group::2` is executed by one warp in each
    CTA of the pair (same warp, same shared address: PTX ISA, "tcgen05.alloc"), allocating the
    same columns in both; the simulator lets each warp allocate in its own CTA, which gives
    the same columns when the two CTAs allocate alike (the rule the ISA states)."""
    if mods.one_of(("cta_group::1", "cta_group::2")) is None:
        raise Unsupported("expected .cta_group::1 or .cta_group::2")


def warps(m: Machine, lanes: Lanes, what: str) -> np.ndarray:
    """The active lanes as whole warps (a row of 32 thread ids each): `.sync.aligned`
    instructions run for every thread of a warp together."""
    require_whole_warp(warp_view(m, lanes), what)
    if m.geometry.block_threads % WARP:
        raise Fault(f"{what}: blocks of {m.geometry.block_threads} threads have a partial "
                    "warp, which tcgen05 instructions do not support", lanes.first())
    ids = thread_ids(lanes)
    if ids.size % WARP:  # some threads of a warp exited: the rest cannot run it
        raise Fault(f"{what}: every thread of the warp must execute it (some exited)",
                    lanes.first())
    return ids.reshape(-1, WARP)


def _uniform(values: np.ndarray, members: np.ndarray, what: str, name: str) -> np.ndarray:
    """One value per warp (values: a row per warp), checked to agree across the warp."""
    differs = (values != values[:, :1]).any(axis=1)
    if differs.any():
        w = int(np.argmax(differs))
        raise Fault(f"{what}: the threads of a warp must give the same {name}",
                    int(members[w, 0]))
    return values[:, 0]


def _per_lane(read, m: Machine, lanes: Lanes, shape: tuple[int, int]) -> np.ndarray:
    return np.broadcast_to(np.asarray(read(m, lanes)), (lanes.count,)).reshape(shape)


# -- allocation ----------------------------------------------------------------------------

def _allocation(inst: Instruction, env: DecodeEnv, mods: Modifiers, operation: str) -> Step:
    _cta_group(mods)
    _aligned(mods)
    what = f"tcgen05.{operation}"
    if operation == "relinquish_alloc_permit":
        mods.done()
        expect(inst.operands, 0)

        def relinquish(m: Machine, lanes: Lanes) -> None:
            members = warps(m, lanes, what)
            for block in np.unique(m.geometry.block_of[members[:, 0]]):
                tensor_memory(m).relinquish(int(block))

        return Compute(relinquish)
    if operation == "alloc" and mods.one_of(("shared::cta", "shared")) is None:
        raise Unsupported("tcgen05.alloc writes to .shared::cta")
    if not mods.flag("b32"):
        raise Unsupported(f"{what} takes .b32 operands")
    mods.done()
    first, count = expect(inst.operands, 2)
    read_count = reader(count, "u32", env)
    if operation == "dealloc":
        read_address = reader(first, "u32", env)

        def dealloc(m: Machine, lanes: Lanes) -> None:
            members = warps(m, lanes, what)
            taddrs = _uniform(_per_lane(read_address, m, lanes, members.shape), members, what,
                              "address")
            counts = _uniform(_per_lane(read_count, m, lanes, members.shape), members, what,
                              "column count")
            for w, thread in enumerate(members[:, 0].tolist()):
                tensor_memory(m).dealloc(int(m.geometry.block_of[thread]), int(taddrs[w]),
                                         int(counts[w]), thread)

        return Compute(dealloc)
    offsets_of = shared_offsets(first, "shared", env)

    def alloc(m: Machine, lanes: Lanes) -> None:
        members = warps(m, lanes, what)
        offsets = _uniform(offsets_of(m, lanes).reshape(members.shape), members, what,
                           "destination")
        counts = _uniform(_per_lane(read_count, m, lanes, members.shape), members, what,
                          "column count")
        for w, thread in enumerate(members[:, 0].tolist()):
            block = int(m.geometry.block_of[thread])
            offset = int(offsets[w])
            if offset % 4:
                raise Fault(f"{what}: shared address {offset:#x} is not 4-byte aligned", thread)
            taddr = tensor_memory(m).alloc(block, int(counts[w]), thread)
            flat = block * m.shared.size + offset + np.arange(4)
            hazards = m.async_engine.shared
            hazards.async_write(flat, thread, what)  # written by the tensor core, not a thread
            m.shared.data[flat] = np.array([taddr], np.uint32).view(np.uint8)
            hazards.filled(flat)

    return Compute(alloc)


# -- tcgen05.ld / tcgen05.st ---------------------------------------------------------------

def _transfer(inst: Instruction, env: DecodeEnv, mods: Modifiers, load: bool) -> Step:
    _aligned(mods)
    shape = mods.one_of(SHAPES)
    num = mods.one_of(NUMS)
    packed = mods.flag("pack::16b" if load else "unpack::16b")
    if shape is None or num is None or not mods.flag("b32"):
        raise Unsupported("expected tcgen05.ld/st.sync.aligned.<shape>.x<num>.b32")
    mods.done()
    count = int(num[1:])
    if count > MAX_NUM[shape]:
        raise Unsupported(f".{shape} repeats at most .x{MAX_NUM[shape]} times")
    split = shape == "16x32bx2"
    operands = expect(inst.operands, 2 + split)
    vector, address = (operands[0], operands[1]) if load else (operands[-1], operands[0])
    if not isinstance(vector, VectorOperand) or not all(
            isinstance(e, Register) for e in vector.elements):
        raise Unsupported("tcgen05.ld/st registers are a brace list of registers")
    names = [e.name for e in vector.elements]
    if len(names) != register_count(shape, count):
        raise Unsupported(f".{shape}.{num} moves {register_count(shape, count)} registers per "
                          f"thread, not {len(names)}")
    offset = 0
    if split:
        immediate = operands[2 if load else 1]
        if not isinstance(immediate, Immediate):
            raise Unsupported("immHalfSplitoff is an immediate")
        offset = int(immediate.value)
    base, extra = address_parts(address) if isinstance(address, Address) else (address, 0)
    read_base = reader(base, "u32", env)
    lane_off, column_off = fragment(shape, count, offset)
    if packed:
        column_off = np.stack([2 * column_off, 2 * column_off + 1], axis=-1)
        lane_off = np.broadcast_to(lane_off[..., None], column_off.shape)
    what = f"the tcgen05.{'ld' if load else 'st'} at line {inst.line}"
    spec = _Transfer(names, lane_off, column_off, lanes_spanned(shape), packed, what, extra)
    return Compute(partial(_load if load else _store, spec, read_base))


class _Transfer:
    """A decoded tcgen05.ld/st: registers, (lane, column) offsets per (thread, register[,
    half]), the lanes one warp spans, and whether 16-bit halves are (un)packed."""

    def __init__(self, names: list[str], lanes: np.ndarray, columns: np.ndarray, span: int,
                 packed: bool, what: str, offset: int) -> None:
        self.names, self.lanes, self.columns, self.span = names, lanes, columns, span
        self.packed, self.what, self.offset = packed, what, offset

    def cells(self, m: Machine, members: np.ndarray, taddrs: np.ndarray, w: int
              ) -> tuple[int, np.ndarray, np.ndarray]:
        """(block, lanes, columns) warp `w` reaches, checked against the data-path
        restriction and the allocation."""
        thread = int(members[w, 0])
        block = int(m.geometry.block_of[thread])
        taddr = int(taddrs[w]) + self.offset
        lane, column = lane_of(taddr), column_of(taddr)
        quarter = (thread - block * m.geometry.block_threads) // WARP % 4
        first = LANES_PER_WARP * quarter
        if not (first <= lane and lane + self.span <= first + LANES_PER_WARP):
            raise Fault(f"{self.what}: warp {quarter} of its warpgroup reaches only tensor "
                        f"memory lanes {first}..{first + LANES_PER_WARP - 1}, not "
                        f"{lane}..{lane + self.span - 1}", thread)
        lanes, columns = lane + self.lanes, column + self.columns
        tensor_memory(m).check(block, lanes, columns, thread, self.what)
        return block, lanes, columns


def _addresses(read_base, m: Machine, lanes: Lanes, spec: _Transfer
               ) -> tuple[np.ndarray, np.ndarray]:
    members = warps(m, lanes, spec.what)
    taddrs = _uniform(_per_lane(read_base, m, lanes, members.shape), members, spec.what,
                      "tensor memory address")
    return members, taddrs


def _load(spec: _Transfer, read_base, m: Machine, lanes: Lanes) -> None:
    members, taddrs = _addresses(read_base, m, lanes, spec)
    engine, memory = m.async_engine, tensor_memory(m)
    for w in range(members.shape[0]):
        block, cell_lanes, cell_columns = spec.cells(m, members, taddrs, w)
        memory.guard(block, cell_lanes, cell_columns, int(members[w, 0]), spec.what)
        values = memory.read(block, cell_lanes, cell_columns)
        if spec.packed:
            values = (values[..., 0] & 0xFFFF) | ((values[..., 1] & 0xFFFF) << 16)
        threads = members[w]
        for r, name in enumerate(spec.names):  # register reads wait on the load's data
            m.registers.write(name, values[:, r].astype(np.uint32), threads)
        engine.issue(AsyncOp(engine.new_id(), spec.what, lambda: None),
                     group=("tcgen05.ld", int(threads[0])))


def _store(spec: _Transfer, read_base, m: Machine, lanes: Lanes) -> None:
    members, taddrs = _addresses(read_base, m, lanes, spec)
    engine, memory = m.async_engine, tensor_memory(m)
    for w in range(members.shape[0]):
        thread = int(members[w, 0])
        block, cell_lanes, cell_columns = spec.cells(m, members, taddrs, w)
        memory.guard(block, cell_lanes, cell_columns, thread, spec.what, pipelined="st")
        values = np.stack([m.registers.read(name, members[w]) for name in spec.names], axis=1)
        values = values.astype(np.uint32)
        if spec.packed:
            values = np.stack([values & 0xFFFF, values >> 16], axis=-1)
        memory.write(block, cell_lanes, cell_columns, values)
        op = AsyncOp(engine.new_id(), spec.what, lambda: None)
        op.on_retire = partial(memory.release, {op.id})
        memory.own(block, cell_lanes, cell_columns, op.id, spec.what, "tcgen05.wait::st", "st")
        engine.issue(op, group=("tcgen05.st", thread))


def _wait(kind: str, m: Machine, lanes: Lanes) -> None:
    """tcgen05.wait::ld / wait::st: the warp's prior loads (stores) complete and retire."""
    members = warps(m, lanes, f"tcgen05.wait::{kind}")
    engine = m.async_engine
    for thread in members[:, 0].tolist():
        group = (f"tcgen05.{kind}", thread)
        engine.commit(group)
        engine.wait_groups(group, 0)
    engine.tick()
