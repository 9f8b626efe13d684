"""Collective kernels across processes (`jax.distributed`, one GPU per process).

In one process the launcher makes a collective kernel's symmetric heap itself (CUDA VMM).
When the mesh axis spans processes (more devices along it than this process has, with one
GPU per process), the heap comes from NVSHMEM's host library (the `nvidia-nvshmem-cu13`
wheel), which every process must initialise with the same unique id: at the first such
collective kernel call on CUDA (`prepare_collective`), process 0 asks the library for an id,
publishes its bytes in jax.distributed's key-value store, and every process reads them and
initialises NVSHMEM as PE `jax.process_index()` of `jax.process_count()`
(`bootstrap_nvshmem`). Every process traces the same program, so they all reach this point;
one that waits longer than $SMALTI_NVSHMEM_BOOTSTRAP_TIMEOUT seconds (default 300) gets an
error naming the key and itself (and at once process 0's error when it could not make the
id). After that, the launcher's collective launches in this process take their heap from
NVSHMEM (launcher/nvshmem.h): allocations are collective, so every process must make the
same collective launches in the same order, as SPMD programs under `jax.jit` do.

On JAX's CPU backend the simulator runs every device of a collective launch in one process;
it cannot meet devices of other processes, so such a call is refused when it is traced
(`check_cpu_collective`). Kernels without in-kernel communication need none of this: under
`jax.jit` with a global mesh each process runs its own shards.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path

from smalti.dialect.kernel import CollectiveSpec
from smalti.runtime import launcher
from smalti.runtime.cache import cache_directory

KEY_PREFIX = "smalti/nvshmem/unique_id"  # + "/<bootstrap number>", bytes of the id
TIMEOUT_VARIABLE = "SMALTI_NVSHMEM_BOOTSTRAP_TIMEOUT"  # seconds to wait for process 0's id
DEFAULT_TIMEOUT = 300.0
LIBRARY_NAME = "libnvshmem_host.so.3"
UNIQUE_ID_BYTES = launcher.NVSHMEM_UNIQUE_ID_BYTES
ERROR_MARK = "error: "  # what process 0 publishes instead of an id it could not make


class DistributedError(RuntimeError):
    """A collective kernel cannot run across these processes (or their bootstrap failed)."""


_LOCK = threading.Lock()
_BOOTSTRAPS = 0  # bootstraps done by this process: numbers the key (every process alike)


def library_path() -> str:
    """The NVSHMEM host library to open: the nvidia-nvshmem-cu13 wheel's, else the bare name
    for the loader's search path ($SMALTI_LIBNVSHMEM, read by the launcher, overrides both)."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root) / "nvshmem" / "lib" / LIBRARY_NAME
        if candidate.exists():
            return str(candidate)
    return LIBRARY_NAME


