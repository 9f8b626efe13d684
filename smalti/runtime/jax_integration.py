"""Compiled kernels as JAX operations, inside and outside `jax.jit`.

Both paths are XLA FFI custom calls. On CPU, `smalti_simulate` runs the kernel's PTX in the
simulator on XLA's host buffers (cpu_target.py); on CUDA, `smalti_launch` carries the cubin,
the launch configuration and the tensor-map records, launched by the C++ launcher on XLA's
stream. `jax.lax.platform_dependent` picks the branch when the computation is lowered, so a
function lowers for one platform or several, on any machine (`smalti.runtime.export`).

A kernel with `smalti.debug_print` ops prints the same lines on both paths (both go through
`simulate.print_debug_buffer`). On CPU they are printed by the simulator as the kernel runs.
On CUDA the custom call has one more result, the kernel's debug buffer (u8[
`debug_buffer_bytes`], zeroed by the launcher on XLA's stream and passed as the hidden
`debug` parameter after the tensor maps); a `jax.debug.callback` (unordered) prints it once
the kernel has finished, and the buffer is not among the call's outputs. That callback is a
Python callback, which JAX can neither lower for CUDA without a CUDA backend nor serialize:
it is staged only where this process has a CUDA backend and the function is not being
exported, so exported CUDA code launches the kernel with its buffer but prints nothing.

A collective kernel (called inside `jax.shard_map` over its mesh axis) takes one more
operand on both paths, last: its device's position (`device_position`, i32[2]). On CPU the
per-device calls meet and run as one simulated launch; on CUDA the launcher's calls meet,
make the group's symmetric heap at its first launch, and launch on every device (the
`collective` attribute says how many devices, heap bytes and whether it uses multimem);
across processes the heap comes from NVSHMEM, bootstrapped by `smalti.runtime.distributed`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator, Sequence

import numpy as np

from smalti.dialect.kernel import KernelSignature, TensorMapRecord
from smalti.runtime import distributed
from smalti.runtime.cache import CompiledKernel, cache_directory
from smalti.runtime.cpu_target import TARGET_NAME as CPU_TARGET_NAME
from smalti.runtime.cpu_target import cpu_attributes, register_cpu_target
from smalti.runtime.dtypes import NUMPY_DTYPES
from smalti.runtime.launcher import TARGET_NAME, register
from smalti.runtime.simulate import launch_cluster, print_debug_buffer
from smalti.runtime.tensor_maps import encode_arguments

# CUtensorMapDataType values of the CUDA driver API.
TENSOR_MAP_DATA_TYPES = {"i8": 0, "f8E4M3FN": 0, "f8E5M2": 0, "f8E8M0FNU": 0, "i16": 1,
                         "i32": 3, "i64": 5, "f16": 6, "f32": 7, "f64": 8, "bf16": 9}
SWIZZLE_CODES = {None: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle
OOB_FILL_CODES = {"zero": 0, "nan": 1}  # CUtensorMapFloatOOBfill
RECORD_SIZE = 24  # i64 entries per tensor-map record (launcher/core.h: kRecordSize)
COLLECTIVE_SIZE = 3  # i64 entries of the `collective` attribute (launcher/core.h)

OutputSpec = tuple[tuple[int, ...], np.dtype]


def check_call(signature: KernelSignature, args: Sequence[object],
               outputs: Sequence[OutputSpec]) -> None:
    """TypeError/ValueError naming the argument whose shape or dtype the kernel was not
    compiled for; checked before anything is traced or launched."""
    inputs = signature.args[:len(signature.args) - len(outputs)]
    if len(args) != len(inputs):
        raise TypeError(f"kernel {signature.name} takes {len(inputs)} input arrays, got "
                        f"{len(args)}")
    for position, (value, arg) in enumerate(zip(args, inputs, strict=True)):
        dtype = NUMPY_DTYPES[arg.dtype]
        shape = getattr(value, "shape", None)
        if shape is None or not hasattr(value, "dtype"):
            raise TypeError(f"argument #{position} of kernel {signature.name} must be an array,"
                            f" got {type(value).__name__}")
        if np.dtype(value.dtype) != dtype:
            raise TypeError(f"argument #{position} of kernel {signature.name} must have dtype "
                            f"{dtype.name}, got {np.dtype(value.dtype).name}")
        if tuple(shape) != arg.shape:
            raise ValueError(f"argument #{position} of kernel {signature.name} must have shape "
                             f"{arg.shape}, got {tuple(shape)}")


def call_kernel(compiled: CompiledKernel, args: Sequence[object],
                outputs: Sequence[OutputSpec], *, cluster: tuple[int, ...] | None = None
                ) -> list:
    """Run `compiled` on `args` (jax.Arrays, tracers or numpy arrays); its output arrays.
    The launch's cluster is the kernel's `smalti.cluster`; a `cluster` given here must be
    the same (ValueError otherwise). What its debug_prints wrote is printed to stderr when
    the kernel has run (see the module's docstring)."""
    import jax

    check_call(compiled.signature, args, outputs)
    cluster = launch_cluster(compiled.signature, cluster)
    structs = tuple(jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in outputs)
    prints = bool(compiled.signature.debug_prints)

    collective = compiled.signature.collective
    # A collective kernel's last operand, on both paths: its device's position (i32[2]).
    where = () if collective is None else (device_position(compiled.name, collective.mesh_axis,
                                                           collective.devices),)

    def on_cpu(*inputs: object) -> tuple:
        if collective is not None:  # refused when its devices are in several processes
            distributed.check_cpu_collective(compiled.name, collective)
        register_cpu_target()
        call = jax.ffi.ffi_call(CPU_TARGET_NAME, structs, has_side_effect=prints,
                                vmap_method="sequential")
        return tuple(call(*inputs, **cpu_attributes(compiled)))

    def on_cuda(*inputs: object) -> tuple:
        if compiled.cubin is None:
            raise RuntimeError(f"kernel {compiled.name} has no cubin: ptxas was not found "
                               "when it was compiled (install nvidia-cuda-nvcc or set "
                               "SMALTI_PTXAS)")
        if cuda_backend_present():
            register(cache_directory())
            if collective is not None:  # across processes: NVSHMEM is bootstrapped first
                distributed.prepare_collective(compiled.name, collective)
        results = cuda_results(compiled.signature, structs)
        # The per-device calls of a collective kernel meet in the launcher: never merge or
        # drop one (has_side_effect), as XLA may for a pure call.
        call = jax.ffi.ffi_call(TARGET_NAME, results, has_side_effect=collective is not None,
                                vmap_method="sequential")
        values = tuple(call(*inputs, **ffi_attributes(compiled, cluster)))
        if len(values) == len(structs):
            return values
        silenced = _EXPORTING.get()
        if silenced is not None:
            silenced.append(compiled.name)
        elif cuda_backend_present():
            stage_debug_print(compiled.signature, values[-1])
        return values[:len(structs)]

    @jax.custom_jvp
    def run(*inputs: object) -> tuple:
        return tuple(jax.lax.platform_dependent(*inputs, cpu=on_cpu, cuda=on_cuda))

    @run.defjvp
    def _no_derivative(primals: tuple, tangents: tuple) -> tuple:
        raise TypeError(f"kernel {compiled.name} has no derivative: jax.grad and jax.jvp reach "
                        "a smalti kernel only through a jax.custom_vjp that says what its "
                        "backward is (as smalti.ops' differentiable ops do), or take "
                        "jax.lax.stop_gradient of its inputs")

    return list(run(*args, *where))


def device_position(kernel: str, axis: str, devices: int) -> object:
    """i32[2]: this device's index along mesh axis `axis` and its group (its linear index
    along the other axes of the shard_map being traced); a ValueError naming the kernel
    outside a shard_map over `axis`, or over an axis of another size."""
    import jax
    import jax.numpy as jnp

    mesh = jax.sharding.get_abstract_mesh()
    manual = tuple(getattr(mesh, "manual_axes", ()) or ())
    if axis not in manual:
        raise ValueError(f"kernel {kernel} is collective over mesh axis '{axis}': call it "
                         f"inside jax.shard_map over a mesh with that axis (manual axes here: "
                         f"{list(manual) or 'none'})")
    size = jax.lax.axis_size(axis)
    if size != devices:
        raise ValueError(f"kernel {kernel} is compiled for {devices} devices along '{axis}', "
                         f"but that axis has {size} here")
    group = jnp.int32(0)
    for other in manual:
        if other != axis:
            group = group * jax.lax.axis_size(other) + jax.lax.axis_index(other)
    index = jax.lax.axis_index(axis).astype(jnp.int32)
    return jnp.stack([index, jnp.asarray(group, jnp.int32)])


# While a function is traced for export: the kernels whose CUDA prints were left out.
_EXPORTING: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "smalti_exporting", default=None)


