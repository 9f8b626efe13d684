"""Clusters of CTAs: `mapa` and `barrier.cluster.arrive` / `barrier.cluster.wait`.

PTX ISA, "Data Movement: mapa": maps the address of a shared variable in the executing CTA to
the address of the same variable in the CTA of cluster rank `b`. Here a .shared::cluster
address is `rank * CTA_SPAN + offset` (smalti.sim.memory), and the generic form adds
the shared window.
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction, Symbol
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.memory import CTA_SPAN, SHARED_WINDOW
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, writer
from smalti.sim.ops.shared_address import thread_ids
from smalti.sim.registry import Compute, Step, Wait, semantics


@semantics("mapa")
def decode_mapa(inst: Instruction, env: DecodeEnv) -> Step:
    """mapa{.shared::cluster}.{u32,u64} d, a, b: `a` mapped into the CTA of cluster rank b."""
    mods = Modifiers(inst)
    cluster = mods.flag("shared::cluster")
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type not in ("u32", "u64") or (not cluster and ptx_type != "u64"):
        raise Unsupported("mapa takes .u32 or .u64 (.shared::cluster) or .u64 (generic)")
    dest, source, rank = expect(inst.operands, 3)
    write = writer(dest, ptx_type, env)
    read_address = reader(source, ptx_type, env)
    read_rank = reader(rank, "u32", env)
    # A variable name is a shared::cta address; in the generic form it means its generic one.
    window = 0 if cluster or (isinstance(source, Symbol) and source.name in env.shared.offsets) \
        else SHARED_WINDOW

    def run(m: Machine, lanes: Lanes) -> None:
        n = lanes.count
        address = np.broadcast_to(read_address(m, lanes), (n,)).astype(np.uint64)
        ranks = np.broadcast_to(read_rank(m, lanes), (n,)).astype(np.uint64)
        size = m.geometry.cluster_size
        if (ranks >= size).any():
            bad = ranks >= size
            raise Fault(f"mapa to CTA rank {int(ranks[np.argmax(bad)])} of a cluster of {size}",
                        lanes.first(bad))
        offset = address - np.uint64(window)
        if window and not m.shared.in_window(address).all():
            bad = ~m.shared.in_window(address)
            raise Fault(f"mapa of {int(address[np.argmax(bad)]):#x}, which is not a shared "
                        "memory address", lanes.first(bad))
        offset = offset % np.uint64(CTA_SPAN)
        if (offset >= np.uint64(m.shared.size)).any():
            bad = offset >= np.uint64(m.shared.size)
            raise Fault(f"mapa of shared address {int(offset[np.argmax(bad)]):#x} beyond the "
                        f"CTA's {m.shared.size} bytes", lanes.first(bad))
        mapped = ranks * np.uint64(CTA_SPAN) + offset
        if not cluster:
            mapped = mapped + np.uint64(SHARED_WINDOW)
        write(m, lanes, mapped.astype(np.uint32 if ptx_type == "u32" else np.uint64))

    return Compute(run)


def decode_barrier_cluster(inst: Instruction, mods: Modifiers) -> Step:
    """barrier.cluster.arrive{.release|.relaxed}{.aligned}, barrier.cluster.wait{.acquire}."""
    expect(inst.operands, 0)
    operation = mods.one_of(("arrive", "wait"))
    if operation == "arrive":
        mods.one_of(("release", "relaxed"))
    else:
        mods.flag("acquire")
    mods.flag("aligned")
    mods.done()
    if operation is None:
        raise Unsupported("barrier.cluster needs .arrive or .wait")
    if operation == "arrive":
        return Compute(_arrive)
    return Wait(_wait)


def _arrive(m: Machine, lanes: Lanes) -> None:
    m.async_engine.clusters.arrive(thread_ids(lanes), m.live)


def _wait(m: Machine, lanes: Lanes) -> np.ndarray:
    ids = thread_ids(lanes)
    ok = m.async_engine.clusters.wait(ids)
    if not ok.all():
        for thread in ids[~ok]:
            m.async_engine.waiting_on[int(thread)] = "the cluster barrier"
    return ok
