"""Which scalar values vary between the threads of a warpgroup.

A value is thread-varying when it is derived from the thread index (`gpu.thread_id`,
`gpu.lane_id`), except through a division (or right shift) that keeps only the warpgroup
index: `%tid / 128` is the same in all 128 threads of a warpgroup. Loop-carried values and
branch results are followed to a fixed point.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from smalti.dialect.ops import constant_index
from smalti.tiling import WARPGROUP_SIZE

THREAD_SOURCES = ("gpu.thread_id", "gpu.lane_id")
WARPGROUP_DIVISIONS = ("arith.divui", "arith.divsi", "arith.floordivsi", "arith.ceildivui",
                       "arith.ceildivsi")


def _constant(value: ir.Value) -> int | None:
    """An integer constant of index or integer type, or None."""
    known = constant_index(value)
    if known is not None:
        return known
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    attr = owner.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _keeps_only_warpgroup(op: ir.Operation) -> bool:
    """`x / c` with c a multiple of 128, or `x >> s` with s >= 7."""
    if len(op.operands) != 2:
        return False
    amount = _constant(op.operands[1])
    if amount is None:
        return False
    if op.name in WARPGROUP_DIVISIONS:
        return amount > 0 and amount % WARPGROUP_SIZE == 0
    if op.name == "arith.shrui":
        return amount >= WARPGROUP_SIZE.bit_length() - 1
    return False


def _flows(op: ir.Operation) -> list[tuple[ir.Value, ir.Value]]:
    """(source, target) pairs of values an op moves into block arguments and results."""
    pairs: list[tuple[ir.Value, ir.Value]] = []
    match op.name:
        case "scf.for":
            body = op.regions[0].blocks[0]
            inits = list(op.operands)[3:]
            carried = list(body.arguments)[1:]
            yielded = list(_terminator(body).operands)
            for init, arg, out, result in zip(inits, carried, yielded, op.results, strict=True):
                pairs += [(init, arg), (out, arg), (out, result)]
        case "scf.if":
            for region in op.regions:
                if len(region.blocks):
                    yielded = _terminator(region.blocks[0]).operands
                    pairs += list(zip(yielded, op.results, strict=True))
    return pairs


def _terminator(block: ir.Block) -> ir.Operation:
    ops = list(block.operations)
    return ops[-1].operation


def thread_varying(func: ir.Operation) -> set[ir.Value]:
    """Every value of `func` that may differ between threads of one warpgroup."""
    varying: set[ir.Value] = set()
    ops: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(collect, ir.WalkOrder.PRE_ORDER)
    changed = True
    while changed:
        changed = False
        for op in ops:
            derived = any(v in varying for v in op.operands) and not _keeps_only_warpgroup(op)
            targets = list(op.results) if op.name in THREAD_SOURCES or derived else []
            targets += [t for s, t in _flows(op) if s in varying]
            for value in targets:
                if value not in varying:
                    varying.add(value)
                    changed = True
    return varying


def divergent_condition(op: ir.Operation, varying: set[ir.Value]) -> ir.Value | None:
    """The thread-varying value that decides whether (or how often) `op`'s regions run."""
    match op.name:
        case "scf.if":
            deciding = [op.operands[0]]
        case "scf.for":
            deciding = list(op.operands)[:3]
        case "scf.while":
            before = op.regions[0].blocks[0]
            deciding = list(_terminator(before).operands)[:1]
        case "scf.index_switch":
            deciding = [op.operands[0]]
        case _:
            deciding = []
    return next((v for v in deciding if v in varying), None)
