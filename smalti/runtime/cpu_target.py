"""smalti kernels on JAX's CPU backend: the XLA FFI custom call `smalti_simulate`.

Its handler (`SmaltiSimulate`, launcher/simulator.cc, built into the launcher library) calls
back into this module, which runs the kernel's PTX in the simulator on XLA's host buffers.
Being an ordinary custom call whose attributes are the PTX and the signature (JSON), the CPU
path lowers next to the CUDA one for several platforms, serializes with `jax.export`, and
runs again in any process that has registered it (`register_cpu_target`). A failing kernel
comes back as one error from the call, whose message names the kernel.

A collective kernel's call has one more input, last: i32[2], the device's index along the
kernel's mesh axis and its group (its position along the mesh's other axes). The calls of
one group meet (smalti.runtime.rendezvous) and run as one simulated launch over its devices.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import threading
import time
from dataclasses import dataclass

import numpy as np

from smalti.dialect.kernel import KernelArg, KernelSignature
from smalti.runtime import subbyte
from smalti.runtime.cache import CompiledKernel, cache_directory
from smalti.runtime.compiler import CompiledModule
from smalti.runtime.dtypes import NUMPY_DTYPES
from smalti.runtime.launcher import load
from smalti.runtime.rendezvous import Rendezvous
from smalti.runtime.signatures import signature_from_json, signature_to_json
from smalti.runtime.simulate import run_simulated, run_simulated_devices

TARGET_NAME = "smalti_simulate"
HANDLER_SYMBOL = "SmaltiSimulate"

# simulator.cc's SimulateFn.
_SIMULATE_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
    ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_size_t)

# XLA may run independent custom calls on several threads; the simulator runs one at a time.
_RUN_LOCK = threading.Lock()
_MEETINGS = Rendezvous()  # where the per-device calls of collective kernels meet


def cpu_attributes(compiled: CompiledKernel) -> dict[str, str]:
    """The custom call's attributes: what simulator.cc reads."""
    return {"ptx": compiled.ptx, "signature": signature_to_json(compiled.signature)}


@functools.lru_cache(maxsize=64)
def _signature(text: str) -> KernelSignature:
    return signature_from_json(text)


@dataclass(frozen=True)
class PackedBuffer:
    """XLA's buffer of 4-bit elements: `raw`, its bytes (two elements each, low nibble
    first), holding `shape` elements of `dtype` (an MLIR name)."""

    raw: np.ndarray
    dtype: str
    shape: tuple[int, ...]


Buffer = np.ndarray | PackedBuffer
Call = tuple[list[Buffer], list[Buffer]]  # one device's inputs and outputs (XLA's)


def simulate_on_buffers(ptx: str, signature: KernelSignature, inputs: list[np.ndarray],
                        outputs: list[np.ndarray]) -> None:
    """Run the kernel on copies of `inputs` and zeroed outputs; write the outputs' final
    contents into `outputs` (XLA's buffers, which the kernel never sees half-written)."""
    module = CompiledModule(ptx, {signature.name: signature})
    _write_back((inputs, outputs), run_simulated(module, *_kernel_arguments((inputs, outputs))))


def simulate_devices(ptx: str, signature: KernelSignature, calls: dict[int, Call]) -> None:
    """Run a collective kernel once over its devices: `calls[d]` holds device d's inputs
    and output buffers, filled as simulate_on_buffers fills one device's."""
    module = CompiledModule(ptx, {signature.name: signature})
    devices = sorted(calls)
    with _RUN_LOCK:
        after = run_simulated_devices(module, [_kernel_arguments(calls[d]) for d in devices])
    for d, arguments in zip(devices, after, strict=True):
        _write_back(calls[d], arguments)


def _kernel_arguments(call: Call) -> list[np.ndarray]:
    """The kernel's arguments for one call: copies of its inputs, zeroed outputs (4-bit
    buffers, XLA's packed bytes, as numpy arrays of their dtype)."""
    inputs, outputs = call
    return [_host(x, copy=True) for x in inputs] + [np.zeros_like(_host(y)) for y in outputs]


def _write_back(call: Call, arguments: list[np.ndarray]) -> None:
    """Copy the kernel's outputs (its arguments after the run) into the call's buffers."""
    inputs, outputs = call
    for target, result in zip(outputs, arguments[len(inputs):], strict=True):
        np.copyto(target.raw if isinstance(target, PackedBuffer) else target,
                  subbyte.pack(result) if isinstance(target, PackedBuffer) else result)


def _host(buffer: Buffer, copy: bool = False) -> np.ndarray:
    """A call's buffer as the numpy array of its arguments' dtype and shape."""
    if isinstance(buffer, PackedBuffer):
        return subbyte.unpack(buffer.raw, buffer.dtype, buffer.shape)
    return np.array(buffer) if copy else buffer


