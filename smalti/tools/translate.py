"""`smalti-translate`: MLIR to PTX (the default pipeline, then lowering), cubin or SASS."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir

from smalti.dialect.context import make_context
from smalti.dialect.diagnostics import DiagnosticError
from smalti.dialect.kernel import ARCHES, DEFAULT_ARCH
from smalti.passes.registry import DEFAULT_PIPELINE
from smalti.ptx.toolchain import ToolchainError, disassemble
from smalti.runtime.compiler import CompiledModule, compile_module
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
from smalti.tools.mlir_input import parse_chunk
from smalti.tools.reported import DiagnosticCollector, Reported, merge_smalti_notes
from smalti.tools.split import Chunk, join_outputs, split_input

TOOL = "smalti-translate"


@dataclass(frozen=True)
class Translated:
    """One chunk translated: its compiled module (None when it failed) and what was reported."""

    compiled: CompiledModule | None
    diagnostics: tuple[Reported, ...]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of smalti-translate."""
    parser = ToolArgumentParser(
        prog=TOOL,
        description="Translate a smalti MLIR file (after the default pipeline: "
                    f"{DEFAULT_PIPELINE}) to PTX, a cubin (ptxas) or SASS (nvdisasm).",
        epilog="Exit status: 0 success, 1 bad input (diagnostics on stderr, nothing written), "
               "2 internal error (SMALTI_DEBUG=1 shows the traceback).",
    )
    parser.add_argument("input", nargs="?", default="-", metavar="FILE",
                        help="input .mlir file ('-' or absent: stdin)")
    parser.add_argument("--to", choices=("ptx", "cubin", "sass"), default="ptx",
                        help="what to emit (default: ptx)")
    parser.add_argument("--arch", choices=tuple(ARCHES), default=DEFAULT_ARCH,
                        help="the PTX .target and ptxas architecture: sm_90a (Hopper) or "
                             f"sm_100a (Blackwell) (default: {DEFAULT_ARCH})")
    parser.add_argument("-o", dest="output", metavar="OUT",
                        help="write the output here (atomically); required for --to=cubin")
    parser.add_argument("--kernel", metavar="NAME",
                        help="emit only this kernel of the module")
    parser.add_argument("--split-input-file", action="store_true",
                        help="translate each '// -----'-separated chunk on its own "
                             "(not with --to=cubin)")
    parser.add_argument("--verify-diagnostics", action="store_true",
                        help="check diagnostics against '// expected-error {{...}}' "
                             "annotations instead of printing them")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print ptxas's report (registers, spills, warnings) on stderr")
    return parser


def translate_chunk(chunk: Chunk, source_name: str, context: ir.Context,
                    collector: DiagnosticCollector, arch: str, kernel: str | None
                    ) -> Translated:
    """The compiled module of one chunk of MLIR source (None when it failed), and what was
    reported on the way."""
    collector.take()
    module = parse_chunk(chunk, source_name, context)
    if module is None:
        return Translated(None, tuple(collector.take()))
    try:
        compiled = compile_module(module, arch=arch, kernel=kernel)
    except DiagnosticError as error:
        return Translated(None, tuple(merge_smalti_notes(collector.take(), error.diagnostics)))
    except KeyError as error:
        raise ToolError(error.args[0]) from None
    return Translated(compiled, tuple(collector.take()))


def _run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.to == "cubin" and args.output in (None, "-"):
        raise ToolError("--to=cubin writes a binary file: give it with -o OUT")
    if args.to == "cubin" and args.split_input_file:
        raise ToolError("--split-input-file makes one output per chunk: use --to=ptx or sass")
    source_name = "<stdin>" if args.input == "-" else args.input
    text = read_input(args.input)
    chunks = split_input(text) if args.split_input_file else [Chunk(text)]
    context = make_context()
    outputs: list[str] = []
    failed = False
    with DiagnosticCollector(context) as collector:
        for chunk in chunks:
            result = translate_chunk(chunk, source_name, context, collector, args.arch,
                                     args.kernel)
            failed |= report_chunk(chunk, source_name, result.diagnostics,
                                   verify=args.verify_diagnostics, failed=result.compiled is None)
            outputs.append(result.compiled)
    if failed:
        return EXIT_FAILURE
    match args.to:
        case "ptx":
            write_output(args.output, join_outputs([c.ptx if c else "" for c in outputs]))
        case "sass":
            sass = [_disassemble(_assemble(c, args.verbose)) if c else "" for c in outputs]
            write_output(args.output, join_outputs(sass))
        case "cubin":
            write_output(args.output, _assemble(outputs[0], args.verbose))
    return EXIT_OK


def _assemble(compiled: CompiledModule, verbose: bool) -> bytes:
    """The cubin ptxas makes; ptxas errors become ToolError (they name the PTX line)."""
    try:
        result = compiled.assemble()
    except ToolchainError as error:  # PtxasError (naming the PTX line), missing ptxas, ...
        raise ToolError(str(error)) from None
    if verbose and result.log:
        print(result.log.rstrip("\n"), file=sys.stderr)
    return result.cubin


def _disassemble(cubin: bytes) -> str:
    """SASS text of a cubin; nvdisasm failures become ToolError."""
    try:
        return disassemble(cubin)
    except ToolchainError as error:
        raise ToolError(str(error)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `smalti-translate`; returns the exit status."""
    return run_tool(TOOL, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
