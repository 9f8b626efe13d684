"""The CUDA launcher: `launcher.cc` built at first use with the system C++ compiler against
`jax.ffi.include_dir()`, cached by content, and registered as an XLA FFI target for CUDA."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("launcher.cc")
TARGET_NAME = "smalti_launch"
HANDLER_SYMBOL = "SmaltiLaunch"


class LauncherBuildError(RuntimeError):
    """The C++ compiler is missing or rejected the launcher."""


def compiler() -> str:
    """$CXX, else g++ or c++ on PATH."""
    for candidate in (os.environ.get("CXX"), "g++", "c++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise LauncherBuildError("no C++ compiler found (set CXX, or install g++)")


def build_command(cxx: str, output: Path) -> list[str]:
    import jax

    return [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-Wall",
            "-isystem", jax.ffi.include_dir(), str(SOURCE), "-o", str(output), "-ldl"]


def library_path(directory: Path) -> Path:
    """Where the built library lives: named by a hash of the source and the FFI headers."""
    import jax

    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(jax.ffi.include_dir().encode())
    digest.update(jax.__version__.encode())
    return directory / f"smalti_launcher-{digest.hexdigest()[:16]}.so"


def build(directory: Path) -> Path:
    """The launcher library under `directory`, compiled if it is not there yet (atomically,
    so concurrent builders never load a half-written file)."""
    path = library_path(directory)
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        done = subprocess.run(build_command(compiler(), Path(temporary)), capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            raise LauncherBuildError(f"compiling {SOURCE.name} failed:\n{done.stderr}")
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return path


@functools.cache
def register(directory: Path) -> str:
    """Build (if needed), load and register the launcher for CUDA; its FFI target name."""
    import jax

    library = ctypes.cdll.LoadLibrary(str(build(directory)))
    handler = getattr(library, HANDLER_SYMBOL)
    jax.ffi.register_ffi_target(TARGET_NAME, jax.ffi.pycapsule(handler), platform="CUDA")
    return TARGET_NAME
