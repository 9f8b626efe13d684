"""Collective kernels on GPUs in one process, without a GPU: the launcher's core drives the
recording stand-in for libcuda.so.1 (tests/launcher/fake_libcuda.cc, 8 fake devices) from one
thread per device, as XLA calls it, for 2, 4 and 8 devices. Checked on the recorded calls:
the symmetric heap's VMM and multicast calls keep the driver API's documented rules
(fake_driver.vmm_violations), every device's peer table holds every heap in axis order, the
heap is made once and reused, the kernel's parameters follow the ABI (buffers, tensor maps,
debug, then smalti_device, smalti_peers, smalti_multicast), and a missing device, a device
without multicast or peer access, and a failing cuMulticastCreate come back as errors naming
what failed."""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.dialect.kernel import CollectiveSpec, KernelArg, KernelSignature, TensorMapRecord
from smalti.ptx.toolchain import compile_ptx
from smalti.runtime import jax_integration, launcher
from smalti.runtime.cache import CompiledKernel, ptxas_available
from smalti.runtime.launcher import LaunchError
from smalti.runtime.simulate import NUMPY_DTYPES
from tests.launcher import fake_driver

pytestmark = pytest.mark.skipif(not ptxas_available(),
                                reason="ptxas (nvidia-cuda-nvcc) is not installed: no cubins")

S = jax.ShapeDtypeStruct
DEVICE_COUNTS = [2, 4, 8]
HIDDEN = 3  # smalti_device, smalti_peers, smalti_multicast


def ordinals(devices: int) -> list[int]:
    """The CUDA ordinal of each index along the mesh axis: a permutation of the fake's devices,
    so that axis order and ordinal order differ."""
    return [(3 * rank + 1) % fake_driver.FAKE_DEVICES for rank in range(devices)]


@pytest.fixture
def driver(library, libcuda, tmp_path, monkeypatch) -> fake_driver.CallLog:
    """A fresh stand-in recording into this test's log (heaps of earlier tests released)."""
    monkeypatch.setenv(launcher.LIBCUDA_VARIABLE, str(libcuda))
    monkeypatch.setenv(fake_driver.LOG_VARIABLE, str(tmp_path / "calls.jsonl"))
    for variable in (fake_driver.FAIL_VARIABLE, fake_driver.STAMP_VARIABLE,
                     fake_driver.NO_MULTICAST_VARIABLE, fake_driver.NO_PEER_VARIABLE,
                     fake_driver.NO_VMM_VARIABLE, launcher.TIMEOUT_VARIABLE):
        monkeypatch.delenv(variable, raising=False)
    launcher.reset(library)
    yield fake_driver.CallLog(tmp_path / "calls.jsonl")
    launcher.reset(library)


def aligned(nbytes: int, keep: list) -> np.ndarray:
    """Host memory posing as a device buffer, 256-byte aligned."""
    raw = np.zeros(nbytes + 256, np.uint8)
    keep.append(raw)
    offset = -raw.ctypes.data % 256
    return raw[offset:offset + nbytes]


@dataclass
class Device:
    """One device's call: its index along the axis, CUDA ordinal, buffers and rank buffer."""

    rank: int
    ordinal: int
    buffers: list[np.ndarray]
    position: np.ndarray  # i32[2]: index along the mesh axis, group

    @property
    def stream(self) -> int:
        return fake_driver.stream_of(self.ordinal)

    def addresses(self) -> list[int]:
        return [b.ctypes.data for b in self.buffers]


def group(signature: KernelSignature, devices: int, keep: list, group_index: int = 0
          ) -> list[Device]:
    out = []
    for rank, ordinal in enumerate(ordinals(devices)):
        buffers = [aligned(math.prod(a.shape) * NUMPY_DTYPES[a.dtype].itemsize, keep)
                   for a in signature.args]
        position = aligned(8, keep).view(np.int32)
        position[:] = (rank, group_index)
        out.append(Device(rank, ordinal, buffers, position))
    return out


