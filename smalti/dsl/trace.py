"""The tracing state: which kernel is being traced, and how ops are emitted at the user's line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dsl.locations import user_error, user_location


@dataclass(frozen=True)
class TraceInfo:
    """What the kernel body may ask about its launch while it is traced."""

    name: str
    grid: tuple[int, int, int]
    warpgroups: int


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
    active()
    return ir.Operation.create(name, results=list(results), operands=list(operands),
                               attributes=attributes or {}, regions=regions,
                               loc=user_location() if location is None else location).operation


def emit_value(name: str, operands: Sequence[ir.Value], result: ir.Type,
               attributes: dict[str, ir.Attribute] | None = None,
               location: ir.Location | None = None) -> ir.Value:
    """Emit a one-result op and return its result."""
    return emit(name, operands, [result], attributes, location=location).results[0]
