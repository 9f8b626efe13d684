"""Values any layout can hold for free get one copy per user while inference decides.

A constant (or a broadcast scalar, or an iota) costs the same to make in any layout, so two
ops that need it in different layouts do not conflict: each should get its own copy. Users
rarely write it so, and CSE merges the copies they write. Before the equations are built,
`split_per_user` gives every user of such a value a copy of its own (at the original's
place, so it dominates every use); after solving, `merge_equal` folds back the copies that
got the same layout, so the IR grows only where layouts really differ.

Constants that canonicalize made by folding carry no location; a copy takes its user's
location, so that every diagnostic about it points at the user's source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, vector

from smalti.dialect.bindings import file_line_col
from smalti.dialect.ops_compute import IotaOp
from smalti.dialect.registry import OpRegistry

Materialisable = Callable[[ir.OpView], bool]
MATERIALISABLE: OpRegistry[Materialisable] = OpRegistry("values free in any layout")


@MATERIALISABLE.register(arith.ConstantOp)
def _constant(op: arith.ConstantOp) -> bool:
    """A vector constant: each thread writes its elements' values into its registers."""
    return isinstance(op.result.type, ir.VectorType)


@MATERIALISABLE.register(vector.BroadcastOp)
def _broadcast_scalar(op: vector.BroadcastOp) -> bool:
    """A scalar broadcast: every thread holds the scalar already."""
    return not isinstance(op.source.type, ir.VectorType)


@MATERIALISABLE.register(IotaOp)
def _iota(op: IotaOp) -> bool:
    """An iota: each thread computes its elements' indices."""
    del op
    return True


@dataclass
class Copies:
    """One materialisable value's copies, the original first (one per user op)."""

    ops: list[ir.Operation] = field(default_factory=list)


def is_unknown(location: ir.Location) -> bool:
    return file_line_col(location) is None


def split_per_user(func: ir.Operation) -> list[Copies]:
    """Give each user op of every materialisable value in `func` a copy of its own; a copy
    of an op without a location takes its user's. Returns the copies of each value."""
    # ir.Operation hashes change when an op's operands or attributes do: every lookup by op
    # happens here, before anything changes.
    order: dict[ir.Operation, int] = {}
    candidates: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        order[op] = len(order)
        test = MATERIALISABLE.get(op) if len(op.results) == 1 and not op.regions else None
        if test is not None and test(op.opview):
            candidates.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    plans: list[tuple[ir.Operation, list[tuple[ir.Operation, list[int]]]]] = []
    for op in candidates:
        users: dict[ir.Operation, tuple[ir.Operation, list[int]]] = {}
        for use in op.results[0].uses:
            owner = use.owner.operation
            users.setdefault(owner, (owner, []))[1].append(use.operand_number)
        ranked = sorted(users.values(), key=lambda user: order.get(user[0], len(order)))
        if ranked:
            plans.append((op, ranked))
    groups = []
    for op, users in plans:
        located = not is_unknown(op.location)
        copies = Copies([_relocated(op, users[0][0].location)])
        for user, numbers in users[1:]:
            copy = _copy(copies.ops[0], copies.ops[0].location if located else user.location)
            for number in numbers:
                user.operands[number] = copy.results[0]
            copies.ops.append(copy)
        if len(copies.ops) > 1:
            groups.append(copies)
    return groups


def merge_equal(groups: list[Copies], same: Callable[[ir.Value, ir.Value], bool],
                forget: Callable[[ir.Value], None] = lambda value: None) -> None:
    """Fold back the copies whose results `same` says are interchangeable (the same
    layout): their uses take the first such copy, and they are erased (`forget` hears of
    each erased result first, while it can still be looked at)."""
    for group in groups:
        kept: list[ir.Operation] = []
        for op in group.ops:
            result = op.results[0]
            twin = next((k for k in kept if same(k.results[0], result)), None)
            if twin is None:
                kept.append(op)
                continue
            result.replace_all_uses_with(twin.results[0])
            forget(result)
            op.erase()


def _relocated(op: ir.Operation, location: ir.Location) -> ir.Operation:
    """`op`, or a copy at `location` in its place when `op` has no location of its own."""
    if not is_unknown(op.location) or is_unknown(location):
        return op
    copy = _copy(op, location)
    op.results[0].replace_all_uses_with(copy.results[0])
    op.erase()
    return copy


def _copy(op: ir.Operation, location: ir.Location) -> ir.Operation:
    """A copy of a region-free `op` at `location`, just before it."""
    attributes = {name: op.attributes[name] for name in op.attributes}
    return ir.Operation.create(op.name, results=[r.type for r in op.results],
                               operands=list(op.operands), attributes=attributes,
                               loc=location, ip=ir.InsertionPoint(op))
