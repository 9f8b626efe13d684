"""The roles of a warp-specialised kernel: its `smalti.warpgroup_region` ops, where they may
stand, which warpgroups they name, and the register budgets they ask for."""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_ops

from smalti.dialect.diagnostics import Diagnostic, DiagnosticError, error_at
from smalti.dialect.launch import kernel_warpgroups
from smalti.dialect.ops_warpgroup import (
    REGISTER_FILE,
    WarpgroupRegionOp,
    entry_register_budget,
)
from smalti.tiling import WARPGROUP_SIZE


@dataclass(frozen=True)
class Role:
    """One warpgroup_region: the warpgroups that run it and their register budget."""

    op: ir.Operation
    warpgroups: tuple[int, ...]
    max_registers: int | None


def _note(op: ir.Operation, message: str) -> Diagnostic:
    return Diagnostic(op.location, message, "note")


def kernel_roles(func: ir.Operation) -> tuple[Role, ...]:
    """The roles of kernel `func`, checked: top level of the body, nothing but roles and
    the return after the first budgeted one, existing warpgroups, at most one role each."""
    count = kernel_warpgroups(func)
    roles: list[Role] = []
    owner: dict[int, Role] = {}
    budgeted: Role | None = None
    for op in func.regions[0].blocks[0].operations:
        op = op.operation
        view = op.opview
        if not isinstance(view, WarpgroupRegionOp):
            if budgeted is not None and not isinstance(view, func_ops.ReturnOp):
                raise error_at(op, "follows a warpgroup_region that set a register budget; "
                                   "warpgroups run with different budgets after it, so only "
                                   "more warpgroup_regions may follow",
                               (_note(budgeted.op, "the budget is set here"),))
            continue
        role = Role(op, view.warpgroups, view.max_registers)
        for w in role.warpgroups:
            if w >= count:
                raise error_at(op, f"names warpgroup {w}, but the kernel has {count} "
                                   "(smalti.warpgroups)")
            if w in owner:
                raise error_at(op, f"warpgroup {w} already runs another warpgroup_region; "
                                   "each warpgroup takes one role",
                               (_note(owner[w].op, "the other region"),))
            owner[w] = role
        if role.max_registers is not None and budgeted is None:
            budgeted = role
        roles.append(role)
    return tuple(roles)


def misplaced_region(func: ir.Operation) -> DiagnosticError | None:
    """A warpgroup_region nested anywhere but the kernel body's top level."""
    body = func.regions[0].blocks[0]
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        if isinstance(op.opview, WarpgroupRegionOp) and op.parent.operation != func:
            found.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    del body
    if not found:
        return None
    return error_at(found[0], "must stand at the top level of a kernel body (not nested in "
                              "control flow or another warpgroup_region): its warpgroups "
                              "branch to it from the kernel's start")


def register_budgets(func: ir.Operation, roles: tuple[Role, ...]) -> tuple[int, ...] | None:
    """Per warpgroup, its register budget (a role's max_registers, else the entry budget),
    when some role sets one; DiagnosticError if they overflow the register file."""
    if all(role.max_registers is None for role in roles):
        return None
    count = kernel_warpgroups(func)
    entry = entry_register_budget(count)
    budgets = [entry] * count
    for role in roles:
        for w in role.warpgroups:
            budgets[w] = role.max_registers if role.max_registers is not None else entry
    total = sum(budgets) * WARPGROUP_SIZE
    if total > REGISTER_FILE:
        notes = tuple(_note(role.op, f"warpgroup(s) {list(role.warpgroups)}: "
                                     f"{role.max_registers} registers per thread")
                      for role in roles if role.max_registers is not None)
        raise error_at(func, f"register budgets {budgets} x {WARPGROUP_SIZE} threads need "
                             f"{total} registers, more than the {REGISTER_FILE} of the "
                             "register file", notes)
    return tuple(budgets)
