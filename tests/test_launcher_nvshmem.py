"""Collective kernels across processes, without GPUs: NVSHMEM's host library replaced by a
recording stand-in (tests/launcher/fake_nvshmem.cc), the CUDA driver by fake_libcuda.cc.

(a) The bootstrap for real through jax.distributed's key-value store, 2 and 4 CPU processes
    on localhost: process 0 alone asks for a unique id, and every process initialises NVSHMEM
    with those bytes as its own rank (once); a missing key times out naming key and process.
(b) The launcher's NVSHMEM heap path, driven through its C entries in this process, one rank
    after another: init before nvshmem_malloc, the same size on every rank, zeroing then a
    barrier, nvshmem_ptr for every PE and nvshmemx_mc_ptr only with multimem, the peer table
    and hidden parameters, one allocation reused; and the errors: an unreachable peer, no
    multicast, a missing library, a rank that is not the PE, an axis that is not every PE.
(c) Two jax.distributed CPU processes running examples/pointwise.py's kernel on their shards
    of a global mesh (shard_map and plain jax.jit sharding), and the clear error for a
    collective kernel whose devices are in other processes.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import pytest

from smalti.dialect.kernel import CollectiveSpec
from smalti.runtime import distributed, jax_integration, launcher
from smalti.runtime.cache import CompiledKernel, ptxas_available
from smalti.runtime.launcher import LaunchError
from smalti.runtime.simulate import NUMPY_DTYPES
from tests.gpu.conftest import gpu_devices
from tests.launcher import fake_driver, fake_nvshmem

ROOT = Path(__file__).resolve().parents[1]
S = jax.ShapeDtypeStruct
HIDDEN = 3  # smalti_device, smalti_peers, smalti_multicast
needs_ptxas = pytest.mark.skipif(not ptxas_available(),
                                 reason="ptxas (nvidia-cuda-nvcc) is not installed: no cubins")


@pytest.fixture(scope="module")
def libnvshmem(tmp_path_factory) -> Path:
    return fake_nvshmem.build(tmp_path_factory.mktemp("libnvshmem"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """The smalti cache this module and its worker processes share (the launcher built once)."""
    return tmp_path_factory.mktemp("smalti-cache")


@pytest.fixture(scope="module")
def library(cache) -> ctypes.CDLL:
    """The launcher built into `cache`, where the worker processes find it."""
    return launcher.load(cache)


# ---------------------------------------------------------------------------------------
# (a) and (c): processes joined by jax.distributed.


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Job:
    reports: list[dict]  # each process's, by process index
    logs: list[list[dict]]  # each process's stand-in NVSHMEM calls


def run_job(processes: int, libnvshmem: Path, cache: Path, tmp_path: Path, *,
            mode: str = "") -> Job:
    """`processes` tests/launcher/distributed_worker.py processes joined on localhost, sharing
    `cache` (where the launcher is built already), in the worker's `mode`."""
    port = free_port()
    children = []
    for process in range(processes):
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("XLA_FLAGS", "SMALTI_FAKE", "JAX_"))}
        env.update(JAX_PLATFORMS="cpu", SMALTI_CACHE_DIR=str(cache),
                   SMALTI_LIBNVSHMEM=str(libnvshmem),
                   SMALTI_FAKE_NVSHMEM_LOG=str(tmp_path / f"nvshmem-{process}.jsonl"),
                   NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME="lo")  # the processes share this host
        command = [sys.executable, "-m", "tests.launcher.distributed_worker", str(port),
                   str(processes), str(process), *([mode] if mode else [])]
        children.append(subprocess.Popen(command, cwd=ROOT, env=env, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    reports = []
    for process, child in enumerate(children):
        try:
            out, err = child.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for other in children:
                other.kill()
            raise
        lines = [line for line in out.splitlines() if line.startswith("{")]
        assert child.returncode == 0 and lines, f"process {process} failed:\n{out}\n{err}"
        report = json.loads(lines[-1])
        assert "error" not in report, report["error"]
        reports.append(report)
    logs = [fake_driver.read_calls(tmp_path / f"nvshmem-{p}.jsonl") for p in range(processes)]
    return Job(reports, logs)


def check_bootstrap(job: Job, processes: int) -> None:
    """Process 0 alone made the id; every process initialised once with it, as its rank."""
    made = [c for log in job.logs for c in log if c["call"] == "nvshmemx_get_uniqueid"]
    assert len(made) == 1 and made[0]["pid"] == job.logs[0][0]["pid"]
    unique_id = made[0]["id"]
    assert int.from_bytes(bytes.fromhex(unique_id)[:4], "little") == \
        fake_nvshmem.UNIQUE_ID_VERSION
    for process, (report, log) in enumerate(zip(job.reports, job.logs, strict=True)):
        assert report["process"] == process and report["processes"] == processes
        assert report["active"] is True
        [init] = [c for c in log if c["call"] == "nvshmemx_hostlib_init_attr"]
        assert (init["flags"], init["rank"], init["nranks"], init["id"], init["result"]) == (
            fake_nvshmem.INIT_WITH_UNIQUEID, process, processes, unique_id, 0)
        [finalize] = [c for c in log if c["call"] == "nvshmemx_hostlib_finalize"]
        assert finalize["pe"] == process and finalize["result"] == 0


def test_two_processes_bootstrap_nvshmem_and_run_pointwise_on_their_shards(libnvshmem, library,
                                                                           cache, tmp_path):
    job = run_job(2, libnvshmem, cache, tmp_path, mode="kernels")
    check_bootstrap(job, 2)
    assert "process 1 waited 0.5 s for NVSHMEM's unique id under key 'smalti/test/never'" in \
        job.reports[1]["timeout"]
    for report in job.reports:
        for way in ("shard_map", "jit"):  # each process holds one 128-row shard, exactly right
            assert report[way] == {"shape": [256, 128], "matches": [True]}, way
        collective = report["collective"]
        assert collective.startswith("DistributedError: collective kernel all_gather runs "
                                     "over 2 devices along mesh axis 'x'")
        assert f"jax.process_index() = {report['process']} of 2) has 1 CPU device" in collective
        assert "cannot meet devices of other processes" in collective


def test_four_processes_bootstrap_with_one_id(libnvshmem, library, cache, tmp_path):
    check_bootstrap(run_job(4, libnvshmem, cache, tmp_path), 4)


@pytest.mark.skipif(not gpu_devices() or distributed.library_path() == distributed.LIBRARY_NAME,
                    reason="NVSHMEM's host library initialises CUDA: it needs a GPU and the "
                           "nvidia-nvshmem-cu13 wheel (pip install -e '.[distributed]')")
def test_nvshmems_own_library_bootstraps_two_processes(library, cache, tmp_path):
    """The ABI declared in launcher/nvshmem.cc against NVSHMEM's real host library: its unique
    id and initialisation as rank 0 and 1 (on this machine, over the loopback interface)."""
    job = run_job(2, Path(distributed.library_path()), cache, tmp_path, mode="real")
    assert [(r["process"], r["active"]) for r in job.reports] == [(0, True), (1, True)]


class _Store:
    """jax.distributed's client, as far as the exchange uses it."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def key_value_set_bytes(self, key: str, value: bytes) -> None:
        assert key not in self.values
        self.values[key] = value

    def blocking_key_value_get_bytes(self, key: str, timeout_in_ms: int) -> bytes:
        if key not in self.values:
            raise TimeoutError(f"DEADLINE_EXCEEDED after {timeout_in_ms} ms")
        return self.values[key]


def test_the_exchange_publishes_once_and_names_key_and_process_on_timeout():
    store = _Store()
    made = []

    def make() -> bytes:
        made.append(1)
        return b"\x01" * 128

    assert distributed.exchange_unique_id(store, 0, make, "k/0", 1.0) == b"\x01" * 128
    assert distributed.exchange_unique_id(store, 3, make, "k/0", 1.0) == b"\x01" * 128
    assert made == [1]
    with pytest.raises(distributed.DistributedError,
                       match=r"process 2 waited 0.25 s for NVSHMEM's unique id under key "
                             r"'k/1'.*DEADLINE_EXCEEDED after 250 ms"):
        distributed.exchange_unique_id(store, 2, make, "k/1", 0.25)

    def fail() -> bytes:
        raise LaunchError("cannot load the NVSHMEM host library", status=3, call="",
                          cuda_error=0)

    with pytest.raises(LaunchError, match="cannot load"):  # process 0 publishes its error
        distributed.exchange_unique_id(store, 0, fail, "k/2", 1.0)
    with pytest.raises(distributed.DistributedError,
                       match=r"process 1: process 0 could not make NVSHMEM's unique id \(key "
                             r"'k/2'\): cannot load the NVSHMEM host library"):
        distributed.exchange_unique_id(store, 1, make, "k/2", 1.0)


def test_nvshmem_is_bootstrapped_only_for_an_axis_across_processes(monkeypatch):
    """prepare_collective: nothing in one process or for an axis this process holds; the
    bootstrap with one GPU per process; an error naming the kernel otherwise."""
    boots = []
    monkeypatch.setattr(distributed, "bootstrap_nvshmem", lambda: boots.append(1))
    spec = CollectiveSpec(4, "x", 4096)
    for processes, local, booted in ((1, 4, 0), (2, 4, 0), (4, 1, 1)):
        monkeypatch.setattr(jax, "process_count", lambda p=processes: p)
        monkeypatch.setattr(jax, "local_device_count", lambda n=local: n)
        boots.clear()
        distributed.prepare_collective("k", spec)
        assert len(boots) == booted, (processes, local)
    monkeypatch.setattr(jax, "local_device_count", lambda: 2)
    with pytest.raises(distributed.DistributedError,
                       match=r"collective kernel k over 4 devices along mesh axis 'x', across 4 "
                             r"processes: this process has 2 GPUs.*one GPU per process"):
        distributed.prepare_collective("k", spec)

    def broken() -> None:
        raise LaunchError("cannot load the NVSHMEM host library x", status=3, call="",
                          cuda_error=0)

    monkeypatch.setattr(distributed, "bootstrap_nvshmem", broken)
    monkeypatch.setattr(jax, "local_device_count", lambda: 1)
    with pytest.raises(distributed.DistributedError,
                       match=r"collective kernel k .*: cannot load the NVSHMEM host library x"):
        distributed.prepare_collective("k", spec)


def test_the_library_path_is_the_wheels_or_the_soname():
    path = distributed.library_path()
    assert path == distributed.LIBRARY_NAME or path.endswith("nvidia/nvshmem/lib/"
                                                             "libnvshmem_host.so.3")


# ---------------------------------------------------------------------------------------
# (b) The launcher's NVSHMEM heap path, one rank after another in this process.

@pytest.fixture
def stand_ins(library, libcuda, libnvshmem, tmp_path, monkeypatch) -> fake_driver.CallLog:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv(launcher.LIBCUDA_VARIABLE, str(libcuda))
    monkeypatch.setenv(launcher.LIBNVSHMEM_VARIABLE, str(libnvshmem))
    monkeypatch.setenv(fake_driver.LOG_VARIABLE, str(log))
    monkeypatch.setenv(fake_nvshmem.LOG_VARIABLE, str(log))
    for variable in (fake_driver.FAIL_VARIABLE, fake_nvshmem.FAIL_VARIABLE,
                     fake_nvshmem.UNREACHABLE_VARIABLE, fake_nvshmem.NO_MULTICAST_VARIABLE):
        monkeypatch.delenv(variable, raising=False)
    launcher.reset(library)
    yield fake_driver.CallLog(log)  # both stand-ins append here, in call order
    launcher.reset(library)  # finalises NVSHMEM: later tests launch in one process again


def aligned(nbytes: int, keep: list) -> np.ndarray:
    """Host memory posing as a device buffer, 256-byte aligned."""
    raw = np.zeros(nbytes + 256, np.uint8)
    keep.append(raw)
    offset = -raw.ctypes.data % 256
    return raw[offset:offset + nbytes]


@dataclass
class Process:
    """One process's launch: its buffers and rank buffer, on its one GPU (CUDA device 0)."""

    buffers: list[np.ndarray]
    position: np.ndarray  # i32[2]: index along the mesh axis, group
    stream: int = fake_driver.stream_of(0)

    def launch(self, library: ctypes.CDLL, kernel: CompiledKernel) -> None:
        launcher.launch_core(library, jax_integration.ffi_attributes(kernel),
                             [b.ctypes.data for b in self.buffers], stream=self.stream,
                             rank=self.position.ctypes.data)


def process(kernel: CompiledKernel, rank: int, keep: list, group: int = 0) -> Process:
    buffers = [aligned(int(np.prod(a.shape)) * NUMPY_DTYPES[a.dtype].itemsize, keep)
               for a in kernel.signature.args]
    position = aligned(8, keep).view(np.int32)
    position[:] = (rank, group)
    return Process(buffers, position)


def join(library: ctypes.CDLL, unique_id: bytes, rank: int, ranks: int) -> None:
    """This process becomes NVSHMEM PE `rank` of `ranks` (the stand-in is named by
    $SMALTI_LIBNVSHMEM, so no path is passed)."""
    launcher.nvshmem_initialize(library, None, unique_id, rank, ranks)


def u64(value: bytes) -> int:
    return int.from_bytes(value, "little")


@needs_ptxas
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("name", ["all_gather", "all_reduce"])  # all_reduce: multimem
def test_every_rank_takes_its_heap_from_nvshmem(name, ranks, collective_example, library, stand_ins):
    kernel = collective_example(name, ranks)
    spec = kernel.signature.collective
    unique_id = launcher.nvshmem_unique_id(library, None)
    sizes = []
    for rank in range(ranks):
        stand_ins.clear()
        join(library, unique_id, rank, ranks)
        keep: list = []
        me = process(kernel, rank, keep)
        me.launch(library, kernel)
        calls = stand_ins.calls()
        assert [c for c in calls if "reason" in c] == []  # nothing refused
        order = [c["call"] for c in calls]
        # Initialised with the id as this rank, before the one collective allocation.
        [init] = stand_ins.calls("nvshmemx_hostlib_init_attr")
        assert (init["rank"], init["nranks"], bytes.fromhex(init["id"])) == (rank, ranks,
                                                                             unique_id)
        [malloc] = stand_ins.calls("nvshmem_malloc")
        assert order.index("nvshmemx_hostlib_init_attr") < order.index("nvshmem_malloc")
        sizes.append(malloc["size"])
        heap = malloc["pointer"]
        # Zeroed, and only then the barrier that lets peers signal into it.
        [zero] = [c for c in stand_ins.calls("cuMemsetD8_v2") if c["destination"] == heap]
        assert zero["count"] == malloc["size"] and zero["value"] == 0
        assert not any(ctypes.string_at(heap, malloc["size"]))  # the stand-in filled 0xA5
        zeroed = calls.index(zero)
        [barrier] = stand_ins.calls("nvshmem_barrier_all")
        assert zeroed < calls.index(barrier)
        assert "cuCtxSynchronize" in order[zeroed:calls.index(barrier)]
        # Every PE's address, and the multicast address only when the kernel uses multimem.
        assert sorted(c["target"] for c in stand_ins.calls("nvshmem_ptr")) == list(range(ranks))
        multicasts = stand_ins.calls("nvshmemx_mc_ptr")
        assert len(multicasts) == spec.multimem
        assert all(c["team"] == 0 for c in multicasts)
        # The peer table: this PE's heap at its index, the stand-in's address for the others.
        expected = [heap if pe == rank else fake_nvshmem.peer_address(pe, 0)
                    for pe in range(ranks)]
        [table] = [c for c in stand_ins.calls("cuMemAlloc_v2") if c["size"] == 8 * ranks]
        held = np.frombuffer(ctypes.string_at(table["pointer"], 8 * ranks), np.uint64)
        assert held.tolist() == expected
        [launch] = stand_ins.calls("cuLaunchKernelEx")
        values = [bytes.fromhex(p["bytes"]) for p in launch["params"]]
        device, peers, multicast = (u64(v) for v in values[-HIDDEN:])
        assert device == me.position.ctypes.data and peers == table["pointer"]
        assert multicast == (fake_nvshmem.multicast_address(0) if spec.multimem else 0)
        assert stand_ins.calls("cuMemCreate") == []  # no VMM heap: NVSHMEM's
        # A second launch reuses the allocation and its table.
        stand_ins.clear()
        me.launch(library, kernel)
        again = [c["call"] for c in stand_ins.calls()]
        assert "nvshmem_malloc" not in again and "cuMemAlloc_v2" not in again
        assert "cuLaunchKernelEx" in again
        # Finalising frees the heap and the table, then NVSHMEM itself (collective).
        stand_ins.clear()
        launcher.nvshmem_finalize(library)
        assert [c["call"] for c in stand_ins.calls()] == [
            "cuCtxPushCurrent_v2", "cuMemFree_v2", "cuCtxPopCurrent_v2", "nvshmem_free",
            "nvshmemx_hostlib_finalize"]
        assert stand_ins.calls("nvshmem_free")[0]["pointer"] == heap
        assert not launcher.nvshmem_active(library)
    assert len(set(sizes)) == 1 and sizes[0] >= spec.symmetric_bytes  # the same on every rank


@needs_ptxas
def test_an_unreachable_peer_is_named_and_the_next_launch_allocates_nothing_new(
        collective_example, library, stand_ins, monkeypatch):
    kernel = collective_example("all_gather", 4)
    join(library, launcher.nvshmem_unique_id(library, None), 1, 4)
    keep: list = []
    me = process(kernel, 1, keep)
    monkeypatch.setenv(fake_nvshmem.UNREACHABLE_VARIABLE, "3")
    with pytest.raises(LaunchError) as caught:
        me.launch(library, kernel)
    error = caught.value
    assert (error.status, error.call) == (launcher.STATUS_DRIVER_ERROR, "nvshmem_ptr")
    assert "nvshmem_ptr returned null for NVSHMEM PE 3 on NVSHMEM PE 1" in str(error)
    assert "not reachable by loads and stores" in str(error) and "all_gather" in str(error)
    assert stand_ins.calls("cuLaunchKernelEx") == []
    # The allocation stays (the other PEs made theirs): retrying makes only the table.
    monkeypatch.delenv(fake_nvshmem.UNREACHABLE_VARIABLE)
    stand_ins.clear()
    me.launch(library, kernel)
    assert stand_ins.calls("nvshmem_malloc") == [] and stand_ins.calls("cuLaunchKernelEx")


@needs_ptxas
def test_multimem_without_a_multicast_address_is_an_error(collective_example, library, stand_ins,
                                                         monkeypatch):
    kernel = collective_example("all_reduce", 2)
    join(library, launcher.nvshmem_unique_id(library, None), 0, 2)
    monkeypatch.setenv(fake_nvshmem.NO_MULTICAST_VARIABLE, "1")
    keep: list = []
    with pytest.raises(LaunchError, match=r"nvshmemx_mc_ptr\(NVSHMEM_TEAM_WORLD\) returned null "
                                          r"on NVSHMEM PE 0.*all_reduce.*multimem") as caught:
        process(kernel, 0, keep).launch(library, kernel)
    assert caught.value.call == "nvshmemx_mc_ptr"
    assert stand_ins.calls("cuLaunchKernelEx") == []


@needs_ptxas
def test_the_rank_must_be_the_pe_and_the_axis_every_pe(collective_example, library, stand_ins):
    kernel = collective_example("all_gather", 2)
    join(library, launcher.nvshmem_unique_id(library, None), 0, 2)
    keep: list = []
    with pytest.raises(LaunchError, match=r"got device index 1 \(group 0\) in the process that "
                                          r"is NVSHMEM PE 0.*jax.process_index"):
        process(kernel, 1, keep).launch(library, kernel)
    with pytest.raises(LaunchError, match=r"got device index 0 \(group 1\)"):
        process(kernel, 0, keep, group=1).launch(library, kernel)
    four = collective_example("all_gather", 4)
    with pytest.raises(LaunchError, match="runs over 4 devices along its mesh axis, but NVSHMEM "
                                          "joins 2 processes"):
        process(four, 0, keep).launch(library, four)
    assert stand_ins.calls("nvshmem_malloc") == []
    # Initialised once: again as the same PE is nothing, as another PE an error.
    unique_id = bytes.fromhex(stand_ins.calls("nvshmemx_hostlib_init_attr")[0]["id"])
    join(library, unique_id, 0, 2)
    with pytest.raises(LaunchError, match="already is NVSHMEM PE 0 of 2"):
        join(library, unique_id, 1, 2)
    assert len(stand_ins.calls("nvshmemx_hostlib_init_attr")) == 1


def test_a_missing_or_failing_library_is_named(library, stand_ins, monkeypatch, tmp_path):
    monkeypatch.delenv(launcher.LIBNVSHMEM_VARIABLE)
    missing = str(tmp_path / "absent" / "libnvshmem_host.so.3")
    with pytest.raises(LaunchError, match=r"cannot load the NVSHMEM host library .*absent.*"
                                          r"nvidia-nvshmem-cu13") as caught:
        launcher.nvshmem_unique_id(library, missing)
    assert caught.value.status == launcher.STATUS_NO_DRIVER
    with pytest.raises(LaunchError, match=r"libcuda.* lacks nvshmemx_get_uniqueid"):
        launcher.nvshmem_unique_id(library, os.environ[launcher.LIBCUDA_VARIABLE])
    monkeypatch.setenv(launcher.LIBNVSHMEM_VARIABLE, missing)  # the variable wins over a path
    with pytest.raises(LaunchError, match="absent"):
        launcher.nvshmem_unique_id(library, os.environ[launcher.LIBCUDA_VARIABLE])
    monkeypatch.delenv(launcher.LIBNVSHMEM_VARIABLE)
    fake = str(fake_nvshmem.build(tmp_path / "fake"))
    monkeypatch.setenv(fake_nvshmem.FAIL_VARIABLE, "nvshmemx_hostlib_init_attr")
    with pytest.raises(LaunchError, match=r"nvshmemx_hostlib_init_attr failed \(status 7\) "
                                          r"initialising NVSHMEM as NVSHMEM PE 1 of 2"):
        launcher.nvshmem_initialize(library, fake, bytes(launcher.NVSHMEM_UNIQUE_ID_BYTES), 1, 2)
    assert not launcher.nvshmem_active(library)
    with pytest.raises(LaunchError, match="a unique id takes 128 bytes, got 3"):
        launcher.nvshmem_initialize(library, fake, b"abc", 0, 2)


@needs_ptxas
def test_a_group_of_one_device_needs_no_nvshmem(collective_example, library, stand_ins):
    """With NVSHMEM up, a kernel whose mesh axis has one device still meets itself alone and
    gets a heap of its own (CUDA VMM): it has no peers in other processes."""
    kernel = collective_example("all_gather", 1)
    join(library, launcher.nvshmem_unique_id(library, None), 1, 2)
    keep: list = []
    process(kernel, 0, keep).launch(library, kernel)
    assert stand_ins.calls("nvshmem_malloc") == [] and stand_ins.calls("nvshmem_ptr") == []
    assert len(stand_ins.calls("cuMemCreate")) == 1 and stand_ins.calls("cuLaunchKernelEx")
