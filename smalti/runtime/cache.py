"""Compiled kernels cached by content: in memory and on disk (`SMALTI_CACHE_DIR`, default
`~/.cache/smalti`), keyed by a hash of the module text, the compiler version and the arch.

Entries are written atomically (a temporary file renamed into place) and carry a checksum of
their payload; an entry that fails to parse or to match its checksum is rebuilt.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from jaxlib.mlir import ir

from smalti import __version__
from smalti.dialect.bindings import file_line_col
from smalti.dialect.kernel import KernelSignature
from smalti.dialect.launch import kernel_functions, kernel_name
from smalti.ptx.ptxas_log import PtxasReport
from smalti.ptx.toolchain import ToolchainError, find_tool
from smalti.runtime.compiler import DEFAULT_ARCH, compile_module
from smalti.runtime.dump import dumping_enabled
from smalti.runtime.quality import warn_about_quality
from smalti.runtime.signatures import signature_from_data, signature_to_data

CACHE_VARIABLE = "SMALTI_CACHE_DIR"
FORMAT = 3  # 2: with the ptxas report; 3: signatures carry the arch
_SMALTI_ROOT = Path(__file__).resolve().parents[1]
_COMPILER_PACKAGES = ("dialect", "tiling", "layout_inference", "lowering", "passes", "ptx")
_log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class CompiledKernel:
    """One kernel ready to launch: its PTX, its cubin (None without ptxas), its signature,
    and what ptxas reported of it (registers, spills, shared memory, warnings)."""

    key: str
    ptx: str
    signature: KernelSignature
    cubin: bytes | None
    arch: str = DEFAULT_ARCH
    report: PtxasReport | None = None

    @property
    def name(self) -> str:
        return self.signature.name


def cache_directory() -> Path:
    """$SMALTI_CACHE_DIR, else $XDG_CACHE_HOME/smalti, else ~/.cache/smalti."""
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "smalti"


@functools.cache
def compiler_version() -> str:
    """smalti's version, a hash of the compiler's sources, and the ptxas in use: anything that
    changes what a module compiles to."""
    digest = hashlib.sha256(__version__.encode())
    for package in _COMPILER_PACKAGES:
        for path in sorted((_SMALTI_ROOT / package).rglob("*.py")):
            digest.update(path.relative_to(_SMALTI_ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    digest.update((_SMALTI_ROOT / "runtime" / "compiler.py").read_bytes())
    try:
        ptxas = find_tool("ptxas")
        stat = ptxas.stat()
        digest.update(f"{ptxas}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    except ToolchainError:
        digest.update(b"no ptxas")
    return f"{__version__}+{digest.hexdigest()[:16]}"


def cache_key(module_text: str, arch: str) -> str:
    """The content hash naming a compiled module for `arch`: one module compiled for two
    archs is two entries."""
    material = f"smalti-cache {FORMAT}\n{compiler_version()}\n{arch}\n{module_text}"
    return hashlib.sha256(material.encode()).hexdigest()


def module_text(module: ir.Operation) -> str:
    """The module's text with its locations: the PTX carries them (`.loc`, and the
    file:line of debug_prints), so a kernel traced from other lines compiles anew."""
    return module.get_asm(enable_debug_info=True)


class StaleEntry(ValueError):
    """A cache entry another version of smalti wrote (its format differs)."""


class KernelCache:
    """The memory and disk levels of the cache; `directory=None` keeps memory only."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: dict[str, CompiledKernel] = {}
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{key}.json"

    def get(self, key: str) -> CompiledKernel | None:
        """The entry for `key`; a corrupted disk entry is removed (and reported) as a miss."""
        with self._lock:
            hit = self._memory.get(key)
        if hit is not None or self.directory is None:
            return hit
        compiled = read_entry(self.path(key), lambda raw: decode_entry(raw, key),
                              "rebuilding corrupted cache entry")
        if compiled is None:
            return None
        with self._lock:
            self._memory[key] = compiled
        return compiled

    def put(self, compiled: CompiledKernel) -> None:
        with self._lock:
            self._memory[compiled.key] = compiled
        if self.directory is not None:
            atomic_write(self.path(compiled.key), encode_entry(compiled))


