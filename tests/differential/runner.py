"""Running one program through smalti and holding it against the numpy reference.

.mlir programs: `smalti.runtime.compile_mlir`, then `run_simulated`; DSL programs: their
source is executed (compiled under the file name it came from, so located errors name its
lines) and the kernel is called under `jax.jit` on the CPU. Every compiled kernel's PTX goes
through ptxas when it is installed (the DSL's compile cache does that itself).

Outcomes (`Outcome.kind`): "match"; "limitation" (a located refusal the allowlist names as a
documented limitation); and the findings: "mismatch" (wrong numbers), "refusal" (a located
refusal of another kind), "crash" (any other exception), "ptxas" (ptxas rejected the PTX).
"""

from __future__ import annotations

import contextlib
import io
import re
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np

from smalti.dialect.diagnostics import DiagnosticError
from smalti.ptx.toolchain import PtxasError
from smalti.runtime import compile_mlir, run_simulated
from smalti.runtime.cache import ptxas_available
from tests.differential.allowlist import KNOWN_FINDINGS, LIMITATIONS
from tests.differential.compare import compare_outputs
from tests.differential.dtypes import DTYPES
from tests.differential.emit_dsl import emit_dsl
from tests.differential.emit_mlir import emit_mlir
from tests.differential.inputs import make_inputs
from tests.differential.prints import compare_prints, split_records
from tests.differential.program import Program
from tests.differential.reference import run_reference
from tests.differential.refusals import judge_refusal
from tests.differential.typecheck import value_types

FINDINGS = ("mismatch", "refusal", "crash", "ptxas")
LOCATED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): ")
_NUMBERS = re.compile(r"\d+")
_LOCATION = re.compile(r"[^\s:'\"]+:\d+:\d+:?")


@dataclass(frozen=True)
class Outcome:
    """What happened to one program: `kind` (see the module docstring), a one-line `detail`,
    the full `message`, and `signature`: the finding class the minimiser keeps reproducing."""

    kind: str
    detail: str = ""
    message: str = ""
    known: str = ""  # the known finding (allowlist.KNOWN_FINDINGS) this one is, if any

    @property
    def is_finding(self) -> bool:
        return self.kind in FINDINGS

    @property
    def signature(self) -> str:
        return f"{self.kind}: {normalise(self.detail)}"


def normalise(text: str) -> str:
    """A message without locations, numbers and value names: the class of a finding."""
    text = _LOCATION.sub("LOC", text)
    text = re.sub(r"%[\w#]+", "%v", text)
    return _NUMBERS.sub("N", text)


def source_text(program: Program) -> str:
    return emit_mlir(program) if program.kind == "mlir" else emit_dsl(program)


def run_program(program: Program, source: str | None = None,
                filename: str = "differential_program", judge: bool = True) -> Outcome:
    """Compile and run `program` (or `source`, its text as a finding file holds it) and
    compare with the reference. `judge`: search for a layout assignment where layout
    inference refused (tests.differential.refusals)."""
    try:
        text = source_text(program) if source is None else source
        batch = [make_inputs(program, k) for k in range(max(program.batch, 1))]
        inputs = batch[0]
        want_prints: dict = {}
        wants = [run_reference(program, x, prints=want_prints if k == 0 else None)
                 for k, x in enumerate(batch)]
        types = value_types(program)
    except Exception as error:  # the tester's own bug: never blame smalti for it
        raise RuntimeError(f"tester failed on program {program.seed}") from error
    suffix = ".mlir" if program.kind == "mlir" else ".py"
    name = filename if filename.endswith(suffix) else filename + suffix
    printed: list[str] = []
    stderr = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(stderr):
            warnings.simplefilter("ignore")  # spills (KernelQualityWarning) are not findings
            if program.kind == "mlir":
                zeros = [np.zeros(r.shape, DTYPES[r.dtype].numpy) for r in program.outputs]
                scalars = [] if program.dynamic is None else [np.int32(program.dynamic)]
                gots = [_run_mlir(text, name, inputs, zeros, scalars, printed.append)]
            else:
                gots = _run_dsl(text, name, batch, program.batch > 0)
                printed = split_records(stderr.getvalue())
    except DiagnosticError as error:
        outcome = _refusal(str(error), located=not str(error).startswith("<unknown>"))
        if outcome.kind == "limitation" and judge:
            outcome = _second_opinion(outcome, program, text, name, inputs)
        return outcome
    except PtxasError as error:
        return _classify(Outcome("ptxas", _first_line(str(error)), str(error)))
    except (TypeError, ValueError, IndexError) as error:
        message = str(error)
        if program.kind == "dsl" and LOCATED.match(message) and name in message.split(":")[0]:
            return _refusal(message, located=True)
        return _crash(error)
    except Exception as error:
        return _crash(error)
    mismatches = [compare_outputs(program, got, want) for got, want in zip(gots, wants,
                                                                           strict=True)]
    if program.batch:
        mismatches = [m if m is None else f"{m.splitlines()[0]} (batch element {k} of "
                      f"{program.batch} under jax.vmap)\n{m}" for k, m in enumerate(mismatches)]
    else:  # (under vmap, the batch elements' prints come in no promised order)
        mismatches.append(compare_prints(program, types, printed, want_prints))
    mismatch = next((m for m in mismatches if m is not None), None)
    if mismatch is None:
        return Outcome("match")
    outcome = Outcome("mismatch", mismatch.splitlines()[0], mismatch)
    for known in KNOWN_FINDINGS:
        if known.model is not None and all(
                known.model(program, x, got) for x, got in zip(batch, gots, strict=True)):
            return Outcome(outcome.kind, outcome.detail, outcome.message, known.name)
    return _classify(outcome)