def launch_all(library: ctypes.CDLL, attributes: dict, members: Sequence[Device]
               ) -> list[BaseException | None]:
    """Every member's launch, each from its own thread (as XLA calls per device); the error
    each raised (None when it launched)."""
    errors: list[BaseException | None] = [None] * len(members)

    def run(i: int) -> None:
        member = members[i]
        try:
            launcher.launch_core(library, attributes, member.addresses(), stream=member.stream,
                                 rank=member.position.ctypes.data)
        except BaseException as error:  # handed to the test
            errors[i] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(members))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a collective launch never returned"
    return errors


@dataclass(frozen=True)
class Heap:
    """The symmetric heap as the recorded calls made it."""

    bases: dict[int, int]  # CUDA ordinal -> the heap's address (its cuMemMap)
    size: int
    tables: dict[int, int]  # CUDA ordinal -> its peer table (cuMemAlloc)
    multicast: int  # the multicast mapping's address (0: none)


def heap_of(calls: list[dict], devices: int) -> Heap:
    created = {c["handle"]: c["prop"]["device"] for c in calls
               if c["call"] == "cuMemCreate" and c["result"] == 0}
    maps = [c for c in calls if c["call"] == "cuMemMap" and c["result"] == 0]
    bases = {created[m["handle"]]: m["pointer"] for m in maps if m["handle"] in created}
    multicast = [m["pointer"] for m in maps if m.get("multicast")]
    tables = {c["device"]: c["pointer"] for c in calls
              if c["call"] == "cuMemAlloc_v2" and c["size"] == 8 * devices and c["result"] == 0}
    sizes = {m["size"] for m in maps}
    assert len(sizes) == 1 and len(multicast) <= 1
    return Heap(bases, sizes.pop(), tables, multicast[0] if multicast else 0)


def parameters(launch: dict) -> list[bytes]:
    return [bytes.fromhex(p["bytes"]) for p in launch["params"]]


def u64(value: bytes) -> int:
    return int.from_bytes(value, "little")


def kernel_params(calls: list[dict], name: str) -> list[dict]:
    """The kernel's parameters as the stand-in read them from the cubin (its first load)."""
    load = next(c for c in calls if c["call"] == "cuModuleLoadData" and c["result"] == 0)
    return load["kernels"][name]["params"]


def check_group_launch(calls: list[dict], signature: KernelSignature, members: list[Device],
                       heap: Heap, params: list[dict]) -> None:
    """Each device launched once, on its own stream, with the ABI's parameters (`params`:
    the cubin's)."""
    devices = len(members)
    spec = signature.collective
    launches = [c for c in calls if c["call"] == "cuLaunchKernelEx"]
    assert len(launches) == devices
    by_stream = {launch["stream"]: launch for launch in launches}
    for member in members:
        launch = by_stream[member.stream]
        values = parameters(launch)
        assert [p["size"] for p in launch["params"]] == [p["size"] for p in params]
        args = len(signature.args)
        assert [u64(v) for v in values[:args]] == member.addresses()
        device, peers, multicast = (u64(v) for v in values[-HIDDEN:])
        assert device == member.position.ctypes.data  # element 0: the index along the axis
        assert peers == heap.tables[member.ordinal]
        assert multicast == (heap.multicast if spec.multimem else 0)
        assert len(values) == args + len(signature.tensor_maps) + HIDDEN  # no debug buffer
    # The peer table of every device: every device's heap, in axis order.
    expected = [heap.bases[ordinal] for ordinal in ordinals(devices)]
    for ordinal, table in heap.tables.items():
        held = np.frombuffer(ctypes.string_at(table, 8 * devices), np.uint64).tolist()
        assert held == expected, f"the peer table of CUDA device {ordinal}"


