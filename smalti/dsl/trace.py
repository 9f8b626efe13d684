"""The tracing state: which kernel is being traced, and how ops are emitted at the user's
line: smalti ops through their declared builders (`create`), upstream ops by their OpView
class (`emit`), and the registry of which DSL function reaches each smalti op."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jaxlib.mlir import ir

from smalti.dialect.definition import SmaltiOp
from smalti.dialect.ops_warpgroup import WarpgroupRegionOp
from smalti.dialect.registry import OpRegistry
from smalti.dsl.locations import user_error, user_location

OpT = TypeVar("OpT", bound=SmaltiOp)

DSL_ENTRIES: OpRegistry[Callable[..., Any]] = OpRegistry("DSL entries")
"""The public DSL function (or method) through which users reach each smalti op."""
dsl_entry = DSL_ENTRIES.register


@dataclass(frozen=True)
class TraceInfo:
    """What the kernel body may ask about its launch while it is traced."""

    name: str
    grid: tuple[int, int, int]
    warpgroups: int
    cluster: tuple[int, int, int] = (1, 1, 1)
    devices: int | None = None  # a collective kernel's devices along its mesh axis
    # The warpgroup_regions traced so far (smalti.dsl.regions.Role), to check their use.
    roles: list = field(default_factory=list, compare=False)
    # Where each collective async_copy was traced (smalti.dsl.locations.SourcePosition).
    collective_copies: list = field(default_factory=list, compare=False)
    # What each traced index atom (an index value) can be: (least, greatest, what it is),
    # e.g. (0, 3, "program_id(0)"), so windows are checked against shapes while tracing.
    ranges: dict = field(default_factory=dict, compare=False)
    # The shared memory taken so far (smalti.dsl.smem.SmemStack): where scoped allocations go.
    smem: Any = field(default=None, compare=False)


_ACTIVE: list[TraceInfo] = []


def active() -> TraceInfo:
    """The kernel being traced; a located error if DSL code runs outside a kernel body."""
    if not _ACTIVE:
        raise user_error(RuntimeError, "smalti.dsl operations are only valid inside the body "
                                       "of a @smalti.dsl.kernel function while it is traced")
    return _ACTIVE[-1]


class tracing:
    """Context manager marking `info`'s kernel as the one being traced."""

    def __init__(self, info: TraceInfo) -> None:
        self.info = info

    def __enter__(self) -> TraceInfo:
        _ACTIVE.append(self.info)
        return self.info

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.pop()


def emit(op: type[ir.OpView], operands: Sequence[ir.Value] = (),
         results: Sequence[ir.Type] = (), attributes: dict[str, ir.Attribute] | None = None,
         regions: int = 0, location: ir.Location | None = None) -> ir.Operation:
    """Create an upstream op (arith, vector, scf, gpu: its OpView class) at the insertion
    point, located at `location` (default: the user's current line)."""
    info = active()
    if info.roles:
        _check_roles(info, op, operands)
    return ir.Operation.create(op.OPERATION_NAME, results=list(results),
                               operands=list(operands), attributes=attributes or {},
                               regions=regions,
                               loc=user_location() if location is None else location).operation


def create(op: type[OpT], *, result_types: Sequence[ir.Type] = (),
           location: ir.Location | None = None, **fields: Any) -> OpT:
    """Create smalti op `op` through its declared builder (fields by name) at the insertion
    point, located at `location` (default: the user's current line)."""
    info = active()
    if info.roles:
        operands = [v for f in op.OPERANDS if f.name in fields
                    for v in (fields[f.name] if f.variadic else [fields[f.name]])]
        _check_roles(info, op, operands)
    return op.build(result_types=result_types,
                    loc=user_location() if location is None else location, **fields)


def _check_roles(info: TraceInfo, op: type[ir.OpView], operands: Sequence[ir.Value]
                 ) -> None:
    """Once a warpgroup_region set a register budget, the kernel body's top level holds only
    more regions (warpgroups run with different budgets from there on); and a value traced
    in one region is not there for warpgroups that run another."""
    here = _enclosing_region(ir.InsertionPoint.current.block)
    first = next((role for role in info.roles if role.registers is not None), None)
    if first is not None and here is None and op is not WarpgroupRegionOp:
        raise user_error(ValueError, f"after the warpgroup_region at {first.where}, which sets "
                                     "a register budget, the kernel body may only hold more "
                                     "warpgroup_regions: move this into one of them (or "
                                     "before the first region)")
    for operand in operands:
        owner = operand.owner
        block = owner if isinstance(owner, ir.Block) else owner.operation.block
        source = _enclosing_region(block)
        if source is not None and source != here:
            role = next(role for role in info.roles if role.op == source)
            raise user_error(ValueError, f"uses a value traced inside the warpgroup_region at "
                                         f"{role.where}, which only warpgroup(s) "
                                         f"{list(role.warpgroups)} run; compute it here (or "
                                         "before the regions)")


def _enclosing_region(block: ir.Block) -> ir.Operation | None:
    """The warpgroup_region whose body holds `block` (at any depth), or None."""
    op = block.owner.operation
    while op.parent is not None:
        if isinstance(op.opview, WarpgroupRegionOp):
            return op
        op = op.parent.operation
    return None


def emit_value(op: type[ir.OpView], operands: Sequence[ir.Value], result: ir.Type,
               attributes: dict[str, ir.Attribute] | None = None,
               location: ir.Location | None = None) -> ir.Value:
    """Emit a one-result upstream op and return its result."""
    return emit(op, operands, [result], attributes, location=location).results[0]
