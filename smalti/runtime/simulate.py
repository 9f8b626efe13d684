"""Run a compiled kernel on the CPU through the PTX simulator, with checked arguments."""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from smalti.dialect.kernel import KernelSignature
from smalti.dialect.ops_debug import HEADER_BYTES, DebugPrintRecord
from smalti.runtime import subbyte
from smalti.runtime.compiler import CompiledModule
from smalti.runtime.dtypes import NUMPY_DTYPES
from smalti.runtime.tensor_maps import sim_tensor_maps
from smalti.sim import Multicast, PeerTable, run_ptx, run_ptx_devices
from smalti.tiling import WGSplatLayout


def check_arguments(signature: KernelSignature, args: tuple) -> list:
    """The kernel's arguments as the simulator takes them (device buffers: 4-bit arrays
    packed two per byte, smalti.runtime.subbyte); TypeError/ValueError name the argument
    that does not match the signature."""
    if len(args) != len(signature.args):
        raise TypeError(f"kernel @{signature.name} takes {len(signature.args)} arguments, "
                        f"got {len(args)}")
    checked = []
    for position, (value, arg) in enumerate(zip(args, signature.args, strict=True)):
        dtype = NUMPY_DTYPES[arg.dtype]
        if arg.shape is None:
            checked.append(dtype.type(value))
            continue
        if not isinstance(value, np.ndarray):
            raise TypeError(f"argument #{position} of @{signature.name} must be an array, got "
                            f"{type(value).__name__}")
        if value.dtype != dtype:
            raise TypeError(f"argument #{position} of @{signature.name} must have dtype "
                            f"{dtype.name}, got {value.dtype.name}")
        if value.shape != arg.shape:
            raise ValueError(f"argument #{position} of @{signature.name} must have shape "
                             f"{arg.shape}, got {value.shape}")
        checked.append(subbyte.pack(value) if subbyte.is_packed(arg.dtype)
                       else np.ascontiguousarray(value))
    return checked


def host_arrays(signature: KernelSignature, buffers: list) -> list:
    """The kernel's device buffers as the arrays its arguments are (4-bit ones unpacked)."""
    return [subbyte.unpack(value, arg.dtype, arg.shape)
            if arg.shape is not None and subbyte.is_packed(arg.dtype) else value
            for value, arg in zip(buffers, signature.args, strict=True)]


def launch_cluster(signature: KernelSignature,
                   cluster: tuple[int, ...] | int | None = None) -> tuple[int, int, int]:
    """The cluster shape a launch of the kernel uses: its `smalti.cluster`. A shape the
    caller names (1 to 3 ints) must be the same: the PTX requires it (.reqnctapercluster)."""
    if cluster is None:
        return signature.cluster
    dims = (cluster,) if isinstance(cluster, int) else tuple(cluster)
    shape = (*dims, 1, 1)[:3]
    if not 1 <= len(dims) <= 3 or shape != signature.cluster:
        raise ValueError(f"kernel {signature.name} is compiled for clusters of "
                         f"{signature.cluster} CTAs (its 'smalti.cluster'); the launch asks "
                         f"for {cluster!r}")
    return signature.cluster


def run_simulated(compiled: CompiledModule, *args, kernel: str | None = None,
                  print_fn: Callable[[str], None] | None = None, **options) -> list:
    """Run `kernel` on copies of `args`; return the arguments after the run (buffers updated).
    `options` go to `smalti.sim.run_ptx` (async_completion, seed, spurious_waits; a
    `cluster`, if given, must be the kernel's). A kernel with `smalti.debug_print` ops gets
    its hidden debug buffer, and what it printed goes to `print_fn` (default: a line on
    stderr), block by block in launch order."""
    signature = compiled.signature(kernel)
    cluster = launch_cluster(signature, options.pop("cluster", None))
    buffers, debug = _launch_buffers(signature, args)
    run_ptx(compiled.ptx, signature.name, signature.grid, signature.block,
            _parameters(signature, buffers, debug), shared_bytes=signature.smem_bytes,
            cluster=None if cluster == (1, 1, 1) else cluster, **options)
    if debug:
        print_debug_buffer(signature, debug[0], print_fn)
    return host_arrays(signature, buffers)


