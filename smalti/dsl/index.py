"""Traced index scalars (block ids, loop counters and arithmetic on them) kept in linear form,
so that `ref[i:i + 128]` has a static length even when `i` is only known on the GPU."""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dsl.locations import user_error
from smalti.dsl.trace import active, emit_value


class IndexOperand(abc.ABC):  # noqa: B024 (a marker: types register, nothing to implement)
    """Types whose reflected operators take an Index (smalti.dsl.array.Array, which splats
    it to its shape and dtype: `n > sd.iota(...)`, `s * x`), so Index's own operators leave
    them to those. array.py registers Array (it imports this module: this one cannot name
    it)."""


def _defers_to_arrays(method: Callable[[Index, Any], Any]) -> Callable[[Index, Any], Any]:
    """An operator of Index that returns NotImplemented for an IndexOperand."""

    @functools.wraps(method)
    def operator(self: Index, other: Any) -> Any:
        if isinstance(other, IndexOperand):
            return NotImplemented
        return method(self, other)

    return operator


@dataclass(frozen=True, eq=False)
class Index:
    """constant + sum(coefficient * atom): atoms are index values of the kernel."""

    terms: tuple[tuple[ir.Value, int], ...]
    constant: int = 0

    @staticmethod
    def of(value: ir.Value, least: int | None = None, greatest: int | None = None,
           what: str = "") -> Index:
        """The index value `value`; with `least`/`greatest`, the values it can take
        (`what` says what it is, for messages), noted for the kernel being traced."""
        if least is not None and greatest is not None:
            active().ranges[value] = (least, greatest, what)
        return Index(((value, 1),))

    def bounds(self) -> tuple[int, int] | None:
        """The least and greatest values the index can take, when every atom's are known."""
        ranges = active().ranges
        least = greatest = self.constant
        for value, coefficient in self.terms:
            if value not in ranges:
                return None
            low, high, _ = ranges[value]
            ends = (coefficient * low, coefficient * high)
            least, greatest = least + min(ends), greatest + max(ends)
        return least, greatest

    def extreme(self, largest: bool) -> str:
        """The atom values at which the index is largest (or least), for messages."""
        ranges = active().ranges
        parts = []
        for value, coefficient in self.terms:
            low, high, what = ranges[value]
            parts.append(f"{what} = {high if (coefficient > 0) == largest else low}")
        return ", ".join(parts)

    @property
    def static(self) -> int | None:
        """The value if it is known while tracing."""
        return None if self.terms else self.constant

    def _combine(self, other: IndexLike, sign: int) -> Index:
        other = as_index(other, "an index")
        terms = list(self.terms)
        for value, coefficient in other.terms:
            for k, (existing, c) in enumerate(terms):
                if existing == value:
                    terms[k] = (existing, c + sign * coefficient)
                    break
            else:
                terms.append((value, sign * coefficient))
        return Index(tuple((v, c) for v, c in terms if c), self.constant + sign * other.constant)

    @_defers_to_arrays
    def __add__(self, other: IndexLike) -> Index:
        return self._combine(other, 1)

    __radd__ = __add__

    @_defers_to_arrays
    def __sub__(self, other: IndexLike) -> Index:
        return self._combine(other, -1)

    @_defers_to_arrays
    def __rsub__(self, other: IndexLike) -> Index:
        return as_index(other, "an index")._combine(self, -1)

    def __neg__(self) -> Index:
        return Index(tuple((v, -c) for v, c in self.terms), -self.constant)

    @_defers_to_arrays
    def __mul__(self, other: IndexLike) -> Index:
        other = as_index(other, "an index")
        if other.static is not None:
            factor = other.static
            return Index(tuple((v, c * factor) for v, c in self.terms if c * factor),
                         self.constant * factor)
        if self.static is not None:
            return other * self.static
        product = emit_value(arith.MulIOp, [self.materialize(), other.materialize()],
                             ir.IndexType.get())
        mine, theirs = self.bounds(), other.bounds()
        if mine is None or theirs is None:
            return Index.of(product)
        ends = [a * b for a in mine for b in theirs]
        return Index.of(product, min(ends), max(ends), "a product of indices")

    __rmul__ = __mul__

    @_defers_to_arrays
    def __floordiv__(self, other: IndexLike) -> Index:
        """Floor division, as Python's `//` (rounds toward minus infinity)."""
        other = as_index(other, "an index")
        return self._quotient(other) if other.static != 1 else self

    @_defers_to_arrays
    def __rfloordiv__(self, other: IndexLike) -> Index:
        return as_index(other, "an index") // self

    @_defers_to_arrays
    def __mod__(self, other: IndexLike) -> Index:
        """The remainder of `//`, as Python's `%`: it takes the divisor's sign, so `k % stages`
        is a stage in [0, stages)."""
        other = as_index(other, "an index")
        if other.static is not None:
            _nonzero(other.static)
            if self.static is not None:
                return Index((), self.static % other.static)
        mine, theirs = self.bounds(), other.bounds()
        if other.static is not None and mine is not None and (
                mine[0] // other.static == mine[1] // other.static):
            return self - other.static * (mine[0] // other.static)  # one quotient: linear
        positive = theirs is not None and theirs[0] > 0
        if positive and mine is not None and mine[0] >= 0:
            value = emit_value(arith.RemUIOp, [self.materialize(), other.materialize()],
                               ir.IndexType.get())
        else:
            value = (self - self._quotient(other) * other).materialize()
        if theirs is None or theirs[0] <= 0 <= theirs[1]:
            return Index.of(value)
        least, greatest = (0, theirs[1] - 1) if positive else (theirs[0] + 1, 0)
        if positive and mine is not None and mine[0] >= 0:
            greatest = min(greatest, mine[1])
        return Index.of(value, least, greatest, "a remainder of indices")

    @_defers_to_arrays
    def __rmod__(self, other: IndexLike) -> Index:
        return as_index(other, "an index") % self

    def _quotient(self, other: Index) -> Index:
        """floor(self / other) as an atom (or a Python int when both are known)."""
        if other.static is not None:
            _nonzero(other.static)
        if self.static is not None and other.static is not None:
            return Index((), self.static // other.static)
        mine, theirs = self.bounds(), other.bounds()
        if (mine is not None and other.static is not None
                and mine[0] // other.static == mine[1] // other.static):
            return Index((), mine[0] // other.static)  # the quotient is known while tracing
        # floor division of a non-negative index by a positive one is unsigned division,
        # which ptxas makes a shift for powers of two (the signed one needs fix-ups)
        unsigned = mine is not None and mine[0] >= 0 and theirs is not None and theirs[0] > 0
        value = emit_value(arith.DivUIOp if unsigned else arith.FloorDivSIOp,
                           [self.materialize(), other.materialize()], ir.IndexType.get())
        if mine is None or theirs is None or theirs[0] <= 0 <= theirs[1]:
            return Index.of(value)  # unknown, or a divisor that may be 0 or change sign
        ends = [a // b for a in mine for b in theirs]
        return Index.of(value, min(ends), max(ends), "a quotient of indices")

    def _compare(self, other: IndexLike, how: str) -> Predicate | bool:
        """`self how other`: a Python bool when both are known, else a traced Predicate."""
        other = as_index(other, "an index")
        difference = (self - other).static
        if difference is not None:
            return _STATIC_COMPARISONS[how](difference)
        attributes = {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                      CMPI_PREDICATES[how])}
        return Predicate(emit_value(arith.CmpIOp, [self.materialize(), other.materialize()],
                                    ir.IntegerType.get_signless(1), attributes))

    @_defers_to_arrays
    def __lt__(self, other: IndexLike) -> Predicate | bool:
        return self._compare(other, "lt")

    @_defers_to_arrays
    def __le__(self, other: IndexLike) -> Predicate | bool:
        return self._compare(other, "le")

    @_defers_to_arrays
    def __gt__(self, other: IndexLike) -> Predicate | bool:
        return self._compare(other, "gt")

    @_defers_to_arrays
    def __ge__(self, other: IndexLike) -> Predicate | bool:
        return self._compare(other, "ge")

    def __eq__(self, other: object) -> Predicate | bool:  # type: ignore[override]
        if isinstance(other, bool) or not isinstance(other, Index | int):
            return NotImplemented
        return self._compare(other, "eq")

    def __ne__(self, other: object) -> Predicate | bool:  # type: ignore[override]
        if isinstance(other, bool) or not isinstance(other, Index | int):
            return NotImplemented
        return self._compare(other, "ne")

    __hash__ = object.__hash__  # identity, as before == became a traced comparison

    def __index__(self) -> int:
        if self.static is None:
            raise user_error(TypeError, "a traced index (program_id, a loop counter) has no "
                                        "Python value while tracing")
        return self.static

    def materialize(self) -> ir.Value:
        """The index as an MLIR value (ops at the user's current line)."""
        index = ir.IndexType.get()
        total: ir.Value | None = None
        for value, coefficient in self.terms:
            term = value if coefficient == 1 else emit_value(
                arith.MulIOp, [value, constant_index(coefficient)], index)
            total = term if total is None else emit_value(arith.AddIOp, [total, term], index)
        if total is None:
            return constant_index(self.constant)
        if self.constant:
            total = emit_value(arith.AddIOp, [total, constant_index(self.constant)], index)
        return total

    def __repr__(self) -> str:
        return f"Index(<traced>{self.constant:+d})" if self.terms else f"Index({self.constant})"


IndexLike = Index | int

# arith.cmpi eq, ne, slt, sle, sgt, sge
CMPI_PREDICATES = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}
_STATIC_COMPARISONS = {"eq": lambda d: d == 0, "ne": lambda d: d != 0,
                       "lt": lambda d: d < 0, "le": lambda d: d <= 0,
                       "gt": lambda d: d > 0, "ge": lambda d: d >= 0}


@dataclass(frozen=True)
class Predicate:
    """A traced i1 (a comparison of indices): a condition for `smalti.dsl.when`."""

    value: ir.Value

    def __bool__(self) -> bool:
        raise user_error(TypeError, "a comparison of traced indices has no Python value while "
                                    "tracing; branch on it with smalti.dsl.when")


def _nonzero(divisor: int) -> int:
    if divisor == 0:
        raise user_error(ZeroDivisionError, "division of an index by zero")
    return divisor


def as_index(value: object, what: str) -> Index:
    """A Python int or an Index as an Index; a located TypeError otherwise."""
    if isinstance(value, Index):
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise user_error(TypeError, f"expected {what} (a Python int or a traced index), got "
                                    f"{type(value).__name__}")
    return Index((), int(value.__index__()))


def check_stage_index(stage: Index, stages: int, name: str, counter: str) -> None:
    """A located IndexError unless the traced `stage` stays in [0, stages) (the stages of
    ref `name`; `counter` names a loop counter in the modulo the message suggests)."""
    bounds = stage.bounds()
    if bounds is None or bounds[0] < 0 or bounds[1] >= stages:
        reach = ("takes values not known while tracing" if bounds is None else
                 f"ranges over [{bounds[0]}, {bounds[1]}] "
                 f"(at {stage.extreme(bounds[1] >= stages)})")
        raise user_error(IndexError, f"the stage index of {name} {reach}; it must stay in "
                                     f"[0, {stages}): take it modulo the stages "
                                     f"({counter} % {stages})")


def constant_index(value: int) -> ir.Value:
    index = ir.IndexType.get()
    return emit_value(arith.ConstantOp, [], index, {"value": ir.IntegerAttr.get(index, value)})
