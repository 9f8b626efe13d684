"""Holding smalti's outputs against the reference's bounds.

Where the reference is exact (bound 0), smalti must give the same value: NaN where it has
NaN, the same infinity, and (for floats) the same number up to the sign of zero. Where the
bound is finite, |smalti - reference| must be within it; where it is infinite (undefined
behaviour, or a discontinuity within the error), anything goes.
"""

from __future__ import annotations

import numpy as np

from tests.differential.dtypes import DTYPES
from tests.differential.numerics import Tracked
from tests.differential.program import Program

SHOWN = 4  # elements quoted per mismatching output


def compare_outputs(program: Program, got: list[np.ndarray], want: list[Tracked]) -> str | None:
    """None if every output is within bounds, else a description (first line: a summary)."""
    problems = []
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for ref, array, tracked in zip(program.outputs, got, want, strict=True):
        dtype = DTYPES[ref.dtype]
        if array.shape != tracked.val.shape or array.dtype != dtype.numpy:
            problems.append(f"{ref.name}: got {array.dtype}{list(array.shape)}, expected "
                            f"{dtype.numpy}{list(tracked.val.shape)}")
            continue
        bad = wrong_elements(array, tracked, dtype.is_float)
        if bad.any():
            where = np.argwhere(bad)[:SHOWN]
            quoted = ", ".join(f"[{','.join(map(str, i))}] got {_number(array[tuple(i)])} want "
                               f"{_number(tracked.val[tuple(i)])}"
                               + (f" ±{tracked.err[tuple(i)]:.3g}" if tracked.err[tuple(i)] else "")
                               for i in where)
            problems.append(f"{ref.name} ({ref.dtype}{list(ref.shape)}): {int(bad.sum())} of "
                            f"{bad.size} elements wrong: {quoted}")
    if not problems:
        return None
    return f"wrong numbers in {len(problems)} output(s)\n" + "\n".join(problems)


def _number(x: object) -> str:
    """An element as a plain Python number (no numpy type names)."""
    value = x.item() if hasattr(x, "item") else x
    return repr(float(value)) if not isinstance(value, bool | int) else repr(value)


def wrong_elements(got: np.ndarray, want: Tracked, is_float: bool) -> np.ndarray:
    """Per element: outside the bound."""
    err = want.err
    checked = np.isfinite(err)
    if not is_float:
        return checked & (got != want.val)
    with np.errstate(invalid="ignore"):  # (casting fp8 NaNs)
        x, y = got.astype(np.float64), want.val.astype(np.float64)
    both_nan = np.isnan(x) & np.isnan(y)
    with np.errstate(invalid="ignore"):
        same = (x == y) | both_nan  # +0 == -0; the same infinity
        within = np.abs(x - y) <= err  # False on NaN
    ok = np.where(err == 0, same, same | within)
    return checked & ~ok


__all__ = ["compare_outputs", "wrong_elements"]
