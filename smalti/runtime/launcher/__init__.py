"""The CUDA launcher: every `*.cc` of this directory built at first use into one shared library
with the system C++ compiler against `jax.ffi.include_dir()`, cached by content, and
registered as an XLA FFI target for CUDA.

`driver.cc` opens the CUDA driver ($SMALTI_LIBCUDA, default `libcuda.so.1`), `core.cc` makes
every driver call of a launch, and `launcher.cc` is the XLA FFI handler that feeds it. For
collective kernels, `group.cc` makes the per-device calls of a group meet and
`symmetric_heap.cc` makes the group's symmetric heap, peer tables and multicast object; across
processes, `nvshmem.cc` takes the heap from NVSHMEM once `nvshmem_initialize` has run
(smalti.runtime.distributed bootstraps it). `timing.cc` brackets the launches of a kernel
being timed with CUDA events (`kernel_timer`). `launch_core` drives the core directly through
ctypes, as tests do against a stand-in driver.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

DIRECTORY = Path(__file__).parent
TARGET_NAME = "smalti_launch"
HANDLER_SYMBOL = "SmaltiLaunch"
# The same handler without a platform stream (the null stream): tests register it for XLA's
# CPU platform to run XLA's attribute and buffer decoding against a stand-in driver.
HANDLER_WITHOUT_STREAM_SYMBOL = "SmaltiLaunchWithoutStream"
LIBCUDA_VARIABLE = "SMALTI_LIBCUDA"  # the driver library to open (default libcuda.so.1)
LAUNCH_SIZE = 10  # grid x,y,z, block x,y,z, cluster x,y,z, dynamic shared bytes
COLLECTIVE_SIZE = 3  # devices along the mesh axis, symmetric heap bytes, multimem (0 or 1)
# How long a collective launch waits for the rest of its group, in seconds (default 120).
TIMEOUT_VARIABLE = "SMALTI_COLLECTIVE_TIMEOUT"
# The NVSHMEM host library to open, overriding the path Python passes (tests: a stand-in).
LIBNVSHMEM_VARIABLE = "SMALTI_LIBNVSHMEM"
NVSHMEM_UNIQUE_ID_BYTES = 128  # sizeof(nvshmemx_uniqueid_t)

# LaunchStatus of core.h.
STATUS_OK, STATUS_INVALID_ARGUMENT, STATUS_DRIVER_ERROR, STATUS_NO_DRIVER = 0, 1, 2, 3
STATUS_TIMEOUT = 4  # a collective launch's group did not all arrive
_TEXT_CAPACITY = 4096
TIMED_LAUNCHES = 1024  # launches a timed kernel keeps unread (timing.h: kTimedLaunches)


class LauncherBuildError(RuntimeError):
    """The C++ compiler is missing or rejected the launcher."""


class LaunchError(RuntimeError):
    """A launch failed: `call` names the failing driver call ("" when the request itself was
    malformed or no driver could be opened), `cuda_error` is its CUresult (0 otherwise)."""

    def __init__(self, message: str, *, status: int, call: str, cuda_error: int) -> None:
        super().__init__(message)
        self.status = status
        self.call = call
        self.cuda_error = cuda_error


def sources() -> list[Path]:
    """The C++ sources compiled into the library, sorted."""
    return sorted(DIRECTORY.glob("*.cc"))


def headers() -> list[Path]:
    return sorted(DIRECTORY.glob("*.h"))


def compiler() -> str:
    """$CXX, else g++ or c++ on PATH."""
    for candidate in (os.environ.get("CXX"), "g++", "c++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise LauncherBuildError("no C++ compiler found (set CXX, or install g++)")


def build_command(cxx: str, output: Path) -> list[str]:
    import jax

    return [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-Wall",
            "-isystem", jax.ffi.include_dir(), *map(str, sources()), "-o", str(output), "-ldl"]


def library_path(directory: Path) -> Path:
    """Where the built library lives: named by a hash of the sources, headers and FFI headers."""
    import jax

    digest = hashlib.sha256()
    for path in (*sources(), *headers()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
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
            names = ", ".join(p.name for p in sources())
            raise LauncherBuildError(f"compiling {names} failed:\n{done.stderr}")
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return path


@functools.cache
def load(directory: Path) -> ctypes.CDLL:
    """The launcher library under `directory` (built if needed), loaded once per process."""
    library = ctypes.CDLL(str(build(directory)))
    core = library.smalti_launch_core
    core.restype = ctypes.c_int
    core.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,  # stream, cubin, kernel
        ctypes.c_void_p, ctypes.c_size_t,  # launch
        ctypes.c_void_p, ctypes.c_size_t,  # tensor maps
        ctypes.c_void_p, ctypes.c_size_t,  # buffers
        ctypes.c_void_p, ctypes.c_int64,  # debug
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,  # collective, rank
        ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t,  # cuda error, call
        ctypes.c_char_p, ctypes.c_size_t,  # message
    ]
    library.smalti_launcher_reset.restype = None
    library.smalti_launcher_reset.argtypes = []
    library.smalti_nvshmem_unique_id.restype = ctypes.c_int
    library.smalti_nvshmem_unique_id.argtypes = [
        ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    library.smalti_nvshmem_initialize.restype = ctypes.c_int
    library.smalti_nvshmem_initialize.argtypes = [
        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
        ctypes.c_char_p, ctypes.c_size_t]
    library.smalti_nvshmem_active.restype = ctypes.c_int
    library.smalti_nvshmem_active.argtypes = []
    library.smalti_nvshmem_finalize.restype = None
    library.smalti_nvshmem_finalize.argtypes = []
    library.smalti_timing_start.restype = ctypes.c_int
    library.smalti_timing_start.argtypes = [
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    library.smalti_timing_stop.restype = ctypes.c_int
    library.smalti_timing_stop.argtypes = [
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,  # cubin, kernel
        ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t,  # cuda error, call
        ctypes.c_char_p, ctypes.c_size_t]  # message
    return library


@functools.cache
def register(directory: Path) -> str:
    """Build (if needed), load and register the launcher for CUDA; its FFI target name."""
    import jax

    handler = getattr(load(directory), HANDLER_SYMBOL)
    jax.ffi.register_ffi_target(TARGET_NAME, jax.ffi.pycapsule(handler), platform="CUDA")
    return TARGET_NAME


def launch_core(library: ctypes.CDLL, attributes: Mapping[str, object], buffers: Sequence[int],
                *, stream: int = 0, debug: int = 0, rank: int = 0) -> None:
    """Launch through the driver-facing core, as the FFI handler does: `attributes` is exactly
    `jax_integration.ffi_attributes(compiled)`, `buffers` the device addresses of the inputs
    then the outputs, `debug` the debug buffer's (when `debug_bytes` > 0), `rank` a collective
    kernel's rank buffer's (i32[2]: index along the mesh axis, group). LaunchError names the
    failing call. A collective launch returns once its whole group has met (call it from one
    thread per device)."""
    cubin = np.ascontiguousarray(attributes["cubin"], dtype=np.uint8)
    launch = np.ascontiguousarray(attributes["launch"], dtype=np.int64)
    records = np.ascontiguousarray(attributes["tensor_maps"], dtype=np.int64)
    pointers = (ctypes.c_void_p * max(len(buffers), 1))(*buffers)
    kernel = str(attributes["kernel"]).encode()
    collective = np.ascontiguousarray(attributes.get("collective", ()), dtype=np.int64)
    if collective.size and collective[0] == 0:
        collective = collective[:0]  # not a collective kernel
    cuda_error = ctypes.c_int(0)
    call = ctypes.create_string_buffer(_TEXT_CAPACITY)
    message = ctypes.create_string_buffer(_TEXT_CAPACITY)
    status = library.smalti_launch_core(
        stream or None, cubin.ctypes.data if cubin.size else None, cubin.size, kernel,
        launch.ctypes.data, launch.size, records.ctypes.data if records.size else None,
        records.size, pointers, len(buffers), debug or None, int(attributes["debug_bytes"]),
        collective.ctypes.data if collective.size else None, collective.size, rank or None,
        ctypes.byref(cuda_error), call, _TEXT_CAPACITY, message, _TEXT_CAPACITY)
    if status != STATUS_OK:
        raise LaunchError(message.value.decode(errors="replace"), status=status,
                          call=call.value.decode(), cuda_error=cuda_error.value)


# ---------------------------------------------------------------------------------------
# Device time of launches (timing.h): a kernel is named by its entry name and cubin, as the
# launcher's function cache knows it, so kernels timed at once never mix.


def start_timing(library: ctypes.CDLL, kernel: str, cubin: bytes) -> None:
    """Bracket each later launch of `kernel` (of `cubin`) with CUDA events on its stream;
    LaunchError when it is already being timed."""
    message = ctypes.create_string_buffer(_TEXT_CAPACITY)
    status = library.smalti_timing_start(cubin, len(cubin), kernel.encode(), message,
                                         _TEXT_CAPACITY)
    if status != STATUS_OK:
        raise LaunchError(message.value.decode(errors="replace"), status=status, call="",
                          cuda_error=0)


def stop_timing(library: ctypes.CDLL, kernel: str, cubin: bytes) -> list[float]:
    """Stop timing `kernel`: the device time of each launch since `start_timing` (the last
    TIMED_LAUNCHES), in milliseconds, in launch order, each read with cuEventSynchronize
    and cuEventElapsedTime; LaunchError names the failing call."""
    times = (ctypes.c_float * TIMED_LAUNCHES)()
    count = ctypes.c_size_t(0)
    cuda_error = ctypes.c_int(0)
    call = ctypes.create_string_buffer(_TEXT_CAPACITY)
    message = ctypes.create_string_buffer(_TEXT_CAPACITY)
    status = library.smalti_timing_stop(
        cubin, len(cubin), kernel.encode(), times, TIMED_LAUNCHES, ctypes.byref(count),
        ctypes.byref(cuda_error), call, _TEXT_CAPACITY, message, _TEXT_CAPACITY)
    if status != STATUS_OK:
        raise LaunchError(message.value.decode(errors="replace"), status=status,
                          call=call.value.decode(), cuda_error=cuda_error.value)
    return list(times[:count.value])


@contextlib.contextmanager
def kernel_timer(library: ctypes.CDLL, kernel: str, cubin: bytes) -> Iterator[list[float]]:
    """Time `kernel`'s launches inside the block: the list it yields holds their device
    times (ms) once the block has ended (and the launches have finished)."""
    start_timing(library, kernel, cubin)
    times: list[float] = []
    try:
        yield times
    except BaseException:
        with contextlib.suppress(LaunchError):
            stop_timing(library, kernel, cubin)
        raise
    times.extend(stop_timing(library, kernel, cubin))


def reset(library: ctypes.CDLL) -> None:
    """Forget the loaded driver, its modules and symmetric heaps (freed through it), and
    finalise NVSHMEM if this process initialised it (collective): the next launch opens
    $SMALTI_LIBCUDA again."""
    library.smalti_launcher_reset()


# ---------------------------------------------------------------------------------------
# NVSHMEM across processes (nvshmem.h). `path` is the host library to open unless
# $SMALTI_LIBNVSHMEM names another (None: libnvshmem_host.so.3 on the loader's path).


def _nvshmem_error(status: int, message: ctypes.Array) -> LaunchError:
    return LaunchError(message.value.decode(errors="replace"), status=status, call="",
                       cuda_error=0)


def nvshmem_unique_id(library: ctypes.CDLL, path: str | None) -> bytes:
    """A fresh NVSHMEM unique id (nvshmemx_get_uniqueid): the bytes every process of the job
    initialises with."""
    unique = ctypes.create_string_buffer(NVSHMEM_UNIQUE_ID_BYTES)
    message = ctypes.create_string_buffer(_TEXT_CAPACITY)
    status = library.smalti_nvshmem_unique_id(path.encode() if path else None, unique,
                                              NVSHMEM_UNIQUE_ID_BYTES, message, _TEXT_CAPACITY)
    if status != STATUS_OK:
        raise _nvshmem_error(status, message)
    return unique.raw


def nvshmem_initialize(library: ctypes.CDLL, path: str | None, unique_id: bytes, rank: int,
                       ranks: int) -> None:
    """Initialise NVSHMEM in this process as PE `rank` of `ranks` (collective: every process
    calls it with the same id); collective launches then take their heap from NVSHMEM."""
    message = ctypes.create_string_buffer(_TEXT_CAPACITY)
    status = library.smalti_nvshmem_initialize(path.encode() if path else None, unique_id,
                                               len(unique_id), rank, ranks, message,
                                               _TEXT_CAPACITY)
    if status != STATUS_OK:
        raise _nvshmem_error(status, message)


def nvshmem_active(library: ctypes.CDLL) -> bool:
    return bool(library.smalti_nvshmem_active())


def nvshmem_finalize(library: ctypes.CDLL) -> None:
    """Free the NVSHMEM heaps and finalise NVSHMEM (collective; nothing when not active)."""
    library.smalti_nvshmem_finalize()
