"""Data movement between registers: `mov` (incl. packing and unpacking) and `cvta`."""

from __future__ import annotations

from functools import partial

import numpy as np

from smalti.ptx.module import Instruction, VectorOperand
from smalti.sim.dtypes import B128, BITS, UINT_OF_BITS, bits_as
from smalti.sim.errors import Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, writer
from smalti.sim.ops.common import elementwise
from smalti.sim.registry import Compute, Step, semantics


@semantics("mov")
def decode_mov(inst: Instruction, env: DecodeEnv) -> Step:
    """mov.T d, a; mov.bN d, {a, b, ...} packs (first element lowest); mov.bN {a, b}, d unpacks."""
    mods = Modifiers(inst)
    [ptx_type] = mods.types()
    mods.done()
    dest, src = expect(inst.operands, 2)
    match dest, src:
        case VectorOperand(elements=parts), _:
            return _unpack(parts, src, ptx_type, env)
        case _, VectorOperand(elements=parts):
            return _pack(dest, parts, ptx_type, env)
    return elementwise(inst, env, [ptx_type], ptx_type, lambda a: a)


def _part_type(ptx_type: str, parts: tuple) -> tuple[int, str]:
    width = BITS[ptx_type] // len(parts)
    if width not in (8, 16, 32, 64) or width * len(parts) != BITS[ptx_type]:
        raise Unsupported(f"cannot split .{ptx_type} into {len(parts)} parts")
    return width, f"b{width}"


def _pack(dest, parts: tuple, ptx_type: str, env: DecodeEnv) -> Step:
    width, part_type = _part_type(ptx_type, parts)
    reads = [reader(p, part_type, env) for p in parts]
    write = writer(dest, ptx_type, env)
    udt = UINT_OF_BITS[BITS[ptx_type]]
    if udt == B128:
        return Compute(partial(_pack_wide, reads, write, UINT_OF_BITS[width]))

    def run(m: Machine, lanes: Lanes) -> None:
        packed = np.zeros((), udt)
        for i, read in enumerate(reads):
            packed = packed | (read(m, lanes).astype(udt) << udt(width * i))
        write(m, lanes, bits_as(packed, ptx_type))

    return Compute(run)


def _unpack(parts: tuple, src, ptx_type: str, env: DecodeEnv) -> Step:
    width, part_type = _part_type(ptx_type, parts)
    read = reader(src, ptx_type, env)
    writes = [writer(p, part_type, env) for p in parts]
    udt = UINT_OF_BITS[BITS[ptx_type]]
    if udt == B128:
        return Compute(partial(_unpack_wide, read, writes, UINT_OF_BITS[width]))
    mask = udt((1 << width) - 1)

    def run(m: Machine, lanes: Lanes) -> None:
        bits = np.asarray(read(m, lanes)).view(udt)
        for i, write in enumerate(writes):
            write(m, lanes, ((bits >> udt(width * i)) & mask).astype(UINT_OF_BITS[width]))

    return Compute(run)


def _pack_wide(reads, write, part, m: Machine, lanes: Lanes) -> None:
    """mov.b128 d, {a, b}: parts laid out lowest first (little-endian, as in memory)."""
    columns = [np.broadcast_to(read(m, lanes), (lanes.count,)).astype(part) for read in reads]
    write(m, lanes, np.ascontiguousarray(np.stack(columns, axis=1)).view(B128)[:, 0])


def _unpack_wide(read, writes, part, m: Machine, lanes: Lanes) -> None:
    """mov.b128 {a, b}, d: the parts of each 16-byte value, lowest first."""
    bits = np.ascontiguousarray(np.broadcast_to(read(m, lanes), (lanes.count,)))
    columns = bits.view(part).reshape(lanes.count, -1)
    for i, write in enumerate(writes):
        write(m, lanes, columns[:, i])


@semantics("cvta")
def decode_cvta(inst: Instruction, env: DecodeEnv) -> Step:
    """cvta{.to}.space.size: convert between generic and state-space addresses."""
    mods = Modifiers(inst)
    to_space = mods.flag("to")
    space = mods.one_of(("global", "shared", "shared::cta", "param", "const", "local"))
    [ptx_type] = mods.types()
    mods.done()
    if space is None or ptx_type not in ("u32", "u64"):
        raise Unsupported("cvta supports .global, .shared, .local, .const and .param with "
                          ".u32/.u64")
    if space in ("global", "const"):  # generic addresses already, in this simulator
        return elementwise(inst, env, [ptx_type], ptx_type, lambda a: a)
    udt = UINT_OF_BITS[BITS[ptx_type]]
    base = {"local": LOCAL_WINDOW, "param": PARAM_WINDOW}.get(space, SHARED_WINDOW)
    window = udt(base % (1 << BITS[ptx_type]))
    if to_space:
        return elementwise(inst, env, [ptx_type], ptx_type, lambda a: a - window)
    return elementwise(inst, env, [ptx_type], ptx_type, lambda a: a + window)
