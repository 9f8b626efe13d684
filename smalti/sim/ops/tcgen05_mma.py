"""tcgen05.mma (dense, .cta_group::1; block-scaled too) and tcgen05.commit.

PTX ISA, "tcgen05.mma": a single thread issues
`tcgen05.mma.cta_group::1.kind::K [d_taddr], a_desc|[a_taddr], b_desc, idesc, enable_input_d`
computing D (M x N, in tensor memory) = A (M x K) @ B (K x N) + (enable_input_d ? D : 0),
K being 32 bytes of the input type (16 for .kind::f16, 8 for .kind::tf32, 32 for
.kind::f8f6f4). A comes from shared memory (a shared memory descriptor) or from tensor memory
(row i in lane i, K packed into 32-bit columns), B from shared memory; the instruction
descriptor gives the types, transposes, negations, M and N (tcgen05_descriptors.py). With
M = 128, row i of D is lane i and column j is column d + j (one 32-bit column per f32);
M = 64 puts 16 rows of D in each 32-lane quarter (`row_lanes`), N then a multiple of 8.
Products are exact in float64 and summed there, then rounded once to D's type: f32, or f16
(.kind::f16 with f16 inputs, .kind::f8f6f4), an f16 D holding one element per 32-bit column
in the column's low 16 bits (`_d_values`). The optional
`{disable-output-lane}` vector after idesc leaves the lanes of D whose bits are set as they
are, and the optional immediate `scale-input-d` after enable_input_d scales the old D by
2^-scale-input-d before the sum (CUTLASS passes an all-zero vector to every MMA).

The MMA is asynchronous: `tcgen05.commit.cta_group::1.mbarrier::arrive::one{.shared::cluster}
.b64 [mbar]` makes the mbarrier track the completion of the executing thread's prior
tcgen05.mma operations (one arrive when they are done). Until a wait observes that phase, the
D cells stay the MMA's (tcgen05.ld of them is a reported hazard) and so do A's and B's shared
bytes (writing them is one); tcgen05.mma instructions on the same accumulator need no wait
between them ("tcgen05 Memory Consistency Model": they are pipelined), nor does an MMA reading
what the same thread's tcgen05.cp wrote.

Block scaling (PTX ISA, "tcgen05.mma", `.block_scale`):
`tcgen05.mma.cta_group::1.kind::{mxf8f6f4,mxf4,mxf4nvf4}.block_scale{.scale_vec::NX|.blockB}
[d], a_desc|[a], b_desc, idesc, [scale_A], [scale_B], enable_input_d` scales each block of K
of A's rows and B's columns by a factor read from tensor memory (tcgen05_scales.py); the
instruction descriptor's block-scaled form gives the scale type and data IDs.
Rows of .kind::f8f6f4 and .kind::mxf8f6f4 hold 32 elements in 32 bytes of shared memory
(8-bit types a byte each, 6- and 4-bit types in the padded .b6x16_p32 / .b4x16_p64 groups);
.kind::mxf4 and .kind::mxf4nvf4 pack 64 E2M1 in them, two to a byte (tcgen05_scales.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from smalti.ptx.module import Address, Immediate, Instruction, VectorOperand
from smalti.sim.async_engine import AsyncOp
from smalti.sim.errors import Fault, Unsupported
from smalti.sim.lanes import Lanes, thread_ids
from smalti.sim.machine import Machine
from smalti.sim.operands import DecodeEnv, Modifiers, address_parts, reader
from smalti.sim.ops import tcgen05_scales as scales
from smalti.sim.ops.bulk_queue import multicast_targets
from smalti.sim.ops.shared_address import shared_targets
from smalti.sim.ops.tcgen05_descriptors import (
    BLOCK_SCALED,
    BlockScaledDescriptor,
    InstructionDescriptor,
    SharedDescriptor,
)
from smalti.sim.ops.wgmma_operands import INPUTS, distinct, esize_of, from_bits, values
from smalti.sim.ops.wgmma_operands import operand_addresses as canonical_addresses
from smalti.sim.registry import Compute
from smalti.sim.tmem import column_of, lane_of, tensor_memory

KINDS = ("f16", "tf32", "f8f6f4", *BLOCK_SCALED)
BYTE_KINDS = ("f8f6f4", *BLOCK_SCALED)  # one byte (or half a byte) per element
M_SUPPORTED = {128: (0,), 64: (0, 16)}  # M -> the lanes D (and A in TMEM) may start at
WAIT_HINT = "a wait on the mbarrier its tcgen05.commit arrives on"


def decode_mma(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Compute:
    """tcgen05.mma.cta_group::{1,2}.kind::K{.block_scale{.scale_vec::NX|.blockB}} [d], a,
    b_desc, idesc{, [scale_A], [scale_B]}, enable_d."""
    pair = mods.flag("cta_group::2")
    if not pair and not mods.flag("cta_group::1"):
        raise Unsupported("expected .cta_group::1 or .cta_group::2")
    kind = mods.one_of(tuple(f"kind::{k}" for k in KINDS))
    if kind is None:
        raise Unsupported("tcgen05.mma supports .kind::f16, .kind::tf32, .kind::f8f6f4, "
                          ".kind::mxf8f6f4, .kind::mxf4 and .kind::mxf4nvf4")
    kind = kind[len("kind::"):]
    block_scale = mods.flag("block_scale")
    vector = mods.one_of((*scales.SCALE_VECTORS, *scales.BLOCKS))
    mods.items = [i for i in mods.items if not i.startswith("collector::")]  # reuse hints
    mods.done()
    if (kind in BLOCK_SCALED) != block_scale:
        raise Unsupported(f".kind::{kind} {'needs' if not block_scale else 'takes no'} "
                          ".block_scale")
    if vector is not None and not block_scale:
        raise Unsupported(f".{vector} needs .block_scale")
    count = 0
    if block_scale:
        try:
            count = scales.vectors(kind, vector)
        except ValueError as error:
            raise Unsupported(str(error)) from None
    operands = list(inst.operands)
    mask_op, scale_d = _output_options(operands, block_scale, pair, kind)
    expected = 7 if block_scale else 5
    if len(operands) != expected or isinstance(operands[-1], VectorOperand):
        raise Unsupported("expected [d], a, b_desc, idesc{, {disable-output-lane}}, "
                          "enable_input_d{, scale-input-d}" if not block_scale else
                          "expected [d], a, b_desc, idesc, [scale_A], [scale_B], enable_input_d")
    d_op, a_op, b_op, idesc_op = operands[:4]
    a_in_tmem = isinstance(a_op, Address)
    if pair and (block_scale or a_in_tmem):
        raise Unsupported(".cta_group::2 block-scaled MMAs and A from tensor memory are not "
                          "supported")
    spec = _Spec(kind, a_in_tmem, f"the tcgen05.mma at line {inst.line}", count, pair,
                 scale_d)
    reads = [_tmem_reader(d_op, env),
             _tmem_reader(a_op, env) if a_in_tmem else reader(a_op, "b64", env),
             reader(b_op, "b64", env), reader(idesc_op, "b32", env),
             reader(operands[-1], "pred", env)]
    if block_scale:
        reads += [_tmem_reader(operands[4], env), _tmem_reader(operands[5], env)]
    masks = tuple(reader(op, "b32", env) for op in mask_op.elements) if mask_op else ()
    return Compute(partial(_mma, spec, tuple(reads), masks))


def _output_options(operands: list, block_scale: bool, pair: bool,
                    kind: str) -> tuple[VectorOperand | None, int]:
    """Remove the optional `{disable-output-lane}` vector and `scale-input-d` immediate from
    a dense MMA's `operands` and return them (PTX ISA, "tcgen05.mma"): the vector has 4
    (.cta_group::1) or 8 (.cta_group::2) .b32 elements, bit i (the first element's bit 0
    first) masking lane i of D; scale-input-d (0..15, .kind::f16 and .kind::tf32 only) makes
    D = A*B + D * 2^-scale-input-d."""
    if block_scale:
        return None, 0
    scale_d = 0
    if len(operands) == 7 or (len(operands) == 6 and isinstance(operands[-1], Immediate)):
        last = operands.pop()
        if not isinstance(last, Immediate) or not 0 <= int(last.value) <= 15:
            raise Unsupported("scale-input-d is an immediate in [0, 15]")
        if kind not in ("f16", "tf32"):
            raise Unsupported("scale-input-d needs .kind::f16 or .kind::tf32")
        scale_d = int(last.value)
    if len(operands) == 6 and isinstance(operands[4], VectorOperand):
        mask = operands.pop(4)
        if len(mask.elements) != (8 if pair else 4):
            raise Unsupported(f"disable-output-lane has {8 if pair else 4} elements with "
                              f".cta_group::{2 if pair else 1}")
        return mask, scale_d
    return None, scale_d


def row_lanes(rows: int, first: int) -> np.ndarray:
    """Tensor memory lanes (rows x 1) of the rows of D (and of A in tensor memory).

    PTX ISA, "Data path layout organization" (.cta_group::1): with M = 128, row i is lane i;
    with M = 64, the rows are spread over the four 32-lane quarters, 16 rows each: row i is
    lane first + 32 (i // 16) + i % 16, `first` (0 or 16) choosing the half of every quarter
    (CUTLASS's tmem_frg for M = 64 allocates the same `((16,4),N):((1,32),128)` atom)."""
    r = np.arange(rows)[:, None]
    if rows == 128:
        return first + r
    return first + 32 * (r // 16) + r % 16


def _tmem_reader(op, env: DecodeEnv):
    """A reader of a [taddr] operand (a register plus an immediate offset)."""
    base, offset = address_parts(op)
    read = reader(base, "u32", env)
    return lambda m, lanes: np.asarray(read(m, lanes)).astype(np.int64) + offset


@dataclass(frozen=True)
class _Spec:
    kind: str
    a_in_tmem: bool
    what: str
    scale_vectors: int = 0  # scale factors per row per MMA (0: not block-scaled)
    pair: bool = False  # .cta_group::2
    scale_d: int = 0  # scale-input-d: D = A*B + D * 2^-scale_d


@dataclass(frozen=True)
class _Operands:
    """One issued MMA's operands, checked: where A and B lie and the D cells."""

    block: int
    kind: str
    idesc: InstructionDescriptor | BlockScaledDescriptor
    a_addresses: np.ndarray | None  # (M, K) shared byte offsets, or None (A in TMEM)
    a_cells: tuple[np.ndarray, np.ndarray] | None  # (lanes, columns) (M, words)
    b_addresses: np.ndarray  # (N, K)
    d_cells: tuple[np.ndarray, np.ndarray]  # (lanes (M, 1), columns (1, N))
    enable_d: bool
    scale_cells: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
    scale_vectors: int = 0
    pair: tuple[int, int] | None = None  # .cta_group::2: the even and odd CTA of the pair
    disabled: int = 0  # disable-output-lane: bit i set leaves lane i of D as it is
    scale_d: int = 0

    @property
    def blocks(self) -> tuple[int, ...]:
        return self.pair or (self.block,)


def cta_pair(m: Machine, thread: int, what: str) -> tuple[int, int]:
    """The CTA pair of `thread`'s CTA (PTX ISA, "tcgen05" CTA pairs: the CTAs of cluster ranks
    2i and 2i + 1)."""
    geometry = m.geometry
    if geometry.cluster_size < 2 or geometry.cluster_size % 2:
        raise Fault(f"{what}: .cta_group::2 needs clusters of an even number of CTAs (this "
                    f"launch's have {geometry.cluster_size})", thread)
    block = int(geometry.block_of[thread])
    rank = int(geometry.cluster_rank[block])
    return int(geometry.peer(block, rank & ~1)), int(geometry.peer(block, rank | 1))


def _mma(spec: _Spec, reads, masks, m: Machine, lanes: Lanes) -> None:
    per_lane = [np.broadcast_to(np.asarray(read(m, lanes)), (lanes.count,)) for read in reads]
    mask_words = [np.broadcast_to(np.asarray(read(m, lanes)), (lanes.count,)) for read in masks]
    for i, thread in enumerate(thread_ids(lanes).tolist()):  # each thread issues one
        d, a, b, idesc, enable, *scale = (int(values_[i]) for values_ in per_lane)
        ops = _operands(m, spec, thread, d, a, b, idesc, bool(enable))
        if spec.scale_vectors:
            ops = _scale_operands(m, spec, thread, ops, *scale)
        disabled = sum(int(words[i]) << (32 * w) for w, words in enumerate(mask_words))
        if disabled and spec.pair:
            raise Fault(f"{spec.what}: a nonzero disable-output-lane mask with .cta_group::2 "
                        "is not supported (which words mask which CTA's lanes)", thread)
        if disabled or spec.scale_d:
            ops = replace(ops, disabled=disabled, scale_d=spec.scale_d)
        _issue(m, spec, thread, ops)


def _esize(kind: str, itype: str) -> int:
    """Bytes per element in shared memory (the f8f6f4 and mx kinds: 32 bytes of K per row)."""
    return 1 if kind in BYTE_KINDS else esize_of(itype)


def _operands(m: Machine, spec: _Spec, thread: int, d: int, a: int, b: int, idesc_value: int,
              enable: bool) -> _Operands:
    what = spec.what
    idesc: InstructionDescriptor | BlockScaledDescriptor
    if spec.scale_vectors:
        idesc = BlockScaledDescriptor.decode(idesc_value, spec.kind)
    else:
        idesc = InstructionDescriptor.decode(idesc_value, spec.kind)
    if idesc.sparse or idesc.max_shift:
        raise Fault(f"{what}: sparse and weight-stationary (.ws) descriptors are not "
                    "supported", thread)
    if (problem := _accumulator_problem(spec.kind, idesc)) is not None:
        raise Fault(f"{what}: {problem} (instruction descriptor {idesc_value:#010x})", thread)
    for name, itype in (("A", idesc.atype), ("B", idesc.btype)):
        if itype is None or (itype not in INPUTS and spec.kind not in BYTE_KINDS):
            raise Fault(f"{what}: the instruction descriptor's {name} type is not one "
                        f".kind::{spec.kind} supports here", thread)
    if spec.pair:
        if idesc.m != 256:
            raise Fault(f"{what}: M = {idesc.m}; .cta_group::2 supports M = 256 here", thread)
    elif idesc.m not in M_SUPPORTED or (spec.scale_vectors and idesc.m != 128):
        raise Fault(f"{what}: M = {idesc.m}; .cta_group::1 supports M = 64 and M = 128 here "
                    "(M = 128 only when block-scaled)", thread)
    step = 8 if idesc.m == 64 else 16
    rows = 128 if spec.pair else idesc.m  # rows of A and D in each CTA
    if not (idesc.n % step == 0 and step <= idesc.n <= 256):
        raise Fault(f"{what}: N = {idesc.n} must be a multiple of {step} in [{step}, 256] for "
                    f"M = {idesc.m}", thread)
    block = int(m.geometry.block_of[thread])
    memory = tensor_memory(m)
    if lane_of(d) not in M_SUPPORTED[rows]:
        raise Fault(f"{what}: D at tensor memory lane {lane_of(d)}: with M = {idesc.m} it "
                    f"starts at lane {' or '.join(map(str, M_SUPPORTED[rows]))}", thread)
    d_lanes = row_lanes(rows, lane_of(d))
    d_columns = column_of(d) + np.arange(idesc.n)[None, :]
    pair = cta_pair(m, thread, what) if spec.pair else None
    for each in pair or (block,):
        memory.check(each, d_lanes, d_columns, thread, what)
        memory.guard(each, d_lanes, d_columns, thread, what, pipelined="mma")
    if scales.packed(spec.kind) and (idesc.transpose_a or idesc.transpose_b):
        raise Fault(f"{what}: .kind::{spec.kind} operands are K-major (transpose A and B must "
                    "be 0)", thread)
    for name, itype, mn_major in (("A", idesc.atype, idesc.transpose_a),
                                  ("B", idesc.btype, idesc.transpose_b)):
        if mn_major and itype in scales.PADDED:
            raise Fault(f"{what}: {name} of type {itype.upper()} is K-major (only 8- and "
                        "16-bit types and TF32 may be MN-major)", thread)
    if spec.a_in_tmem and spec.kind in BYTE_KINDS and idesc.atype in scales.PADDED:
        raise Fault(f"{what}: A of type {idesc.atype.upper()} from tensor memory (the 8-bit "
                    "containers tcgen05.cp's decompression writes) is not supported", thread)
    b_rows = idesc.n // 2 if spec.pair else idesc.n  # a pair splits B's N between its CTAs
    b_addresses = _shared_operand(m, b, b_rows, _esize(spec.kind, idesc.btype),
                                  idesc.transpose_b, thread, what)
    a_addresses = a_cells = None
    if spec.a_in_tmem:
        if idesc.transpose_a:
            raise Fault(f"{what}: A in tensor memory is K-major (transpose A must be 0)",
                        thread)
        words = 32 // 4
        if lane_of(a) not in M_SUPPORTED[idesc.m]:
            raise Fault(f"{what}: A at tensor memory lane {lane_of(a)}: with M = {idesc.m} it "
                        f"starts at lane {' or '.join(map(str, M_SUPPORTED[idesc.m]))}", thread)
        a_cells = (row_lanes(idesc.m, lane_of(a)),
                   column_of(a) + np.arange(words)[None, :])
        memory.check(block, *a_cells, thread, what)
        memory.guard(block, *a_cells, thread, what, pipelined="cp")
    else:
        a_addresses = _shared_operand(m, a, rows, _esize(spec.kind, idesc.atype),
                                      idesc.transpose_a, thread, what)
    return _Operands(block, spec.kind, idesc, a_addresses, a_cells, b_addresses,
                     (d_lanes, d_columns), enable, pair=pair)


def _accumulator_problem(kind: str, idesc: InstructionDescriptor | BlockScaledDescriptor
                         ) -> str | None:
    """Why D's type does not go with the kind and inputs, or None. PTX ISA, "tcgen05.mma",
    kinds and types table: .kind::f16 accumulates f16 x f16 in f16 or f32, bf16 x bf16 in
    f32; .kind::f8f6f4 in f16 or f32; .kind::tf32 and the block-scaled kinds in f32."""
    dtype = idesc.dtype
    if dtype == "f32":
        return None
    if dtype == "f16" and (kind == "f8f6f4" or (kind == "f16" and idesc.atype == "f16"
                                                 and idesc.btype == "f16")):
        return None
    inputs = "" if kind != "f16" else f" with {idesc.atype} x {idesc.btype}"
    return f"D of type {dtype} does not go with .kind::{kind}{inputs}"


def _d_values(words: np.ndarray, dtype: str) -> np.ndarray:
    """D's elements (float64) from its 32-bit TMEM cells: an f32 per cell, or an f16 in the
    low 16 bits of each cell (one element per column, as CUTLASS's tmem_frg lays out 16-bit
    accumulators in 32-bit storage and tcgen05.ld .pack::16b reads them)."""
    if dtype == "f16":
        return (words & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    return words.view(np.float32).astype(np.float64)


def _d_words(values: np.ndarray, dtype: str) -> np.ndarray:
    """D's 32-bit cells holding `values` rounded once to D's type (`_d_values`'s inverse;
    an f16's upper 16 bits are written as zero, which the ISA leaves unsaid)."""
    if dtype == "f16":
        return values.astype(np.float16).view(np.uint16).astype(np.uint32)
    return values.astype(np.float32).view(np.uint32)


def _scale_operands(m: Machine, spec: _Spec, thread: int, ops: _Operands, scale_a: int,
                    scale_b: int) -> _Operands:
    """Check the block-scaled operands: the scale type and data IDs the instruction allows,
    and the tensor memory cells of both scale factor matrices (tcgen05_scales.py)."""
    what, idesc, count = spec.what, ops.idesc, spec.scale_vectors
    assert isinstance(idesc, BlockScaledDescriptor)
    allowed = scales.ALLOWED[spec.kind][count]
    if idesc.scale_type not in allowed:
        raise Fault(f"{what}: .kind::{spec.kind} with {count} scale factor(s) per row takes "
                    f"{' or '.join(a.upper() for a in allowed)} scale factors, but the "
                    f"instruction descriptor (bit 23) gives {idesc.scale_type.upper()}", thread)
    for name, ident in (("A", idesc.a_scale_id), ("B", idesc.b_scale_id)):
        if ident not in scales.SCALE_IDS[count]:
            raise Fault(f"{what}: matrix {name}'s scale factor data ID {ident} is not one of "
                        f"{scales.SCALE_IDS[count]} (with {count} scale factor(s) per row)",
                        thread)
    memory = tensor_memory(m)
    cells = []
    for name, taddr, make, extent, ident in (
            ("A", scale_a, scales.a_cells, idesc.m, idesc.a_scale_id),
            ("B", scale_b, scales.b_cells, idesc.n, idesc.b_scale_id)):
        taddr = _scale_address(taddr, ident, name, thread, what)
        if lane_of(taddr) != 0:
            raise Fault(f"{what}: the scale factors of {name} start at tensor memory lane "
                        f"{lane_of(taddr)}; with M = 128 they start at lane 0", thread)
        lanes, columns = make(column_of(taddr), extent)
        memory.check(ops.block, lanes, columns, thread, f"{what} (scale factors of {name})")
        memory.guard(ops.block, lanes, columns, thread, what, pipelined="cp")
        cells.append((lanes, columns))
    return _Operands(ops.block, ops.kind, idesc, ops.a_addresses, ops.a_cells,
                     ops.b_addresses, ops.d_cells, ops.enable_d, (cells[0], cells[1]), count)


def _scale_address(taddr: int, ident: int, name: str, thread: int, what: str) -> int:
    """A scale-factor TMEM address without its top two bits, which CUTLASS sets to the byte
    of the 32-bit column the scales start at (`make_runtime_instr_desc_block_scaled` copies
    them into the instruction descriptor's data ID): they must agree with that ID."""
    byte = (taddr >> 30) & 3
    if byte and byte != ident:
        raise Fault(f"{what}: the scale factors of {name} are addressed at byte {byte} of "
                    f"their column, but the instruction descriptor's data ID is {ident}",
                    thread)
    return taddr & 0x3FFFFFFF


def _shared_operand(m: Machine, value: int, rows: int, esize: int, mn_major: bool,
                    thread: int, what: str) -> np.ndarray:
    """Byte offsets (rows x K) in the block's shared memory of an operand's elements."""
    desc = SharedDescriptor.decode(value)
    problem = desc.problem()
    if problem is not None:
        raise Fault(f"{what}: {problem}", thread)
    addresses = canonical_addresses(desc.canonical(), rows, esize, mn_major)
    if int(addresses.max()) + esize > m.shared.size:
        raise Fault(f"{what}: operand bytes up to shared address "
                    f"{int(addresses.max()) + esize - 1:#x} lie beyond the block's "
                    f"{m.shared.size} bytes", thread)
    return addresses


def _issue(m: Machine, spec: _Spec, thread: int, ops: _Operands) -> None:
    engine, memory = m.async_engine, tensor_memory(m)
    idesc = ops.idesc
    owned = []
    for block in ops.blocks:
        base = block * m.shared.size
        for addresses, itype in ((ops.a_addresses, idesc.atype),
                                 (ops.b_addresses, idesc.btype)):
            if addresses is not None:
                if spec.kind in BYTE_KINDS:  # the bytes of each row that hold data
                    addresses = addresses[:, scales.data_bytes(itype, spec.kind)]
                idx = distinct(base + addresses[..., None]
                               + np.arange(_esize(spec.kind, itype)))
                engine.shared.async_read(idx, thread, spec.what)
                owned.append(idx)
    op = AsyncOp(engine.new_id(), spec.what, partial(_compute, m, ops),
                 chain=("tcgen05", thread))
    op.on_retire = partial(memory.release, {op.id})
    engine.own(op, np.unique(np.concatenate(owned)), reads=False)
    for block in ops.blocks:
        memory.own(block, *ops.d_cells, op.id, spec.what, WAIT_HINT, "mma")
    memory.in_flight.setdefault(thread, []).append(op)
    engine.issue(op)


def _compute(m: Machine, ops: _Operands) -> None:
    """The MMA completes: D = A @ B (+ D). A CTA pair's A is the even CTA's rows then the odd
    one's, its B the even CTA's N/2 columns then the odd one's; each CTA's tensor memory gets
    its rows of D."""
    parts = [_inputs(m, ops, block) for block in ops.blocks]
    a = np.concatenate([part[0] for part in parts])
    b = np.concatenate([part[1] for part in parts])
    idesc, memory = ops.idesc, tensor_memory(m)
    if ops.scale_cells is not None:
        assert isinstance(idesc, BlockScaledDescriptor)
        count = ops.scale_vectors
        (a_lanes, a_cols), (b_lanes, b_cols) = ops.scale_cells
        scale_a = scales.scale_values(scales.scale_bytes(
            memory.read(ops.block, a_lanes, a_cols)[:, 0], idesc.a_scale_id, count),
            idesc.scale_type)  # (M, S)
        scale_b = scales.scale_values(scales.scale_bytes(
            memory.read(ops.block, b_lanes, b_cols), idesc.b_scale_id, count),
            idesc.scale_type)  # (4, N, S)
        product = scales.scaled_product(a, b, scale_a, scale_b)
    else:
        product = a @ b.T
    if idesc.negate_a != idesc.negate_b:
        product = -product
    rows = ops.d_cells[0].shape[0]
    for i, block in enumerate(ops.blocks):
        piece = product[i * rows:(i + 1) * rows]
        if ops.enable_d or ops.disabled:
            old = _d_values(memory.read(block, *ops.d_cells), idesc.dtype)
            if ops.enable_d:
                piece = piece + np.ldexp(old, -ops.scale_d)
            if ops.disabled:  # (.cta_group::1 only: one block)
                kept = [(ops.disabled >> int(lane)) & 1 for lane in ops.d_cells[0][:, 0]]
                piece = np.where(np.array(kept, bool)[:, None], old, piece)
        memory.write(block, *ops.d_cells, _d_words(piece, idesc.dtype))


def _inputs(m: Machine, ops: _Operands, block: int) -> tuple[np.ndarray, np.ndarray]:
    """A's and B's elements (float64) as CTA `block` holds them."""
    idesc, memory = ops.idesc, tensor_memory(m)
    data = m.shared.data
    base = block * m.shared.size
    if ops.kind in BYTE_KINDS:
        b = scales.element_values(data[base + ops.b_addresses], idesc.btype, ops.kind)
        if ops.a_addresses is not None:
            a = scales.element_values(data[base + ops.a_addresses], idesc.atype, ops.kind)
        else:
            words = memory.read(block, *ops.a_cells)  # (M, 8) 32-bit columns
            raw = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)
            a = scales.element_values(raw, idesc.atype, ops.kind)
    else:
        b_esize = esize_of(idesc.btype)
        b = values(data[base + ops.b_addresses[..., None] + np.arange(b_esize)], idesc.btype)
        if ops.a_addresses is not None:
            a_esize = esize_of(idesc.atype)
            a = values(data[base + ops.a_addresses[..., None] + np.arange(a_esize)],
                       idesc.atype)
        else:
            words = memory.read(block, *ops.a_cells)  # (M, 8) 32-bit columns
            a = _unpack_words(words, idesc.atype)
    return a, b


def _unpack_words(words: np.ndarray, itype: str) -> np.ndarray:
    """A's elements (M x K, float64) from tensor-memory columns holding K packed in order,
    the first element in the low bits."""
    esize = esize_of(itype)
    raw = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)
    raw = raw.reshape(words.shape[0], -1, esize)
    bits = np.ascontiguousarray(raw).view(f"<u{esize}")[..., 0]
    return from_bits(bits, itype)


def decode_commit(inst: Instruction, env: DecodeEnv, mods: Modifiers) -> Compute:
    """tcgen05.commit.cta_group::{1,2}.mbarrier::arrive::one{.shared::cluster}
    {.multicast::cluster}.b64 [mbar]{, ctaMask}.

    PTX ISA, "tcgen05.commit": with `.multicast::cluster` the 16-bit ctaMask names CTAs of the
    cluster; each gets one arrive on the mbarrier at the same shared memory offset as `mbar`
    once the tracked operations are done. `.cta_group::2` commits track the executing thread's
    prior .cta_group::2 operations (those of its CTA pair) the same way."""
    if mods.one_of(("cta_group::1", "cta_group::2")) is None or not mods.flag(
            "mbarrier::arrive::one"):
        raise Unsupported("expected tcgen05.commit.cta_group::{1,2}.mbarrier::arrive::one")
    mods.one_of(("shared::cluster", "shared::cta"))
    multicast = mods.flag("multicast::cluster")
    if not mods.flag("b64"):
        raise Unsupported("tcgen05.commit takes a .b64 mbarrier")
    mods.done()
    if len(inst.operands) != 1 + multicast:
        raise Unsupported("tcgen05.commit takes an mbarrier operand"
                          + (" and a ctaMask" if multicast else ""))
    targets_of = shared_targets(inst.operands[0], "cluster", env)
    read_mask = reader(inst.operands[1], "b16", env) if multicast else None
    what = f"the tcgen05.commit at line {inst.line}"

    def run(m: Machine, lanes: Lanes) -> None:
        engine, memory = m.async_engine, tensor_memory(m)
        blocks, offsets = targets_of(m, lanes)
        masks = (np.broadcast_to(np.asarray(read_mask(m, lanes)), (lanes.count,))
                 if read_mask is not None else None)
        for i, thread in enumerate(thread_ids(lanes).tolist()):
            if masks is None:
                keys = [(int(blocks[i]), int(offsets[i]))]
            else:
                keys = [(target, int(offsets[i])) for target, _ in
                        multicast_targets(m, thread, int(masks[i]), what)]
            for key in keys:
                engine.barriers.get(key, thread)
            # All the thread's prior tcgen05 operations, those an earlier commit tracked too
            # (PTX ISA, "tcgen05.commit"): CUTLASS commits each K block's MMAs to the
            # stage's empty barrier and then, at the end of a tile, to the accumulator's.
            tracked = [op for op in memory.in_flight.get(thread, ()) if not op.retired]
            memory.in_flight[thread] = tracked
            op = AsyncOp(engine.new_id(), what, partial(_arrive, m, keys, thread, tracked),
                         chain=("tcgen05", thread))
            engine.issue(op)

    return Compute(run)


def _arrive(m: Machine, keys: list[tuple[int, int]], thread: int,
            tracked: list[AsyncOp]) -> None:
    """The tracked operations are done: one arrive on each mbarrier; they retire when a wait
    observes one of those phases."""
    barriers = m.async_engine.barriers
    for key in keys:
        barriers.get(key, thread).landed.extend(tracked)
        barriers.arrive(key, 1, thread)
