"""What every smalti command-line tool shares: argument errors, exit codes, input and output.

Exit codes: 0 success, 1 bad input (diagnostics printed), 2 internal error (a bug in smalti).
No tool lets a Python traceback escape unless `SMALTI_DEBUG=1` is set.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from jaxlib.mlir import ir

from smalti.dialect.diagnostics import format_location
from smalti.passes.registry import PassInfo

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INTERNAL = 2


class ToolError(Exception):
    """Bad input or arguments: the message is printed as `TOOL: error: MESSAGE`, exit status 1."""


class ToolArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise ToolError (exit 1) instead of exiting with 2."""

    def error(self, message: str) -> NoReturn:
        raise ToolError(f"{message} (see --help)")


def read_input(path: str) -> str:
    """The text of `path`, or of stdin for `-`; ToolError when it cannot be read."""
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ToolError(f"cannot read {path}: {_reason(error)}") from None


def write_output(path: str | None, data: str | bytes) -> None:
    """Write `data` to `path` atomically (temp file + rename), or to stdout for None / `-`."""
    if path is None or path == "-":
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(data)
            sys.stdout.flush()
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temp = tempfile.mkstemp(prefix=".smalti-", dir=directory)
    except OSError as error:
        raise ToolError(f"cannot write {path}: {_reason(error)}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, path)
    except OSError as error:
        os.unlink(temp)
        raise ToolError(f"cannot write {path}: {_reason(error)}") from None


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _reason(error: Exception) -> str:
    """The human part of an OSError (its strerror) or the exception text."""
    return getattr(error, "strerror", None) or str(error)


def run_tool(tool: str, body: Callable[[Sequence[str]], int], argv: Sequence[str] | None) -> int:
    """Run `body(argv)` and turn every way it can end into an exit code, never a traceback."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return body(args)
    except ToolError as error:
        print(f"{tool}: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{tool}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_FAILURE
    except Exception as error:  # a bug in smalti: say so, with where it happened
        print(f"{tool}: internal error: {describe_internal_error(error)}", file=sys.stderr)
        if os.environ.get("SMALTI_DEBUG") == "1":
            traceback.print_exception(error, file=sys.stderr)
        else:
            print(f"{tool}: note: set SMALTI_DEBUG=1 for the Python traceback", file=sys.stderr)
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's exit flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def describe_internal_error(error: BaseException) -> str:
    """`Type: message`, plus the pass that was running and the op it was looking at, if known."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    pass_name, location = _context_from_traceback(error)
    where = []
    if pass_name:
        where.append(f"in pass '{pass_name}'")
    if location:
        where.append(f"at op {location}")
    return text + (f" ({' '.join(where)})" if where else "")


def _context_from_traceback(error: BaseException) -> tuple[str | None, str | None]:
    """The innermost running smalti pass and the location of the innermost op in a local."""
    pass_name: str | None = None
    location: str | None = None
    frames = list(traceback.walk_tb(error.__traceback__))
    for frame, _ in reversed(frames):
        local_values = list(frame.f_locals.items())
        if location is None and _is_smalti_frame(frame.f_code.co_filename):
            for _, value in sorted(local_values, key=lambda item: item[0] != "op"):
                if isinstance(value, ir.OpView | ir.Operation):
                    try:
                        found = format_location(value.operation.location)
                    except Exception:  # an erased op: look further out
                        continue
                    if found != "<unknown>":
                        location = found
                        break
        if pass_name is None:
            info = frame.f_locals.get("info")
            if isinstance(info, PassInfo):
                pass_name = info.argument
    return pass_name, location


def _is_smalti_frame(filename: str) -> bool:
    """Frames of smalti's own code, outside the drivers (whose ops are not the culprit)."""
    normalized = filename.replace(os.sep, "/")
    return "/smalti/" in normalized and "/smalti/tools/" not in normalized
