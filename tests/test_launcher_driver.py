"""The CUDA launch path without a GPU: the launcher's driver-facing core, and its XLA FFI
handler registered on the CPU platform, drive a recording stand-in for libcuda.so.1
(tests/launcher/fake_libcuda.cc) for every example kernel, and each recorded driver call is
checked against the CUDA driver API's documented preconditions: tensor-map encodings, launch
configurations and cluster attributes, dynamic shared memory opt-ins, kernel parameters
against the cubin's own (EIATTR_KPARAM_INFO), the debug buffer's memset. Broken arguments
and a driver failure at each stage come back as errors naming the call."""

from __future__ import annotations

import ctypes
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smalti.dialect.context import make_context, parse_module
from smalti.dialect.kernel import KernelSignature
from smalti.ptx.toolchain import ToolchainError, compile_ptx, find_tool
from smalti.runtime import jax_integration, launcher
from smalti.runtime.cache import CompiledKernel, KernelCache, compile_kernel, ptxas_available
from smalti.runtime.launcher import LaunchError
from smalti.runtime.simulate import NUMPY_DTYPES
from tests.dsl_helpers import EXAMPLES as EXAMPLES_DIR
from tests.dsl_helpers import load_example
from tests.launcher import fake_driver
from tests.test_jax_integration import DEBUG_KERNEL

pytestmark = pytest.mark.skipif(not ptxas_available(),
                                reason="ptxas (nvidia-cuda-nvcc) is not installed: no cubins")

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16
STREAM = 0x5A1700  # a stream handle, as XLA would pass one
HOST_TARGET = "smalti_launch_host_test"  # the FFI handler without a stream, on XLA:CPU

# name -> (examples/NAME.py, its kernel, the argument specs) for DSL kernels; NAME.mlir files
# and the debug_print kernel of test_jax_integration otherwise.
DSL_EXAMPLES = {
    "pointwise": ("pointwise", "scale_shift", (S((256, 384), F32), S((384,), F32),
                                               S((256,), F32))),
    "softmax": ("softmax", "softmax", (S((256, 512), F32),)),
    "matmul": ("matmul", "matmul", (S((256, 256), BF16),) * 2),
    "matmul_autotuned": ("matmul_autotuned", "matmul", (S((256, 256), BF16),) * 2),
    "matmul_ws": ("matmul_ws", "matmul_ws", (S((256, 512), BF16), S((512, 512), BF16))),
    "flash_attention_d64": ("flash_attention", "attention", (S((2, 256, 64), BF16),) * 3),
    "flash_attention_d128": ("flash_attention", "causal_attention",
                             (S((2, 256, 128), BF16),) * 3),
}
MLIR_EXAMPLES = ["pointwise_f32.mlir", "matmul_128x128x64.mlir", "matmul_128x256x64_ws.mlir",
                 "matmul_256x128x64_multicast.mlir"]
ALL_KERNELS = [*DSL_EXAMPLES, *MLIR_EXAMPLES, "debug_print"]
# The CUtensorMapDataType each element type must be encoded as (driver API enum values).
DATA_TYPES = {"i8": 0, "f8E4M3FN": 0, "f8E5M2": 0, "i16": 1, "i32": 3, "i64": 5, "f16": 6,
              "f32": 7, "f64": 8, "bf16": 9}  # UINT8, UINT16, INT32, INT64, FLOAT16, ...
SWIZZLES = {None: 0, 32: 1, 64: 2, 128: 3}  # CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B, _128B


def compile_named(name: str) -> CompiledKernel:
    """One of ALL_KERNELS, compiled (with its cubin)."""
    if name in DSL_EXAMPLES:
        module, kernel, specs = DSL_EXAMPLES[name]
        return getattr(load_example(module), kernel).compile(*specs)[1]
    text = DEBUG_KERNEL if name == "debug_print" else (EXAMPLES_DIR / name).read_text()
    context = make_context()
    module = parse_module(text, name, context)
    with context:
        return compile_kernel(module, cache=KernelCache(None))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Callable[[str], CompiledKernel]:
    """name -> its CompiledKernel, compiled once per module (into a private cache)."""
    kernels: dict[str, CompiledKernel] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMALTI_CACHE_DIR", str(tmp_path_factory.mktemp("smalti-cache")))

        def get(name: str) -> CompiledKernel:
            if name not in kernels:
                kernels[name] = compile_named(name)
                assert kernels[name].cubin is not None
            return kernels[name]

        yield get