def _run_mlir(text: str, name: str, inputs: list[np.ndarray], outputs: list[np.ndarray],
              scalars: list[np.generic], print_fn: Callable[[str], None]) -> list[np.ndarray]:
    compiled = compile_mlir(text, name)
    if ptxas_available():
        compiled.assemble()
    arrays = run_simulated(compiled, *inputs, *outputs, *scalars, print_fn=print_fn)
    return arrays[len(inputs):len(inputs) + len(outputs)]


def _run_dsl(source: str, name: str, batch: list[list[np.ndarray]], vmap: bool
             ) -> list[list[np.ndarray]]:
    """The outputs for each input set: one jitted call, or one jax.vmap over the sets."""
    namespace: dict = {"__name__": "differential_kernel"}
    exec(compile(source, name, "exec"), namespace)
    kernel = namespace["kernel"]
    if not vmap:
        outputs = [np.asarray(o) for o in jax.jit(kernel)(*batch[0])]
        jax.effects_barrier()  # a kernel without outputs prints after the call returns
        return [outputs]
    stacked = [np.stack(arrays) for arrays in zip(*batch, strict=True)]
    outputs = [np.asarray(o) for o in jax.jit(jax.vmap(kernel, axis_size=len(batch)))(*stacked)]
    jax.effects_barrier()
    return [[o[k] for o in outputs] for k in range(len(batch))]


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _refusal(message: str, located: bool) -> Outcome:
    """A located DiagnosticError (or DSL error): a limitation if the allowlist names it."""
    headline = _first_line(message)
    body = LOCATED.sub("", headline)
    if not located:
        return _classify(Outcome("refusal", f"unlocated: {body}", message))
    for limitation in LIMITATIONS:
        if limitation.pattern.search(message):
            return Outcome("limitation", f"{limitation.name}: {body}", message)
    return _classify(Outcome("refusal", body, message))


def _second_opinion(outcome: Outcome, program: Program, text: str, name: str,
                    inputs: list[np.ndarray]) -> Outcome:
    """A refusal for want of a layout is a limitation only if no assignment exists."""
    if program.kind == "dsl":
        namespace: dict = {"__name__": "differential_kernel"}
        exec(compile(text, name, "exec"), namespace)
        specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs]
        text = namespace["kernel"].trace(*specs).mlir
    verdict = judge_refusal(text, name)
    if verdict.kind == "satisfiable":
        return _classify(Outcome("refusal", f"refused a satisfiable program: "
                                            f"{LOCATED.sub('', _first_line(outcome.message))}",
                                 f"{outcome.message}\nan assignment: {verdict.detail}"))
    name_, _, rest = outcome.detail.partition(": ")
    return Outcome("limitation", f"{name_} ({verdict.kind}): {rest}", outcome.message)


def _crash(error: BaseException) -> Outcome:
    summary = f"{type(error).__name__}: {_first_line(str(error))}"
    return _classify(Outcome("crash", summary, "".join(traceback.format_exception(error))))


def _classify(outcome: Outcome) -> Outcome:
    """A finding the allowlist knows (filed, with a regression test) is marked as such."""
    for known in KNOWN_FINDINGS:
        if known.kind == outcome.kind and known.pattern is not None \
                and known.pattern.search(f"{outcome.detail}\n{outcome.message}"):
            return Outcome(outcome.kind, outcome.detail, outcome.message, known.name)
    return outcome


__all__ = ["FINDINGS", "Outcome", "normalise", "run_program", "source_text"]