@pytest.mark.parametrize("devices", DEVICE_COUNTS)
@pytest.mark.parametrize("name", ["all_gather", "all_reduce"])  # all_reduce: multimem
def test_a_group_makes_its_heap_once_and_launches_with_the_peer_table(name, devices, collective_example,
                                                                      library, driver):
    kernel = collective_example(name, devices)
    signature = kernel.signature
    spec = signature.collective
    assert spec.devices == devices and spec.multimem == (name == "all_reduce")
    attributes = jax_integration.ffi_attributes(kernel)
    keep: list = []
    members = group(signature, devices, keep)
    assert launch_all(library, attributes, members) == [None] * devices
    calls = driver.calls()
    assert [c for c in calls if c["result"] != 0] == []
    assert fake_driver.vmm_violations(calls) == []
    heap = heap_of(calls, devices)
    assert set(heap.bases) == set(heap.tables) == set(ordinals(devices))
    assert heap.size >= spec.symmetric_bytes
    for base in heap.bases.values():  # zeroed when made (the semaphores start at 0)
        assert not any(ctypes.string_at(base, heap.size))
    # Every heap is readable and writable by every device of the group.
    group_devices = sorted(ordinals(devices))
    for call in driver.calls("cuMemSetAccess"):
        assert sorted(a["device"] for a in call["access"]) == group_devices
        assert {a["flags"] for a in call["access"]} == {fake_driver.ACCESS_READ_WRITE}
    assert len(driver.calls("cuMemSetAccess")) == devices + spec.multimem
    assert len(driver.calls("cuMulticastCreate")) == spec.multimem
    if spec.multimem:
        [create] = driver.calls("cuMulticastCreate")
        assert create["prop"]["num_devices"] == devices and create["prop"]["size"] == heap.size
        binds = driver.calls("cuMulticastBindMem")
        assert sorted(b["device"] for b in binds) == group_devices
    params = kernel_params(calls, signature.name)
    assert [p["size"] for p in params] == [8] * (len(signature.args) + HIDDEN)
    check_group_launch(calls, signature, members, heap, params)
    # Each device read its rank on its own stream and waited for it.
    reads = driver.calls("cuMemcpyDtoHAsync_v2")
    assert sorted((r["stream"], r["source"]) for r in reads) == sorted(
        (m.stream, m.position.ctypes.data) for m in members)

    # A second launch of the group reuses the heap: no VMM call, the same tables.
    driver.clear()
    assert launch_all(library, attributes, members) == [None] * devices
    again = driver.calls()
    made = {"cuMemCreate", "cuMemMap", "cuMemAlloc_v2", "cuMulticastCreate", "cuMemsetD8_v2"}
    assert made.isdisjoint(c["call"] for c in again)
    check_group_launch(again, signature, members, heap, params)

    # Reset frees the heap: unmapped before its addresses are freed, every handle released.
    launcher.reset(library)
    everything = calls + again + driver.calls()[len(again):]
    assert fake_driver.vmm_violations(everything) == []
    released = {c["handle"] for c in driver.calls("cuMemRelease") if c["result"] == 0}
    handles = {c["handle"] for c in calls if c["call"] in ("cuMemCreate", "cuMulticastCreate")}
    assert released == handles
    assert len([c for c in driver.calls("cuMemFree_v2") if c["result"] == 0]) == devices


def test_groups_of_two_axes_get_heaps_of_their_own(collective_example, library, driver):
    """Two groups of 2 (group indices 0 and 1) on disjoint devices launch at once; each meets
    its own members and gets its own heap."""
    kernel = collective_example("all_gather", 2)
    attributes = jax_integration.ffi_attributes(kernel)
    keep: list = []
    first = group(kernel.signature, 2, keep, group_index=0)
    second = group(kernel.signature, 2, keep, group_index=1)
    for member, ordinal in zip(second, (0, 5), strict=True):
        member.ordinal = ordinal
    assert launch_all(library, attributes, first + second) == [None] * 4
    tables = {c["device"]: c["pointer"] for c in driver.calls("cuMemAlloc_v2")}
    assert len(driver.calls("cuMemCreate")) == 4
    for members in (first, second):
        held = np.frombuffer(ctypes.string_at(tables[members[0].ordinal], 16), np.uint64)
        heap = heap_of(driver.calls(), 2)
        assert held.tolist() == [heap.bases[m.ordinal] for m in members]


