"""`smalti-translate`: MLIR to PTX (the default pipeline, then lowering), cubin or SASS."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

from smalti.dialect.context import make_context
from smalti.dialect.diagnostics import DiagnosticError
from smalti.passes.registry import DEFAULT_PIPELINE, run_pipeline
from smalti.tools.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    ToolArgumentParser,
    ToolError,
    read_input,
    run_tool,
    write_output,
)
from smalti.tools.mlir_input import parse_chunk
from smalti.tools.reported import DiagnosticCollector, Reported, merge_smalti_notes
from smalti.tools.split import Chunk

TOOL = "smalti-translate"


class _InputErrors(Exception):
    """Located diagnostics about the input; printed one per line, exit status 1."""

    def __init__(self, diagnostics: list[Reported]) -> None:
        super().__init__("\n".join(d.format() for d in diagnostics))
        self.diagnostics = diagnostics


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
    parser.add_argument("--arch", default="sm_90a",
                        help="the PTX .target and ptxas architecture (default: sm_90a)")
    parser.add_argument("-o", dest="output", metavar="OUT",
                        help="write the output here (atomically); required for --to=cubin")
    parser.add_argument("--kernel", metavar="NAME",
                        help="emit only this kernel of the module")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print ptxas's report (registers, spills, warnings) on stderr")
    return parser


def translate_to_ptx(text: str, source_name: str, arch: str, kernel: str | None) -> str:
    """PTX text for an MLIR source; raises _InputErrors or ToolError on bad input."""
    from smalti.lowering import lower_module
    from smalti.ptx import print_module

    context = make_context()
    with DiagnosticCollector(context) as collector:
        module = parse_chunk(Chunk(text), source_name, context, collector)
        if module is None:
            raise _InputErrors(collector.take())
        try:
            run_pipeline(module, DEFAULT_PIPELINE)
            ptx_module = lower_module(module)
        except DiagnosticError as error:
            raise _InputErrors(merge_smalti_notes(collector.take(), error.diagnostics)) from None
        for warning in collector.take():
            print(warning.format(), file=sys.stderr)
    if kernel is not None:
        try:
            ptx_module = dataclasses.replace(ptx_module, kernels=(ptx_module.kernel(kernel),))
        except KeyError as error:
            raise ToolError(error.args[0]) from None
    ptx_module = dataclasses.replace(ptx_module, target=arch)
    return print_module(ptx_module)


def _run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.to == "cubin" and args.output in (None, "-"):
        raise ToolError("--to=cubin writes a binary file: give it with -o OUT")
    source_name = "<stdin>" if args.input == "-" else args.input
    text = read_input(args.input)
    try:
        ptx = translate_to_ptx(text, source_name, args.arch, args.kernel)
    except _InputErrors as error:
        for diagnostic in error.diagnostics:
            print(diagnostic.format(), file=sys.stderr)
        return EXIT_FAILURE
    match args.to:
        case "ptx":
            write_output(args.output, ptx)
        case "cubin" | "sass":
            cubin = _compile(ptx, args.arch, args.verbose)
            if args.to == "cubin":
                write_output(args.output, cubin)
            else:
                write_output(args.output, _disassemble(cubin))
    return EXIT_OK


def _compile(ptx: str, arch: str, verbose: bool) -> bytes:
    """The cubin ptxas makes of `ptx`; ptxas errors become ToolError (they name PTX lines)."""
    from smalti.ptx.toolchain import ToolchainError, compile_ptx

    try:
        result = compile_ptx(ptx, arch=arch)
    except ToolchainError as error:  # PtxasError (naming the PTX line), missing ptxas, ...
        raise ToolError(str(error)) from None
    if verbose and result.log:
        print(result.log.rstrip("\n"), file=sys.stderr)
    return result.cubin


def _disassemble(cubin: bytes) -> str:
    """SASS text of a cubin; nvdisasm failures become ToolError."""
    from smalti.ptx.toolchain import ToolchainError, disassemble

    try:
        return disassemble(cubin)
    except ToolchainError as error:
        raise ToolError(str(error)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `smalti-translate`; returns the exit status."""
    return run_tool(TOOL, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
