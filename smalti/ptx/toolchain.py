"""Runs NVIDIA's ptxas and nvdisasm (from the pip wheels) on PTX text and cubins."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from smalti.ptx.ptxas_log import PtxasReport, parse_ptxas_log

__all__ = [
    "CompileResult", "PtxasCrash", "PtxasError", "PtxasReport", "ToolchainError", "compile_ptx",
    "disassemble", "find_tool", "sass_opcode_counts",
]

_ENV_VARS = {"ptxas": "SMALTI_PTXAS", "nvdisasm": "SMALTI_NVDISASM",
             "cuobjdump": "SMALTI_CUOBJDUMP"}
_WHEELS = {"ptxas": "nvidia-cuda-nvcc", "nvdisasm": "nvidia-cuda-nvdisasm",
           "cuobjdump": "nvidia-cuda-cuobjdump"}
_PTXAS_ERROR = re.compile(r"ptxas (?:\S+), line (\d+); error\s*:\s*(.*)")
_PTXAS_FATAL = re.compile(r"ptxas fatal\s*:\s*(.*)")
_FUNCTION_HEADER = re.compile(r"\.(?:entry|func)\s*(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
_SASS_LINE = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", re.M)
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE,
                  signal.SIGKILL}


class ToolchainError(RuntimeError):
    """A CUDA tool is missing or failed."""


class PtxasError(ToolchainError):
    """ptxas rejected the PTX (or timed out)."""


class PtxasCrash(PtxasError):
    """ptxas died from a signal instead of reporting an error: a ptxas bug, not ours alone."""


@dataclass(frozen=True)
class CompileResult:
    """A cubin, the ptxas -v log, and the per-function resource reports read from it."""

    cubin: bytes
    log: str
    reports: dict[str, PtxasReport] = field(hash=False)


def find_tool(name: str) -> Path:
    """The `ptxas`, `nvdisasm` or `cuobjdump` to run: $SMALTI_<NAME>, else the pip wheel's."""
    if name not in _ENV_VARS:
        raise ToolchainError(f"unknown tool {name!r}; known: {', '.join(_ENV_VARS)}")
    env_var = _ENV_VARS[name]
    override = os.environ.get(env_var)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ToolchainError(f"{env_var}={override} is not an executable file")
        return path
    try:
        import nvidia  # the namespace package the NVIDIA wheels install into
    except ImportError:
        search: list[str] = []
    else:
        search = list(nvidia.__path__)
    for root in search:
        for candidate in sorted(Path(root).glob(f"cu*/bin/{name}"), reverse=True):
            if os.access(candidate, os.X_OK):
                return candidate
    raise ToolchainError(
        f"{name} not found: install the {_WHEELS[name]} wheel (pip install smalti pulls it in)"
        f" or set {env_var} to its path")


def compile_ptx(ptx: str, *, arch: str = "sm_90a", timeout_s: float = 120,
                kernel_hint: str | None = None) -> CompileResult:
    """Assemble PTX with `ptxas -v --warn-on-spills`; raise PtxasError quoting bad lines."""
    ptxas = find_tool("ptxas")
    with tempfile.TemporaryDirectory(prefix="smalti-ptxas-") as directory:
        source = Path(directory) / "kernel.ptx"
        output = Path(directory) / "kernel.cubin"
        source.write_text(ptx)
        command = [str(ptxas), "-v", "--warn-on-spills", f"-arch={arch}", source.name,
                   "-o", output.name]
        what = _describe(ptx, kernel_hint)
        try:
            done = subprocess.run(command, cwd=directory, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise PtxasError(f"ptxas timed out after {timeout_s} s compiling {what}") from None
        log = done.stdout
        signal_number = _signal_of(done.returncode)
        if signal_number is not None:
            name = signal.Signals(signal_number).name
            raise PtxasCrash(f"ptxas crashed (killed by {name}) compiling {what}; this is a "
                             f"ptxas bug, not a rejection of the PTX\n{log.strip()}")
        if done.returncode != 0:
            raise PtxasError(_rejection_message(ptx, log, kernel_hint))
        cubin = output.read_bytes()
    return CompileResult(cubin, log, parse_ptxas_log(log, kernel_hint))


def disassemble(cubin: bytes, *, timeout_s: float = 120) -> str:
    """The SASS text of a cubin's code sections, as nvdisasm prints it."""
    nvdisasm = find_tool("nvdisasm")
    with tempfile.TemporaryDirectory(prefix="smalti-nvdisasm-") as directory:
        path = Path(directory) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            done = subprocess.run([str(nvdisasm), "-c", str(path)], capture_output=True,
                                  text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"nvdisasm timed out after {timeout_s} s") from None
    if done.returncode != 0:
        raise ToolchainError(f"nvdisasm failed (exit {done.returncode}): "
                             f"{done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def sass_opcode_counts(sass: str) -> Counter[str]:
    """How often each SASS mnemonic (HGMMA, UTMALDG, LDG, FFMA, ...) occurs, modifiers dropped."""
    return Counter(_SASS_LINE.findall(sass))


def _signal_of(returncode: int) -> int | None:
    """The signal that killed the process, directly (<0) or as a shell reports it (128+N)."""
    if returncode < 0:
        return -returncode
    if returncode > 128 and (returncode - 128) in _CRASH_SIGNALS:
        return returncode - 128
    return None


def _kernel_at(ptx: str, line: int) -> str | None:
    """The function whose header comes last before `line` of `ptx`."""
    name = None
    for match in _FUNCTION_HEADER.finditer(ptx):
        if ptx.count("\n", 0, match.start()) + 1 > line:
            break
        name = match.group(1)
    return name


def _describe(ptx: str, kernel_hint: str | None) -> str:
    if kernel_hint is not None:
        return f"kernel '{kernel_hint}'"
    names = [m.group(1) for m in _FUNCTION_HEADER.finditer(ptx)]
    return "kernel " + ", ".join(f"'{n}'" for n in names) if names else "PTX with no kernel"


def _rejection_message(ptx: str, log: str, kernel_hint: str | None) -> str:
    lines = ptx.split("\n")
    messages = []
    for match in _PTXAS_ERROR.finditer(log):
        number, message = int(match.group(1)), match.group(2).strip()
        kernel = _kernel_at(ptx, number) or kernel_hint or "?"
        quoted = lines[number - 1].strip() if 0 < number <= len(lines) else "<no such line>"
        messages.append(f"ptxas rejected kernel '{kernel}': {message}\n"
                        f"  line {number}: {quoted}")
    if not messages:
        fatal = [m.group(1).strip() for m in _PTXAS_FATAL.finditer(log)]
        detail = "; ".join(fatal) or log.strip() or "no message"
        messages.append(f"ptxas rejected {_describe(ptx, kernel_hint)}: {detail}")
    return "\n".join(messages)
