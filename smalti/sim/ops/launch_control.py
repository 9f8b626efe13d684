"""Cluster launch control (sm_100a): `clusterlaunchcontrol.try_cancel` and `.query_cancel`.

PTX ISA, "Parallel Synchronization and Communication Instructions: clusterlaunchcontrol"
(PTX ISA 8.6, sm_100 and later; `.multicast::cluster::all` on the arch-specific targets):
- `clusterlaunchcontrol.try_cancel.async{.shared::cta}.mbarrier::complete_tx::bytes
  {.multicast::cluster::all}.b128 [addr], [mbar]` asks, for each executing thread, to cancel
  a cluster of the grid that has not started. The 16-byte opaque response lands
  asynchronously at `addr` (16-byte aligned) and then performs complete-tx of 16 bytes on
  `mbar`; with `.multicast::cluster::all` it lands, and signals, at the same offsets in every
  CTA of the executing cluster. A canceled cluster never runs; no two successful responses
  of one grid name the same cluster. After a CTA observed a failed response, issuing another
  request is undefined: the simulator reports it.
- `clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r` and
  `.get_first_ctaid{::x,::y,::z}.b32.b128 d, r` / `.get_first_ctaid.v4.b32.b128 {x, y, z, _}, r`
  decode a response held in a .b128 register: whether it canceled a cluster, and the %ctaid
  of that cluster's first CTA (undefined for a failed request: all ones here).

Which cluster a request cancels, and when clusters launch, is sim/cluster_launch.py's rule.
The response is four .b32 words laid out as ptxas 13.5 decodes them for sm_100a (word 0 the
first ctaid.x, word 1 ctaid.y in its low and ctaid.z in its high 16 bits, bit 0 of word 2
set on success); word 3 holds the simulator's tag, so decoding 16 bytes no request wrote is
reported.
"""

from __future__ import annotations

import re

import numpy as np

from smalti.ptx.module import Instruction, Register, VectorOperand
from smalti.sim.cluster_launch import ClusterLaunch
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, writer
from smalti.sim.ops.bulk_queue import queue_shared_write
from smalti.sim.ops.shared_address import shared_offsets
from smalti.sim.registry import Compute, Step, semantics

RESPONSE_BYTES = 16
MBARRIER_ALIGN = 8
TAG = 0x434C4300  # word 3 of every response the simulator writes ("CLC")
UNDEFINED = 0xFFFFFFFF  # the words of the first ctaid of a failed request
CANCELED = 1  # bit 0 of word 2
HALF = 16  # ctaid.y and ctaid.z share word 1
MIN_VERSION = (8, 6)
AXES = {"get_first_ctaid::x": 0, "get_first_ctaid::y": 1, "get_first_ctaid::z": 2}


@semantics("clusterlaunchcontrol")
def decode_clusterlaunchcontrol(inst: Instruction, env: DecodeEnv) -> Step:
    """Dispatch on the operation, after checking the module's target and PTX version."""
    mods = Modifiers(inst)
    operation = mods.items.pop(0) if mods.items else ""
    multicast = mods.flag("multicast::cluster::all")
    _check_target(env, multicast)
    match operation:
        case "try_cancel":
            return _try_cancel(inst, env, mods, multicast)
        case "query_cancel":
            return _query_cancel(inst, env, mods)
    raise Unsupported(f"unsupported clusterlaunchcontrol operation .{operation}")


def _check_target(env: DecodeEnv, multicast: bool) -> None:
    """sm_100 or later and PTX ISA 8.6+; the multicast form needs an arch-specific target."""
    found = re.match(r"sm_(\d+)([af]?)", env.target.split(",")[0].strip())
    arch, suffix = (int(found[1]), found[2]) if found else (0, "")
    if arch < 100 or (multicast and not suffix):
        need = "sm_100a (or another arch-specific target)" if multicast else "sm_100 or later"
        raise Unsupported(f"clusterlaunchcontrol needs .target {need}; the module targets "
                          f"{env.target}")
    version = tuple(int(part) for part in env.version.split(".")[:2])
    if version < MIN_VERSION:
        raise Unsupported(f"clusterlaunchcontrol needs PTX ISA .version 8.6 or later; the "
                          f"module declares {env.version}")


# -- try_cancel -----------------------------------------------------------------------------

def _try_cancel(inst: Instruction, env: DecodeEnv, mods: Modifiers, multicast: bool) -> Step:
    if not (mods.flag("async") and mods.flag("mbarrier::complete_tx::bytes")
            and mods.flag("b128")):
        raise Unsupported("expected clusterlaunchcontrol.try_cancel.async{.shared::cta}"
                          ".mbarrier::complete_tx::bytes{.multicast::cluster::all}.b128")
    space = "shared" if mods.one_of(("shared::cta",)) else "generic"
    mods.done()
    address, barrier = expect(inst.operands, 2)
    response_of = shared_offsets(address, space, env)
    barrier_of = shared_offsets(barrier, space, env)
    what = f"the clusterlaunchcontrol.try_cancel at line {inst.line}"

    def run(m: Machine, lanes: Lanes) -> None:
        responses, barriers = response_of(m, lanes), barrier_of(m, lanes)
        launch = _launch(m)
        for i, thread in enumerate(thread_ids(lanes).tolist()):
            response, bar = int(responses[i]), int(barriers[i])
            block = int(m.geometry.block_of[thread])
            if response % RESPONSE_BYTES:
                raise Fault(f"{what}: response address {response:#x} is not "
                            f"{RESPONSE_BYTES}-byte aligned", thread)
            if bar % MBARRIER_ALIGN:
                raise Fault(f"{what}: mbarrier address {bar:#x} is not {MBARRIER_ALIGN}-byte "
                            "aligned", thread)
            if block in launch.observed_failure:
                raise Fault(f"{what}: this CTA already observed a failed try_cancel, after "
                            "which another request is undefined (PTX ISA)", thread)
            request = _Request(launch, int(m.geometry.device_of[thread]))
            for target in _targets(m, block, multicast, thread, what):
                idx = target * m.shared.size + response + np.arange(RESPONSE_BYTES)
                queue_shared_write(m, idx, (target, bar), request.response, thread, what)

    return Compute(run)


