"""`smalti-opt`: parse MLIR, run passes, print the IR (mlir-opt's conventions and flags)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.context import make_context
from smalti.dialect.diagnostics import DiagnosticError
from smalti.passes.canonicalize import ALIASES
from smalti.passes.registry import REGISTRY, build_pass_manager
from smalti.tools.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    ToolArgumentParser,
    ToolError,
    read_input,
    run_tool,
    write_output,
)
from smalti.tools.diagnostics_check import report_chunk
from smalti.tools.explain_schedule import explain_module
from smalti.tools.mlir_input import parse_chunk
from smalti.tools.reported import (
    DiagnosticCollector,
    Reported,
    from_smalti,
    merge_smalti_notes,
)
from smalti.tools.split import Chunk, join_outputs, split_input

TOOL = "smalti-opt"

# Upstream MLIR passes offered as flags besides the registry's (all exist in jaxlib's MLIR).
UPSTREAM_PASSES: dict[str, str] = {
    "canonicalize": "Canonicalize operations (upstream MLIR)",
    "cse": "Eliminate common sub-expressions (upstream MLIR)",
    "inline": "Inline function calls (upstream MLIR)",
    "symbol-dce": "Remove dead symbols (upstream MLIR)",
    "sccp": "Sparse conditional constant propagation (upstream MLIR)",
    "loop-invariant-code-motion": "Hoist loop invariants (upstream MLIR)",
}

_PIPELINE_PARSER_PREFIX = re.compile(r"MLIR Textual PassPipeline Parser:\d+:\d+: error: ")


@dataclass(frozen=True)
class PrintOptions:
    """How output IR (and --mlir-print-ir-after-all dumps) is printed."""

    debug_info: bool = False
    generic: bool = False


@dataclass(frozen=True)
class ChunkResult:
    """One chunk processed: its printed IR (None when it failed) and what it reported."""

    output: str | None
    diagnostics: tuple[Reported, ...]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; one flag per registered pass and per offered upstream pass."""
    parser = ToolArgumentParser(
        prog=TOOL,
        description="Parse an MLIR file, run smalti and upstream passes on it, print the IR.",
        epilog="Pass flags run in the order given. Exit status: 0 success, 1 bad input "
               "(diagnostics on stderr, nothing written), 2 internal error "
               "(SMALTI_DEBUG=1 shows the traceback).",
    )
    parser.add_argument("input", nargs="?", default="-", metavar="FILE",
                        help="input .mlir file ('-' or absent: stdin)")
    parser.add_argument("-o", dest="output", metavar="OUT",
                        help="write the output here (atomically) instead of stdout")
    parser.add_argument("--pass-pipeline", metavar="PIPELINE",
                        help="a textual pipeline, e.g. 'builtin.module(smalti-verify,cse)'")
    parser.add_argument("--split-input-file", action="store_true",
                        help="process each '// -----'-separated chunk on its own")
    parser.add_argument("--verify-diagnostics", action="store_true",
                        help="check diagnostics against '// expected-error {{...}}' "
                             "annotations instead of printing them")
    parser.add_argument("--mlir-print-ir-after-all", action="store_true",
                        help="print the IR after every pass on stderr")
    parser.add_argument("--mlir-print-debuginfo", action="store_true",
                        help="print locations with the IR")
    parser.add_argument("--mlir-print-op-generic", action="store_true",
                        help="print ops in their generic form")
    parser.add_argument("--smalti-explain-schedule", action="store_true",
                        help="print on stderr, per kernel, the cost model's verdict on its "
                             "recorded 'smalti.schedule' (and its own choice when that "
                             "differs); the IR is unchanged")
    passes = parser.add_argument_group("passes (run in command-line order)")
    for name, description in [*((n, i.description) for n, i in REGISTRY.items()),
                              *((n, help_) for n, (_, help_) in ALIASES.items()),
                              *UPSTREAM_PASSES.items()]:
        passes.add_argument(f"--{name}", dest="passes", action="append_const", const=name,
                            help=description)
    return parser


