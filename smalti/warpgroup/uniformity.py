"""Which scalar values vary between the threads of a warpgroup.

A value is thread-varying when it is derived from the thread index (`gpu.thread_id`,
`gpu.lane_id`), except through a division (or right shift) that keeps only the warpgroup
index: `%tid / 128` is the same in all 128 threads of a warpgroup. Loop-carried values and
branch results are followed to a fixed point.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu, scf

from smalti.tiling import WARPGROUP_SIZE

THREAD_SOURCES = (gpu.ThreadIdOp, gpu.LaneIdOp)
WARPGROUP_DIVISIONS = (arith.DivUIOp, arith.DivSIOp, arith.FloorDivSIOp, arith.CeilDivUIOp,
                       arith.CeilDivSIOp)


def _constant(value: ir.Value) -> int | None:
    """An integer constant of index or integer type, or None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or not isinstance(owner.operation.opview, arith.ConstantOp):
        return None
    attr = owner.operation.opview.value
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _keeps_only_warpgroup(op: ir.OpView) -> bool:
    """`x / c` with c a multiple of 128, or `x >> s` with s >= 7."""
    if isinstance(op, WARPGROUP_DIVISIONS):
        amount = _constant(op.rhs)
        return amount is not None and amount > 0 and amount % WARPGROUP_SIZE == 0
    if isinstance(op, arith.ShRUIOp):
        amount = _constant(op.rhs)
        return amount is not None and amount >= WARPGROUP_SIZE.bit_length() - 1
    return False


def _flows(op: ir.OpView) -> list[tuple[ir.Value, ir.Value]]:
    """(source, target) pairs of values an op moves into block arguments and results."""
    pairs: list[tuple[ir.Value, ir.Value]] = []
    match op:
        case scf.ForOp():
            yielded = list(_terminator(op.body).operands)
            for init, arg, out, result in zip(op.initArgs, op.inner_iter_args, yielded,
                                              op.results, strict=True):
                pairs += [(init, arg), (out, arg), (out, result)]
        case scf.IfOp():
            for region in (op.thenRegion, op.elseRegion):
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
    ops: list[ir.OpView] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        ops.append(op.operation.opview)
        return ir.WalkResult.ADVANCE

    func.walk(collect, ir.WalkOrder.PRE_ORDER)
    changed = True
    while changed:
        changed = False
        for op in ops:
            derived = (any(v in varying for v in op.operation.operands)
                       and not _keeps_only_warpgroup(op))
            source = isinstance(op, THREAD_SOURCES)
            targets = list(op.operation.results) if source or derived else []
            targets += [t for s, t in _flows(op) if s in varying]
            for value in targets:
                if value not in varying:
                    varying.add(value)
                    changed = True
    return varying


def divergent_condition(op: ir.Operation, varying: set[ir.Value]) -> ir.Value | None:
    """The thread-varying value that decides whether (or how often) `op`'s regions run."""
    match op.opview:
        case scf.IfOp(condition=condition):
            deciding = [condition]
        case scf.ForOp(lowerBound=lower, upperBound=upper, step=step):
            deciding = [lower, upper, step]
        case scf.WhileOp(before=before):
            deciding = list(_terminator(before.blocks[0]).operands)[:1]
        case scf.IndexSwitchOp(arg=argument):
            deciding = [argument]
        case _:
            deciding = []
    return next((v for v in deciding if v in varying), None)