def test_a_device_that_never_arrives_times_out_naming_it(collective_example, library, driver,
                                                         monkeypatch):
    kernel = collective_example("all_gather", 4)
    monkeypatch.setenv(launcher.TIMEOUT_VARIABLE, "1.5")
    keep: list = []
    members = group(kernel.signature, 4, keep)
    errors = launch_all(library, jax_integration.ffi_attributes(kernel), members[:3])
    for error in errors:
        assert isinstance(error, LaunchError)
        assert error.status == launcher.STATUS_TIMEOUT and error.call == ""
        assert "collective kernel all_gather (group 0) waited 1.5 s" in str(error)
        assert "devices 3 of 4 along the mesh axis never arrived" in str(error)
        assert "arrived: 0 on CUDA device 1, 1 on CUDA device 4, 2 on CUDA device 7" in str(error)
    assert driver.calls("cuMemCreate") == [] and driver.calls("cuLaunchKernelEx") == []
    # The group meets again when every device comes.
    assert launch_all(library, jax_integration.ffi_attributes(kernel), members) == [None] * 4


def check_failed_everywhere(errors: list, call: str, code: int, text: str) -> None:
    for error in errors:
        assert isinstance(error, LaunchError), error
        assert (error.status, error.call, error.cuda_error) == (
            launcher.STATUS_DRIVER_ERROR, call, code)
        assert text in str(error) and "all_reduce" in str(error)


def test_a_failing_multicast_create_is_reported_and_nothing_is_left(collective_example, library, driver,
                                                                    monkeypatch):
    kernel = collective_example("all_reduce", 4)
    attributes = jax_integration.ffi_attributes(kernel)
    keep: list = []
    members = group(kernel.signature, 4, keep)
    monkeypatch.setenv(fake_driver.FAIL_VARIABLE, "cuMulticastCreate")
    errors = launch_all(library, attributes, members)
    check_failed_everywhere(errors, "cuMulticastCreate", fake_driver.CUDA_ERROR_NOT_SUPPORTED,
                            "cuMulticastCreate failed: CUDA_ERROR_NOT_SUPPORTED")
    calls = driver.calls()
    assert fake_driver.vmm_violations(calls) == []
    made = {c["handle"] for c in calls if c["call"] == "cuMemCreate" and c["result"] == 0}
    assert made and made == {c["handle"] for c in driver.calls("cuMemRelease")}
    assert driver.calls("cuLaunchKernelEx") == []
    # Not remembered: the next launch makes the heap and runs.
    monkeypatch.delenv(fake_driver.FAIL_VARIABLE)
    driver.clear()
    assert launch_all(library, attributes, members) == [None] * 4
    assert len(driver.calls("cuMulticastCreate")) == 1


def test_a_device_without_multicast_or_peer_access_is_named(collective_example, library, driver,
                                                            monkeypatch):
    kernel = collective_example("all_reduce", 2)
    attributes = jax_integration.ffi_attributes(kernel)
    keep: list = []
    members = group(kernel.signature, 2, keep)
    monkeypatch.setenv(fake_driver.NO_MULTICAST_VARIABLE, "4")
    check_failed_everywhere(launch_all(library, attributes, members), "cuDeviceGetAttribute",
                            fake_driver.CUDA_ERROR_NOT_SUPPORTED,
                            "CUDA device 4 (index 1 along the mesh axis) does not support "
                            "multicast")
    monkeypatch.delenv(fake_driver.NO_MULTICAST_VARIABLE)
    monkeypatch.setenv(fake_driver.NO_PEER_VARIABLE, "1")
    check_failed_everywhere(launch_all(library, attributes, members), "cuDeviceCanAccessPeer",
                            fake_driver.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                            "CUDA device 1 (index 0 along the mesh axis) cannot access the "
                            "memory of CUDA device 4")
    monkeypatch.delenv(fake_driver.NO_PEER_VARIABLE)
    monkeypatch.setenv(fake_driver.NO_VMM_VARIABLE, "1")
    check_failed_everywhere(launch_all(library, attributes, members), "cuDeviceGetAttribute",
                            fake_driver.CUDA_ERROR_NOT_SUPPORTED,
                            "does not support virtual memory management")
    assert driver.calls("cuMemCreate") == []


