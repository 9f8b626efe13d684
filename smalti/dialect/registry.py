"""Rules keyed by op class: the registries of inference rules, lowering rules and DSL
entries all work this way, so an op is found by its class, never by a name typed again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from jaxlib.mlir import ir

T = TypeVar("T")


def op_class(op: ir.Operation | ir.OpView) -> type[ir.OpView]:
    """The OpView class parsed ops of `op`'s name come back as (ir.OpView if none)."""
    return type(op.operation.opview)


class OpRegistry(Generic[T]):
    """One `T` (a rule) per op class; registering a class twice is an error."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[type[ir.OpView], T] = {}

    def register(self, *classes: type[ir.OpView]) -> Callable[[T], T]:
        """Decorator: `entry` serves every op class in `classes`."""

        def register(entry: T) -> T:
            for cls in classes:
                if not (isinstance(cls, type) and issubclass(cls, ir.OpView)
                        and cls is not ir.OpView):
                    raise TypeError(f"{self.what} are keyed by op classes, got {cls!r}")
                if cls in self._entries:
                    raise ValueError(f"two {self.what} for {cls.OPERATION_NAME}")
                self._entries[cls] = entry
            return entry

        return register

    def get(self, op: ir.Operation | ir.OpView) -> T | None:
        """The entry for `op`'s class, or None."""
        return self._entries.get(op_class(op))

    def of(self, cls: type[ir.OpView]) -> T | None:
        """The entry registered for op class `cls`, or None."""
        return self._entries.get(cls)

    def __contains__(self, cls: type[ir.OpView]) -> bool:
        return cls in self._entries

    def __iter__(self) -> Iterator[type[ir.OpView]]:
        return iter(self._entries)