def run_simulated_devices(compiled: CompiledModule, args_per_device: list[tuple] | list[list],
                          *, kernel: str | None = None,
                          print_fn: Callable[[str], None] | None = None, **options
                          ) -> list[list]:
    """Run a collective kernel on `len(args_per_device)` simulated devices at once (device
    d with copies of `args_per_device[d]`, its index d along the mesh axis); each device's
    arguments after the run. The kernel must be compiled for that many devices. `options`
    are run_simulated's."""
    signature = compiled.signature(kernel)
    spec = signature.collective
    devices = len(args_per_device)
    if spec is None:
        raise ValueError(f"kernel @{signature.name} is not collective (it has no "
                         "'smalti.devices'); run it with run_simulated")
    if devices != spec.devices:
        raise ValueError(f"kernel @{signature.name} is compiled for {spec.devices} devices "
                         f"(its 'smalti.devices'); {devices} were given arguments")
    cluster = launch_cluster(signature, options.pop("cluster", None))
    buffers, debug = zip(*(_launch_buffers(signature, tuple(args))
                           for args in args_per_device), strict=True)
    heaps = [np.zeros(max(spec.symmetric_bytes, 1), np.uint8) for _ in range(devices)]
    run_ptx_devices(
        compiled.ptx, signature.name, signature.grid, signature.block,
        [[*_parameters(signature, buffers[d], debug[d], heaps),
          *collective_arguments(signature, d)]
         for d in range(devices)],
        symmetric=heaps, shared_bytes=signature.smem_bytes,
        cluster=None if cluster == (1, 1, 1) else cluster, **options)
    for d in range(devices):
        if debug[d]:
            print_debug_buffer(signature, debug[d][0],
                               lambda line, d=d: (print_fn or _print_stderr)(
                                   f"[device {d}] {line}"))
    return [host_arrays(signature, b) for b in buffers]


def _launch_buffers(signature: KernelSignature, args: tuple) -> tuple[list, list]:
    """Copies of the checked arguments (the launch updates them) and the kernel's hidden
    debug buffer, zeroed (an empty list when it prints nothing)."""
    buffers = [a.copy() if isinstance(a, np.ndarray) else a
               for a in check_arguments(signature, args)]
    debug = ([np.zeros(signature.debug_buffer_bytes, np.uint8)] if signature.debug_prints
             else [])
    return buffers, debug


def _parameters(signature: KernelSignature, buffers: list, debug: list,
                heaps: list[np.ndarray] | None = None) -> list:
    """The kernel's parameters in the launch ABI's order: arguments, tensor maps (those of
    symmetric buffers over every device's heap in `heaps`), debug."""
    return [*buffers, *sim_tensor_maps(signature, buffers, heaps or ()), *debug]


def collective_arguments(signature: KernelSignature, device: int) -> list:
    """The hidden arguments of a collective kernel on simulated device `device`: its index,
    the peer table, the multicast address of the symmetric heap (CollectiveSpec)."""
    spec = signature.collective
    assert spec is not None
    multicast = Multicast() if spec.multimem else np.uint64(0)
    return [np.array([device], np.int32), PeerTable(), multicast]


def print_debug_buffer(signature: KernelSignature, buffer: object,
                       print_fn: Callable[[str], None] | None = None) -> None:
    """Print `debug_print_lines` of the kernel's debug buffer, each through `print_fn`
    (default: a line on stderr). The simulator and the CUDA launch (a `jax.debug.callback`
    after the kernel) both print through here, so both print the same text."""
    for line in debug_print_lines(signature, np.asarray(buffer, np.uint8)):
        (print_fn or _print_stderr)(line)


def _print_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def debug_print_lines(signature: KernelSignature, buffer: np.ndarray) -> list[str]:
    """What the kernel's debug_prints wrote into `buffer` (its hidden debug buffer), as
    `file:line: [block (x, y, z), warpgroup w] <format>` lines: per block in launch order,
    the ops in program order; the bracket names only what is ambiguous."""
    gx, gy, gz = signature.grid
    lines = []
    for block in range(gx * gy * gz):
        for record in signature.debug_prints:
            for group in range(signature.warpgroups):
                instance = block * signature.warpgroups + group
                head = record.offset + instance * record.instance_bytes
                count = int(buffer[head:head + 4].view(np.uint32)[0])
                if count == 0:  # this warpgroup of this block did not reach the op
                    continue
                tags = []
                if gx * gy * gz > 1:
                    tags.append(f"block ({block % gx}, {block // gx % gy}, {block // (gx * gy)})")
                if signature.warpgroups > 1:
                    tags.append(f"warpgroup {group}")
                if count > 1:
                    tags.append(f"last of {count} runs")
                value = debug_value(record, buffer[head + HEADER_BYTES:])
                text = np.array2string(value, threshold=sys.maxsize, floatmode="unique",
                                       max_line_width=sys.maxsize)
                prefix = f"[{', '.join(tags)}] " if tags else ""
                lines.append(f"{record.file}:{record.line}: {prefix}"
                             f"{record.format.replace('{}', text, 1)}")
    return lines


def debug_value(record: DebugPrintRecord, data: np.ndarray) -> np.ndarray:
    """One instance's value: the array reassembled through its layout's element map (or the
    0-d scalar), from `data`, the bytes after the instance's header."""
    dtype = NUMPY_DTYPES.get(record.dtype, np.dtype(np.int64))  # index: int64
    values = data[:record.values * dtype.itemsize].view(dtype)
    if not record.vector:
        return values[0:1].reshape(())
    if record.layout is None:
        raise ValueError(f"debug_print at {record.file}:{record.line} has no layout")
    if isinstance(record.layout, WGSplatLayout):
        return np.full(record.shape, values[0], dtype)
    index = record.layout.element_index(record.shape).reshape(-1, len(record.shape))
    array = np.zeros(record.shape, dtype)
    array[tuple(index.T)] = values[:len(index)]
    return array