def read_entry(path: Path, decode: Callable[[bytes], T], corrupted: str) -> T | None:
    """The entry file at `path` decoded, or None: missing, or removed when another format
    wrote it (quietly) or it is corrupted (logging `corrupted`, the path and the error)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return decode(raw)
    except StaleEntry:  # written by another version of smalti: rebuilt quietly
        path.unlink(missing_ok=True)
        return None
    except (ValueError, KeyError, TypeError) as error:
        _log.warning("smalti: %s %s (%s)", corrupted, path, error)
        path.unlink(missing_ok=True)
        return None


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def encode_entry(compiled: CompiledKernel) -> bytes:
    payload = {
        "key": compiled.key,
        "arch": compiled.arch,
        "ptx": compiled.ptx,
        "cubin": None if compiled.cubin is None else base64.b64encode(compiled.cubin).decode(),
        "signature": signature_to_data(compiled.signature),
        "report": None if compiled.report is None else asdict(compiled.report),
    }
    return seal_payload(payload, FORMAT)


def seal_payload(payload: dict, version: int) -> bytes:
    """An entry file's bytes: `payload` as JSON, with its format version and sha256."""
    body = json.dumps(payload, sort_keys=True)
    checksum = hashlib.sha256(body.encode()).hexdigest()
    return json.dumps({"format": version, "checksum": checksum, "payload": body}).encode()


def open_payload(raw: bytes, key: str, version: int) -> dict:
    """The payload sealed in `raw`; ValueError if it is malformed, for another key, or
    corrupted (StaleEntry if another format version wrote it)."""
    try:
        entry = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(entry, dict) or "format" not in entry:
        raise ValueError("unknown entry format")
    if entry["format"] != version:
        raise StaleEntry(f"format {entry['format']}, not {version}")
    body = entry["payload"]
    if hashlib.sha256(body.encode()).hexdigest() != entry["checksum"]:
        raise ValueError("checksum mismatch")
    payload = json.loads(body)
    if payload["key"] != key:
        raise ValueError(f"entry holds key {payload['key']}")
    return payload


def decode_entry(raw: bytes, key: str) -> CompiledKernel:
    """The entry in `raw`; ValueError if it is malformed, for another key, or corrupted."""
    payload = open_payload(raw, key, FORMAT)
    cubin, report = payload["cubin"], payload["report"]
    return CompiledKernel(key, payload["ptx"], signature_from_data(payload["signature"]),
                          None if cubin is None else base64.b64decode(cubin), payload["arch"],
                          None if report is None else PtxasReport(
                              **{**report, "warnings": tuple(report["warnings"])}))


_CACHES: dict[Path | None, KernelCache] = {}


def default_cache() -> KernelCache:
    """The process-wide cache over the current cache directory."""
    directory = cache_directory()
    if directory not in _CACHES:
        _CACHES[directory] = KernelCache(directory)
    return _CACHES[directory]


def ptxas_available() -> bool:
    try:
        find_tool("ptxas")
    except ToolchainError:
        return False
    return True


def compile_kernel(module: ir.Operation, *, arch: str = DEFAULT_ARCH,
                   cache: KernelCache | None = None) -> CompiledKernel:
    """The compiled form of a one-kernel module, from the cache or compiled (and stored).
    Compiling runs the pipeline on `module` in place; errors are located DiagnosticErrors.
    A kernel ptxas reports spilling or serialising is a KernelQualityWarning at its line.
    With SMALTI_DUMP_TO set it is always compiled, its dump named by kernel and key."""
    cache = default_cache() if cache is None else cache
    functions = kernel_functions(module)
    if len(functions) != 1:
        raise ValueError("compile_kernel takes a module with exactly one kernel")
    name, where = kernel_name(functions[0]), file_line_col(functions[0].location)
    key = cache_key(module_text(module), arch)
    dumping = dumping_enabled()
    compiled = None if dumping else cache.get(key)
    if compiled is None:
        compiled_module = compile_module(module, arch=arch,
                                         dump_name=f"{name}.{key[:12]}" if dumping else None)
        cubin = report = None
        if ptxas_available():
            result = compiled_module.assemble()
            cubin, report = result.cubin, result.reports.get(name)
        compiled = CompiledKernel(key, compiled_module.ptx, compiled_module.signature(),
                                  cubin, arch, report)
        cache.put(compiled)
    warn_about_quality(compiled.report, name, where)
    return compiled
