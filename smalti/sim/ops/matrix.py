"""Warp-wide matrix ops: ldmatrix, stmatrix (m8n8 b16) and mma.sync (m16n8k8/k16/k32).

Fragment layouts follow the PTX ISA figures ("Warp-level Matrix Instructions": "Matrix
Fragments for mma.m16n8k16 with floating point type", "ldmatrix"), with g = lane / 4 (the
group) and t = lane % 4 (the thread in the group).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from smalti.ptx.module import Instruction
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, expect, reader, vector_elements, writer
from smalti.sim.ops.memory import _address, _watch
from smalti.sim.ops.warp import FULL, WarpView, warp_view
from smalti.sim.registry import Compute, Step, semantics

WARP = 32
ROW_BYTES = 16  # one row of an 8x8 b16 matrix


def whole_warps(view: WarpView, what: str) -> None:
    """Warp-wide `.aligned` matrix ops need all 32 lanes of each warp to execute them."""
    short = view.active != FULL
    if short.any():
        k = int(np.argmax(short))
        raise Fault(f"{what} needs all 32 lanes of the warp to execute it together (active "
                    f"lanes {int(view.active[k]):#010x})", int(view.ids[k]))


def _row_addresses(addresses: np.ndarray, view: WarpView, what: str) -> np.ndarray:
    """(n, 32): the address each lane of each thread's warp supplies, checked 16-B aligned."""
    bad = addresses % np.uint64(ROW_BYTES) != 0
    if bad.any():
        k = int(np.argmax(bad))
        raise Fault(f"{what}: row address {int(addresses[k]):#x} is not 16-byte aligned",
                    int(view.ids[k]))
    source = view.base[:, None] + np.arange(WARP)
    return addresses[view.position[source]]


def _matrix_parts(inst: Instruction) -> tuple[int, bool]:
    """(matrices, transposed) of an ldmatrix/stmatrix opcode."""
    mods = Modifiers(inst)
    if not (mods.flag("sync") and mods.flag("aligned") and mods.flag("m8n8")):
        raise Unsupported(f"{inst.base}.sync.aligned.m8n8 is the supported shape")
    num = mods.one_of(("x1", "x2", "x4"))
    trans = mods.flag("trans")
    mods.one_of(("shared", "shared::cta"))
    [ptx_type] = mods.types()
    mods.done()
    if num is None or ptx_type != "b16":
        raise Unsupported(f"{inst.base} needs .x1/.x2/.x4 and .b16")
    return int(num[1:]), trans


