"""The tracing state: which kernel is being traced, and how ops are emitted at the user's line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jaxlib.mlir import ir

from smalti.dialect.ops_warpgroup import WarpgroupRegionOp
from smalti.dsl.locations import user_error, user_location

REGION_OP = WarpgroupRegionOp.OPERATION_NAME


@dataclass(frozen=True)
class TraceInfo:
    """What the kernel body may ask about its launch while it is traced."""

    name: str
    grid: tuple[int, int, int]
    warpgroups: int
    cluster: tuple[int, int, int] = (1, 1, 1)
    # The warpgroup_regions traced so far (smalti.dsl.regions.Role), to check their use.
    roles: list = field(default_factory=list, compare=False)
    # Where each collective async_copy was traced (smalti.dsl.locations.SourcePosition).
    collective_copies: list = field(default_factory=list, compare=False)


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


def emit(name: str, operands: Sequence[ir.Value] = (), results: Sequence[ir.Type] = (),
         attributes: dict[str, ir.Attribute] | None = None, regions: int = 0,
         location: ir.Location | None = None) -> ir.Operation:
    """Create op `name` at the insertion point, located at `location` (default: the user's
    current line)."""
    info = active()
    if info.roles:
        _check_roles(info, name, operands)
    return ir.Operation.create(name, results=list(results), operands=list(operands),
                               attributes=attributes or {}, regions=regions,
                               loc=user_location() if location is None else location).operation


def _check_roles(info: TraceInfo, name: str, operands: Sequence[ir.Value]) -> None:
    """Once a warpgroup_region set a register budget, the kernel body's top level holds only
    more regions (warpgroups run with different budgets from there on); and a value traced
    in one region is not there for warpgroups that run another."""
    here = _enclosing_region(ir.InsertionPoint.current.block)
    first = next((role for role in info.roles if role.registers is not None), None)
    if first is not None and here is None and name != REGION_OP:
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
    while op.name != "func.func":
        if op.name == REGION_OP:
            return op
        op = op.parent.operation
    return None


def emit_value(name: str, operands: Sequence[ir.Value], result: ir.Type,
               attributes: dict[str, ir.Attribute] | None = None,
               location: ir.Location | None = None) -> ir.Value:
    """Emit a one-result op and return its result."""
    return emit(name, operands, [result], attributes, location=location).results[0]
