"""Atomic read-modify-write: `atom` (returns the old value) and `red` on global, shared
(a CTA's own or, with .shared::cluster, any CTA of the cluster) and generic addresses.

Threads of one instruction that hit the same address are applied one after another, in
ascending thread order: an instruction runs in rounds, round k applying every thread that is
the k-th to touch its address, so each round touches distinct addresses and is one vector
operation. `atom` returns the value each thread saw in that serial order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.dtypes import BITS, UINT_OF_BITS, VIEW
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.memory import SHARED_WINDOW
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, writer
from smalti.sim.ops.memory import (
    ORDERINGS,
    SCOPES,
    _address,
    _load,
    _store,
    _sub_lanes,
    normal_space,
    peer_check,
)
from smalti.sim.registry import Compute, Step, semantics
from smalti.sim.rounding import flush_subnormals

ATOM_SPACES = ("global", "shared", "shared::cta", "shared::cluster")
# Operation -> the types PTX allows for it (PTX ISA, "atom", "red"; .f16/.bf16 forms omitted).
ATOM_TYPES = {
    "add": ("u32", "s32", "u64", "f32", "f64"),
    "min": ("u32", "s32", "u64", "s64"),
    "max": ("u32", "s32", "u64", "s64"),
    "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
    "exch": ("b32", "b64"), "cas": ("b32", "b64"),
    "inc": ("u32",), "dec": ("u32",),
}


def _add(old: np.ndarray, b: np.ndarray, ptx_type: str) -> np.ndarray:
    """atom.add; .f32 rounds to nearest even and flushes subnormal inputs and results to zero.

    PTX ISA, "atom": "atom.add.f32 rounds to nearest even and flushes subnormal inputs and
    results to sign-preserving zero"; .f64 keeps subnormals.
    """
    if ptx_type == "f32":
        return flush_subnormals(flush_subnormals(old) + flush_subnormals(b))
    return old + b


def combine(op: str, ptx_type: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray],
                                                np.ndarray]:
    """new = f(old, b, c) for one atomic operation (c is only used by cas)."""
    match op:
        case "add":
            return lambda old, b, c: _add(old, b, ptx_type)
        case "min":
            return lambda old, b, c: np.minimum(old, b)
        case "max":
            return lambda old, b, c: np.maximum(old, b)
        case "and":
            return lambda old, b, c: old & b
        case "or":
            return lambda old, b, c: old | b
        case "xor":
            return lambda old, b, c: old ^ b
        case "exch":
            return lambda old, b, c: b
        case "cas":
            return lambda old, b, c: np.where(old == b, c, old)
        case "inc":  # ((old >= b) ? 0 : old + 1)
            return lambda old, b, c: np.where(old >= b, 0, old + np.uint32(1)).astype(old.dtype)
    # dec: ((old == 0) || (old > b)) ? b : old - 1
    return lambda old, b, c: np.where((old == 0) | (old > b), b,
                                      old - np.uint32(1)).astype(old.dtype)


def serial_rank(addresses: np.ndarray) -> np.ndarray:
    """For each access, how many earlier accesses (in lane order) hit the same address."""
    order = np.argsort(addresses, kind="stable")
    ordered = addresses[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(ordered.size), 0))
    rank = np.empty(addresses.size, np.int64)
    rank[order] = np.arange(ordered.size) - first
    return rank


def _parse(inst: Instruction) -> tuple[str, str, str]:
    """(state space, operation, type) of an atom/red opcode."""
    mods = Modifiers(inst)
    mods.one_of((*ORDERINGS, "acq_rel"))
    mods.one_of(SCOPES)
    space = mods.one_of(ATOM_SPACES, default="generic")
    op = mods.one_of(tuple(ATOM_TYPES))
    [ptx_type] = mods.types()
    mods.hints()
    mods.done()
    if op is None or ptx_type not in ATOM_TYPES[op]:
        raise Unsupported(f"{inst.base}.{op}.{ptx_type} is not supported")
    return normal_space(space), op, ptx_type


def _physical(m: Machine, space: str, addresses: np.ndarray, elem: int,
              lanes: Lanes) -> np.ndarray:
    """Keys naming the bytes each lane updates: shared addresses of different CTAs differ, and
    a CTA's own address and its .shared::cluster alias (mapa) coincide."""
    if space == "global" or lanes.count == 0:
        return addresses
    if space in ("shared", "cluster"):
        return m.shared.flat(addresses, elem, lanes, "atom", space == "cluster")
    inside = m.shared.in_window(addresses)
    if not inside.any():
        return addresses
    keys = addresses.copy()
    sub = lanes if inside.all() else _sub_lanes(lanes, inside)
    # Flat shared offsets sit below the global buffers' fake addresses (smalti.sim.memory).
    keys[inside] = m.shared.flat(addresses[inside] - np.uint64(SHARED_WINDOW), elem, sub,
                                 "atom", True)
    return keys


def _atomic(inst: Instruction, env: DecodeEnv, returns: bool) -> Step:
    space, op, ptx_type = _parse(inst)
    operands = inst.operands
    arity = 2 + (op == "cas") + returns
    expect(operands, arity)
    write = writer(operands[0], ptx_type, env) if returns else None
    address_op, *sources = operands[1:] if returns else operands
    address_of = _address(address_op, space, env)
    read_b = reader(sources[0], ptx_type, env)
    read_c = reader(sources[1], ptx_type, env) if op == "cas" else None
    update = combine(op, ptx_type)
    elem = BITS[ptx_type] // 8
    view = VIEW[ptx_type]
    peer = peer_check(inst, space, elem, read=True, write=True, atomic=True)

    def run(m: Machine, lanes: Lanes) -> None:
        n = lanes.count
        addresses = np.broadcast_to(address_of(m, lanes), (n,))
        b = np.broadcast_to(read_b(m, lanes), (n,))
        c = np.broadcast_to(read_c(m, lanes), (n,)) if read_c else b
        old = np.empty(n, view)
        rank = serial_rank(_physical(m, space, addresses, elem, lanes))
        for k in range(int(rank.max()) + 1 if n else 0):
            where = rank == k
            sub = lanes if where.all() else _sub_lanes(lanes, where)
            at = addresses[where]
            before = _load(m, space, at, elem, 1, sub)[:, 0].view(view)
            after = np.asarray(update(before, b[where], c[where])).astype(view)
            raw = np.ascontiguousarray(after).view(UINT_OF_BITS[elem * 8])[:, None]
            _store(m, space, at, raw, elem, sub)
            old[where] = before
            if m.atomic_writes is not None:  # a spin watch tells atomic polls from updates
                changed = raw[:, 0] != before.view(UINT_OF_BITS[elem * 8])
                m.atomic_writes[thread_ids(sub)[changed]] += 1
        if m.peers is not None and peer is not None:
            peer(m, addresses, lanes)
        if write is not None:
            write(m, lanes, old)

    return Compute(run)


@semantics("atom")
def decode_atom(inst: Instruction, env: DecodeEnv) -> Step:
    """atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}: d gets the old value."""
    return _atomic(inst, env, returns=True)


@semantics("red")
def decode_red(inst: Instruction, env: DecodeEnv) -> Step:
    """red{.sem}{.scope}{.space}.op.type [a], b: atom without a result."""
    return _atomic(inst, env, returns=False)
