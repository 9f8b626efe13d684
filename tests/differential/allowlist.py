"""Refusals that are documented limitations, and findings already filed.

A located refusal (a DiagnosticError, or a DSL error at the program's line) is acceptable
only when one of `LIMITATIONS` matches its message; each names where the limitation is
documented. Any other refusal is a finding.

`KNOWN_FINDINGS` are findings filed with a regression test in tests/differential/findings/
(xfail until their owners fix them): a run counts them apart, so a batch fails only on new
findings. Remove an entry when its regression test passes (the test is strict: it fails as
soon as the bug is fixed, which is the reminder).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.differential.program import Program


@dataclass(frozen=True)
class Limitation:
    name: str
    pattern: re.Pattern[str]
    documented: str  # where: README line, docs/dsl.md section, issue


# A model of a known wrong-numbers bug: (program, inputs, smalti's outputs) -> whether the
# bug explains every wrong number.
Model = Callable[[Program, list[np.ndarray], list[np.ndarray]], bool]


@dataclass(frozen=True)
class KnownFinding:
    name: str
    kind: str  # the outcome kind: mismatch, refusal, crash, ptxas
    pattern: re.Pattern[str] | None  # searched in the outcome's full message
    regression: str  # the regression test (tests/differential/findings/...)
    model: Model | None = None  # mismatches: the bug, modelled


LIMITATIONS: list[Limitation] = [
    # Layout inference inserts relayouts (in registers, shuffles or through shared memory)
    # where no single assignment exists; what it refuses is a conflict that no relayout
    # between the ops resolves: a slice through the tiles of every layout, a shape no layout
    # fits, a distributed value cast to a splat, i1 values needed in two layouts. README,
    # "Layout inference": "no relayout resolves it".
    Limitation("conflict no relayout resolves",
               re.compile(r"op cannot be given a layout: .*; no relayout resolves it"),
               "README 'Layout inference' (conflicts no relayout resolves)"),
    # docs/dsl.md, "sd.SMEM": a block may use 227 KiB of shared memory.
    Limitation("shared memory over 227 KiB",
               re.compile(r"beyond the 232448 bytes of shared memory a block may use"),
               "docs/dsl.md 'sd.SMEM' (more than 227 KiB raises)"),
]

KNOWN_FINDINGS: list[KnownFinding] = []

__all__ = ["KNOWN_FINDINGS", "LIMITATIONS", "KnownFinding", "Limitation"]