def fragment_rows(lane: np.ndarray, matrix: int, trans: bool) -> list[tuple[np.ndarray, int]]:
    """For each of the two b16 halves of a thread's register of `matrix`: (lane whose row
    address holds it, byte offset in that row).

    PTX ISA, "ldmatrix": thread l holds row l/4, columns 2(l%4) and 2(l%4)+1; with .trans it
    holds column l/4 of rows 2(l%4) and 2(l%4)+1. Rows of matrix i come from lanes 8i..8i+7.
    """
    if trans:
        return [(8 * matrix + 2 * (lane % 4) + h, 2 * (lane // 4)) for h in (0, 1)]
    return [(8 * matrix + lane // 4, 4 * (lane % 4) + 2 * h) for h in (0, 1)]


def _matrix_rows(m: Machine, lanes: Lanes, address_of, what: str
                 ) -> tuple[WarpView, np.ndarray, np.ndarray]:
    """The warp view of a whole-warp ld/stmatrix, each thread's row addresses, and the
    index of each active thread in them."""
    view = warp_view(m, lanes)
    whole_warps(view, what)
    rows = _row_addresses(np.broadcast_to(address_of(m, lanes), view.ids.shape), view, what)
    return view, rows, np.arange(view.ids.size)


@semantics("ldmatrix")
def decode_ldmatrix(inst: Instruction, env: DecodeEnv) -> Step:
    """ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 {r...}, [p]."""
    count, trans = _matrix_parts(inst)
    dest, address = expect(inst.operands, 2)
    regs = vector_elements(dest)
    if len(regs) != count:
        raise Unsupported(f"ldmatrix .x{count} needs {count} destination registers")
    writes = [writer(r, "b32", env) for r in regs]
    address_of = _address(address, "shared", env)

    def run(m: Machine, lanes: Lanes) -> None:
        view, rows, picks = _matrix_rows(m, lanes, address_of, "ldmatrix")
        for i, write in enumerate(writes):
            halves = []
            for source, offset in fragment_rows(view.lane, i, trans):
                at = rows[picks, source] + offset.astype(np.uint64)
                halves.append(m.shared.load(at, 2, 1, lanes)[:, 0].astype(np.uint32))
                _watch(m, "shared", at, 2, lanes, False)
            write(m, lanes, halves[0] | (halves[1] << np.uint32(16)))

    return Compute(run)


@semantics("stmatrix")
def decode_stmatrix(inst: Instruction, env: DecodeEnv) -> Step:
    """stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 [p], {r...}: ldmatrix's inverse."""
    count, trans = _matrix_parts(inst)
    address, src = expect(inst.operands, 2)
    regs = vector_elements(src)
    if len(regs) != count:
        raise Unsupported(f"stmatrix .x{count} needs {count} source registers")
    reads = [reader(r, "b32", env) for r in regs]
    address_of = _address(address, "shared", env)

    def run(m: Machine, lanes: Lanes) -> None:
        view, rows, picks = _matrix_rows(m, lanes, address_of, "stmatrix")
        for i, read in enumerate(reads):
            value = np.broadcast_to(read(m, lanes), view.ids.shape).astype(np.uint32)
            for h, (source, offset) in enumerate(fragment_rows(view.lane, i, trans)):
                at = rows[picks, source] + offset.astype(np.uint64)
                half = (value >> np.uint32(16 * h)).astype(np.uint16)
                m.shared.store(at, half[:, None], 2, lanes)
                _watch(m, "shared", at, 2, lanes, True)

    return Compute(run)


ELEMENT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
           "e5m2": ml_dtypes.float8_e5m2}
ELEMENT_BITS = {"f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8}


@dataclass(frozen=True)
class MmaShape:
    """An mma.sync shape: M x N x K and the input element width."""

    m: int
    n: int
    k: int
    bits: int

    @property
    def per_register(self) -> int:
        return 32 // self.bits

    @property
    def a_registers(self) -> int:
        return self.m * self.k // WARP // self.per_register

    @property
    def b_registers(self) -> int:
        return self.k * self.n // WARP // self.per_register


def a_position(shape: MmaShape, g: np.ndarray, t: np.ndarray, i: int) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    """(row, col) of element i of a thread's A fragment (row-major A, M=16).

    PTX ISA fragment figures: element pairs (16-bit) or quads (8-bit) are consecutive along
    K; successive registers alternate rows g / g+8, then move K by 8 (16-bit) or 16 (8-bit).
    """
    per = shape.per_register
    r, e = divmod(i, per)
    row = g + 8 * (r & 1)
    col = per * t + e + (r >> 1) * (4 * per)
    return row, col


def b_position(shape: MmaShape, g: np.ndarray, t: np.ndarray, i: int) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    """(k, n) of element i of a thread's B fragment (column-major B, N=8)."""
    per = shape.per_register
    r, e = divmod(i, per)
    return per * t + e + r * (4 * per), g


def c_position(g: np.ndarray, t: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of element i (0..3) of a thread's f32 C/D fragment of a 16x8 tile."""
    return g + 8 * (i >> 1), 2 * t + (i & 1)


MMA_SHAPES = {("m16n8k16", 16): MmaShape(16, 8, 16, 16), ("m16n8k8", 16): MmaShape(16, 8, 8, 16),
              ("m16n8k32", 8): MmaShape(16, 8, 32, 8)}


def _elements(words: np.ndarray, kind: str) -> np.ndarray:
    """(W, 32, regs) b32 words -> (W, 32, regs * per) float64 elements, low bits first."""
    bits = ELEMENT_BITS[kind]
    raw = np.ascontiguousarray(words.astype(np.uint32)).view(
        np.uint16 if bits == 16 else np.uint8)
    return raw.view(ELEMENT[kind]).astype(np.float64)


def warp_mma(shape: MmaShape, a: np.ndarray, b: np.ndarray, c: np.ndarray, a_kind: str,
             b_kind: str) -> np.ndarray:
    """D fragments (W, 32, 4) float32 from A, B (b32 words) and C (f32) fragments (W, 32, r).

    Each product of two f16/bf16/fp8 values is exact in float64 and the K-term sums are
    computed in float64, then rounded once to f32. Hardware accumulates with at least f32
    precision in an implementation-specific order, so results agree to f32 rounding.
    """
    lane = np.arange(WARP)
    g, t = lane // 4, lane % 4
    warps = a.shape[0]
    a_vals, b_vals = _elements(a, a_kind), _elements(b, b_kind)
    full_a = np.zeros((warps, shape.m, shape.k))
    full_b = np.zeros((warps, shape.k, shape.n))
    full_c = np.zeros((warps, shape.m, shape.n))
    for i in range(a_vals.shape[2]):
        row, col = a_position(shape, g, t, i)
        full_a[:, row, col] = a_vals[:, :, i]
    for i in range(b_vals.shape[2]):
        k, n = b_position(shape, g, t, i)
        full_b[:, k, n] = b_vals[:, :, i]
    for i in range(4):
        row, col = c_position(g, t, i)
        full_c[:, row, col] = c[:, :, i]
    d = (full_a @ full_b + full_c).astype(np.float32)
    out = np.empty((warps, WARP, 4), np.float32)
    for i in range(4):
        row, col = c_position(g, t, i)
        out[:, :, i] = d[:, row, col]
    return out


@semantics("mma")
def decode_mma(inst: Instruction, env: DecodeEnv) -> Step:
    """mma.sync.aligned.{m16n8k8,m16n8k16,m16n8k32}.row.col.f32.atype.btype.f32 d, a, b, c."""
    parts = list(inst.modifiers)
    head, types = parts[:-4], parts[-4:]
    if head[:2] != ["sync", "aligned"] or head[3:] != ["row", "col"] or len(head) != 5:
        raise Unsupported("mma.sync.aligned.SHAPE.row.col.dtype.atype.btype.ctype")
    d_kind, a_kind, b_kind, c_kind = types
    if d_kind != "f32" or c_kind != "f32" or a_kind not in ELEMENT or b_kind not in ELEMENT:
        raise Unsupported("mma.sync supports f32 accumulators with f16/bf16/e4m3/e5m2 inputs")
    if ELEMENT_BITS[a_kind] != ELEMENT_BITS[b_kind] or (
            ELEMENT_BITS[a_kind] == 16 and a_kind != b_kind):
        raise Unsupported(f"mma.sync with .{a_kind} and .{b_kind} inputs")
    shape = MMA_SHAPES.get((head[2], ELEMENT_BITS[a_kind]))
    if shape is None:
        raise Unsupported(f"mma.sync.{head[2]} with .{a_kind} inputs")
    d, a, b, c = (vector_elements(op) for op in expect(inst.operands, 4))
    if (len(d), len(a), len(b), len(c)) != (4, shape.a_registers, shape.b_registers, 4):
        raise Unsupported("wrong number of fragment registers")
    writes = [writer(r, "f32", env) for r in d]
    reads_a = [reader(r, "b32", env) for r in a]
    reads_b = [reader(r, "b32", env) for r in b]
    reads_c = [reader(r, "f32", env) for r in c]

    def gather(m: Machine, lanes: Lanes, reads: list, dtype: type) -> np.ndarray:
        n = lanes.count
        cols = [np.broadcast_to(read(m, lanes), (n,)).astype(dtype) for read in reads]
        return np.stack(cols, axis=1).reshape(n // WARP, WARP, len(reads))

    def run(m: Machine, lanes: Lanes) -> None:
        whole_warps(warp_view(m, lanes), "mma.sync")
        out = warp_mma(shape, gather(m, lanes, reads_a, np.uint32),
                       gather(m, lanes, reads_b, np.uint32),
                       gather(m, lanes, reads_c, np.float32), a_kind, b_kind)
        flat = out.reshape(-1, 4)
        for i, write in enumerate(writes):
            write(m, lanes, flat[:, i])

    return Compute(run)