def bootstrap_timeout() -> float:
    """$SMALTI_NVSHMEM_BOOTSTRAP_TIMEOUT seconds when set to a positive number, else 300."""
    try:
        seconds = float(os.environ.get(TIMEOUT_VARIABLE, ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return seconds if seconds > 0 else DEFAULT_TIMEOUT


def key_value_client() -> object:
    """jax.distributed's client (its key-value store); DistributedError when jax.distributed
    was not initialised."""
    from jax._src import distributed

    client = distributed.global_state.client
    if client is None:
        raise DistributedError("collective kernels across processes bootstrap NVSHMEM through "
                               "jax.distributed's key-value store: call "
                               "jax.distributed.initialize() first")
    return client


def exchange_unique_id(client: object, process: int, make_id: Callable[[], bytes], key: str,
                       timeout: float) -> bytes:
    """Process 0 makes the id (`make_id`) and publishes it under `key`; the others wait up to
    `timeout` seconds for it. Every process returns the same bytes. When `make_id` fails,
    process 0 publishes its error instead (any value not UNIQUE_ID_BYTES long), so the others
    fail at once with it."""
    if process == 0:
        try:
            unique_id = make_id()
        except Exception as error:
            client.key_value_set_bytes(key, f"{ERROR_MARK}{error}".encode())
            raise
        client.key_value_set_bytes(key, unique_id)
        return unique_id
    try:
        value = bytes(client.blocking_key_value_get_bytes(key, int(timeout * 1000)))
    except Exception as error:  # jaxlib raises its own error types for a timeout
        raise DistributedError(
            f"process {process} waited {timeout:g} s for NVSHMEM's unique id under key "
            f"'{key}' of jax.distributed's key-value store, which process 0 publishes at its "
            f"first collective kernel call: did process 0 reach that call? (set "
            f"{TIMEOUT_VARIABLE} to wait longer; {type(error).__name__}: {error})") from error
    if value.startswith(ERROR_MARK.encode()) or len(value) != UNIQUE_ID_BYTES:
        text = value.decode(errors="replace").removeprefix(ERROR_MARK)
        raise DistributedError(f"process {process}: process 0 could not make NVSHMEM's unique "
                               f"id (key '{key}'): {text}")
    return value


def bootstrap_nvshmem() -> None:
    """Initialise NVSHMEM in this process as PE jax.process_index() of jax.process_count(),
    with a unique id exchanged through jax.distributed (once; collective: every process
    calls it)."""
    import jax

    global _BOOTSTRAPS
    with _LOCK:
        library = launcher.load(cache_directory())
        if launcher.nvshmem_active(library):
            return
        process, processes = jax.process_index(), jax.process_count()
        path = library_path()
        key = f"{KEY_PREFIX}/{_BOOTSTRAPS}"
        _BOOTSTRAPS += 1  # a retry uses a fresh key, on every process alike
        unique_id = exchange_unique_id(key_value_client(), process,
                                       lambda: launcher.nvshmem_unique_id(library, path), key,
                                       bootstrap_timeout())
        launcher.nvshmem_initialize(library, path, unique_id, process, processes)


def prepare_collective(kernel: str, spec: CollectiveSpec) -> None:
    """Before a collective kernel is staged for CUDA: when its mesh axis has more devices than
    this process, NVSHMEM must be up (`bootstrap_nvshmem`), which needs one GPU per process;
    otherwise the launcher meets the axis's devices in this process and nothing is needed."""
    import jax

    processes, local = jax.process_count(), jax.local_device_count()
    if processes == 1 or spec.devices <= local:
        return
    what = (f"collective kernel {kernel} over {spec.devices} devices along mesh axis "
            f"'{spec.mesh_axis}', across {processes} processes")
    if local != 1:
        raise DistributedError(f"{what}: this process has {local} GPUs, but across processes "
                               "the symmetric heap comes from NVSHMEM with one GPU per process "
                               "(one NVSHMEM PE each)")
    try:
        bootstrap_nvshmem()
    except (DistributedError, launcher.LaunchError) as error:
        raise DistributedError(f"{what}: {error}") from error


def check_cpu_collective(kernel: str, spec: CollectiveSpec) -> None:
    """Before a collective kernel is staged for JAX's CPU backend: DistributedError when this
    process lacks devices of its mesh axis (the simulator meets devices of one process only)."""
    import jax

    if jax.default_backend() != "cpu" or jax.process_count() == 1:
        return
    local = jax.local_device_count()
    if local < spec.devices:
        raise DistributedError(
            f"collective kernel {kernel} runs over {spec.devices} devices along mesh axis "
            f"'{spec.mesh_axis}', but this process (jax.process_index() = "
            f"{jax.process_index()} of {jax.process_count()}) has {local} CPU device(s): on "
            "CPU, smalti's simulator runs all devices of a collective launch in one process "
            "and cannot meet devices of other processes. Give one process every device of the "
            "axis (XLA_FLAGS=--xla_force_host_platform_device_count), or run across processes "
            "on GPUs, where the symmetric heap comes from NVSHMEM")
