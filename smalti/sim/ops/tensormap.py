"""Tensor maps built on the device: `tensormap.replace` and `tensormap.cp_fenceproxy`.

PTX ISA, "tensormap.replace": `tensormap.replace.tile.FIELD{.ss}.b1024.bN [addr], {ord,}
new_val` replaces one field of the 1024-bit tensor map at addr (in .shared::cta or .global, a
generic address without .ss); the bytes are laid out as `smalti.sim.tensormap_memory` says.
It is a write by the executing thread, checked for races like a store. "tensormap.cp_fenceproxy":
`tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.SCOPE.sync.aligned
[dst], [src], 128` copies a map from shared to global memory and fences it for the tensormap
proxy; `.sync.aligned`, so every thread of the warp executes it (with the same operands) and
the copy is made once per warp.

The simulator does not track the tensormap proxy: a TMA that reads a map without the
`fence.proxy.tensormap::generic.acquire` the ISA asks for is not reported.
"""

from __future__ import annotations

import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.memory import SHARED_WINDOW
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader
from smalti.sim.ops.memory import _address
from smalti.sim.ops.shared_address import shared_targets
from smalti.sim.ops.warp import require_whole_warp, warp_view
from smalti.sim.registry import Compute, Step, semantics
from smalti.sim.tensormap import TENSOR_MAP_BYTES
from smalti.sim.tensormap_memory import FIELDS, fields_of_record, is_record, replace

MAP_ALIGN = 64
PER_DIMENSION = ("box_dim", "global_dim", "global_stride", "element_stride")
SCOPES = ("cta", "cluster", "gpu", "sys")


class _MapBytes:
    """Reads and writes the 128 bytes of the map each lane names, in shared or global memory
    (generic addresses are sorted into the two)."""

    def __init__(self, op, space: str, env: DecodeEnv) -> None:
        self.space = space
        if space == "shared":
            self.targets = shared_targets(op, "shared", env)
        else:
            self.address = _address(op, "generic" if space == "generic" else "global", env)

    def locate(self, m: Machine, lanes: Lanes) -> list[tuple[str, int]]:
        """("shared", flat offset) or ("global", address) of each lane's map."""
        if self.space == "shared":
            blocks, offsets = self.targets(m, lanes)
            where = [("shared", int(b) * m.shared.size + int(o))
                     for b, o in zip(blocks, offsets, strict=True)]
            starts = offsets
        else:
            raw = np.broadcast_to(self.address(m, lanes), (lanes.count,)).astype(np.uint64)
            inside = m.shared.in_window(raw) if self.space == "generic" else np.zeros(
                raw.shape, np.bool_)
            where = []
            for i, address in enumerate(raw):
                if inside[i]:
                    local = m.shared.flat(np.array([address - np.uint64(SHARED_WINDOW)], np.uint64),
                                          TENSOR_MAP_BYTES, _one(lanes, i), "access")
                    where.append(("shared", int(local[0])))
                else:
                    where.append(("global", int(address)))
            starts = raw
        bad = np.asarray(starts).astype(np.int64) % MAP_ALIGN != 0
        if bad.any():
            raise Fault(f"tensor map address {int(np.asarray(starts)[np.argmax(bad)]):#x} is "
                        f"not {MAP_ALIGN}-byte aligned", lanes.first(bad))
        return where

    @staticmethod
    def read(m: Machine, where: tuple[str, int], thread: int, lanes: Lanes) -> np.ndarray:
        kind, at = where
        if kind == "shared":
            if at + TENSOR_MAP_BYTES > m.shared.data.size or (
                    at % m.shared.size) + TENSOR_MAP_BYTES > m.shared.size:
                raise Fault(f"a {TENSOR_MAP_BYTES}-byte tensor map at shared address "
                            f"{at % m.shared.size:#x} overruns the block's shared memory", thread)
            m.async_engine.shared.read(np.array([at]), TENSOR_MAP_BYTES, np.array([thread]))
            return m.shared.data[at:at + TENSOR_MAP_BYTES].copy()
        return m.global_memory.load(np.array([at], np.uint64), 1, TENSOR_MAP_BYTES,
                                    _thread_lanes(lanes, thread)).reshape(-1).copy()

    @staticmethod
    def write(m: Machine, where: tuple[str, int], start: int, data: np.ndarray, thread: int,
              lanes: Lanes) -> None:
        """Write `data` at byte `start` of the map."""
        kind, at = where
        if kind == "shared":
            flat = at + start
            m.shared.data[flat:flat + data.size] = data
            m.async_engine.shared.write(np.array([flat]), data.size, np.array([thread]))
            return
        m.global_memory.store(np.array([at + start], np.uint64), data.reshape(1, -1), 1,
                              _thread_lanes(lanes, thread))