@contextlib.contextmanager
def exporting() -> Iterator[list[str]]:
    """While tracing a function for `jax.export`: stage nothing that cannot be serialized.
    Yields the names of the kernels whose debug_prints exported CUDA code will not print."""
    silenced: list[str] = []
    token = _EXPORTING.set(silenced)
    try:
        yield silenced
    finally:
        _EXPORTING.reset(token)


def register_targets() -> tuple[str, ...]:
    """Register smalti's custom-call targets with JAX in this process: the CPU simulator
    always, the CUDA launcher where JAX has a CUDA backend. Kernel calls do this by
    themselves; run it before calling a deserialized export that holds smalti kernels."""
    targets = [register_cpu_target()]
    if cuda_backend_present():
        targets.append(register(cache_directory()))
    return tuple(targets)


def cuda_results(signature: KernelSignature, outputs: Sequence[object]) -> tuple:
    """The custom call's results: the kernel's outputs, then its debug buffer (u8, one
    element per byte) when it has debug_prints; launcher.cc reads the same (`debug_bytes`)."""
    import jax

    if not signature.debug_prints:
        return tuple(outputs)
    return (*outputs, jax.ShapeDtypeStruct((signature.debug_buffer_bytes,), np.uint8))


def stage_debug_print(signature: KernelSignature, buffer: object) -> None:
    """Stage a `jax.debug.callback` that prints `buffer`, the kernel's debug buffer after
    the launch, as `run_simulated` would (`print_debug_buffer`, to stderr)."""
    import jax

    jax.debug.callback(functools.partial(print_debug_buffer, signature), buffer)