def pipeline_from_args(args: argparse.Namespace) -> str:
    """The pipeline to run: --pass-pipeline, or the pass flags in order (never both)."""
    if args.pass_pipeline is not None and args.passes:
        raise ToolError("--pass-pipeline cannot be combined with individual pass flags "
                        f"({', '.join('--' + p for p in args.passes)})")
    if args.pass_pipeline is not None:
        return args.pass_pipeline
    return f"builtin.module({','.join(args.passes or [])})"


def check_pipeline(pipeline: str, context: ir.Context) -> None:
    """Raise ToolError when `pipeline` names an unknown pass or is malformed."""
    try:
        build_pass_manager(pipeline, context)
    except ValueError as error:
        raise ToolError(f"invalid pass pipeline {pipeline!r}: {_mlir_reason(str(error))} "
                        "(see --help for smalti's passes)") from None


def _mlir_reason(text: str) -> str:
    """The first line of a pipeline-parser message, less its `...Parser:1:1: error:` prefix."""
    first = text.strip().splitlines()[0] if text.strip() else text
    return _PIPELINE_PARSER_PREFIX.sub("", first)


def process_chunk(chunk: Chunk, source_name: str, context: ir.Context,
                  collector: DiagnosticCollector, pipeline: str,
                  options: PrintOptions, print_ir_after_all: bool = False,
                  explain_schedule: bool = False) -> ChunkResult:
    """Parse one chunk, run `pipeline` on it, and print it (or report why not)."""
    collector.take()
    module = parse_chunk(chunk, source_name, context)
    if module is None:
        return ChunkResult(None, tuple(collector.take()))
    if explain_schedule:
        report = explain_module(module)
        if report:
            print(report, file=sys.stderr)
    pm, failures = build_pass_manager(pipeline, context)
    if print_ir_after_all:
        with context:
            pm.enable_ir_printing(print_after_all=True, enable_debug_info=options.debug_info,
                                  print_generic_op_form=options.generic)
    try:
        pm.run(module)
    except ir.MLIRError:
        smalti_diagnostics = [d for e in failures.errors for d in e.diagnostics]
        return ChunkResult(None, tuple(merge_smalti_notes(collector.take(),
                                                          smalti_diagnostics)))
    text = module.get_asm(enable_debug_info=options.debug_info,
                          print_generic_op_form=options.generic)
    remarks = [from_smalti(remark) for remark in failures.remarks]
    return ChunkResult(text, (*collector.take(), *remarks))


def _has_error(result: ChunkResult) -> bool:
    return result.output is None or any(d.severity == "error" for d in result.diagnostics)


def _run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    source_name = "<stdin>" if args.input == "-" else args.input
    text = read_input(args.input)
    context = make_context()
    pipeline = pipeline_from_args(args)
    check_pipeline(pipeline, context)
    options = PrintOptions(args.mlir_print_debuginfo, args.mlir_print_op_generic)
    chunks = split_input(text) if args.split_input_file else [Chunk(text)]

    outputs: list[str] = []
    failed = False
    with DiagnosticCollector(context) as collector:
        for chunk in chunks:
            try:
                result = process_chunk(chunk, source_name, context, collector, pipeline,
                                       options, args.mlir_print_ir_after_all,
                                       args.smalti_explain_schedule)
            except DiagnosticError as error:  # raised outside a pass: still located input
                result = ChunkResult(None, tuple(merge_smalti_notes([], error.diagnostics)))
            failed |= report_chunk(chunk, source_name, result.diagnostics,
                                   verify=args.verify_diagnostics, failed=_has_error(result))
            outputs.append(result.output or "")
    if failed:
        return EXIT_FAILURE
    write_output(args.output, join_outputs(outputs))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `smalti-opt`; returns the exit status."""
    return run_tool(TOOL, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
