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

from tests.differential.compare import compare_outputs
from tests.differential.program import Program
from tests.differential.reference import run_reference


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


def _flushes_subnormals(program: Program, inputs: list[np.ndarray],
                        got: list[np.ndarray]) -> bool:
    """smalti's numbers are those of a machine that flushes subnormals to zero."""
    if program.kind != "dsl":
        return False
    flushed = run_reference(program, inputs, flush_subnormals=True)
    return compare_outputs(program, got, flushed) is None


LIMITATIONS: list[Limitation] = [
    # Layout inference finds no assignment: some value would need two layouts that differ
    # across warps (a value both reduced or transposed, which take tiled layouts, and
    # reshaped, or cast by layout_cast to a strided one; one 1-D value broadcast along both
    # axes; conflicting layout_casts). README: "Not built yet: relayouts across warps (through
    # shared memory)" and the layout_cast row ("casts across warps are refused");
    # docs/dsl.md, "Not supported yet": "Relayouts across warps".
    Limitation("relayout across warps",
               re.compile(r"op cannot be given a layout: "),
               "README 'Not built yet: relayouts across warps'; docs/dsl.md 'Not supported yet'"),
    # The same limitation met by the lowering, where inference leaves a relayout across warps
    # to it (smalti/lowering/layout.py: "needs shared memory, which is not supported yet").
    Limitation("relayout across warps",
               re.compile(r"op relayout from .* needs shared memory, which is not supported yet"),
               "README 'Not built yet: relayouts across warps (through shared memory)'"),
    # docs/dsl.md, "sd.SMEM": a block may use 227 KiB of shared memory.
    Limitation("shared memory over 227 KiB",
               re.compile(r"beyond the 232448 bytes of shared memory a block may use"),
               "docs/dsl.md 'sd.SMEM' (more than 227 KiB raises)"),
]

KNOWN_FINDINGS: list[KnownFinding] = [
    # On the CPU, a kernel called from JAX runs in the simulator inside XLA's custom call,
    # whose thread runs with x86's FTZ/DAZ set: f32 (and bf16) subnormal results and operands
    # become zeros, where PTX's non-.ftz instructions keep them (run_simulated, outside JAX,
    # gives the subnormals).
    KnownFinding("subnormals flushed on the CPU path", "mismatch", None,
                 "tests/differential/findings/dsl_subnormal_flush.py", _flushes_subnormals),
    # smalti/layout_inference: an insert of one splat into another gets a splat layout
    # (debug_print takes any layout), which the lowering refuses.
    KnownFinding("insert of splats given a splat layout", "refusal",
                 re.compile(r"inserting into a splat changes its elements"),
                 "tests/differential/findings/mlir_insert_into_splat.mlir"),
    # smalti/layout_inference: refusals that the wgmma-tf32-a layout (tiles [64, 4]) would
    # have satisfied (slices by 4 columns): the solver's candidates leave it out.
    KnownFinding("satisfiable with wgmma-tf32-a", "refusal",
                 re.compile(r"refused a satisfiable program(.|\n)*an assignment: .*"
                            r"tiling = \[\[64, 4\]"),
                 "tests/differential/findings/mlir_slice_by_4_columns.mlir"),
]

__all__ = ["KNOWN_FINDINGS", "LIMITATIONS", "KnownFinding", "Limitation"]