def test_a_collective_launch_needs_its_rank_buffer(collective_example, library, driver):
    kernel = collective_example("all_gather", 2)
    attributes = jax_integration.ffi_attributes(kernel)
    assert list(attributes["collective"]) == [2, kernel.signature.collective.symmetric_bytes, 0]
    keep: list = []
    [member, _] = group(kernel.signature, 2, keep)
    with pytest.raises(LaunchError, match="lacks its rank buffer"):
        launcher.launch_core(library, attributes, member.addresses(), stream=member.stream)
    member.position[:] = (2, 0)  # an index past the axis
    with pytest.raises(LaunchError, match="got device index 2 and group 0 for 2 devices"):
        launcher.launch_core(library, attributes, member.addresses(), stream=member.stream,
                             rank=member.position.ctypes.data)
    assert driver.calls("cuLaunchKernelEx") == []


# A kernel taking a tensor map over a symmetric buffer (one 128-byte map per device, in one
# parameter) and a collective kernel's hidden parameters.
SYMMETRIC_PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry sym(.param .u64 x, .param .align 64 .b8 maps[{bytes}],
                    .param .u64 smalti_device, .param .u64 smalti_peers,
                    .param .u64 smalti_multicast)
.maxntid 128, 1, 1
{{
  ret;
}}
"""
SYMMETRIC_OFFSET = 4096


def symmetric_kernel(devices: int) -> CompiledKernel:
    cubin = compile_ptx(SYMMETRIC_PTX.format(bytes=128 * devices)).cubin
    record = TensorMapRecord("maps", -1, "bf16", (64, 64), (64, 64), 128,
                             symmetric_offset=SYMMETRIC_OFFSET)
    signature = KernelSignature("sym", (1, 1, 1), 1, (KernelArg("x", "f32", (128,)),),
                                tensor_maps=(record,),
                                collective=CollectiveSpec(devices, "x",
                                                          SYMMETRIC_OFFSET + 64 * 64 * 2))
    return CompiledKernel("sym", "", signature, cubin, "sm_90a")


@pytest.mark.parametrize("devices", DEVICE_COUNTS)
def test_a_symmetric_tensor_map_is_encoded_once_per_device(devices, library, driver):
    kernel = symmetric_kernel(devices)
    attributes = jax_integration.ffi_attributes(kernel)
    records = attributes["tensor_maps"]
    assert records.size == jax_integration.RECORD_SIZE
    assert records[0] == -1 - SYMMETRIC_OFFSET  # a symmetric buffer's record
    assert list(records[1:5]) == [9, 2, 3, 0] and list(records[5:7]) == [64, 64]
    keep: list = []
    members = group(kernel.signature, devices, keep)
    assert launch_all(library, attributes, members) == [None] * devices
    calls = driver.calls()
    assert [c for c in calls if c["result"] != 0] == []
    heap = heap_of(calls, devices)
    encodes = driver.calls("cuTensorMapEncodeTiled")
    assert len(encodes) == devices * devices
    expected = [heap.bases[o] + SYMMETRIC_OFFSET for o in ordinals(devices)]
    for launch in driver.calls("cuLaunchKernelEx"):
        maps = parameters(launch)[1]
        assert len(maps) == 128 * devices
        slots = [maps[128 * p:128 * p + 128] for p in range(devices)]
        by_map = {bytes.fromhex(c["map"]): c for c in encodes}
        assert [by_map[slot]["address"] for slot in slots] == expected  # axis order
        for slot in slots:
            call = by_map[slot]
            assert fake_driver.tensor_map_violations(call) == []
            assert (call["dims"], call["box"], call["strides"]) == ([64, 64], [64, 64], [128])
    params = kernel_params(calls, "sym")
    assert [p["size"] for p in params] == [8, 128 * devices, 8, 8, 8]
    check_group_launch(calls, kernel.signature, members, heap, params)


def test_a_symmetric_record_of_a_kernel_that_is_not_collective_is_refused(library, driver):
    kernel = symmetric_kernel(2)
    attributes = {**jax_integration.ffi_attributes(kernel),
                  "collective": np.zeros(3, np.int64)}
    with pytest.raises(LaunchError, match="maps a symmetric buffer, but the kernel is not "
                                          "collective"):
        launcher.launch_core(library, attributes, [0x1000])
    assert driver.calls() == []


HOST_TARGET = "smalti_launch_host_collective_test"  # the FFI handler without a stream, on CPU


@pytest.fixture(scope="module")
def host_target(library) -> str:
    handler = getattr(library, launcher.HANDLER_WITHOUT_STREAM_SYMBOL)
    jax.ffi.register_ffi_target(HOST_TARGET, jax.ffi.pycapsule(handler), platform="cpu")
    return HOST_TARGET


def test_the_xla_ffi_handler_takes_the_rank_operand_last(host_target, library, driver):
    """Through XLA (a group of one device, the null stream's device 0): the last operand is
    the rank buffer, read back by the launcher and passed as smalti_device; the output is
    XLA's result buffer."""
    kernel = symmetric_kernel(1)
    out = S((128,), jnp.float32)
    position = jnp.array([0, 0], jnp.int32)
    call = jax.ffi.ffi_call(HOST_TARGET, (out,), has_side_effect=True)
    jax.block_until_ready(jax.jit(
        lambda p: call(p, **jax_integration.ffi_attributes(kernel)))(position))
    assert [c for c in driver.calls() if c["result"] != 0] == []
    [read] = driver.calls("cuMemcpyDtoHAsync_v2")
    assert read["count"] == 8 and bytes.fromhex(read["bytes"]) == bytes(8)
    [launch] = driver.calls("cuLaunchKernelEx")
    values = parameters(launch)
    heap = heap_of(driver.calls(), 1)
    assert u64(values[2]) == read["source"]  # smalti_device: the rank operand
    assert u64(values[3]) == heap.tables[0] and u64(values[4]) == 0
    with pytest.raises(Exception, match=r"the last operand of collective kernel sym must be "
                                        r"its s32\[2\] rank buffer"):
        jax.block_until_ready(jax.jit(lambda p: call(
            p, **jax_integration.ffi_attributes(kernel)))(jnp.zeros(3, jnp.int32)))


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int),
                ("location_type", ctypes.c_int), ("device", ctypes.c_int),
                ("win32", ctypes.c_void_p), ("flags", ctypes.c_uint8 * 8)]


