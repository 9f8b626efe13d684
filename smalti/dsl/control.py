"""Control flow: `fori(lo, hi, body, init)` traces `body` once into an scf.for with carried
arrays; `@when(condition)` traces a block into an scf.if (or runs it, or not, when the
condition is a Python bool)."""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import scf

from smalti.dsl.array import Array
from smalti.dsl.index import Index, Predicate, as_index
from smalti.dsl.locations import user_error, user_position
from smalti.dsl.trace import emit

Carry = Array | tuple[Array, ...] | list[Array] | None


def fori(lower: int | Index, upper: int | Index, body: Callable[[Index, Carry], Carry],
         init: Carry = None, *, step: int = 1) -> Carry:
    """for i in range(lower, upper, step): carry = body(i, carry); return carry.

    `i` is a traced Index; `init` is None, an Array or a tuple/list of Arrays, and `body`
    must return the same structure with the same shapes and dtypes (an scf.for)."""
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise user_error(ValueError, f"fori needs a positive Python int step, got {step!r}")
    if not callable(body):
        raise user_error(TypeError, f"fori's body must be callable, got {type(body).__name__}")
    carried = _flatten(init, "fori's init")
    lower, upper = as_index(lower, "a loop bound"), as_index(upper, "a loop bound")
    counter_range = _counter_range(lower, upper, step)
    bounds = [as_index(v, "a loop bound").materialize() for v in (lower, upper, step)]
    values = [a.value for a in carried]
    loop = emit(scf.ForOp, [*bounds, *values], [v.type for v in values], regions=1)
    block = loop.regions[0].blocks.append(ir.IndexType.get(), *[v.type for v in values])
    with ir.InsertionPoint(block):
        arguments = [Array(a) for a in list(block.arguments)[1:]]
        counter = (Index.of(block.arguments[0]) if counter_range is None else
                   Index.of(block.arguments[0], *counter_range,
                            f"the counter of the fori at line {user_position().line}"))
        result = body(counter, _unflatten(init, arguments))
        yielded = _flatten(result, "fori's body result")
        _check_carry(carried, yielded, body)
        emit(scf.YieldOp, [y.value for y in yielded])
    return _unflatten(init, [Array(r) for r in loop.results])


def _counter_range(lower: Index, upper: Index, step: int) -> tuple[int, int] | None:
    """The least and greatest values the counter of `fori(lower, upper, step=step)` takes,
    when the bounds' ranges are known and the loop can run: the greatest is the last
    `lower + k * step` below `upper`'s greatest over `lower`'s values (exact, so that
    windows are never refused for counter values the loop does not reach)."""
    low, high = lower.bounds(), upper.bounds()
    if low is None or high is None or high[1] - 1 < low[0]:
        return None
    last = high[1] - 1
    starts = range(low[0], min(low[1], last) + 1)
    if len(starts) < step:  # some start may not reach `last` exactly: take the largest
        last = max(start + (last - start) // step * step for start in starts)
    return low[0], last


def when(condition: Predicate | bool) -> Callable[[Callable[[], None]], None]:
    """Decorator: run the decorated function (no arguments, no result) only if `condition`.

    A traced condition (a comparison of indices, like `k + 2 < k_tiles`) gives an scf.if;
    a Python bool decides while tracing."""
    if isinstance(condition, bool):
        static = condition
    elif isinstance(condition, Predicate):
        static = None
    else:
        raise user_error(TypeError, "when takes a comparison of traced indices or a Python "
                                    f"bool, got {type(condition).__name__}")

    def decorate(body: Callable[[], None]) -> None:
        if not callable(body):
            raise user_error(TypeError, f"when decorates a function, got {type(body).__name__}")
        if static is not None:
            if static:
                _run_branch(body)
            return None
        branch = emit(scf.IfOp, [condition.value], regions=2)  # type: ignore[union-attr]
        with ir.InsertionPoint(branch.regions[0].blocks.append()):
            _run_branch(body)
            emit(scf.YieldOp)
        return None

    return decorate


def _run_branch(body: Callable[[], None]) -> None:
    if body() is not None:
        raise user_error(TypeError, "a function decorated with when must return None (it "
                                    "cannot produce values yet)")


def _flatten(carry: object, what: str) -> list[Array]:
    match carry:
        case None:
            return []
        case Array():
            return [carry]
        case tuple() | list() if all(isinstance(c, Array) for c in carry):
            return list(carry)
    raise user_error(TypeError, f"{what} must be None, an Array or a tuple of Arrays, got "
                                f"{type(carry).__name__}")


def _unflatten(like: Carry, arrays: list[Array]) -> Carry:
    match like:
        case None:
            return None
        case Array():
            return arrays[0]
        case list():
            return list(arrays)
    return tuple(arrays)


def _check_carry(init: list[Array], result: list[Array], body: Callable) -> None:
    code = getattr(body, "__code__", None)
    where = f" (body at {code.co_filename}:{code.co_firstlineno})" if code else ""
    if len(init) != len(result):
        raise user_error(TypeError, f"fori's body returns {len(result)} arrays for "
                                    f"{len(init)} carried{where}")
    for k, (a, b) in enumerate(zip(init, result, strict=True)):
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            raise user_error(TypeError, f"fori's carried value #{k} enters as "
                                        f"{a.dtype.name}{list(a.shape)} but the body returns "
                                        f"{b.dtype.name}{list(b.shape)}{where}")
