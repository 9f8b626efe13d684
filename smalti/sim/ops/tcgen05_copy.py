"""tcgen05.cp: shared memory to tensor memory, asynchronous, ordered with tcgen05.mma.

PTX ISA, "tcgen05.cp": a single thread issues
`tcgen05.cp.cta_group::1.shape{.multicast} [taddr], s_desc`, copying a matrix that the shared
memory descriptor `s_desc` describes (the canonical K-major layouts of "Shared Memory Matrix
Layout", rows of 128 or 256 bits made of 16-byte core-matrix rows; tcgen05_descriptors.py)
into tensor memory at `taddr`, one source row per lane, 32-bit columns in order
("Data Movement Shape"):

- `.128x256b`: 128 rows of 256 bits to lanes lane(taddr) + r, 8 columns.
- `.128x128b`: 128 rows of 128 bits to lanes lane(taddr) + r, 4 columns.
- `.4x256b`: 4 rows of 256 bits, one to each 32-lane quarter: lane(taddr) + 32 r, 8 columns
  (as CUTLASS's SM100_UTCCP_4dp256bit lays them, `(4,256):(32,128)` in tensor memory's
  lane-major bit order, and TVM's tcgen05.cp table states: lanes 0, 32, 64, 96 from the
  origin).
- `.64x128b.warpx2::02_13`: 64 rows of 128 bits; rows 0-31 go to the lanes of warps 0 and 2
  (lanes r and r + 64), rows 32-63 to those of warps 1 and 3.
- `.64x128b.warpx2::01_23`: rows 0-31 go to the lanes of warps 0 and 1 (r and r + 32), rows
  32-63 to those of warps 2 and 3 (r + 32 and r + 64).
- `.32x128b.warpx4`: 32 rows of 128 bits to every 32-lane quarter (r + 32 q, q = 0..3).

Multicast shapes and the 128-row ones start at lane 0. "tcgen05 Memory Consistency Model":
tcgen05.cp and the tcgen05.mma that the same thread issues after it execute in issue order
(the MMA may read what the copy wrote without a wait); `tcgen05.commit` tracks the thread's
prior copies as it does its MMAs, and only once a wait observes the commit's mbarrier phase
may other instructions (tcgen05.ld) read the destination, or threads write the source bytes.

`.cta_group::2` copies in both CTAs of the pair (cluster ranks 2i, 2i + 1), each from its
own shared memory at the descriptor's address to its own tensor memory at `taddr`.

The decompressing forms (`.b8x16.b6x16_p32`, `.b8x16.b4x16_p64`) are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from smalti.ptx.module import Address, Instruction
from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, address_parts, reader
from smalti.sim.ops.tcgen05_descriptors import SharedDescriptor
from smalti.sim.ops.tcgen05_mma import cta_pair
from smalti.sim.ops.wgmma_operands import distinct
from smalti.sim.ops.wgmma_operands import operand_addresses as canonical_addresses
from smalti.sim.registry import Compute
from smalti.sim.tmem import column_of, lane_of, tensor_memory

WAIT_HINT = "a wait on the mbarrier its tcgen05.commit arrives on"


@dataclass(frozen=True)
class CopyShape:
    """A tcgen05.cp shape: source rows, bytes per row, and the lane offsets (from the
    address's lane) each source row lands in (rows x copies)."""

    rows: int
    row_bytes: int
    lanes: tuple[tuple[int, ...], ...]
    from_lane_zero: bool

    @property
    def columns(self) -> int:
        return self.row_bytes // 4


def _shape(rows: int, row_bytes: int, lanes, from_lane_zero: bool) -> CopyShape:
    return CopyShape(rows, row_bytes, tuple(tuple(int(x) for x in row) for row in lanes),
                     from_lane_zero)


_R128 = np.arange(128)[:, None]
_R64 = np.arange(64)[:, None]
_R32 = np.arange(32)[:, None]
SHAPES: dict[tuple[str, str | None], CopyShape] = {
    ("128x256b", None): _shape(128, 32, _R128, True),
    ("128x128b", None): _shape(128, 16, _R128, True),
    ("4x256b", None): _shape(4, 32, 32 * np.arange(4)[:, None], False),
    ("64x128b", "warpx2::02_13"): _shape(64, 16, _R64 + np.array([[0, 64]]), True),
    ("64x128b", "warpx2::01_23"): _shape(
        64, 16, _R64 % 32 + 64 * (_R64 // 32) + np.array([[0, 32]]), True),
    ("32x128b", "warpx4"): _shape(32, 16, _R32 + 32 * np.arange(4)[None, :], True),
}
MULTICASTS = ("warpx2::02_13", "warpx2::01_23", "warpx4")


def row_lanes(shape: CopyShape) -> np.ndarray:
    """The lane offsets (rows x copies) each source row is written to."""
    return np.array(shape.lanes, np.int64)


def decode_cp(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Compute:
    """tcgen05.cp.cta_group::1.<shape>{.<multicast>} [taddr], s_desc."""
    pair = mods.flag("cta_group::2")
    if not pair and not mods.flag("cta_group::1"):
        raise Unsupported("expected .cta_group::1 or .cta_group::2")
    name = mods.one_of(tuple({s for s, _ in SHAPES}))
    multicast = mods.one_of(MULTICASTS)
    if any(i.startswith("b8x16") or i.startswith("b6x16") or i.startswith("b4x16")
           for i in mods.items):
        raise Unsupported("tcgen05.cp's decompression (.b8x16.b6x16_p32, .b8x16.b4x16_p64) "
                          "is not supported")
    mods.done()
    shape = SHAPES.get((name, multicast)) if name is not None else None
    if shape is None:
        raise Unsupported(f"tcgen05.cp shape .{name}{'.' + multicast if multicast else ''}: "
                          "expected .128x256b, .128x128b, .4x256b, .64x128b.warpx2::02_13, "
                          ".64x128b.warpx2::01_23 or .32x128b.warpx4")
    if len(inst.operands) != 2 or not isinstance(inst.operands[0], Address):
        raise Unsupported("tcgen05.cp takes [taddr], s_desc")
    base, offset = address_parts(inst.operands[0])
    read_taddr = reader(base, "u32", env)
    read_desc = reader(inst.operands[1], "b64", env)
    what = f"the tcgen05.cp at line {inst.line}"

    def run(m: Machine, lanes: Lanes) -> None:
        taddrs = np.broadcast_to(np.asarray(read_taddr(m, lanes)), (lanes.count,))
        descs = np.broadcast_to(np.asarray(read_desc(m, lanes)), (lanes.count,))
        for i, thread in enumerate(thread_ids(lanes).tolist()):  # each thread issues one
            _issue(m, shape, what, thread, int(taddrs[i]) + offset, int(descs[i]), pair)

    return Compute(run)


def _issue(m: Machine, shape: CopyShape, what: str, thread: int, taddr: int,
           desc_value: int, pair: bool) -> None:
    """Issue one copy; `.cta_group::2` copies in both CTAs of the pair, each from its own
    shared memory to its own tensor memory at the same addresses."""
    memory, engine = tensor_memory(m), m.async_engine
    lane, column = lane_of(taddr), column_of(taddr)
    if shape.from_lane_zero and lane != 0:
        raise Fault(f"{what}: this shape writes from tensor memory lane 0, not lane {lane}",
                    thread)
    desc = SharedDescriptor.decode(desc_value)
    problem = desc.problem()
    if problem is not None:
        raise Fault(f"{what}: {problem}", thread)
    source = canonical_addresses(desc.canonical(), shape.rows, 1, False)[:, :shape.row_bytes]
    if int(source.max()) >= m.shared.size:
        raise Fault(f"{what}: source bytes up to shared address {int(source.max()):#x} lie "
                    f"beyond the block's {m.shared.size} bytes", thread)
    dest_lanes = lane + row_lanes(shape)[:, :, None]  # rows x copies x 1
    dest_columns = column + np.arange(shape.columns)[None, None, :]
    dest_lanes, dest_columns = np.broadcast_arrays(dest_lanes, dest_columns)
    blocks = cta_pair(m, thread, what) if pair else (int(m.geometry.block_of[thread]),)
    owned = []
    for block in blocks:
        memory.check(block, dest_lanes, dest_columns, thread, what)
        memory.guard(block, dest_lanes, dest_columns, thread, what, pipelined=("mma", "cp"))
        idx = distinct(block * m.shared.size + source)
        engine.shared.async_read(idx, thread, what)
        owned.append(idx)
    op = AsyncOp(engine.new_id(), what, None, chain=("tcgen05", thread))
    op.run = partial(_land, m, blocks, source, dest_lanes, dest_columns)
    op.on_retire = partial(memory.release, {op.id})
    engine.own(op, np.concatenate(owned), reads=False)
    for block in blocks:
        memory.own(block, dest_lanes, dest_columns, op.id, what, WAIT_HINT, "cp")
    memory.in_flight.setdefault(thread, []).append(op)
    engine.issue(op)


def _land(m: Machine, blocks: tuple[int, ...], source: np.ndarray, lanes: np.ndarray,
          columns: np.ndarray) -> None:
    """The copy completes: the source rows' 32-bit words land in every destination copy."""
    for block in blocks:
        raw = np.ascontiguousarray(m.shared.data[block * m.shared.size + source])
        words = raw.view("<u4")  # rows x columns
        tensor_memory(m).write(block, lanes, columns,
                               np.broadcast_to(words[:, None, :], lanes.shape))