class _MulticastProp(ctypes.Structure):  # CUmulticastObjectProp
    _fields_ = [("num_devices", ctypes.c_uint), ("size", ctypes.c_size_t),
                ("handle_types", ctypes.c_ulonglong), ("flags", ctypes.c_ulonglong)]


def test_the_stand_in_refuses_what_the_driver_api_forbids(libcuda, driver, tmp_path):
    """The stand-in's own checks, called directly: touching memory before access is set,
    mapping outside a reservation, binding before the whole team was added."""
    copy = tmp_path / "copy" / "libcuda.so.1"
    copy.parent.mkdir()
    copy.write_bytes(libcuda.read_bytes())
    fake = ctypes.CDLL(str(copy))
    u64 = ctypes.c_ulonglong
    context = ctypes.c_void_p()
    assert fake.cuStreamGetCtx(ctypes.c_void_p(fake_driver.stream_of(2)),
                               ctypes.byref(context)) == 0
    assert fake.cuCtxPushCurrent_v2(context) == 0
    size = ctypes.c_size_t()
    prop = _Prop(fake_driver.ALLOCATION_TYPE_PINNED, 0, fake_driver.LOCATION_TYPE_DEVICE, 2)
    assert fake.cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(prop), 0) == 0
    granularity = size.value
    handle, base = u64(), u64()
    assert fake.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(granularity + 1),
                            ctypes.byref(prop), u64(0)) == 1  # not a granule multiple
    assert fake.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(granularity),
                            ctypes.byref(prop), u64(0)) == 0
    assert fake.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(granularity),
                                    ctypes.c_size_t(0), u64(0), u64(0)) == 0
    assert fake.cuMemMap(u64(base.value + granularity), ctypes.c_size_t(granularity),
                         ctypes.c_size_t(0), handle, u64(0)) == 1  # past the reservation
    assert fake.cuMemMap(base, ctypes.c_size_t(granularity), ctypes.c_size_t(0), handle,
                         u64(0)) == 0
    assert fake.cuMemsetD8_v2(base, ctypes.c_ubyte(0), ctypes.c_size_t(16)) == 1  # no access
    multicast = u64()
    team = _MulticastProp(2, 2 * granularity, 0, 0)
    assert fake.cuMulticastCreate(ctypes.byref(multicast), ctypes.byref(team)) == 0
    assert fake.cuMulticastAddDevice(multicast, 2) == 0
    assert fake.cuMulticastBindMem(multicast, ctypes.c_size_t(0), handle, ctypes.c_size_t(0),
                                   ctypes.c_size_t(granularity), u64(0)) == 1  # team of 1/2
    assert fake.cuCtxPopCurrent_v2(ctypes.byref(context)) == 0
    refused = {c["call"]: c["reason"] for c in driver.calls() if c["result"] != 0}
    assert "not a multiple of the granularity" in refused["cuMemCreate"]
    assert "not inside one reservation" in refused["cuMemMap"]
    assert "has no access" in refused["cuMemsetD8_v2"]
    assert "before all 2 devices were added" in refused["cuMulticastBindMem"]


