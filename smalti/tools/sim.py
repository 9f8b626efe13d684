"""`smalti-sim`: run one PTX kernel on the CPU simulator with buffers from `.npy` files."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence

import numpy as np

from smalti.ptx.parser import PtxParseError
from smalti.sim import SimError, run_ptx
from smalti.tools.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    ToolArgumentParser,
    ToolError,
    read_input,
    run_tool,
    write_output,
)
from smalti.tools.sim_args import (
    SCALAR_TYPES,
    BufferArg,
    KernelArg,
    TensorMapArg,
    check_distinct_names,
    output_buffers,
    parse_args,
    parse_dims,
    parse_dtype_overrides,
)

TOOL = "smalti-sim"

_ARGS_HELP = f"""\
kernel arguments, in the kernel's parameter order:
  FILE.npy     a device buffer, loaded with allow_pickle=False (C order)
  TYPE:VALUE   a scalar, TYPE one of {', '.join(SCALAR_TYPES)};
               integers in any Python base (u32:5, s64:-1, b32:0xff), floats as
               decimals or PTX bit patterns (f32:1.5, f32:0f3FC00000, f64:0d3FF8000000000000)
  FILE.json    a CUtensorMap parameter: {{"tensor_map": {{"buffer": "a.npy", "data_type":
               "FLOAT16", "global_dim": [...], "global_strides": [...], "box_dim": [...],
               "element_strides": [...], "swizzle": "128B", ...}}}}, cuTensorMapEncodeTiled's
               arguments innermost first (strides in bytes, rank-1 of them; 0 for a unit
               dimension); "buffer" is relative to the JSON file and shares the array of a
               buffer argument naming the same file (else it is loaded, and written out too)

bfloat16 and float8 buffers: numpy saves ml_dtypes arrays with a raw dtype (|V2 for
bfloat16, |V1 for float8), so give their type: --dtype FILE=bfloat16 for one file, or
--dtype bfloat16 for every raw buffer. FILE=TYPE also reinterprets any array of the same
element size (e.g. uint16 bits as bfloat16). Written back, such arrays are |V2 again:
np.load(path).view(ml_dtypes.bfloat16).

Without --out-dir, a summary of every buffer after the run is printed and nothing is
written. Exit status: 0 success, 1 bad arguments or a simulator error, 2 internal error."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of smalti-sim."""
    parser = ToolArgumentParser(
        prog=TOOL,
        description="Run a PTX kernel on smalti's CPU simulator.",
        epilog=_ARGS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ptx", metavar="FILE.ptx", help="the PTX module ('-': stdin)")
    parser.add_argument("args", nargs="*", metavar="ARG", help="kernel arguments (see below)")
    parser.add_argument("--kernel", required=True, metavar="NAME", help="the .entry to run")
    parser.add_argument("--grid", required=True, metavar="X[,Y[,Z]]", help="blocks in the grid")
    parser.add_argument("--block", required=True, metavar="X[,Y[,Z]]",
                        help="threads in a block")
    parser.add_argument("--cluster", metavar="X[,Y[,Z]]",
                        help="CTAs per cluster (default: the kernel's .reqnctapercluster, "
                             "which smalti writes from 'smalti.cluster'; else 1)")
    parser.add_argument("--shared-bytes", type=_non_negative, default=0, metavar="N",
                        help="dynamic shared memory per block (default 0)")
    parser.add_argument("--dtype", action="append", default=[], metavar="[FILE=]TYPE",
                        help="element type of a buffer file (a.npy=bfloat16) or of every "
                             "raw |V buffer (bfloat16)")
    parser.add_argument("--out-dir", metavar="DIR",
                        help="write every buffer after the run as DIR/<its file name>")
    return parser


def _non_negative(text: str) -> int:
    value = int(text, 0)
    if value < 0:
        raise ValueError(text)
    return value


def summarize(arg: BufferArg) -> str:
    """One line about a buffer after the run: shape, dtype, and its value range."""
    array = arg.array
    shape = "x".join(map(str, array.shape)) or "scalar"
    head = f"{arg.name}: {array.dtype.name}[{shape}]"
    if array.size == 0:
        return head + " (empty)"
    if array.dtype.kind == "b":
        return head + f" true={int(np.count_nonzero(array))}"
    values = array.astype(np.float64)
    finite = values[np.isfinite(values)]
    parts = [head]
    if finite.size:
        parts.append(f"min={finite.min():.6g} max={finite.max():.6g} sum={finite.sum():.6g}")
    bad = values.size - finite.size
    if bad:
        parts.append(f"nonfinite={bad}")
    first = ", ".join(f"{v:.6g}" for v in values.reshape(-1)[:4])
    parts.append(f"first=[{first}{', ...' if values.size > 4 else ''}]")
    return " ".join(parts)


def _save(arg: BufferArg, out_dir: str) -> None:
    """Write one buffer as DIR/<file name>.npy, atomically."""
    data = io.BytesIO()
    np.save(data, arg.array, allow_pickle=False)
    write_output(os.path.join(out_dir, arg.name), data.getvalue())


def _simulate(source_name: str, ptx: str, kernel: str, grid: tuple[int, int, int],
              block: tuple[int, int, int], args: list[KernelArg], shared_bytes: int,
              cluster: tuple[int, int, int] | None = None) -> None:
    """Run the kernel; malformed PTX and simulator errors become ToolError."""
    values = [a.array if isinstance(a, BufferArg) else
              a.encoding if isinstance(a, TensorMapArg) else a.value for a in args]
    try:
        run_ptx(ptx, kernel, grid, block, values, shared_bytes=shared_bytes, cluster=cluster)
    except PtxParseError as error:
        raise _PtxSyntaxError(f"{source_name}:{error.line}: error: {error.message}\n"
                              f"  {error.line_text}") from None
    except SimError as error:
        raise ToolError(str(error)) from None


class _PtxSyntaxError(Exception):
    """Malformed PTX, already formatted as `file:line: error: message`."""


def _run(argv: Sequence[str]) -> int:
    parser = build_parser()
    options = parser.parse_intermixed_args(argv)
    grid = parse_dims(options.grid, "grid")
    block = parse_dims(options.block, "block")
    cluster = None if options.cluster is None else parse_dims(options.cluster, "cluster")
    overrides = parse_dtype_overrides(options.dtype)
    args = parse_args(options.args, overrides)
    if options.out_dir is not None:
        check_distinct_names(args)
    ptx = read_input(options.ptx)
    source_name = "<stdin>" if options.ptx == "-" else options.ptx
    try:
        _simulate(source_name, ptx, options.kernel, grid, block, args, options.shared_bytes,
                  cluster)
    except _PtxSyntaxError as error:
        print(error, file=sys.stderr)
        return EXIT_FAILURE
    buffers = output_buffers(args)
    if options.out_dir is None:
        for arg in buffers:
            print(summarize(arg))
        return EXIT_OK
    try:
        os.makedirs(options.out_dir, exist_ok=True)
    except OSError as error:
        raise ToolError(f"cannot create {options.out_dir}: {error.strerror}") from None
    for arg in buffers:
        _save(arg, options.out_dir)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `smalti-sim`; returns the exit status."""
    return run_tool(TOOL, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