def _launch(m: Machine) -> ClusterLaunch:
    if m.cluster_launch is None:
        raise Fault("clusterlaunchcontrol needs the launch's cluster state (run the kernel "
                    "through smalti.sim.run_ptx)")
    return m.cluster_launch


def _targets(m: Machine, block: int, multicast: bool, thread: int, what: str) -> list[int]:
    """The CTAs the response lands in: the executing one, or (multicast) its whole cluster."""
    if not multicast:
        return [block]
    geometry = m.geometry
    members = [int(b) for b in geometry.cluster_members[geometry.cluster_id[block]]]
    gone = m.shared.exited(np.array(members))
    if gone.any():
        rank = int(np.argmax(gone))
        raise Fault(f"{what}: .multicast::cluster::all writes to CTA rank {rank} of the "
                    "cluster, which has exited", thread)
    return members


class _Request:
    """One thread's request: canceled or not is decided once, when its first response lands
    (so a request answered late may take a cluster launched meanwhile, or fail)."""

    def __init__(self, launch: ClusterLaunch, device: int) -> None:
        self.launch, self.device = launch, device
        self.bytes: np.ndarray | None = None

    def response(self) -> np.ndarray:
        """The 16 response bytes (see the module docstring)."""
        if self.bytes is None:
            cluster = self.launch.cancel(self.device)
            if cluster is None:
                words = (UNDEFINED, UNDEFINED, 0, TAG)
            else:
                x, y, z = self.launch.first_ctaid(cluster)
                words = (x, y | z << HALF, CANCELED, TAG)
            self.bytes = np.array(words, np.uint32).view(np.uint8)
        return self.bytes


# -- query_cancel ---------------------------------------------------------------------------

def _query_cancel(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Step:
    query = mods.one_of(("is_canceled", "get_first_ctaid", *AXES))
    vector = mods.flag("v4")
    result = mods.one_of(("pred", "b32"))
    if query is None or not mods.flag("b128") or result != (
            "pred" if query == "is_canceled" else "b32") or vector != (query == "get_first_ctaid"):
        raise Unsupported("expected clusterlaunchcontrol.query_cancel.is_canceled.pred.b128, "
                          ".get_first_ctaid::{x,y,z}.b32.b128 or .get_first_ctaid.v4.b32.b128")
    mods.done()
    dest, source = expect(inst.operands, 2)
    if not (isinstance(source, Register) and env.register_bits(source) == 128):
        raise Unsupported("the try_cancel response operand is a .b128 register")
    if query == "get_first_ctaid":
        if not isinstance(dest, VectorOperand) or len(dest.elements) != 4:
            raise Unsupported("get_first_ctaid.v4 writes a brace list of four .b32 registers")
        writes = [writer(e, "b32", env) for e in dest.elements]
        columns = [0, 1, 2, 3]
    else:
        writes = [writer(dest, result, env)]
        columns = [AXES.get(query, 3)]
    name = source.name

    def run(m: Machine, lanes: Lanes) -> None:
        words = _responses(m, name, lanes)
        if query == "is_canceled":
            canceled = words[:, 2] == CANCELED
            _launch(m).observe(m.geometry.block_of[thread_ids(lanes)][~canceled])
            writes[0](m, lanes, canceled)
            return
        ids = _first_ctaid(words)
        for write, column in zip(writes, columns, strict=True):
            write(m, lanes, ids[:, column])

    return Compute(run)


def _first_ctaid(words: np.ndarray) -> np.ndarray:
    """(lanes, 4): ctaid x, y, z of each response and all ones (the .v4's fourth)."""
    mask = np.uint32((1 << HALF) - 1)
    x, yz = words[:, 0], words[:, 1]
    return np.stack([x, yz & mask, yz >> np.uint32(HALF), np.full_like(x, UNDEFINED)], axis=1)


def _responses(m: Machine, name: str, lanes: Lanes) -> np.ndarray:
    """(lanes, 4) .b32 words of each lane's response register, checked to be responses."""
    raw = np.ascontiguousarray(np.broadcast_to(m.registers.read(name, lanes.index),
                                               (lanes.count,)))
    words = raw.view(np.uint32).reshape(lanes.count, 4)
    bad = (words[:, 3] != TAG) | (words[:, 2] > CANCELED)
    if bad.any():
        raise Fault(f"clusterlaunchcontrol.query_cancel decodes {name}, which holds no "
                    "try_cancel response (read the response after its mbarrier phase "
                    "completed)", lanes.first(bad))
    return words
