"""Loads and stores: `ld`/`st` on the param, global, shared and generic state spaces."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from smalti.ptx.module import Immediate, Instruction, Register, Symbol
from smalti.sim.dtypes import BITS, VIEW, as_bits
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.lines import instruction_text
from smalti.sim.machine import Machine
from smalti.sim.memory import (
    LOCAL_WINDOW,
    PARAM_WINDOW,
    SHARED_WINDOW,
    LocalMemory,
    gather,
)
from smalti.sim.operands import (
    DecodeEnv,
    Modifiers,
    address_parts,
    expect,
    reader,
    vector_elements,
    writer,
)
from smalti.sim.peers import Site as PeerSite
from smalti.sim.peers import sync_of
from smalti.sim.registry import Compute, Step, semantics
from smalti.sim.store_check import Site, check_one_value, may_overlap

SPACES = ("global", "shared", "shared::cta", "shared::cluster", "param", "local", "const")
ORDERINGS = ("relaxed", "acquire", "release")
SCOPES = ("cta", "cluster", "gpu", "sys")
AddressFn = Callable[[Machine, Lanes], np.ndarray]


def _parse(inst: Instruction) -> tuple[str, int, str]:
    """(state space, vector length, element type) of an ld/st opcode."""
    mods = Modifiers(inst)
    space = mods.one_of(SPACES, default="generic")
    mods.hints()
    if mods.one_of(ORDERINGS):
        mods.one_of(SCOPES)
    vec = mods.one_of(("v2", "v4"))
    [ptx_type] = mods.types()
    mods.done()
    if ptx_type == "pred" or ptx_type not in BITS:
        raise Unsupported(f"cannot load or store .{ptx_type}")
    return normal_space(space), int(vec[1:]) if vec else 1, ptx_type


def normal_space(space: str) -> str:
    """The simulator's name of a state space: "shared" (a CTA's own), "cluster" (any CTA of
    the cluster, PTX's .shared::cluster), "global", "param", "local", "const" or "generic"."""
    return {"shared::cta": "shared", "shared::cluster": "cluster"}.get(space, space)


def _address(op, space: str, env: DecodeEnv) -> AddressFn:
    """Per-lane uint64 addresses of a memory operand in `space`."""
    base, offset = address_parts(op)
    delta = np.uint64(offset % (1 << 64))
    match base:
        case Register():
            width = env.register_bits(base)
            read = reader(base, "u64" if width == 64 else "u32", env)
            if not delta:
                return lambda m, lanes: read(m, lanes).astype(np.uint64, copy=False)
            return lambda m, lanes: read(m, lanes).astype(np.uint64) + delta
        case Symbol(name=name) if space in ("shared", "cluster", "generic") and (
                name in env.shared.offsets):
            address = np.uint64(env.shared.offsets[name]) + delta
            if space == "generic":
                address = address + np.uint64(SHARED_WINDOW)
            return lambda m, lanes: m.shared.cta_address(address, lanes)
        case Symbol(name=name) if space in ("local", "generic") and name in env.local:
            address = np.uint64(env.local[name]) + delta
            if space == "generic":
                address = address + np.uint64(LOCAL_WINDOW)
            return lambda m, lanes: address
        case Symbol(name=name) if space in ("global", "const", "generic") and (
                name in env.variables):
            return lambda m, lanes: m.symbol(name, lanes) + delta
        case Immediate(value=int() as value):
            address = np.uint64(value % (1 << 64)) + delta
            return lambda m, lanes: address
    raise Unsupported(f"unsupported address operand for .{space}")


def _per_lane(addresses: np.ndarray, lanes: Lanes) -> np.ndarray:
    return np.broadcast_to(addresses, (lanes.count,)) if addresses.ndim == 0 else addresses


def _sub_lanes(lanes: Lanes, where: np.ndarray) -> Lanes:
    ids = np.arange(lanes.mask.size) if lanes.index is None else lanes.index
    mask = np.zeros_like(lanes.mask)
    mask[ids[where]] = True
    return Lanes(mask, everyone=False)


def _watch(m: Machine, space: str, addresses: np.ndarray, nbytes: int, lanes: Lanes,
           write: bool, flat: np.ndarray | None = None, line: int | None = None) -> bool:
    """Hazard checks of an ld/st to shared memory (races, uninitialised bytes, async owners);
    called after the access, so its bounds are already checked. `flat`: the access's flat
    offsets into shared memory, when the access already computed them. True when a store
    wrote one shared byte from several threads."""
    if m.async_engine is None or space not in ("shared", "cluster", "generic"):
        return False
    if flat is None and space == "generic":
        inside = m.shared.in_window(addresses)
        if not inside.any():
            return False
        addresses = addresses[inside] - np.uint64(SHARED_WINDOW)
        lanes = lanes if inside.all() else _sub_lanes(lanes, inside)
    if flat is None:
        flat = m.shared.flat(addresses, nbytes, lanes, "access", space != "shared")
    threads = thread_ids(lanes)
    hazards = m.async_engine.shared
    if write:
        return hazards.write(flat, nbytes, threads, line)
    hazards.read(flat, nbytes, threads, line)
    return False


def peer_check(inst: Instruction, space: str, nbytes: int, *, read: bool, write: bool,
               atomic: bool = False) -> Callable[[Machine, np.ndarray, Lanes], None] | None:
    """The race check between devices (peers.py) of a global or generic access, run after
    the access as `check(m, addresses, lanes)`; None for other state spaces."""
    if space not in ("global", "generic"):
        return None
    sync = sync_of(inst, atomic)
    site = PeerSite(inst.line, instruction_text(inst))

    def check(m: Machine, addresses: np.ndarray, lanes: Lanes) -> None:
        peers = m.peers
        peers.access(addresses, nbytes, lanes, read=read, write=write, sync=sync,
                     site=peers.site_id(site))

    return check


def _local(m: Machine) -> LocalMemory:
    if m.local is None:
        raise Fault("access to .local memory in a kernel that declares none")
    return m.local


def _in_local(m: Machine, addresses: np.ndarray) -> np.ndarray | None:
    """Which generic addresses are in the thread's local window (None: no local memory)."""
    if m.local is None:
        return None
    inside = (addresses - np.uint64(LOCAL_WINDOW)) < np.uint64(m.local.size)
    return inside if inside.any() else None


def _located(m: Machine, space: str, addresses: np.ndarray, nbytes: int, lanes: Lanes,
             what: str) -> np.ndarray | None:
    """Flat offsets of an access to .shared/.shared::cluster (computed once for the access
    and its hazard checks); None for other spaces."""
    if space not in ("shared", "cluster"):
        return None
    return m.shared.locate(addresses, nbytes, lanes, what, space == "cluster")


def _load(m: Machine, space: str, addresses: np.ndarray, elem: int, count: int,
          lanes: Lanes, flat: np.ndarray | None = None) -> np.ndarray:
    if space in ("global", "const"):  # .const variables live among the device buffers
        return m.global_memory.load(addresses, elem, count, lanes)
    if flat is None:
        flat = _located(m, space, addresses, elem * count, lanes, "load")
    if flat is not None:
        return gather(m.shared.data, flat, elem, count)
    if space == "local":
        return _local(m).load(addresses, elem, count, lanes)
    local = _in_local(m, addresses)
    if local is not None:
        if not local.all():
            raise Fault("a generic access mixing .local and other addresses",
                        lanes.first(~local))
        return m.local.load(addresses - np.uint64(LOCAL_WINDOW), elem, count, lanes)
    in_param = m.params.in_window(addresses)
    if in_param.any():  # a kernel parameter, through its generic address (cvta.param)
        if not in_param.all():
            raise Fault("a generic access mixing .param and other addresses",
                        lanes.first(~in_param))
        return m.params.load_at(addresses - np.uint64(PARAM_WINDOW), elem, count, lanes)
    in_shared = m.shared.in_window(addresses)
    if not in_shared.any():
        return m.global_memory.load(addresses, elem, count, lanes)
    if in_shared.all():
        return m.shared.load(addresses - np.uint64(SHARED_WINDOW), elem, count, lanes, True)
    out = np.empty((addresses.size, count), VIEW[f"b{elem * 8}"])
    out[~in_shared] = m.global_memory.load(addresses[~in_shared], elem, count,
                                           _sub_lanes(lanes, ~in_shared))
    out[in_shared] = m.shared.load(addresses[in_shared] - np.uint64(SHARED_WINDOW), elem,
                                   count, _sub_lanes(lanes, in_shared), True)
    return out


def _store(m: Machine, space: str, addresses: np.ndarray, values: np.ndarray, elem: int,
           lanes: Lanes, flat: np.ndarray | None = None) -> None:
    if space == "global":
        m.global_memory.store(addresses, values, elem, lanes)
        return
    if flat is None:
        flat = _located(m, space, addresses, elem * values.shape[1], lanes, "store")
    if flat is not None:
        m.shared.write(flat, values, elem, lanes)
        return
    if space == "local":
        _local(m).store(addresses, values, elem, lanes)
        return
    local = _in_local(m, addresses)
    if local is not None:
        if not local.all():
            raise Fault("a generic access mixing .local and other addresses",
                        lanes.first(~local))
        m.local.store(addresses - np.uint64(LOCAL_WINDOW), values, elem, lanes)
        return
    in_param = m.params.in_window(addresses)
    if in_param.any():
        raise Fault("store to a kernel parameter's generic address: the .param state space "
                    "is read-only for kernels", lanes.first(in_param))
    in_shared = m.shared.in_window(addresses)
    if in_shared.any():
        m.shared.store(addresses[in_shared] - np.uint64(SHARED_WINDOW), values[in_shared], elem,
                       _sub_lanes(lanes, in_shared), True)
    if not in_shared.all():
        m.global_memory.store(addresses[~in_shared], values[~in_shared], elem,
                              _sub_lanes(lanes, ~in_shared))


@semantics("ld")
def decode_ld(inst: Instruction, env: DecodeEnv) -> Step:
    """ld{.space}{.vN}.T d, [a]: narrow values are zero/sign-extended into wider registers."""
    space, count, ptx_type = _parse(inst)
    dest, address = expect(inst.operands, 2)
    elements = vector_elements(dest)
    if len(elements) != count:
        raise Unsupported(f"{len(elements)} destinations for a vector of {count}")
    writes = [writer(e, ptx_type, env) for e in elements]
    elem = max(1, BITS[ptx_type] // 8)
    view = VIEW[ptx_type]
    if space == "param" and _call_param(address, env):
        space = "local"  # a call sequence's argument or return value: the thread's own
    if space == "param":
        base, offset = address_parts(address)
        if not (isinstance(base, Symbol) and base.name in env.params):
            return _load_param_at(address, elem, count, view, writes, env)

        def run_param(m: Machine, lanes: Lanes) -> None:
            raw = m.params.load(base.name, offset, elem, count, lanes)
            for j, write in enumerate(writes):
                if raw.shape[0] == 1:  # one value for every lane
                    write(m, lanes, raw[0, j:j + 1].reshape(()).view(view))
                else:  # each lane's device's (smalti.sim.devices)
                    write(m, lanes, raw[:, j].view(view))

        return Compute(run_param)
    address_of = _address(address, space, env)
    peer = peer_check(inst, space, elem * count, read=True, write=False)

    def run(m: Machine, lanes: Lanes) -> None:
        addresses = _per_lane(address_of(m, lanes), lanes)
        flat = _located(m, space, addresses, elem * count, lanes, "load")
        raw = _load(m, space, addresses, elem, count, lanes, flat)
        _watch(m, space, addresses, elem * count, lanes, False, flat, inst.line)
        if m.peers is not None and peer is not None:
            peer(m, addresses, lanes)
        for j, write in enumerate(writes):
            write(m, lanes, raw[:, j].view(view))

    return Compute(run)


def _call_param(address, env: DecodeEnv) -> bool:
    """Whether a .param access names a call sequence's parameter (`st.param [param0], %r`)."""
    base, _ = address_parts(address)
    return isinstance(base, Symbol) and base.name in env.call_params


def _load_param_at(address, elem: int, count: int, view, writes, env: DecodeEnv) -> Step:
    """ld.param through a register holding a .param-space address (CUTLASS reads its Params
    struct so: `mov.b64 %rd18, params; ... ld.param.u32 %r5, [%rd18+640]`)."""
    address_of = _address(address, "param", env)

    def run(m: Machine, lanes: Lanes) -> None:
        addresses = _per_lane(address_of(m, lanes), lanes)
        raw = m.params.load_at(addresses, elem, count, lanes)
        for j, write in enumerate(writes):
            write(m, lanes, raw[:, j].view(view))

    return Compute(run)


@semantics("st")
def decode_st(inst: Instruction, env: DecodeEnv) -> Step:
    """st{.space}{.vN}.T [a], b: stores the low bits of each source register."""
    space, count, ptx_type = _parse(inst)
    address, src = expect(inst.operands, 2)
    if space == "param" and _call_param(address, env):
        space = "local"  # a call sequence's argument: the thread's own
    if space in ("param", "const"):
        raise Unsupported(f"st.{space}: the .{space} state space is read-only for kernels")
    elements = vector_elements(src)
    if len(elements) != count:
        raise Unsupported(f"{len(elements)} sources for a vector of {count}")
    reads = [reader(e, ptx_type, env) for e in elements]
    elem = max(1, BITS[ptx_type] // 8)
    nbytes = elem * count
    address_of = _address(address, space, env)
    site = Site(env.kernel, inst.line, instruction_text(inst), inst.source)
    peer = peer_check(inst, space, nbytes, read=False, write=True)

    def run(m: Machine, lanes: Lanes) -> None:
        addresses = _per_lane(address_of(m, lanes), lanes)
        n = addresses.size
        columns = [np.broadcast_to(as_bits(read(m, lanes), ptx_type, elem * 8), (n,))
                   for read in reads]
        values = columns[0][:, None] if count == 1 else np.stack(columns, axis=1)
        flat = _located(m, space, addresses, nbytes, lanes, "store")
        _store(m, space, addresses, values, elem, lanes, flat)
        if m.peers is not None and peer is not None:
            peer(m, addresses, lanes)
        collided = _watch(m, space, addresses, nbytes, lanes, True, flat, inst.line)
        if space == "local" or not (collided or (
                flat is None and may_overlap(m, addresses, nbytes, lanes))):
            return
        landed = (gather(m.shared.data, flat, elem, count) if flat is not None
                  else _load(m, space, addresses, elem, count, lanes))
        check_one_value(m, site, addresses, values.astype(landed.dtype, copy=False), landed,
                        lanes)

    return Compute(run)


