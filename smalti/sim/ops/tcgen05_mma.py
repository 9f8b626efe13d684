"""tcgen05.mma (dense, .cta_group::1) and tcgen05.commit.

PTX ISA, "tcgen05.mma": a single thread issues
`tcgen05.mma.cta_group::1.kind::K [d_taddr], a_desc|[a_taddr], b_desc, idesc, enable_input_d`
computing D (M x N, in tensor memory) = A (M x K) @ B (K x N) + (enable_input_d ? D : 0),
K being 32 bytes of the input type (16 for .kind::f16, 8 for .kind::tf32, 32 for
.kind::f8f6f4). A comes from shared memory (a shared memory descriptor) or from tensor memory
(row i in lane i, K packed into 32-bit columns), B from shared memory; the instruction
descriptor gives the types, transposes, negations, M and N (tcgen05_descriptors.py). With
M = 128, row i of D is lane i and column j is column d + j (one 32-bit column per f32).
Products are exact in float64 and summed there, then rounded once to f32.

The MMA is asynchronous: `tcgen05.commit.cta_group::1.mbarrier::arrive::one{.shared::cluster}
.b64 [mbar]` makes the mbarrier track the completion of the executing thread's prior
tcgen05.mma operations (one arrive when they are done). Until a wait observes that phase, the
D cells stay the MMA's (tcgen05.ld of them is a reported hazard) and so do A's and B's shared
bytes (writing them is one); tcgen05.mma instructions on the same accumulator need no wait
between them ("tcgen05 Memory Consistency Model": they are pipelined).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from smalti.ptx.module import Address, Instruction, VectorOperand
from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, address_parts, reader
from smalti.sim.ops.shared_address import shared_targets
from smalti.sim.ops.tcgen05_descriptors import InstructionDescriptor, SharedDescriptor
from smalti.sim.ops.wgmma_operands import INPUTS, distinct, esize_of, from_bits, values
from smalti.sim.ops.wgmma_operands import operand_addresses as canonical_addresses
from smalti.sim.registry import Compute
from smalti.sim.tmem import column_of, lane_of, tensor_memory

KINDS = ("f16", "tf32", "f8f6f4")
M_SUPPORTED = 128
WAIT_HINT = "a wait on the mbarrier its tcgen05.commit arrives on"


def decode_mma(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Compute:
    """tcgen05.mma.cta_group::1.kind::{f16,tf32,f8f6f4} [d], a, b_desc, idesc, enable_d."""
    if mods.flag("cta_group::2"):
        raise Unsupported(".cta_group::2 (a CTA pair) is not supported")
    if not mods.flag("cta_group::1"):
        raise Unsupported("expected .cta_group::1")
    kind = mods.one_of(tuple(f"kind::{k}" for k in KINDS))
    if kind is None:
        raise Unsupported("tcgen05.mma supports .kind::f16, .kind::tf32 and .kind::f8f6f4")
    mods.items = [i for i in mods.items if not i.startswith("collector::")]  # reuse hints
    mods.done()
    operands = list(inst.operands)
    if len(operands) != 5 or isinstance(operands[4], VectorOperand):
        raise Unsupported("tcgen05.mma with disable-output-lane or scale-input-d operands")
    d_op, a_op, b_op, idesc_op, enable_op = operands
    a_in_tmem = isinstance(a_op, Address)
    spec = _Spec(kind[len("kind::"):], a_in_tmem, f"the tcgen05.mma at line {inst.line}")
    reads = (_tmem_reader(d_op, env),
             _tmem_reader(a_op, env) if a_in_tmem else reader(a_op, "b64", env),
             reader(b_op, "b64", env), reader(idesc_op, "b32", env),
             reader(enable_op, "pred", env))
    return Compute(partial(_mma, spec, reads))


def _tmem_reader(op, env: DecodeEnv):
    """A reader of a [taddr] operand (a register plus an immediate offset)."""
    base, offset = address_parts(op)
    read = reader(base, "u32", env)
    return lambda m, lanes: np.asarray(read(m, lanes)).astype(np.int64) + offset


@dataclass(frozen=True)
class _Spec:
    kind: str
    a_in_tmem: bool
    what: str


@dataclass(frozen=True)
class _Operands:
    """One issued MMA's operands, checked: where A and B lie and the D cells."""

    block: int
    idesc: InstructionDescriptor
    a_addresses: np.ndarray | None  # (M, K) shared byte offsets, or None (A in TMEM)
    a_cells: tuple[np.ndarray, np.ndarray] | None  # (lanes, columns) (M, words)
    b_addresses: np.ndarray  # (N, K)
    d_cells: tuple[np.ndarray, np.ndarray]  # (lanes (M, 1), columns (1, N))
    enable_d: bool