def _buffer(address: int, size: int, arg: KernelArg, what: str) -> Buffer:
    """XLA's host buffer at `address` as an array of the argument's shape and dtype. The FFI
    reports a 4-bit buffer's size as one byte per element; it holds half as many."""
    shape, dtype = arg.shape or (), NUMPY_DTYPES[arg.dtype]
    count = int(np.prod(shape))
    if size != count * dtype.itemsize:
        raise ValueError(f"{what} holds {size} bytes, not a {dtype.name}{list(shape)}")
    if subbyte.is_packed(arg.dtype):
        size = subbyte.packed_bytes(arg.dtype, shape)
    raw = (ctypes.c_uint8 * size).from_address(address) if size else bytearray()
    data = np.frombuffer(raw, dtype=np.uint8)
    if subbyte.is_packed(arg.dtype):
        return PackedBuffer(data, arg.dtype, tuple(shape))
    return data.view(dtype).reshape(shape)


class _CallsInFlight:
    """The simulator calls running in this process. At exit (`stop`), new calls are refused
    before they enter Python (XLA's threads may still be running a computation whose result
    nobody awaited: a thread entering Python while the interpreter finalises never returns,
    and XLA's shutdown would wait for it for ever), calls waiting for their devices' peers
    fail, and the running ones are given time to finish."""

    SETTLE = 0.05  # seconds without calls before the interpreter may go on finalising
    LIMIT = 30.0  # seconds to wait for running simulations

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._running = 0

    def __enter__(self) -> None:
        with self._condition:
            self._running += 1
            self._condition.notify_all()

    def __exit__(self, *exc: object) -> None:
        with self._condition:
            self._running -= 1
            self._condition.notify_all()

    def stop(self, library: ctypes.CDLL) -> None:
        library.smalti_set_simulator(ctypes.cast(None, _SIMULATE_FN))
        _MEETINGS.abort("the Python process is exiting")
        deadline = time.monotonic() + self.LIMIT
        with self._condition:
            while time.monotonic() < deadline:
                if self._running:
                    self._condition.wait(deadline - time.monotonic())
                elif not self._condition.wait(self.SETTLE):
                    return  # no call came or went for SETTLE seconds (one may have read
                    # the callback just before it was removed)


_CALLS = _CallsInFlight()


def _run(ptx: int, ptx_bytes: int, signature: int, signature_bytes: int, input_count: int,
         buffer_count: int, buffers: ctypes.Array, sizes: ctypes.Array, error: int,
         capacity: int) -> int:
    """simulator.cc's callback: 0, or 1 with the error's text written to `error`."""
    with _CALLS:
        return _simulate_call(ptx, ptx_bytes, signature, signature_bytes, input_count,
                              buffer_count, buffers, sizes, error, capacity)


def _simulate_call(ptx: int, ptx_bytes: int, signature: int, signature_bytes: int,
                   input_count: int, buffer_count: int, buffers: ctypes.Array,
                   sizes: ctypes.Array, error: int, capacity: int) -> int:
    """One call of the custom call: its kernel run (or, collective, its launch joined)."""
    name = "?"
    try:
        signature_text = ctypes.string_at(signature, signature_bytes).decode()
        kernel = _signature(signature_text)
        name = kernel.name
        collective = kernel.collective is not None
        if buffer_count != len(kernel.args) + collective:
            raise ValueError(f"the call passes {buffer_count} buffers; the kernel takes "
                             f"{len(kernel.args) + collective}")
        positions = [i for i in range(buffer_count) if not (collective and i == input_count - 1)]
        arrays = [_buffer(buffers[i] or 0, sizes[i], arg, f"buffer #{i}")
                  for i, arg in zip(positions, kernel.args, strict=True)]
        inputs, outputs = arrays[:input_count - collective], arrays[input_count - collective:]
        text = ctypes.string_at(ptx, ptx_bytes).decode()
        if not collective:
            with _RUN_LOCK:
                simulate_on_buffers(text, kernel, inputs, outputs)
            return 0
        where = _buffer(buffers[input_count - 1] or 0, sizes[input_count - 1],
                        KernelArg("where", "i32", (2,)), "the device index")
        device, group = (int(v) for v in where)
        assert kernel.collective is not None
        _MEETINGS.join((text, signature_text, group), kernel.collective.devices, device,
                       (inputs, outputs),
                       lambda calls: simulate_devices(text, kernel, calls),
                       what=f"collective kernel {name}")
        return 0
    except BaseException as caught:
        text = f"smalti kernel {name}: {type(caught).__name__}: {caught}".encode()
        ctypes.memmove(error, text[:capacity - 1] + b"\0", min(len(text) + 1, capacity))
        return 1


_CALLBACK = _SIMULATE_FN(_run)  # kept alive for the life of the process


@functools.cache
def register_cpu_target() -> str:
    """Build (if needed) and load the launcher library, install the simulator in it, and
    register `smalti_simulate` for JAX's CPU platform; its target name."""
    import jax

    library = load(cache_directory())
    library.smalti_set_simulator.argtypes = [_SIMULATE_FN]
    library.smalti_set_simulator.restype = None
    library.smalti_set_simulator(_CALLBACK)
    atexit.register(_CALLS.stop, library)
    handler = getattr(library, HANDLER_SYMBOL)
    jax.ffi.register_ffi_target(TARGET_NAME, jax.ffi.pycapsule(handler), platform="cpu")
    return TARGET_NAME
