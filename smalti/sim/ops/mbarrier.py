"""mbarrier instructions: init, inval, arrive (expect_tx, drop), expect_tx, complete_tx, waits.

PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier". Waits
(`try_wait`, `test_wait`) are `Wait` steps: a lane whose phase has not completed sleeps at
the wait until the barrier changes, which is one of the schedules the ISA allows for a
polling loop (`try_wait` may time out and return false; the loop then comes back). Because a
sleeping `test_wait` is also the simulator's answer to a spin loop, a program that polls with
`test_wait` and does unrelated work while the phase is incomplete is not modelled. With
`spurious_waits`, waits also return false at random, as the ISA permits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smalti.ptx.module import Instruction, Symbol
from smalti.sim.async_engine import AsyncEngine
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, reader, writer
from smalti.sim.ops.shared_address import shared_targets, space_of, thread_ids
from smalti.sim.registry import Compute, Step, Wait, semantics

SEMANTICS = ("release", "acquire", "relaxed")
SCOPES = ("cta", "cluster")
Action = Callable[[Machine, tuple[int, int], int, int], int]


@dataclass(frozen=True)
class Ordering:
    """An mbarrier instruction's memory semantics and scope (PTX ISA defaults: .release for
    arrives, .acquire for waits, .cta scope)."""

    sem: str | None
    scope: str

    def reaches_cluster(self) -> bool:
        """Whether it synchronises with threads of other CTAs of the cluster."""
        return self.scope == "cluster" and self.sem != "relaxed"

    def describe(self, default: str) -> str:
        return f".{self.sem or default}.{self.scope}"


def _modifiers(inst: Instruction) -> tuple[Modifiers, str, str, Ordering]:
    """(modifiers left, the operation, the state space, the ordering) of an mbarrier opcode."""
    mods = Modifiers(inst)
    operation = mods.items.pop(0) if mods.items else ""
    sem = mods.one_of(SEMANTICS)
    scope = mods.one_of(SCOPES, "cta")
    space = space_of(mods)
    if mods.one_of(("b64",)) is None:
        raise Unsupported("mbarrier instructions operate on .b64 objects")
    return mods, operation, space, Ordering(sem, scope)


def _grouped(m: Machine, lanes: Lanes, targets: tuple[np.ndarray, np.ndarray]):
    """(key, positions, ids) per distinct (block, address) among the active lanes."""
    ids = thread_ids(lanes)
    blocks, offsets = targets
    keys = blocks * (m.shared.size + 1) + offsets
    unique, inverse = np.unique(keys, return_inverse=True)
    for k in range(unique.size):
        positions = np.flatnonzero(inverse == k)
        first = positions[0]
        yield (int(blocks[first]), int(offsets[first])), positions, ids


@semantics("mbarrier")
def decode_mbarrier(inst: Instruction, env: DecodeEnv) -> Step:
    """Dispatch on the mbarrier operation."""
    mods, operation, space, ordering = _modifiers(inst)
    if operation in ("try_wait", "test_wait"):
        parity = mods.flag("parity")
        mods.done()
        return _wait(inst, env, space, parity, ordering)
    drop = operation == "arrive_drop"
    if operation in ("arrive", "arrive_drop"):
        expect_tx = mods.flag("expect_tx")
        no_complete = mods.flag("noComplete")
        mods.done()
        if no_complete:
            raise Unsupported("mbarrier.arrive.noComplete is not supported")
        return _arrive(inst, env, space, expect_tx, drop, ordering)
    mods.done()
    match operation, inst.operands:
        case "init", (address, count):
            return _update(address, space, env, reader(count, "u32", env),
                           lambda m, key, n, t: m.async_engine.barriers.init(key, n, t))
        case "inval", (address,):
            return _update(address, space, env, None,
                           lambda m, key, n, t: m.async_engine.barriers.inval(key, t))
        case "expect_tx", (address, count):
            return _update(address, space, env, reader(count, "u32", env),
                           lambda m, key, n, t: m.async_engine.barriers.expect_tx(key, n, t))
        case "complete_tx", (address, count):
            return _update(address, space, env, reader(count, "u32", env),
                           lambda m, key, n, t: m.async_engine.barriers.complete_tx(key, n, t))
    raise Unsupported(f"unsupported mbarrier operation .{operation}")


def _update(address, space: str, env: DecodeEnv, count, action) -> Step:
    """A per-lane barrier update with an optional count operand (same order as lanes)."""
    targets_of = shared_targets(address, space, env)

    def run(m: Machine, lanes: Lanes) -> None:
        blocks, offsets = targets_of(m, lanes)
        counts = np.broadcast_to(count(m, lanes), (lanes.count,)) if count else None
        ids = thread_ids(lanes)
        for i in range(lanes.count):  # per lane, in lane order: a handful of lanes in practice
            key = (int(blocks[i]), int(offsets[i]))
            action(m, key, 0 if counts is None else int(counts[i]), int(ids[i]))
        m.async_engine.tick()

    return Compute(run)


def _arrive(inst: Instruction, env: DecodeEnv, space: str, expect_tx: bool, drop: bool,
            ordering: Ordering) -> Step:
    """[state =] mbarrier.arrive{.expect_tx} [addr]{, count}: the token is the phase number.
    An arrival from another CTA is recorded with its ordering, which the waits check."""
    match inst.operands:
        case (state, address):
            extra = None
        case (state, address, extra):
            pass
        case _:
            raise Unsupported("mbarrier.arrive takes a state, an address and an optional count")
    if expect_tx and extra is None:
        raise Unsupported("mbarrier.arrive.expect_tx needs a tx-count operand")
    write = None if state == Symbol("_") else writer(state, "b64", env)
    if space == "cluster" and write is not None:
        raise Unsupported("mbarrier.arrive.shared::cluster returns no state: use the sink _")
    targets_of = shared_targets(address, space, env)
    read_extra = None if extra is None else reader(extra, "u32", env)
    remote_as = "cluster" if ordering.reaches_cluster() else ordering.describe("release")

    def run(m: Machine, lanes: Lanes) -> None:
        targets = targets_of(m, lanes)
        values = (None if read_extra is None
                  else np.broadcast_to(read_extra(m, lanes), (lanes.count,)))
        tokens = np.zeros(lanes.count, np.uint64)
        barriers = m.async_engine.barriers
        for key, positions, ids in _grouped(m, lanes, targets):
            thread = int(ids[positions[0]])
            if expect_tx:  # PTX ISA: expect-tx is performed before the arrive-on
                barriers.expect_tx(key, int(values[positions].sum()), thread)
                count = positions.size
            else:
                count = positions.size if values is None else int(values[positions].sum())
            remote = (m.geometry.block_of[ids[positions]] != key[0]).any()
            tokens[positions] = barriers.arrive(key, count, thread, drop,
                                                remote_as if remote else None, inst.line)
        if write is not None:
            write(m, lanes, tokens)
        m.async_engine.tick()

    return Compute(run)


def _wait(inst: Instruction, env: DecodeEnv, space: str, parity: bool,
          ordering: Ordering) -> Step:
    """p = try_wait/test_wait{.parity} [addr], state|parity{, hint}: sleeps while incomplete.
    A wait that sees a phase threads of other CTAs arrived on synchronises with them only when
    their arrives released, and it acquires, at .cluster scope (PTX ISA, "Memory Consistency
    Model": morally strong operations need each other's thread in scope). Otherwise it orders
    nothing between the CTAs, which matters only if a generic access then races with one of
    theirs (sim/hazards.py reports that race, naming this wait); data that moves only through
    the async proxy (TMA, tcgen05) leaves no generic access to race with."""
    if len(inst.operands) not in (3, 4):
        raise Unsupported("mbarrier waits take a predicate, an address and a state or parity")
    dest, address, phase = inst.operands[:3]
    write = writer(dest, "pred", env)
    read_phase = reader(phase, "u32" if parity else "b64", env)
    if space == "cluster":
        raise Unsupported("mbarrier waits take a .shared::cta (or generic) address")
    targets_of = shared_targets(address, space, env)

    def poll(m: Machine, lanes: Lanes) -> np.ndarray:
        engine = m.async_engine
        engine.tick()
        targets = targets_of(m, lanes)
        phases = np.broadcast_to(read_phase(m, lanes), (lanes.count,))
        done = np.zeros(lanes.count, np.bool_)
        for key, positions, ids in _grouped(m, lanes, targets):
            for p in np.unique(phases[positions]):
                at = positions[phases[positions] == p]
                thread = int(ids[at[0]])
                ok = engine.barriers.done(key, int(p) if parity else None,
                                          None if parity else int(p), thread)
                done[at] = ok
                if ok:
                    _synchronise(engine, key, None if parity else int(p), ordering, inst.line)
                    engine.observed(*key)
                else:
                    what = engine.barriers.describe(key)
                    if parity:
                        what += f" for parity {int(p) & 1}"
                    for t in ids[at]:
                        engine.waiting_on[int(t)] = what
        result = done & ~engine.spurious(lanes.count)  # a spurious false goes on too
        if done.any():
            write(m, lanes if done.all() else _subset(lanes, done), result[done])
        return done

    return Wait(poll)


def _synchronise(engine: AsyncEngine, key: tuple[int, int], token: int | None,
                 ordering: Ordering, line: int | None) -> None:
    """When the wait observes the last completed phase (a parity wait, or one whose token
    names it) and other CTAs arrived on it: order their accesses before this CTA's if both
    sides reach across CTAs, else record the wait (`SharedHazards.weak_wait`)."""
    bar = engine.barriers.table[key]
    weakness = bar.completed_remote
    if weakness is None or (token is not None and token != bar.phase - 1):
        return
    if weakness == "cluster" and ordering.reaches_cluster():
        engine.shared.sync(np.array([key[0]]), cluster=True)
        return
    arrive = "" if bar.completed_remote_line is None else f" at line {bar.completed_remote_line}"
    wait = "" if line is None else f" at line {line}"
    released = ".release.cluster" if weakness == "cluster" else weakness
    engine.shared.weak_wait(key[0], (
        f"the mbarrier wait{wait} ({ordering.describe('acquire')}) observed a phase a thread of "
        f"another CTA arrived on{arrive} ({released}), "
        "which orders nothing between the CTAs: arrive with .release.cluster and wait with "
        ".acquire.cluster"))


def _subset(lanes: Lanes, keep: np.ndarray) -> Lanes:
    ids = thread_ids(lanes)[keep]
    mask = np.zeros_like(lanes.mask)
    mask[ids] = True
    return Lanes(mask, everyone=False)