def _mma(spec: _Spec, reads, m: Machine, lanes: Lanes) -> None:
    per_lane = [np.broadcast_to(np.asarray(read(m, lanes)), (lanes.count,)) for read in reads]
    for i, thread in enumerate(thread_ids(lanes).tolist()):  # each thread issues one
        d, a, b, idesc, enable = (int(values_[i]) for values_ in per_lane)
        _issue(m, spec, thread, _operands(m, spec, thread, d, a, b, idesc, bool(enable)))


def _operands(m: Machine, spec: _Spec, thread: int, d: int, a: int, b: int, idesc_value: int,
              enable: bool) -> _Operands:
    what = spec.what
    idesc = InstructionDescriptor.decode(idesc_value, spec.kind)
    if idesc.sparse or idesc.max_shift:
        raise Fault(f"{what}: sparse and weight-stationary (.ws) descriptors are not "
                    "supported", thread)
    if idesc.dtype != "f32":
        raise Fault(f"{what}: only an f32 accumulator is supported (instruction descriptor "
                    f"{idesc_value:#010x} gives {idesc.dtype})", thread)
    for name, itype in (("A", idesc.atype), ("B", idesc.btype)):
        if itype not in INPUTS:
            raise Fault(f"{what}: the instruction descriptor's {name} type is not one "
                        f".kind::{spec.kind} supports here", thread)
    if idesc.m != M_SUPPORTED:
        raise Fault(f"{what}: M = {idesc.m}; only M = 128 is supported with .cta_group::1",
                    thread)
    if not (idesc.n % 16 == 0 and 16 <= idesc.n <= 256):
        raise Fault(f"{what}: N = {idesc.n} must be a multiple of 16 in [16, 256] for M = 128",
                    thread)
    block = int(m.geometry.block_of[thread])
    memory = tensor_memory(m)
    if lane_of(d) != 0:
        raise Fault(f"{what}: D at tensor memory lane {lane_of(d)}: with M = 128 it starts "
                    "at lane 0", thread)
    d_lanes = np.arange(idesc.m)[:, None]
    d_columns = column_of(d) + np.arange(idesc.n)[None, :]
    memory.check(block, d_lanes, d_columns, thread, what)
    memory.guard(block, d_lanes, d_columns, thread, what, pipelined="mma")
    b_addresses = _shared_operand(m, b, idesc.n, idesc.btype, idesc.transpose_b, thread, what)
    a_addresses = a_cells = None
    if spec.a_in_tmem:
        if idesc.transpose_a:
            raise Fault(f"{what}: A in tensor memory is K-major (transpose A must be 0)",
                        thread)
        words = 32 // 4
        a_cells = (lane_of(a) + np.arange(idesc.m)[:, None],
                   column_of(a) + np.arange(words)[None, :])
        memory.check(block, *a_cells, thread, what)
        memory.guard(block, *a_cells, thread, what)
    else:
        a_addresses = _shared_operand(m, a, idesc.m, idesc.atype, idesc.transpose_a, thread,
                                      what)
    return _Operands(block, idesc, a_addresses, a_cells, b_addresses, (d_lanes, d_columns),
                     enable)


def _shared_operand(m: Machine, value: int, rows: int, itype: str, mn_major: bool,
                    thread: int, what: str) -> np.ndarray:
    """Byte offsets (rows x K) in the block's shared memory of an operand's elements."""
    desc = SharedDescriptor.decode(value)
    problem = desc.problem()
    if problem is not None:
        raise Fault(f"{what}: {problem}", thread)
    esize = esize_of(itype)
    addresses = canonical_addresses(desc.canonical(), rows, esize, mn_major)
    if int(addresses.max()) + esize > m.shared.size:
        raise Fault(f"{what}: operand bytes up to shared address "
                    f"{int(addresses.max()) + esize - 1:#x} lie beyond the block's "
                    f"{m.shared.size} bytes", thread)
    return addresses