def _thread_lanes(lanes: Lanes, thread: int) -> Lanes:
    mask = np.zeros_like(lanes.mask)
    mask[thread] = True
    return Lanes(mask, everyone=False)


def _one(lanes: Lanes, i: int) -> Lanes:
    return _thread_lanes(lanes, int(thread_ids(lanes)[i]))


def _space(mods: Modifiers) -> str:
    space = mods.one_of(("shared::cta", "shared", "global"))
    return {"shared::cta": "shared", None: "generic"}.get(space, space)


@semantics("tensormap")
def decode_tensormap(inst: Instruction, env: DecodeEnv) -> Step:
    mods = Modifiers(inst)
    if mods.flag("replace"):
        return _replace(inst, mods, env)
    if mods.flag("cp_fenceproxy"):
        return _copy(inst, mods, env)
    raise Unsupported(f"unsupported tensormap operation {inst.opcode}")


def _replace(inst: Instruction, mods: Modifiers, env: DecodeEnv) -> Step:
    if not mods.flag("tile"):
        raise Unsupported("tensormap.replace supports the .tile mode")
    name = mods.one_of(tuple(FIELDS))
    if name is None:
        raise Unsupported("tensormap.replace needs a field")
    space = _space(mods)
    if not mods.flag("b1024"):
        raise Unsupported("tensormap.replace operates on .b1024 objects")
    value_type = mods.one_of(("b32", "b64"))
    mods.done()
    per_dimension = name in PER_DIMENSION
    operands = expect(inst.operands, 3 if per_dimension else 2)
    bytes_of = _MapBytes(operands[0], space, env)
    read_ord = reader(operands[1], "u32", env) if per_dimension else None
    read_value = reader(operands[-1], "u64" if value_type == "b64" else "u32", env)

    def run(m: Machine, lanes: Lanes) -> None:
        places = bytes_of.locate(m, lanes)
        values = np.broadcast_to(np.asarray(read_value(m, lanes)), (lanes.count,))
        ords = (None if read_ord is None
                else np.broadcast_to(np.asarray(read_ord(m, lanes)), (lanes.count,)))
        for i, thread in enumerate(thread_ids(lanes)):
            thread = int(thread)
            raw = _MapBytes.read(m, places[i], thread, lanes)
            whole = is_record(raw)
            if whole:  # a copy of a host map: rewrite it in the field layout first
                raw = fields_of_record(raw, m.global_memory.device_address)
            offset, size, _ = FIELDS[name]
            ordinal = None if ords is None else int(ords[i])
            try:
                replace(raw, name, ordinal, int(values[i]))
            except ValueError as error:
                raise Fault(f"tensormap.replace: {error}", thread) from None
            start = 0 if whole else offset + (ordinal or 0) * size
            stop = TENSOR_MAP_BYTES if whole else start + size
            _MapBytes.write(m, places[i], start, raw[start:stop], thread, lanes)

    return Compute(run)


def _copy(inst: Instruction, mods: Modifiers, env: DecodeEnv) -> Step:
    """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope.sync.aligned"""
    if not (mods.flag("global") and mods.one_of(("shared::cta", "shared"))):
        raise Unsupported("tensormap.cp_fenceproxy copies .shared::cta to .global")
    if not mods.flag("tensormap::generic"):
        raise Unsupported("tensormap.cp_fenceproxy fences the .tensormap::generic proxy")
    mods.flag("release")
    mods.one_of(SCOPES)
    if not (mods.flag("sync") and mods.flag("aligned")):
        raise Unsupported("tensormap.cp_fenceproxy is .sync.aligned")
    mods.done()
    dst, src, size = expect(inst.operands, 3)
    if getattr(size, "value", None) != TENSOR_MAP_BYTES:
        raise Unsupported(f"tensormap.cp_fenceproxy copies {TENSOR_MAP_BYTES} bytes")
    to = _MapBytes(dst, "global", env)
    source = _MapBytes(src, "shared", env)

    def run(m: Machine, lanes: Lanes) -> None:
        view = warp_view(m, lanes)
        require_whole_warp(view, "tensormap.cp_fenceproxy")
        targets, sources = to.locate(m, lanes), source.locate(m, lanes)
        done = set()
        for i, thread in enumerate(thread_ids(lanes)):
            key = (int(view.base[i]), targets[i], sources[i])
            if key in done:  # once per warp (its lanes name the same map)
                continue
            done.add(key)
            raw = _MapBytes.read(m, sources[i], int(thread), lanes)
            _MapBytes.write(m, targets[i], 0, raw, int(thread), lanes)

    return Compute(run)