def test_the_python_checks_catch_what_the_driver_api_forbids():
    """fake_driver.vmm_violations on records that break the rules (as if a driver let them)."""
    ok = {"result": 0}
    calls = [
        {"call": "cuMemGetAllocationGranularity", "granularity": 1 << 21, **ok},
        {"call": "cuMulticastGetGranularity", "granularity": 1 << 22, **ok},
        {"call": "cuMemCreate", "size": 3 << 20, "handle": 1, **ok,
         "prop": {"type": 1, "location_type": 1, "device": 0, "handle_types": 0}},
        {"call": "cuMemAddressReserve", "size": 1 << 21, "alignment": 0, "pointer": 1 << 30,
         **ok},
        {"call": "cuMemMap", "pointer": (1 << 30) + (1 << 21), "size": 1 << 21, "offset": 0,
         "handle": 1, **ok},
        {"call": "cuMemMap", "pointer": 1 << 30, "size": 1 << 21, "offset": 0, "handle": 1,
         **ok},
        {"call": "cuMemsetD8_v2", "destination": 1 << 30, "count": 16, "device": 0, **ok},
        {"call": "cuMulticastCreate", "handle": 9, **ok,
         "prop": {"num_devices": 2, "size": 1 << 21, "handle_types": 0, "flags": 0}},
        {"call": "cuMulticastAddDevice", "handle": 9, "device": 0, **ok},
        {"call": "cuMulticastBindMem", "handle": 9, "memory": 1, "multicast_offset": 0,
         "memory_offset": 0, "size": 1 << 21, "device": 0, **ok},
        {"call": "cuMemAddressFree", "pointer": 1 << 30, "size": 1 << 21, **ok},
    ]
    found = "\n".join(fake_driver.vmm_violations(calls))
    for text in ("size 3145728 is not a multiple of the allocation granularity",
                 "not inside one reservation", "touches memory it was given no access to",
                 "not a multiple of the multicast granularity",
                 "memory bound before every device was added",
                 "offsets or size break the multicast granularity",
                 "addresses freed while still mapped"):
        assert text in found