def _issue(m: Machine, spec: _Spec, thread: int, ops: _Operands) -> None:
    engine, memory = m.async_engine, tensor_memory(m)
    idesc = ops.idesc
    base = ops.block * m.shared.size
    owned = []
    for addresses, itype in ((ops.a_addresses, idesc.atype), (ops.b_addresses, idesc.btype)):
        if addresses is not None:
            idx = distinct(base + addresses[..., None] + np.arange(esize_of(itype)))
            engine.shared.async_read(idx, thread, spec.what)
            owned.append(idx)
    op = AsyncOp(engine.new_id(), spec.what, partial(_compute, m, ops),
                 chain=("tcgen05", thread))
    op.on_retire = partial(memory.release, {op.id})
    engine.own(op, np.unique(np.concatenate(owned)), reads=False)
    memory.own(ops.block, *ops.d_cells, op.id, spec.what, WAIT_HINT, "mma")
    memory.uncommitted.setdefault(thread, []).append(op)
    engine.issue(op)


def _compute(m: Machine, ops: _Operands) -> None:
    """The MMA completes: D = A @ B (+ D)."""
    idesc, memory = ops.idesc, tensor_memory(m)
    data = m.shared.data
    base = ops.block * m.shared.size
    b_esize = esize_of(idesc.btype)
    b = values(data[base + ops.b_addresses[..., None] + np.arange(b_esize)], idesc.btype)
    if ops.a_addresses is not None:
        a_esize = esize_of(idesc.atype)
        a = values(data[base + ops.a_addresses[..., None] + np.arange(a_esize)], idesc.atype)
    else:
        words = memory.read(ops.block, *ops.a_cells)  # (M, 8) 32-bit columns
        a = _unpack_words(words, idesc.atype)
    product = a @ b.T
    if idesc.negate_a != idesc.negate_b:
        product = -product
    if ops.enable_d:
        old = memory.read(ops.block, *ops.d_cells).view(np.float32)
        product = product + old.astype(np.float64)
    memory.write(ops.block, *ops.d_cells, product.astype(np.float32).view(np.uint32))


def _unpack_words(words: np.ndarray, itype: str) -> np.ndarray:
    """A's elements (M x K, float64) from tensor-memory columns holding K packed in order,
    the first element in the low bits."""
    esize = esize_of(itype)
    raw = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)
    raw = raw.reshape(words.shape[0], -1, esize)
    bits = np.ascontiguousarray(raw).view(f"<u{esize}")[..., 0]
    return from_bits(bits, itype)


def decode_commit(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Compute:
    """tcgen05.commit.cta_group::1.mbarrier::arrive::one{.shared::cluster}.b64 [mbar]."""
    if mods.flag("cta_group::2") or mods.flag("multicast::cluster"):
        raise Unsupported("tcgen05.commit with .cta_group::2 or .multicast::cluster")
    if not (mods.flag("cta_group::1") and mods.flag("mbarrier::arrive::one")):
        raise Unsupported("expected tcgen05.commit.cta_group::1.mbarrier::arrive::one")
    mods.one_of(("shared::cluster", "shared::cta"))
    if not mods.flag("b64"):
        raise Unsupported("tcgen05.commit takes a .b64 mbarrier")
    mods.done()
    if len(inst.operands) != 1:
        raise Unsupported("tcgen05.commit takes one mbarrier operand")
    targets_of = shared_targets(inst.operands[0], "cluster", env)
    what = f"the tcgen05.commit at line {inst.line}"

    def run(m: Machine, lanes: Lanes) -> None:
        engine, memory = m.async_engine, tensor_memory(m)
        blocks, offsets = targets_of(m, lanes)
        for i, thread in enumerate(thread_ids(lanes).tolist()):
            key = (int(blocks[i]), int(offsets[i]))
            engine.barriers.get(key, thread)
            tracked = memory.uncommitted.pop(thread, [])
            op = AsyncOp(engine.new_id(), what, partial(_arrive, m, key, thread, tracked),
                         chain=("tcgen05", thread))
            engine.issue(op)

    return Compute(run)


def _arrive(m: Machine, key: tuple[int, int], thread: int, tracked: list[AsyncOp]) -> None:
    """The tracked MMAs are done: one arrive; they retire when a wait observes the phase."""
    barriers = m.async_engine.barriers
    barriers.get(key, thread).landed.extend(tracked)
    barriers.arrive(key, 1, thread)
