"""Warp specialisation: `@warpgroup_region(warpgroups=0, registers=40)` over a function traces
it into a `smalti.warpgroup_region` that only those warpgroups of the kernel run, starting
with `setmaxnreg` to `registers` per thread when given.

    @sd.kernel(..., warpgroups=3)
    def body(...):
        @sd.warpgroup_region(warpgroups=0, registers=40)
        def producer():
            ...  # TMA loads

        @sd.warpgroup_region(warpgroups=(1, 2), registers=232)
        def consumers():
            ...  # wgmma
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_ops

from smalti.dialect.ops_warpgroup import WarpgroupRegionOp, budget_problem
from smalti.dsl.locations import SourcePosition, user_error, user_position
from smalti.dsl.trace import TraceInfo, active, create, dsl_entry


@dataclass(frozen=True)
class Role:
    """One traced warpgroup_region: who runs it, its budget, the user's line of it, its op."""

    warpgroups: tuple[int, ...]
    registers: int | None
    where: SourcePosition
    op: ir.Operation


@dsl_entry(WarpgroupRegionOp)
def warpgroup_region(warpgroups: int | Sequence[int], *, registers: int | None = None
                     ) -> Callable[[Callable[[], None]], None]:
    """Decorator: trace the decorated function (no arguments, no result) into a region that
    only `warpgroups` (an int or a tuple of ints) of this kernel run, at the top level of the
    kernel body; `registers` (a multiple of 8 in [24, 256]) is their per-thread budget."""
    info = active()
    where = user_position()
    if info.warpgroups < 2:
        raise user_error(ValueError, f"warpgroup_region needs a kernel of several warpgroups "
                                     f"(@sd.kernel(..., warpgroups=N)); kernel {info.name} "
                                     f"has {info.warpgroups}")
    group = _warpgroups(warpgroups, info)
    if registers is not None:
        if isinstance(registers, bool) or not isinstance(registers, int):
            raise user_error(TypeError, "warpgroup_region's registers must be an int, got "
                                        f"{type(registers).__name__}")
        problem = budget_problem(registers)
        if problem is not None:
            raise user_error(ValueError, f"warpgroup_region: {problem}")
    if not _at_top_level():
        raise user_error(ValueError, "warpgroup_region must stand at the top level of the "
                                     "kernel body, not inside fori, when or another "
                                     "warpgroup_region: its warpgroups branch to it from the "
                                     "kernel's start")
    for role in info.roles:
        shared = sorted(set(group) & set(role.warpgroups))
        if shared:
            raise user_error(ValueError, f"warpgroup {shared[0]} already runs the "
                                         f"warpgroup_region at {role.where}; each warpgroup "
                                         "takes one role")

    def decorate(body: Callable[[], None]) -> None:
        if not callable(body):
            raise user_error(TypeError, "warpgroup_region decorates a function, got "
                                        f"{type(body).__name__}")
        op = create(WarpgroupRegionOp, warpgroups=group, max_registers=registers,
                    location=where.location()).operation
        info.roles.append(Role(group, registers, where, op))
        with ir.InsertionPoint(op.regions[0].blocks.append()):
            if body() is not None:
                raise user_error(TypeError, "a function decorated with warpgroup_region must "
                                            "return None (a region has no results)")
        return None

    return decorate


def _warpgroups(warpgroups: object, info: TraceInfo) -> tuple[int, ...]:
    """The warpgroups named, checked against the kernel's count."""
    group = (warpgroups,) if isinstance(warpgroups, int) else warpgroups
    if not isinstance(group, tuple | list) or not group or any(
            isinstance(w, bool) or not isinstance(w, int) for w in group):
        raise user_error(TypeError, "warpgroup_region's warpgroups must be an int or a "
                                    f"non-empty tuple of ints, got {warpgroups!r}")
    for w in group:
        if not 0 <= w < info.warpgroups:
            raise user_error(ValueError, f"warpgroup_region names warpgroup {w}, but kernel "
                                         f"{info.name} has {info.warpgroups} (0 to "
                                         f"{info.warpgroups - 1})")
    if len(set(group)) != len(group):
        raise user_error(ValueError, f"warpgroup_region names a warpgroup twice: {list(group)}")
    return tuple(group)


def _at_top_level() -> bool:
    """Whether ops are being traced straight into the kernel's body (no region around)."""
    return isinstance(ir.InsertionPoint.current.block.owner.operation.opview, func_ops.FuncOp)
