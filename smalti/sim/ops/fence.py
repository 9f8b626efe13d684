"""Memory fences: `fence.proxy.async`, `fence.mbarrier_init`, `fence.{sc,acq_rel}`, `membar`.

Threads of the simulator see every store at once, so fences have no effect on values. What
they do matter for is the hazard checks. PTX ISA, "Memory Consistency Model: Proxies" — writes
through the generic proxy (st.shared) become visible to the async proxy (TMA, wgmma operand
reads) only after a `fence.proxy.async`, which `fence.proxy.async` here records per thread.
System-scope fences (`fence.sc.sys`, `fence.acq_rel.sys`, `membar.sys`) order accesses
between the devices of a launch over several (sim/peers.py).
"""

from __future__ import annotations

from smalti.ptx.module import Instruction
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, address_parts, expect
from smalti.sim.ops.shared_address import thread_ids
from smalti.sim.registry import Compute, Step, semantics

PROXY_SPACES = ("shared::cta", "shared::cluster", "global", "shared")
SCOPES = ("cta", "cluster", "gpu", "sys")


@semantics("fence")
def decode_fence(inst: Instruction, env: DecodeEnv) -> Step:
    """fence.proxy.async{.space}; fence.mbarrier_init.release.cluster; fence.sc|acq_rel.scope;
    fence.proxy.tensormap::generic.{release,acquire}.scope (the acquire form names the map:
    [addr], 128)."""
    if inst.operands:
        return _tensormap_acquire(inst)
    mods = Modifiers(inst)
    if mods.flag("proxy"):
        if mods.flag("async"):
            space = mods.one_of(PROXY_SPACES)
            mods.done()
            if space == "global":
                return Compute(lambda m, lanes: None)  # no global-memory proxy tracking
            return Compute(_fence_proxy)
        if mods.one_of(("alias", "tensormap::generic")):
            mods.one_of(("release", "acquire"))
            mods.one_of(SCOPES)
            mods.done()
            return Compute(lambda m, lanes: None)
        raise Unsupported(f"unsupported proxy fence {inst.opcode}")
    if mods.flag("mbarrier_init"):
        mods.flag("release")
        mods.flag("cluster")
        mods.done()
        return Compute(lambda m, lanes: None)
    mods.one_of(("sc", "acq_rel"))
    scope = mods.one_of(SCOPES)
    mods.done()
    return Compute(_fence_system if scope == "sys" else lambda m, lanes: None)


def _tensormap_acquire(inst: Instruction) -> Step:
    """fence.proxy.tensormap::generic.acquire.scope [addr], 128: no effect on values (the
    tensormap proxy is not tracked)."""
    mods = Modifiers(inst)
    if not (mods.flag("proxy") and mods.flag("tensormap::generic") and mods.flag("acquire")):
        raise Unsupported("only fence.proxy.tensormap::generic.acquire takes operands")
    mods.one_of(SCOPES)
    mods.done()
    address, size = expect(inst.operands, 2)
    address_parts(address)
    if getattr(size, "value", None) != 128:
        raise Unsupported("fence.proxy.tensormap::generic.acquire covers 128 bytes")
    return Compute(lambda m, lanes: None)


@semantics("membar")
def decode_membar(inst: Instruction, env: DecodeEnv) -> Step:
    """membar.{cta,gl,sys}: a fence.sc at that scope; no effect on simulated values."""
    mods = Modifiers(inst)
    scope = mods.one_of(("cta", "gl", "sys"))
    mods.done()
    return Compute(_fence_system if scope == "sys" else lambda m, lanes: None)


def _fence_system(m: Machine, lanes: Lanes) -> None:
    """A system-scope fence orders accesses between devices (sim/peers.py)."""
    if m.peers is not None:
        m.peers.fence(lanes)


def _fence_proxy(m: Machine, lanes: Lanes) -> None:
    m.async_engine.shared.fence_proxy(thread_ids(lanes))
    m.async_engine.tick()
