"""The smalti-warpgroup pass: check warpgroup semantics and record register budgets.

Warpgroup-collective ops (wgmma, vector loads, stores and arithmetic, reductions,
warpgroup_barrier, TMA stores) must be reached by whole warpgroups: never under control
flow whose condition varies between the threads of a warpgroup. Block-collective ops
(initialize_barrier) must be reached by the whole block: outside warpgroup_regions and
outside any control flow that depends on the thread. Kernels with budgeted roles get
`smalti.register_budgets` (one per warpgroup).
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_ops

from smalti.dialect.diagnostics import Diagnostic, DiagnosticError, error_at
from smalti.dialect.launch import is_kernel
from smalti.dialect.ops_warpgroup import WarpgroupRegionOp
from smalti.warpgroup.collective import block_collective, warpgroup_collective
from smalti.warpgroup.roles import kernel_roles, misplaced_region, register_budgets
from smalti.warpgroup.uniformity import divergent_condition, thread_varying

REGISTER_BUDGETS_ATTR = "smalti.register_budgets"


def check_warpgroups(module: ir.Operation) -> None:
    """Check every kernel of `module`; annotate budgets; one DiagnosticError for all."""
    diagnostics: list[Diagnostic] = []
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        try:
            if is_kernel(op):
                _check_kernel(op)
            elif isinstance(op.opview, func_ops.FuncOp):
                _check_plain_function(op)
        except DiagnosticError as error:
            diagnostics.extend(error.diagnostics)
    if diagnostics:
        raise DiagnosticError(diagnostics)


def _check_plain_function(func: ir.Operation) -> None:
    """warpgroup_regions only make sense in kernels; the collectives are checked anyway."""
    for op in _ops(func):
        if isinstance(op.opview, WarpgroupRegionOp):
            raise error_at(op, "must be in a kernel (a func.func marked smalti.kernel)")
    _check_collectives(func)


def _check_kernel(func: ir.Operation) -> None:
    misplaced = misplaced_region(func)
    if misplaced is not None:
        raise misplaced
    roles = kernel_roles(func)
    _check_collectives(func)
    budgets = register_budgets(func, roles)
    if budgets is not None:
        with func.context:
            func.attributes[REGISTER_BUDGETS_ATTR] = ir.DenseI64ArrayAttr.get(list(budgets))


def _ops(func: ir.Operation) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops


def _enclosing(op: ir.Operation, func: ir.Operation) -> list[ir.Operation]:
    """The ops whose regions hold `op`, innermost first, up to (not including) `func`."""
    chain = []
    parent = op.parent
    while parent is not None and parent.operation != func:
        chain.append(parent.operation)
        parent = parent.operation.parent
    return chain


def _check_collectives(func: ir.Operation) -> None:
    varying = thread_varying(func)
    errors: list[Diagnostic] = []
    reported: set[ir.Operation] = set()  # one error per divergent op: its first collective
    for op in _ops(func):
        whole_warpgroup, whole_block = warpgroup_collective(op), block_collective(op)
        if not (whole_warpgroup or whole_block):
            continue
        for parent in _enclosing(op, func):
            condition = divergent_condition(parent, varying)
            if condition is not None and parent in reported:
                break
            if condition is not None:
                reported.add(parent)
                scope = "the whole block" if whole_block else "whole warpgroups"
                errors.extend(error_at(op, f"must be reached by {scope}, but it is under "
                                           "control flow that depends on the thread index", (
                    Diagnostic(parent.location, f"'{parent.name}' branches on a value that "
                                                "differs between threads of a warpgroup",
                               "note"),)).diagnostics)
                break
            if whole_block and isinstance(parent.opview, WarpgroupRegionOp):
                errors.extend(error_at(op, "must be reached by the whole block, but it is in "
                                           "a warpgroup_region that only some warpgroups run",
                                       (Diagnostic(parent.location, "the region", "note"),)
                                       ).diagnostics)
                break
    if errors:
        raise DiagnosticError(errors)
