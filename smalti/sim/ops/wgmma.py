"""wgmma: `wgmma.mma_async` over shared-memory descriptors or registers, fence, groups.

PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions". One
instruction is issued by the 128 threads of a warpgroup together and computes
D (64 x N) = scale-a * A (64 x K) @ scale-b * B (K x N) + (scale-d ? D : 0), K being 32
bytes of the input type. Products are exact in float64 and summed there, then rounded once
to the accumulator type; hardware accumulates in its own order and precision, so results may
differ from it in the last bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import ml_dtypes
import numpy as np

from smalti.ptx.module import Immediate, Instruction, Register, VectorOperand
from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader
from smalti.sim.ops.shared_address import thread_ids
from smalti.sim.registry import Compute, Step, semantics
from smalti.sim.swizzle import swizzle

WARPGROUP = 128
M = 64
INPUTS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32,
          "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
K_OF = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
SPAN_OF_MODE = {0: None, 1: 128, 2: 64, 3: 32}
TF32_MASK = np.uint32(0xFFFFE000)  # tf32 keeps 10 mantissa bits; the rest are ignored


@dataclass(frozen=True)
class Descriptor:
    """A decoded matrix descriptor (PTX ISA, "Matrix Descriptor Format")."""

    start: int
    lbo: int
    sbo: int
    base_offset: int
    span: int | None

    @classmethod
    def decode(cls, value: int) -> Descriptor:
        field = lambda lo, bits: (value >> lo) & ((1 << bits) - 1)  # noqa: E731
        return cls(field(0, 14) << 4, field(16, 14) << 4, field(32, 14) << 4, field(49, 3),
                   SPAN_OF_MODE[field(62, 2)])


@lru_cache(maxsize=256)
def operand_addresses(desc: Descriptor, rows: int, esize: int, mn_major: bool) -> np.ndarray:
    """Byte addresses (rows x K) of a rows x 32-byte operand under `desc`, swizzle applied.

    Canonical layouts (PTX ISA, "Shared Memory Matrix Layout"; CUTLASS names them by
    swizzle): K-major: 8-row groups SBO apart, rows 16 bytes apart (no swizzle; the second
    16 bytes of K LBO away) or one swizzle span apart (K contiguous). MN-major: 8 K-rows 16
    bytes (no swizzle) or a span apart, MN contiguous within 16 bytes / one span; the next
    16 bytes of MN (no swizzle) SBO away, the next span of MN LBO away, the next 8 K LBO
    (no swizzle) or SBO away.
    """
    k = 32 // esize
    mn = np.arange(rows, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    span = desc.span
    if not mn_major:
        kb = kk * esize
        if span is None:
            offset = (mn % 8) * 16 + (mn // 8) * desc.sbo + kb % 16 + (kb // 16) * desc.lbo
        else:
            offset = (mn % 8) * span + (mn // 8) * desc.sbo + kb
    else:
        mb = mn * esize
        if span is None:
            offset = mb % 16 + (mb // 16) * desc.sbo + (kk % 8) * 16 + (kk // 8) * desc.lbo
        else:
            offset = mb % span + (mb // span) * desc.lbo + (kk % 8) * span + (kk // 8) * desc.sbo
    addresses = swizzle(desc.start + offset, span)
    addresses.flags.writeable = False  # shared by every call with this descriptor (cached)
    return addresses


@lru_cache(maxsize=16)
def accumulator_coords(registers: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) arrays (128 threads x registers) of the f32 accumulator fragment."""
    t = np.arange(WARPGROUP)[:, None]
    i = np.arange(registers)[None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * ((i >> 1) & 1)
    col = 2 * (t % 4) + (i & 1) + 8 * (i >> 2)
    row.flags.writeable = col.flags.writeable = False  # cached
    return row, col


def a_fragment_coords(esize: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, K index) arrays (128 threads x 4 registers x elements) of A held in registers."""
    per = 4 // esize
    t = np.arange(WARPGROUP)[:, None, None]
    j = np.arange(4)[None, :, None]
    e = np.arange(per)[None, None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * (j & 1)
    kbyte = 4 * (t % 4) + 16 * (j >> 1) + e * esize
    return np.broadcast_to(row, kbyte.shape), kbyte // esize


def _values(raw: np.ndarray, itype: str) -> np.ndarray:
    """Raw little-endian bytes (..., esize) of `itype` as float64 values."""
    esize = np.dtype(INPUTS[itype]).itemsize
    bits = np.ascontiguousarray(raw).view(f"<u{esize}")[..., 0]
    if itype == "tf32":
        return (bits & TF32_MASK).view(np.float32).astype(np.float64)
    return bits.view(INPUTS[itype]).astype(np.float64)


@semantics("wgmma")
def decode_wgmma(inst: Instruction, env: DecodeEnv) -> Step:
    """wgmma.fence / commit_group / wait_group N / mma_async."""
    mods = Modifiers(inst)
    mods.flag("sync")
    mods.flag("aligned")
    if mods.flag("fence"):
        mods.done()
        return Compute(lambda m, lanes: m.async_engine.tick())
    if mods.flag("commit_group"):
        mods.done()
        return Compute(lambda m, lanes: _each_group(m, lanes, lambda key: (
            m.async_engine.commit(key))))
    if mods.flag("wait_group"):
        mods.done()
        [count] = expect(inst.operands, 1)
        keep = reader(count, "u32", env)
        return Compute(lambda m, lanes: _each_group(m, lanes, lambda key: (
            m.async_engine.wait_groups(key, int(keep(m, lanes))))))
    if mods.flag("mma_async"):
        return _mma(inst, env, mods)
    raise Unsupported(f"unsupported wgmma operation {inst.opcode}")


def _groups(m: Machine, lanes: Lanes) -> list[tuple[tuple, np.ndarray]]:
    """Per warpgroup among the active lanes: its key and its 128 thread ids, checked."""
    ids = thread_ids(lanes)
    geometry = m.geometry
    local = ids - geometry.block_of[ids] * geometry.block_threads
    keys = geometry.block_of[ids] * 1024 + local // WARPGROUP
    out = []
    for key in np.unique(keys):
        members = ids[keys == key]
        if members.size != WARPGROUP:
            raise Fault(f"wgmma needs all {WARPGROUP} threads of a warpgroup; "
                        f"{members.size} executed it", int(members[0]))
        out.append((("wgmma", int(key)), members))
    return out


def _each_group(m: Machine, lanes: Lanes, action) -> None:
    for key, _ in _groups(m, lanes):
        action(key)
    m.async_engine.tick()


@dataclass(frozen=True)
class _Shape:
    n: int
    k: int
    dtype: str
    atype: str
    btype: str


def _shape(inst: Instruction, mods: Modifiers) -> _Shape:
    shape = mods.one_of(tuple(f"m64n{n}k{k}" for n in range(8, 257, 8) for k in (8, 16, 32)))
    types = [mods.items.pop(0) for _ in range(min(3, len(mods.items)))]
    mods.done()
    if shape is None or len(types) != 3:
        raise Unsupported(f"expected .m64nNkK.dtype.atype.btype in {inst.opcode}")
    dtype, atype, btype = types
    n, k = (int(x) for x in shape[4:].split("k"))
    if atype not in INPUTS or btype not in INPUTS or K_OF[atype] != k or K_OF[btype] != k:
        raise Unsupported(f"unsupported wgmma input types .{atype}.{btype} for k{k}")
    if dtype not in ("f32", "f16") or (dtype == "f16" and atype not in ("f16", "e4m3", "e5m2")):
        raise Unsupported(f"unsupported wgmma accumulator .{dtype} for .{atype}")
    return _Shape(n, k, dtype, atype, btype)


def _immediate(op, what: str, allowed: tuple[int, ...]) -> int:
    if not isinstance(op, Immediate) or op.value not in allowed:
        raise Unsupported(f"{what} must be an immediate in {allowed}")
    return int(op.value)


def _mma(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Step:
    shape = _shape(inst, mods)
    halves = shape.atype in ("f16", "bf16")
    ops = list(inst.operands)
    a_in_registers = isinstance(ops[1], VectorOperand) if len(ops) > 1 else False
    count = 6 + int(halves) + int(halves and not a_in_registers)
    if len(ops) != count:
        raise Unsupported(f"wgmma.mma_async with these types takes {count} operands")
    d_op, a_op, b_op, scale_d = ops[:4]
    scale_a = _immediate(ops[4], "imm-scale-a", (1, -1))
    scale_b = _immediate(ops[5], "imm-scale-b", (1, -1))
    trans = [_immediate(o, "imm-trans", (0, 1)) for o in ops[6:]]
    trans_a = 0 if a_in_registers else (trans[0] if trans else 0)
    trans_b = trans[-1] if trans else 0
    per_reg = 2 if shape.dtype == "f32" else 4
    if not isinstance(d_op, VectorOperand) or len(d_op.elements) != shape.n // per_reg:
        raise Unsupported(f"the accumulator of m64n{shape.n} .{shape.dtype} is "
                          f"{shape.n // per_reg} registers")
    d_names = [_register(e) for e in d_op.elements]
    if a_in_registers:
        if len(a_op.elements) != 4:
            raise Unsupported("A in registers is four .b32 registers")
        a_names = [_register(e) for e in a_op.elements]
        read_a = None
    else:
        a_names = []
        read_a = reader(a_op, "b64", env)
    read_b = reader(b_op, "b64", env)
    read_scale = reader(scale_d, "pred", env)
    what = f"the wgmma at line {inst.line}"
    spec = _Spec(shape, d_names, a_names, trans_a, trans_b, scale_a * scale_b, what)

    def run(m: Machine, lanes: Lanes) -> None:
        descs_a = None if read_a is None else np.broadcast_to(read_a(m, lanes), (lanes.count,))
        descs_b = np.broadcast_to(read_b(m, lanes), (lanes.count,))
        scales = np.broadcast_to(read_scale(m, lanes), (lanes.count,))
        ids = thread_ids(lanes)
        for key, members in _groups(m, lanes):
            first = int(np.searchsorted(ids, members[0]))
            desc_a = None if descs_a is None else int(descs_a[first])
            _issue(m, spec, key, members, desc_a, int(descs_b[first]), bool(scales[first]))

    return Compute(run)


@dataclass(frozen=True)
class _Spec:
    shape: _Shape
    d_names: list[str]
    a_names: list[str]
    trans_a: int
    trans_b: int
    sign: int
    what: str


def distinct(idx: np.ndarray) -> np.ndarray:
    """The sorted distinct values of non-negative byte indices lying in a narrow range (an
    operand's bytes): a bitmap over the range, much cheaper than np.unique's hashing."""
    flat = idx.reshape(-1)
    low = int(flat.min())
    seen = np.zeros(int(flat.max()) - low + 1, np.bool_)
    seen[flat - low] = True
    return np.flatnonzero(seen) + low


def _register(op) -> str:
    if not isinstance(op, Register):
        raise Unsupported("wgmma fragments are lists of registers")
    return op.name


def _smem_bytes(m: Machine, block: int, desc_value: int, rows: int, itype: str,
                mn_major: bool, thread: int, what: str) -> np.ndarray:
    """Flat shared byte indices (rows x K x esize) of an operand."""
    desc = Descriptor.decode(desc_value)
    if desc.base_offset:
        raise Fault(f"{what}: a non-zero matrix base offset ({desc.base_offset}) is not "
                    "supported; align the operand to its swizzle pattern", thread)
    esize = np.dtype(INPUTS[itype]).itemsize
    addresses = operand_addresses(desc, rows, esize, mn_major)
    idx = addresses[..., None] + np.arange(esize)
    if idx.max() >= m.shared.size:
        raise Fault(f"{what}: operand bytes up to shared address {int(idx.max()):#x} lie "
                    f"beyond the block's {m.shared.size} bytes", thread)
    return block * m.shared.size + idx


def _issue(m: Machine, spec: _Spec, key: tuple, members: np.ndarray, desc_a: int | None,
           desc_b: int, scale_d: bool) -> None:
    engine = m.async_engine
    shape = spec.shape
    thread = int(members[0])
    block = int(m.geometry.block_of[thread])
    if (shape.atype in ("tf32", "e4m3", "e5m2")) and (spec.trans_a or spec.trans_b):
        raise Fault(f"{spec.what}: transposes exist only for .f16/.bf16", thread)
    b_idx = _smem_bytes(m, block, desc_b, shape.n, shape.btype, bool(spec.trans_b), thread,
                        spec.what)
    a_idx = None
    if desc_a is not None:
        a_idx = _smem_bytes(m, block, desc_a, M, shape.atype, bool(spec.trans_a), thread,
                            spec.what)
        engine.shared.async_read(distinct(a_idx), thread, spec.what)
    engine.shared.async_read(distinct(b_idx), thread, spec.what)
    a_regs = None
    if desc_a is None:  # registers are read at issue: the ISA forbids changing them until done
        a_regs = np.stack([m.registers.read(name, members) for name in spec.a_names], axis=1)
    op = AsyncOp(engine.new_id(), spec.what, lambda: None, chain=key)
    op.run = lambda: _compute(m, spec, members, a_idx, a_regs, b_idx, scale_d)
    owned = b_idx.reshape(-1) if a_idx is None else np.concatenate(
        [a_idx.reshape(-1), b_idx.reshape(-1)])
    engine.own(op, distinct(owned), reads=False)
    threads = np.zeros(m.geometry.threads, np.bool_)
    threads[members] = True
    engine.own_registers(op, spec.d_names, threads, reads=True)
    engine.own_registers(op, spec.a_names, threads, reads=False)
    engine.issue(op, group=key)


def _compute(m: Machine, spec: _Spec, members: np.ndarray, a_idx: np.ndarray | None,
             a_regs: np.ndarray | None, b_idx: np.ndarray, scale_d: bool) -> None:
    shape = spec.shape
    data = m.shared.data
    b = _values(data[b_idx], shape.btype)  # (N, K)
    if a_idx is not None:
        a = _values(data[a_idx], shape.atype)  # (64, K)
    else:
        esize = np.dtype(INPUTS[shape.atype]).itemsize
        raw = a_regs.astype(np.uint32).view(np.uint8).reshape(WARPGROUP, 4, 4 // esize, esize)
        rows, ks = a_fragment_coords(esize)
        a = np.zeros((M, shape.k))
        a[rows, ks] = _values(raw, shape.atype)
    product = (a @ b.T) * spec.sign
    guards = m.async_engine.registers
    guards.bypass = True
    try:
        if shape.dtype == "f32":
            _accumulate_f32(m, spec.d_names, members, product, scale_d)
        else:
            _accumulate_f16(m, spec.d_names, members, product, scale_d)
    finally:
        guards.bypass = False


def _accumulate_f32(m: Machine, names: list[str], members: np.ndarray, product: np.ndarray,
                    scale_d: bool) -> None:
    rows, cols = accumulator_coords(len(names))
    result = product[rows, cols]
    if scale_d:
        old = np.stack([m.registers.read(n, members) for n in names], axis=1)
        result = result + old.astype(np.uint32).view(np.float32).astype(np.float64)
    bits = result.astype(np.float32).view(np.uint32)
    for i, name in enumerate(names):
        m.registers.write(name, bits[:, i], members)


def _accumulate_f16(m: Machine, names: list[str], members: np.ndarray, product: np.ndarray,
                    scale_d: bool) -> None:
    rows, cols = accumulator_coords(2 * len(names))
    result = product[rows, cols]  # (128, 2 * registers), element 2i low half of register i
    if scale_d:
        old = np.stack([m.registers.read(n, members) for n in names], axis=1)
        halves = old.astype(np.uint32).view(np.uint16).reshape(WARPGROUP, -1)
        result = result + halves.view(np.float16).astype(np.float64)
    packed = result.astype(np.float16).view(np.uint16).reshape(WARPGROUP, -1, 2)
    bits = packed[..., 0].astype(np.uint32) | (packed[..., 1].astype(np.uint32) << 16)
    for i, name in enumerate(names):
        m.registers.write(name, bits[:, i], members)