def ffi_attributes(compiled: CompiledKernel, cluster: tuple[int, ...] | None = None) -> dict:
    """The custom call's attributes: what launcher.cc reads (the cluster: the kernel's)."""
    signature = compiled.signature
    cluster = launch_cluster(signature, cluster)
    launch = [*signature.grid, *signature.block, *cluster, signature.smem_bytes]
    return {
        "cubin": np.frombuffer(compiled.cubin or b"", dtype=np.uint8),
        "kernel": signature.name,
        "launch": np.array(launch, dtype=np.int64),
        "tensor_maps": tensor_map_attribute(signature),
        "debug_bytes": np.int64(signature.debug_buffer_bytes),  # 0: no debug buffer
        "collective": collective_attribute(signature),
    }


def collective_attribute(signature: KernelSignature) -> np.ndarray:
    """i64[3] (launcher/core.h: kCollectiveSize): devices along the mesh axis, symmetric heap
    bytes, multimem; all 0 for a kernel that is not collective."""
    spec = signature.collective
    if spec is None:
        return np.zeros(COLLECTIVE_SIZE, np.int64)
    return np.array([spec.devices, spec.symmetric_bytes, int(spec.multimem)], np.int64)


def tensor_map_attribute(signature: KernelSignature) -> np.ndarray:
    """Each tensor-map record as RECORD_SIZE i64s (the layout launcher/core.h documents),
    concatenated."""
    records = [tensor_map_entries(record, signature) for record in signature.tensor_maps]
    return np.array([v for r in records for v in r], dtype=np.int64)


def tensor_map_entries(record: TensorMapRecord, signature: KernelSignature) -> list[int]:
    """One record's entries. Entry 0 is the argument's index, or for a map over a symmetric
    buffer (`symmetric_offset` set) -1 - its byte offset in the heap: the launcher encodes
    such a record once per device, over that device's heap + the offset."""
    offset = record.symmetric_offset
    dtype = NUMPY_DTYPES[record.dtype if offset is not None else signature.args[record.arg].dtype]
    strides = _row_major_bytes(record.shape, dtype.itemsize)
    # A stand-in of the argument's shape and strides; as_strided cannot make ml_dtypes
    # arrays (float8), so it is made over unsigned ints of the same width and viewed.
    raw = np.zeros(1, np.dtype(f"u{dtype.itemsize}"))
    like = np.lib.stride_tricks.as_strided(raw, record.shape, strides).view(dtype)
    encoded = encode_arguments(record, like)
    rank = len(encoded.global_dims)

    def padded(values: tuple[int, ...], size: int) -> list[int]:
        return [*values, *([0] * (size - len(values)))]

    return [record.arg if offset is None else -1 - offset, TENSOR_MAP_DATA_TYPES[encoded.dtype],
            rank,
            SWIZZLE_CODES[encoded.swizzle], OOB_FILL_CODES[encoded.oob_fill],
            *padded(encoded.global_dims, 5), *padded(encoded.global_strides, 4),
            *padded(encoded.box_dims, 5), *padded(encoded.element_strides, 5)]


def _row_major_bytes(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


@functools.cache
def cuda_backend_present() -> bool:
    """Whether this process's JAX has a CUDA device (then the launcher gets registered)."""
    import jax

    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False