@pytest.fixture
def driver(library, libcuda, tmp_path, monkeypatch) -> fake_driver.CallLog:
    """The launcher pointed at a freshly loaded stand-in that records into this test's log."""
    monkeypatch.setenv(launcher.LIBCUDA_VARIABLE, str(libcuda))
    monkeypatch.setenv(fake_driver.LOG_VARIABLE, str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv(fake_driver.FAIL_VARIABLE, raising=False)
    monkeypatch.delenv(fake_driver.STAMP_VARIABLE, raising=False)
    launcher.reset(library)
    yield fake_driver.CallLog(tmp_path / "calls.jsonl")
    launcher.reset(library)


class DeviceMemory:
    """Host memory posing as device buffers, 256-byte aligned as cudaMalloc's are."""

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []

    def allocate(self, nbytes: int, fill: int = 0) -> np.ndarray:
        raw = np.full(nbytes + 256, fill, np.uint8)
        self._blocks.append(raw)
        offset = -raw.ctypes.data % 256
        return raw[offset:offset + nbytes]


@dataclass
class Launch:
    """One launch through the core: its kernel, attributes and fake device memory."""

    kernel: CompiledKernel
    attributes: dict
    buffers: list[np.ndarray]
    debug: np.ndarray | None
    memory: DeviceMemory  # where the buffers live

    @property
    def signature(self) -> KernelSignature:
        return self.kernel.signature

    def addresses(self) -> list[int]:
        return [b.ctypes.data for b in self.buffers]

    def run(self, library: ctypes.CDLL, addresses: list[int] | None = None) -> None:
        debug = 0 if self.debug is None else self.debug.ctypes.data
        launcher.launch_core(library, self.attributes,
                             self.addresses() if addresses is None else addresses,
                             stream=STREAM, debug=debug)


def prepare(kernel: CompiledKernel) -> Launch:
    """The kernel's attributes (as the custom call gets them) and fresh buffers for its
    arguments; the debug buffer is filled with 0xAB, which the launch must zero."""
    signature = kernel.signature
    memory = DeviceMemory()
    buffers = [memory.allocate(math.prod(arg.shape) * NUMPY_DTYPES[arg.dtype].itemsize)
               for arg in signature.args]
    debug = (memory.allocate(signature.debug_buffer_bytes, fill=0xAB)
             if signature.debug_prints else None)
    return Launch(kernel, jax_integration.ffi_attributes(kernel), buffers, debug, memory)


def row_major_strides(shape: tuple[int, ...], itemsize: int) -> list[int]:
    """Byte strides of every dim but the innermost, innermost first (as the driver takes)."""
    strides, step = [], itemsize
    for size in reversed(shape[1:]):
        step *= size
        strides.append(step)
    return strides


def check_tensor_maps(encodes: list[dict], signature: KernelSignature,
                      addresses: list[int]) -> None:
    """Every map is valid for the driver and encodes its record over its buffer."""
    assert len(encodes) == len(signature.tensor_maps)
    for call, record in zip(encodes, signature.tensor_maps, strict=True):
        assert fake_driver.tensor_map_violations(call) == [], record
        arg = signature.args[record.arg]
        itemsize = NUMPY_DTYPES[arg.dtype].itemsize
        assert call["address"] == addresses[record.arg]
        assert call["data_type"] == DATA_TYPES[arg.dtype]
        assert call["rank"] == len(arg.shape)
        assert call["dims"] == list(reversed(arg.shape))
        assert call.get("strides", []) == row_major_strides(arg.shape, itemsize)
        assert call["box"] == list(reversed(record.box))
        assert call["element_strides"] == [1] * len(arg.shape)
        assert call["swizzle"] == SWIZZLES[record.swizzle]
        assert (call["interleave"], call["oob_fill"]) == (0, 0)


def check_parameters(launch: dict, kernel: dict, addresses: list[int], encodes: list[dict],
                     debug: int | None) -> None:
    """The launch passes the cubin's parameters: a pointer per buffer, the maps this launch
    encoded, then the debug buffer's pointer."""
    sizes = [p["size"] for p in kernel["params"]]
    assert sizes == ([8] * len(addresses) + [fake_driver.TENSOR_MAP_BYTES] * len(encodes)
                     + [8] * (debug is not None))
    assert [p["size"] for p in launch["params"]] == sizes
    values = [bytes.fromhex(p["bytes"]) for p in launch["params"]]
    pointers = [int.from_bytes(v, "little") for v in values[:len(addresses)]]
    assert pointers == addresses
    maps = values[len(addresses):len(addresses) + len(encodes)]
    assert maps == [bytes.fromhex(call["map"]) for call in encodes]
    ends = [p["offset"] + p["size"] for p in kernel["params"]]
    assert all(end <= p["offset"] for end, p in zip(ends, kernel["params"][1:], strict=False))
    if debug is not None:
        assert int.from_bytes(values[-1], "little") == debug


def dynamic_shared_limit(calls: list[dict], function: int) -> int:
    """MAX_DYNAMIC_SHARED_SIZE_BYTES as last set on `function` in `calls`."""
    sets = [c["value"] for c in calls if c["call"] == "cuFuncSetAttribute"
            and c.get("function") == function and c["result"] == 0
            and c["attribute"] == fake_driver.MAX_DYNAMIC_SHARED_SIZE_BYTES]
    return sets[-1] if sets else fake_driver.DEFAULT_DYNAMIC_SHARED


def expected_calls(signature: KernelSignature, *, first_launch: bool = True) -> list[str]:
    """The driver calls of one launch, in order."""
    opt_in = signature.smem_bytes > fake_driver.DEFAULT_DYNAMIC_SHARED
    return ["cuStreamGetCtx", "cuCtxPushCurrent_v2",
            *(["cuModuleLoadData", "cuModuleGetFunction"] if first_launch else []),
            *(["cuFuncSetAttribute"] if opt_in and first_launch else []),
            *["cuTensorMapEncodeTiled"] * len(signature.tensor_maps),
            *(["cuMemsetD8Async"] if signature.debug_prints else []),
            "cuLaunchKernelEx", "cuCtxPopCurrent_v2"]


@pytest.mark.parametrize("name", ALL_KERNELS)
def test_every_example_launches_within_the_driver_preconditions(name, compiled, library,
                                                                 driver):
    run = prepare(compiled(name))
    signature = run.signature
    run.run(library)
    calls = driver.calls()
    assert [c["call"] for c in calls] == expected_calls(signature)
    assert [c for c in calls if c["result"] != 0] == []
    [load] = driver.calls("cuModuleLoadData")
    assert load["sm"] == 90
    kernel = load["kernels"][signature.name]
    [launch] = driver.calls("cuLaunchKernelEx")
    [get_function] = driver.calls("cuModuleGetFunction")
    assert get_function["name"] == launch["kernel"] == signature.name

    encodes = driver.calls("cuTensorMapEncodeTiled")
    check_tensor_maps(encodes, signature, run.addresses())

    limit = dynamic_shared_limit(calls, launch["function"])
    assert fake_driver.launch_violations(launch, kernel, limit) == []
    assert launch["grid"] == list(signature.grid)
    assert launch["block"] == list(signature.block)
    assert launch["shared_bytes"] == signature.smem_bytes
    clustered = math.prod(signature.cluster) > 1
    assert fake_driver.launch_cluster(launch) == (signature.cluster if clustered else None)
    assert launch["stream"] == STREAM and launch["depth"] >= 1  # a context is current

    debug = None if run.debug is None else run.debug.ctypes.data
    check_parameters(launch, kernel, run.addresses(), encodes, debug)
    if run.debug is not None:
        [memset] = driver.calls("cuMemsetD8Async")
        assert (memset["destination"], memset["count"], memset["value"]) == (
            debug, signature.debug_buffer_bytes, 0)
        assert memset["stream"] == launch["stream"]
        assert not run.debug.any()  # all of it zeroed (and the count is exact, above)
    assert calls[0]["stream"] == STREAM and calls[-1]["depth"] == 0  # context popped


def test_a_second_launch_reuses_the_module_and_encodes_fresh_maps(compiled, library, driver):
    run = prepare(compiled("matmul_128x256x64_ws.mlir"))
    run.run(library)
    first = driver.calls()
    driver.clear()
    run.run(library)
    second = driver.calls()
    assert [c["call"] for c in second] == expected_calls(run.signature, first_launch=False)
    [launch] = [c for c in second if c["call"] == "cuLaunchKernelEx"]
    [load] = [c for c in first if c["call"] == "cuModuleLoadData"]
    limit = dynamic_shared_limit(first, launch["function"])
    kernel = load["kernels"][run.signature.name]
    assert fake_driver.launch_violations(launch, kernel, limit) == []
    encodes = [c for c in second if c["call"] == "cuTensorMapEncodeTiled"]
    check_parameters(launch, kernel, run.addresses(), encodes, None)
    first_maps = {c["map"] for c in first if c["call"] == "cuTensorMapEncodeTiled"}
    assert first_maps.isdisjoint(c["map"] for c in encodes)


def test_the_debug_buffer_is_zeroed_before_every_launch(compiled, library, driver):
    run = prepare(compiled("debug_print"))
    for _ in range(2):
        run.debug[:] = 0xAB  # what the previous launch's prints left
        run.run(library)
        assert not run.debug.any()
    names = [c["call"] for c in driver.calls()]
    memsets = [i for i, n in enumerate(names) if n == "cuMemsetD8Async"]
    launches = [i for i, n in enumerate(names) if n == "cuLaunchKernelEx"]
    assert len(memsets) == len(launches) == 2
    assert all(m < k for m, k in zip(memsets, launches, strict=True))
    assert launches[0] < memsets[1]


def _set_entry(key: str, index: int, value: int) -> Callable[[Launch], None]:
    def mutate(run: Launch) -> None:
        values = np.array(run.attributes[key], dtype=np.int64)
        values[index] = value
        run.attributes[key] = values

    return mutate


# name -> (kernel, what to break, the call that must refuse it, its CUresult, its reason)
BROKEN = {
    "box over 256": ("matmul_128x128x64.mlir", _set_entry("tensor_maps", 15, 512),
                     "cuTensorMapEncodeTiled", 1, "boxDim[1] = 512"),
    "box wider than the swizzle span": ("matmul_128x128x64.mlir",
                                        _set_entry("tensor_maps", 14, 128),
                                        "cuTensorMapEncodeTiled", 1, "swizzle span"),
    "stride not a multiple of 16": ("matmul_128x128x64.mlir", _set_entry("tensor_maps", 10, 1000),
                                    "cuTensorMapEncodeTiled", 1, "globalStrides[0] = 1000"),
    "misaligned buffer": ("flash_attention_d64", None, "cuTensorMapEncodeTiled", 1,
                          "globalAddress"),
    "shared memory over 227 KiB": ("matmul_128x256x64_ws.mlir",
                                   _set_entry("launch", 9, 240 * 1024),
                                   "cuFuncSetAttribute", 1, "opt-in limit"),
    "grid not a whole number of clusters": ("matmul_256x128x64_multicast.mlir",
                                            _set_entry("launch", 0, 3), "cuLaunchKernelEx",
                                            912, "does not divide the grid"),
    "cluster other than the kernel's": ("matmul_256x128x64_multicast.mlir",
                                        _set_entry("launch", 6, 4), "cuLaunchKernelEx", 912,
                                        ".reqnctapercluster"),
    "2048 threads per block": ("pointwise_f32.mlir", _set_entry("launch", 3, 2048),
                               "cuLaunchKernelEx", 1, "block dimension 0 = 2048"),
    "block over the kernel's .maxntid": ("matmul_ws", _set_entry("launch", 3, 512),
                                         "cuLaunchKernelEx", 1, ".maxntid"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_argument_is_refused_by_the_call_that_checks_it(case, compiled, library,
                                                                 driver):
    name, mutate, call, code, reason = BROKEN[case]
    run = prepare(compiled(name))
    addresses = run.addresses()
    if mutate is None:  # the misaligned buffer: an argument 8 bytes past a 256-byte boundary
        addresses[run.signature.tensor_maps[0].arg] += 8
    else:
        mutate(run)
    with pytest.raises(LaunchError) as caught:
        run.run(library, addresses)
    error = caught.value
    assert (error.call, error.cuda_error, error.status) == (call, code,
                                                            launcher.STATUS_DRIVER_ERROR)
    assert str(error).startswith(f"smalti launcher: {call} failed: CUDA_ERROR_")
    assert f"kernel {run.signature.name}" in str(error)
    refused = driver.calls(call)[-1]
    assert refused["result"] == code and reason in refused["reason"]
    if call == "cuTensorMapEncodeTiled":
        assert "for tensor map 0 of kernel" in str(error)
        assert fake_driver.tensor_map_violations(refused) != []  # the Python checks agree
    if call == "cuLaunchKernelEx":
        [load] = driver.calls("cuModuleLoadData")
        kernel = load["kernels"][run.signature.name]
        limit = dynamic_shared_limit(driver.calls(), refused["function"])
        assert fake_driver.launch_violations(refused, kernel, limit) != []
    assert driver.calls()[-1]["call"] == "cuCtxPopCurrent_v2"  # the context is left as found


# The entry point made to fail, the call the error names, a kernel that reaches it.
STAGES = [
    ("cuStreamGetCtx", "cuStreamGetCtx", "matmul_128x128x64.mlir"),
    ("cuCtxPushCurrent_v2", "cuCtxPushCurrent", "matmul_128x128x64.mlir"),
    ("cuModuleLoadData", "cuModuleLoadData", "matmul_128x128x64.mlir"),
    ("cuModuleGetFunction", "cuModuleGetFunction", "matmul_128x128x64.mlir"),
    ("cuFuncSetAttribute", "cuFuncSetAttribute", "matmul_128x128x64.mlir"),
    ("cuTensorMapEncodeTiled", "cuTensorMapEncodeTiled", "matmul_128x128x64.mlir"),
    ("cuMemsetD8Async", "cuMemsetD8Async", "debug_print"),
    ("cuLaunchKernelEx", "cuLaunchKernelEx", "matmul_128x128x64.mlir"),
]


@pytest.mark.parametrize(("symbol", "call", "name"), STAGES)
def test_a_driver_failure_at_each_stage_names_the_call(symbol, call, name, compiled, library,
                                                       driver, monkeypatch):
    run = prepare(compiled(name))
    monkeypatch.setenv(fake_driver.FAIL_VARIABLE, symbol)
    with pytest.raises(LaunchError) as caught:
        run.run(library)
    error, message = caught.value, str(caught.value)
    code, described = fake_driver.DEFAULT_FAILURES[symbol]
    assert (error.call, error.cuda_error, error.status) == (call, code,
                                                            launcher.STATUS_DRIVER_ERROR)
    assert message.startswith(f"smalti launcher: {call} failed: {described} ")
    assert f"kernel {run.signature.name}" in message
    assert len(message) < 300 and run.kernel.cubin[:16].hex() not in message.lower()
    calls = driver.calls()
    pushed = sum(c["call"] == "cuCtxPushCurrent_v2" and c["result"] == 0 for c in calls)
    assert pushed == len([c for c in calls if c["call"] == "cuCtxPopCurrent_v2"])
    if symbol == "cuModuleGetFunction":
        assert [c["result"] for c in driver.calls("cuModuleUnload")] == [0]  # no module leaked

    # Nothing half-done is kept: the next launch redoes the failed step and succeeds.
    monkeypatch.delenv(fake_driver.FAIL_VARIABLE)
    driver.clear()
    run.run(library)
    assert symbol in [c["call"] for c in driver.calls()]
    assert all(c["result"] == 0 for c in driver.calls())


def test_malformed_requests_are_refused_before_any_driver_call(compiled, library, driver):
    run = prepare(compiled("matmul_128x128x64.mlir"))
    records = run.attributes["tensor_maps"]
    cases = {
        "hold 71 values, not records of 24": {"tensor_maps": records[:-1]},
        "names argument 7 of 3": {"tensor_maps": np.concatenate([[7], records[1:]])},
        "has no cubin": {"cubin": np.zeros(0, np.uint8)},
        "launch must hold 10 values, got 9": {"launch": run.attributes["launch"][:9]},
        "launch value 3 of kernel matmul_128x128x64 is 0": {
            "launch": np.array([4, 4, 1, 0, 1, 1, 1, 1, 1, 0], np.int64)},
        "does not match debug_bytes = 64": {"debug_bytes": np.int64(64)},
    }
    for text, changes in cases.items():
        with pytest.raises(LaunchError, match=text) as caught:
            launcher.launch_core(library, {**run.attributes, **changes}, run.addresses())
        assert (caught.value.status, caught.value.call) == (launcher.STATUS_INVALID_ARGUMENT, "")
    assert driver.calls() == []


def test_a_missing_driver_is_reported_and_reset_loads_another(compiled, library, driver,
                                                               libcuda, tmp_path, monkeypatch):
    run = prepare(compiled("pointwise_f32.mlir"))
    monkeypatch.setenv(launcher.LIBCUDA_VARIABLE, str(tmp_path / "missing" / "libcuda.so.1"))
    launcher.reset(library)
    with pytest.raises(LaunchError, match=r"cannot load .*missing/libcuda\.so\.1") as caught:
        run.run(library)
    assert (caught.value.status, caught.value.call) == (launcher.STATUS_NO_DRIVER, "")
    monkeypatch.setenv(launcher.LIBCUDA_VARIABLE, str(libcuda))
    run.run(library)  # a failed open is not remembered: the next launch opens the stand-in
    assert [c["result"] for c in driver.calls("cuLaunchKernelEx")] == [0]


def test_the_launcher_opens_the_driver_named_at_first_use(compiled, library, driver, libcuda,
                                                          tmp_path, monkeypatch):
    """SMALTI_LIBCUDA is read when a launch first needs the driver: after reset, a second
    copy of the stand-in is the one that records."""
    run = prepare(compiled("pointwise_f32.mlir"))
    copy = tmp_path / "other" / "libcuda.so.1"
    copy.parent.mkdir()
    shutil.copy(libcuda, copy)
    run.run(library)
    monkeypatch.setenv(launcher.LIBCUDA_VARIABLE, str(copy))
    run.run(library)  # still the first driver: nothing reloads behind a user's back
    assert len(driver.calls("cuLaunchKernelEx")) == 2
    assert len(driver.calls("cuModuleLoadData")) == 1
    launcher.reset(library)
    run.run(library)  # the copy: a fresh driver, so the module is loaded again
    loads = driver.calls("cuModuleLoadData")
    assert [load["library"] for load in loads] == [str(libcuda), str(copy)]


# A hand-written module with what the examples lack: scalar parameters of 4 and 2 bytes,
# .reqntid, a cluster shape along y, .explicitcluster and static shared memory.
PARAMETER_PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k1(.param .u32 a, .param .u64 b, .param .align 64 .b8 t[128], .param .u16 c)
.reqntid 64, 2, 1
.reqnctapercluster 1, 2, 1
{
  ret;
}
.visible .entry k2(.param .u64 b)
.maxntid 256
.explicitcluster
{
  .shared .align 4 .b8 s[100];
  .reg .u32 %r;
  mov.u32 %r, s;
  st.shared.u32 [%r], %r;
  ret;
}
"""


def load_module(libcuda: Path, copy_dir: Path, cubin: bytes, log: Path) -> dict:
    """cuModuleLoadData of the stand-in (a private copy, called directly): what it read."""
    copy_dir.mkdir(exist_ok=True)
    copy = copy_dir / "libcuda.so.1"
    shutil.copy(libcuda, copy)
    fake = ctypes.CDLL(str(copy))
    context, module = ctypes.c_void_p(), ctypes.c_void_p()
    assert fake.cuStreamGetCtx(None, ctypes.byref(context)) == 0
    assert fake.cuCtxPushCurrent_v2(context) == 0
    image = ctypes.create_string_buffer(cubin, len(cubin) + 8)
    try:
        assert fake.cuModuleLoadData(ctypes.byref(module), image) == 0
    finally:
        assert fake.cuCtxPopCurrent_v2(ctypes.byref(context)) == 0
    return [c for c in fake_driver.read_calls(log) if c["call"] == "cuModuleLoadData"][-1]


@pytest.mark.parametrize("name", ["matmul_256x128x64_multicast.mlir", "matmul_ws", "debug_print",
                                  "flash_attention_d128", "parameters.ptx"])
def test_the_stand_in_reads_cubins_as_cuobjdump_does(name, compiled, libcuda, driver, tmp_path):
    try:
        cuobjdump = find_tool("cuobjdump")
    except ToolchainError as error:
        pytest.skip(str(error))
    cubin = compile_ptx(PARAMETER_PTX).cubin if name == "parameters.ptx" else compiled(name).cubin
    path = tmp_path / "kernel.cubin"
    path.write_bytes(cubin)
    expected = fake_driver.cuobjdump_kernels(cuobjdump, path)
    load = load_module(libcuda, tmp_path / "copy", cubin, driver.log)
    assert load["result"] == 0 and load["sm"] == 90
    assert set(load["kernels"]) == set(expected)
    for kernel, info in expected.items():
        read = load["kernels"][kernel]
        assert [(p["ordinal"], p["offset"], p["size"]) for p in read["params"]] == info.params
        assert read["registers"] == info.registers
        assert read["max_threads"] == info.max_threads
        assert read["cluster"] == info.cluster
    if name == "parameters.ptx":
        assert [p[2] for p in expected["k1"].params] == [4, 8, 128, 2]
        assert load["kernels"]["k1"]["reqntid"] == [64, 2, 1]
        assert load["kernels"]["k2"]["explicit_cluster"] is True
        assert load["kernels"]["k2"]["static_shared"] == 100  # past the 1 KiB reserved


@pytest.fixture(scope="module")
def host_target(library) -> str:
    """The launcher's handler without a stream, registered for XLA:CPU (test only)."""
    handler = getattr(library, launcher.HANDLER_WITHOUT_STREAM_SYMBOL)
    jax.ffi.register_ffi_target(HOST_TARGET, jax.ffi.pycapsule(handler), platform="cpu")
    return HOST_TARGET


def host_call(compiled: CompiledKernel, outputs: int, results: tuple | None = None):
    """The kernel called through XLA's FFI on the CPU, as `call_kernel` calls it on CUDA:
    the handler gets `ffi_attributes` and XLA's own buffers."""
    signature = compiled.signature
    args = [S(arg.shape, NUMPY_DTYPES[arg.dtype]) for arg in signature.args]
    inputs = [jnp.zeros(a.shape, a.dtype) for a in args[:len(args) - outputs]]
    if results is None:
        results = jax_integration.cuda_results(signature, args[len(args) - outputs:])
    call = jax.ffi.ffi_call(HOST_TARGET, results, has_side_effect=True)
    values = jax.jit(lambda *xs: call(*xs, **jax_integration.ffi_attributes(compiled)))(*inputs)
    return [np.asarray(v) for v in jax.block_until_ready(values)]


@pytest.mark.parametrize("name", ["matmul_256x128x64_multicast.mlir", "debug_print",
                                  "flash_attention_d64"])
def test_the_xla_ffi_handler_decodes_attributes_and_buffers(name, compiled, host_target,
                                                            driver, monkeypatch):
    """Through XLA: every attribute arrives (the launch matches the signature), outputs and the
    debug buffer are XLA's result buffers in order (the stand-in stamps ordinal + 1 into what
    each pointer parameter points at), and the debug buffer is zeroed before the launch."""
    monkeypatch.setenv(fake_driver.STAMP_VARIABLE, "1")
    kernel = compiled(name)
    signature = kernel.signature
    results = host_call(kernel, outputs=1)
    [launch] = driver.calls("cuLaunchKernelEx")
    [load] = driver.calls("cuModuleLoadData")
    info = load["kernels"][signature.name]
    assert all(c["result"] == 0 for c in driver.calls())
    assert launch["stream"] == 0  # this handler has no stream
    assert (launch["grid"], launch["block"], launch["shared_bytes"]) == (
        list(signature.grid), list(signature.block), signature.smem_bytes)
    limit = dynamic_shared_limit(driver.calls(), launch["function"])
    assert fake_driver.launch_violations(launch, info, limit) == []
    pointers = [int.from_bytes(bytes.fromhex(p["bytes"]), "little") for p in launch["params"]
                if p["size"] == 8]
    encodes = driver.calls("cuTensorMapEncodeTiled")
    check_tensor_maps(encodes, signature, pointers)
    debug = pointers[-1] if signature.debug_prints else None
    check_parameters(launch, info, pointers[:len(signature.args)], encodes, debug)
    output = results[0].view(np.uint8).reshape(-1)
    assert output[0] == len(signature.args)  # the output's parameter ordinal, plus 1
    if signature.debug_prints:
        buffer = results[-1]
        assert buffer.dtype == np.uint8 and buffer.shape == (signature.debug_buffer_bytes,)
        debug_ordinal = len(launch["params"]) - 1
        assert buffer[0] == debug_ordinal + 1 and not buffer[1:].any()
        [memset] = driver.calls("cuMemsetD8Async")
        assert (memset["destination"], memset["count"]) == (debug, signature.debug_buffer_bytes)


def test_the_xla_ffi_handler_checks_the_debug_result(compiled, host_target, driver):
    kernel = compiled("debug_print")
    out = S((8, 256), BF16)
    with pytest.raises(Exception, match=r"the last result of kernel dbg must be its "
                                        r"u8\[8320\] debug buffer"):
        host_call(kernel, outputs=1, results=(out,))
    assert driver.calls() == []
