"""The public entry points: marshal arguments, run a kernel, and write device buffers back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from smalti.ptx.module import Module, Param
from smalti.ptx.parser import parse_module
from smalti.sim.async_engine import AsyncEngine
from smalti.sim.cluster_barrier import ClusterBarrier
from smalti.sim.cluster_launch import ClusterLaunch
from smalti.sim.dtypes import BITS, FLOAT, VIEW, constant
from smalti.sim.errors import SimError
from smalti.sim.geometry import Geometry, as_dim3
from smalti.sim.hazards import SharedHazards
from smalti.sim.machine import Machine
from smalti.sim.memory import (
    MULTICAST_WINDOW,
    GlobalMemory,
    LocalMemory,
    ParamSpace,
    SharedMemory,
    variable_bytes,
)
from smalti.sim.multicast import Multicast, MulticastGroup
from smalti.sim.param_struct import ParamStruct
from smalti.sim.peers import PeerOrder, PeerTable
from smalti.sim.program import Program, load_program, param_size
from smalti.sim.registers import RegisterFile
from smalti.sim.scheduler import execute
from smalti.sim.tensormap import TensorMap
from smalti.sim.tensormap_encode import TensorMapEncodeTiled
from smalti.sim.tmem import leak_message

Arg = (np.ndarray | int | float | np.generic | TensorMap | TensorMapEncodeTiled | ParamStruct
       | PeerTable | Multicast)
Dim = tuple[int, int, int] | int
MAX_SHARED_BYTES = 227 * 1024  # the most shared memory one sm_90 block can use
SHARED_GRANULE = 16  # each block's shared memory is a whole number of these (see _shared_size)
POINTER_TYPES = ("u64", "b64", "s64")


def run_ptx(ptx_text: str, kernel: str, grid: Dim, block: Dim, args: Sequence[Arg],
            shared_bytes: int = 0, *, cluster: Dim | None = None, async_completion: str = "eager",
            seed: int = 0, spurious_waits: bool = False,
            resident_clusters: int | None = None) -> None:
    """Parse PTX text and run `kernel` on the CPU; numpy arrays in `args` are updated in place.

    Each argument matches a kernel parameter: a numpy array is a device buffer (its address
    is passed to a .u64 parameter); a numpy scalar or Python number is passed by value; a
    CUtensorMap parameter (`.param .align 64 .b8 name[128]`) takes a `smalti.sim.TensorMap`
    or a `TensorMapEncodeTiled` (cuTensorMapEncodeTiled's arguments over a numpy buffer);
    another `.b8` array parameter (a struct passed by value) takes its bytes, or a
    `ParamStruct` that places device pointers and tensor maps in them. The PTX may be any
    compiler's (debug sections, `.loc`, call sequences to __assertfail/vprintf included).

    `cluster` groups the grid's CTAs into clusters sharing distributed shared memory (default:
    the kernel's `.reqnctapercluster`, else one CTA). `async_completion` says when TMA and
    wgmma work completes: "eager" (at issue), "latest" (only when a wait forces it) or
    "random" (seeded by `seed`); `spurious_waits` lets mbarrier waits fail spuriously, as the
    ISA allows. See `smalti.sim.async_engine`. `resident_clusters` runs that many clusters at
    once and launches the others as they finish, which `clusterlaunchcontrol.try_cancel` can
    cancel (default: every cluster runs from the start; see `smalti.sim.cluster_launch`).
    """
    run_module(_parsed(ptx_text), kernel, grid, block, args, shared_bytes, cluster=cluster,
               async_completion=async_completion, seed=seed, spurious_waits=spurious_waits,
               resident_clusters=resident_clusters)


@lru_cache(maxsize=32)
def _parsed(ptx_text: str) -> Module:
    """The parsed module of a PTX text (modules are immutable: runs of one text share it)."""
    return parse_module(ptx_text)


def run_module(module: Module, kernel: str, grid: Dim, block: Dim, args: Sequence[Arg],
               shared_bytes: int = 0, *, cluster: Dim | None = None,
               async_completion: str = "eager", seed: int = 0,
               spurious_waits: bool = False, resident_clusters: int | None = None) -> None:
    """Run `kernel` of a PTX module on the CPU; numpy arrays in `args` are device buffers."""
    launch(module, kernel, grid, block, [args], shared_bytes, cluster=cluster,
           async_completion=async_completion, seed=seed, spurious_waits=spurious_waits,
           resident_clusters=resident_clusters)


def launch(module: Module, kernel: str, grid: Dim, block: Dim,
           args_per_device: Sequence[Sequence[Arg]], shared_bytes: int = 0, *,
           symmetric: Sequence[np.ndarray] = (), cluster: Dim | None = None,
           async_completion: str = "eager", seed: int = 0, spurious_waits: bool = False,
           resident_clusters: int | None = None) -> None:
    """Run `kernel` on as many devices as `args_per_device` has argument lists, each with
    its own arguments; `symmetric[d]` is device d's symmetric buffer (placed first, one
    after another, so that smalti.sim.peers can find them). Polling loops sleep while others
    run, and unsatisfiable polls are deadlocks (sim/spin.py). See run_ptx and
    smalti.sim.devices.
    """
    program = load_program(module, kernel)
    devices = len(args_per_device)
    try:
        shape, explicit = cluster_shape(program.kernel.extra_directives, cluster)
        geometry = Geometry(as_dim3(grid, "grid"), as_dim3(block, "block"), shape, explicit,
                            devices)
        clusters = ClusterLaunch(geometry, resident_clusters)
    except ValueError as e:
        raise SimError(str(e), kernel=kernel) from None
    params = program.kernel.params
    for d, args in enumerate(args_per_device):
        if len(args) != len(params):
            raise SimError(f"{len(params)} kernel arguments expected, {len(args)} given"
                           + (f" for device {d}" if devices > 1 else ""), kernel=kernel)
    if not symmetric and any(isinstance(a, Multicast) for args in args_per_device for a in args):
        raise SimError("a Multicast argument needs symmetric buffers (run_ptx_devices with "
                       "symmetric=[...])", kernel=kernel)
    shared_size = _shared_size(program, shared_bytes)
    placed = _place(program, args_per_device, symmetric)
    buffers, names = placed.buffers, placed.names
    # Module-scope variables: one copy per device, after every other buffer.
    variables = [variable_bytes(v) for _ in range(devices) for v in program.variables]
    memory = GlobalMemory(buffers + variables, names + [
        (f"device {d}: " if devices > 1 else "") + f".{v.state} variable {v.name}"
        for d in range(devices) for v in program.variables])
    for table in placed.tables:
        table[:] = [memory.address(p) for p in range(len(symmetric))]
    rows = []
    for args, buffer_of, structs in zip(args_per_device, placed.pointers, placed.structs,
                                        strict=True):
        try:
            rows.append(_marshal(program, memory, args,
                                 lambda array, at=structs: memory.address(at[id(array)]),
                                 buffer_of))
        except ValueError as e:  # an invalid TensorMapEncodeTiled
            raise SimError(str(e), kernel=kernel) from None
    machine = Machine(
        geometry=geometry,
        registers=RegisterFile(_declared(program), geometry.threads),
        global_memory=memory,
        shared=SharedMemory(geometry.blocks, shared_size, geometry.block_of, geometry.peer,
                            geometry.cluster_size, geometry.cluster_rank),
        params=ParamSpace(rows, {p.name: o for p, o in
                                 zip(params, program.param_offsets, strict=True)},
                          geometry.device_of),
    )
    if symmetric:
        stride = memory.address(1) - memory.address(0) if len(symmetric) > 1 else 1
        try:
            machine.peers = PeerOrder([memory.address(p) for p in range(len(symmetric))],
                                      max(stride, buffers[0].nbytes), buffers[0].nbytes,
                                      geometry.device_of)
        except ValueError as e:
            raise SimError(str(e), kernel=kernel) from None
        machine.multicast = MulticastGroup(tuple(memory.address(p)
                                                 for p in range(len(symmetric))),
                                           buffers[0].nbytes)
    machine.symbols = _symbols(program, memory, len(buffers), geometry)
    machine.cluster_launch = clusters
    if program.local_bytes:
        machine.local = LocalMemory(geometry.threads, program.local_bytes)
    try:
        machine.async_engine = AsyncEngine(
            SharedHazards(geometry.blocks, shared_size, geometry.block_of,
                          geometry.cluster_id if geometry.cluster_size > 1 else None),
            async_completion, seed, spurious_waits)
    except ValueError as e:
        raise SimError(str(e), kernel=kernel) from None
    engine = machine.async_engine
    machine.shared.data_guard = engine.barriers.check_data_store
    engine.clusters = ClusterBarrier(geometry, lambda blocks: engine.shared.sync(blocks, True))
    machine.registers.guards = machine.async_engine.registers
    with np.errstate(all="ignore"):
        execute(program, machine)
        unwaited = machine.async_engine.unwaited_bulk_reads()
        machine.async_engine.drain()
    if unwaited:
        (_, thread), op = unwaited[0]
        raise SimError(f"the kernel exited while {op.what} still read shared memory: no "
                       "cp.async.bulk.wait_group.read covered it before the thread exited",
                       kernel=kernel, thread=geometry.describe(int(thread)))
    leak = leak_message(machine)
    if leak is not None:
        raise SimError(leak[0], kernel=kernel, thread=geometry.describe(leak[1]))
    for original, copy in placed.copies:
        if original.flags.writeable:
            original[...] = copy


def _symbols(program: Program, memory: GlobalMemory, first: int, geometry: Geometry
             ) -> dict[str, np.ndarray]:
    """Each module variable's device address (0-d), or per thread (its device's copy) in a
    launch over several devices; the copies are buffers from `first` on, device by device."""
    count = len(program.variables)
    symbols = {}
    for i, v in enumerate(program.variables):
        copies = np.array([memory.address(first + d * count + i)
                           for d in range(geometry.devices)], np.uint64)
        symbols[v.name] = np.array(copies[0]) if geometry.devices == 1 else copies[
            geometry.device_of]
    return symbols


@dataclass
class _Placement:
    """The launch's device buffers in order (`names` for messages), the host arrays copied to
    make them (written back at the end), the peer tables to fill, and per device where each
    pointer argument (`pointers`: position -> buffer) and struct pointer (`structs`: id of
    the array -> buffer) went."""

    buffers: list[np.ndarray] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    copies: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    tables: list[np.ndarray] = field(default_factory=list)
    pointers: list[dict[int, int]] = field(default_factory=list)
    structs: list[dict[int, int]] = field(default_factory=list)

    def add(self, array: np.ndarray, name: str) -> int:
        """Place `array` (a contiguous writable copy when it is not one); its index."""
        view = array
        if not (array.flags.c_contiguous and array.flags.writeable):
            view = np.ascontiguousarray(array).copy()
            self.copies.append((array, view))
        self.buffers.append(view)
        self.names.append(name)
        return len(self.buffers) - 1


def _place(program: Program, args_per_device: Sequence[Sequence[Arg]],
           symmetric: Sequence[np.ndarray]) -> _Placement:
    """Lay out the symmetric buffers (first, buffer d is device d's), then each device's
    array arguments, peer tables and struct pointers."""
    placed = _Placement()
    params = program.kernel.params
    for d, array in enumerate(symmetric):
        placed.add(array, f"device {d}'s symmetric buffer")
    for d, args in enumerate(args_per_device):
        prefix = f"device {d}: " if len(args_per_device) > 1 else ""
        buffer_of: dict[int, int] = {}
        structs: dict[int, int] = {}
        placed.pointers.append(buffer_of)
        placed.structs.append(structs)
        for i, arg in enumerate(args):
            what = f"{prefix}args[{i}] ({params[i].name})"
            if isinstance(arg, PeerTable):
                placed.tables.append(np.zeros(len(symmetric), np.uint64))
                buffer_of[i] = placed.add(placed.tables[-1], f"{what} peer table")
            elif isinstance(arg, np.ndarray) and params[i].array is None:
                # the device's own symmetric buffer passed as an argument: the same memory
                own = d < len(symmetric) and arg is symmetric[d]
                buffer_of[i] = d if own else placed.add(arg, what)
            elif isinstance(arg, ParamStruct):
                for offset, array in arg.pointers.items():
                    if id(array) not in structs:
                        structs[id(array)] = placed.add(array, f"{what} pointer at +{offset}")
    return placed


def cluster_shape(directives: Sequence[str], cluster: Dim | None) -> tuple[
        tuple[int, int, int], bool]:
    """(cluster shape, whether it was given explicitly) of a launch, checked against the
    kernel's `.reqnctapercluster`, `.explicitcluster` and `.maxclusterrank` directives."""
    required = maxrank = None
    must_be_explicit = False
    for directive in directives:
        word, _, rest = directive.partition(" ")
        values = tuple(int(v) for v in rest.replace(",", " ").split())
        match word:
            case ".reqnctapercluster":
                required = as_dim3(values, ".reqnctapercluster")
            case ".explicitcluster":
                must_be_explicit = True
            case ".maxclusterrank":
                maxrank = values[0]
    shape = required if cluster is None else as_dim3(cluster, "cluster")
    if required is not None and shape != required:
        raise ValueError(f"the kernel requires clusters of {required} CTAs "
                         f"(.reqnctapercluster), the launch gives {shape}")
    if must_be_explicit and shape is None:
        raise ValueError("the kernel is .explicitcluster: launch it with a cluster shape")
    shape = shape or (1, 1, 1)
    if maxrank is not None and shape[0] * shape[1] * shape[2] > maxrank:
        raise ValueError(f"a cluster of {shape} CTAs exceeds the kernel's .maxclusterrank "
                         f"{maxrank}")
    return shape, cluster is not None or required is not None


def _declared(program: Program) -> dict[str, str]:
    return {name: decl.type for decl in program.kernel.registers for name in decl.names()}


def _shared_size(program: Program, shared_bytes: int) -> int:
    layout = program.shared
    size = max(layout.static_bytes, layout.dynamic_offset + shared_bytes if shared_bytes else 0)
    if shared_bytes < 0 or size > MAX_SHARED_BYTES:
        raise SimError(f"the kernel needs {size} bytes of shared memory per block; sm_90 "
                       f"allows {MAX_SHARED_BYTES}", kernel=program.kernel.name)
    # Blocks' memories lie end to end in one array, accessed in units of up to 16 bytes: a
    # size that is a multiple of 16 keeps every block's aligned accesses aligned in it.
    return -(-size // SHARED_GRANULE) * SHARED_GRANULE


def _marshal(program: Program, memory: GlobalMemory, args: Sequence[Arg],
             address_of, buffer_of: dict[int, int]) -> bytes:
    """The parameter bytes of one device's arguments; `buffer_of` maps the position of each
    argument passed as a pointer (an array, a peer table) to its buffer in `memory`."""
    data = bytearray(program.param_bytes)
    for i, (param, offset, arg) in enumerate(zip(program.kernel.params, program.param_offsets,
                                                 args, strict=True)):
        if isinstance(arg, ParamStruct):
            raw = _struct_bytes(param, arg.encode(address_of), program.kernel.name)
        else:
            raw = _param_bytes(param, arg, program.kernel.name, memory, buffer_of.get(i, -1))
        data[offset:offset + len(raw)] = raw
    return bytes(data)


def _struct_bytes(param: Param, raw: bytes, kernel: str) -> bytes:
    size, _ = param_size(param)
    if param.array is None or len(raw) != size:
        raise SimError(f"parameter {param.name} takes {size} bytes; the ParamStruct has "
                       f"{len(raw)}", kernel=kernel)
    return raw


def _param_bytes(param: Param, arg: Arg, kernel: str, memory: GlobalMemory,
                 buffer_index: int) -> bytes:
    size, _ = param_size(param)
    if isinstance(arg, PeerTable | Multicast) and (param.array is not None
                                                   or param.type not in POINTER_TYPES):
        raise SimError(f"a {arg!r} is passed to a .u64 pointer parameter, not to "
                       f"{param.name}", kernel=kernel)
    if isinstance(arg, Multicast):
        return np.uint64(MULTICAST_WINDOW).tobytes()
    if isinstance(arg, TensorMapEncodeTiled):
        arg = arg.tensor_map()
    if param.array is not None and isinstance(arg, TensorMap):  # a CUtensorMap parameter
        raw = arg.encode()
        if len(raw) != size:
            raise SimError(f"parameter {param.name} takes {size} bytes; a TensorMap is "
                           f"{len(raw)} (declare it .align 64 .b8 {param.name}[128])",
                           kernel=kernel)
        return raw
    if param.array is not None:  # `.b8 name[N]`: the argument's raw bytes (e.g. a struct)
        raw = np.ascontiguousarray(arg).tobytes()
        if len(raw) != size:
            raise SimError(f"parameter {param.name} takes {size} bytes, got {len(raw)}",
                           kernel=kernel)
        return raw
    if isinstance(arg, np.ndarray | PeerTable):
        if param.type not in POINTER_TYPES:
            raise SimError(f"array passed to .{param.type} parameter {param.name}; arrays are "
                           "device buffers for .u64 pointer parameters", kernel=kernel)
        return np.uint64(memory.address(buffer_index)).tobytes()
    if param.type not in VIEW or param.type == "pred":
        raise SimError(f"unsupported parameter type .{param.type} of {param.name}",
                       kernel=kernel)
    value = arg.item() if isinstance(arg, np.generic) else arg
    if param.type in FLOAT or param.type in ("f16", "bf16"):
        return constant(float(value), param.type).tobytes()
    if isinstance(value, float) or not _fits(int(value), param.type):
        raise SimError(f"argument {value!r} does not fit parameter {param.name} "
                       f"(.{param.type})", kernel=kernel)
    return constant(int(value), param.type).tobytes()


def _fits(value: int, ptx_type: str) -> bool:
    bits = BITS[ptx_type]
    if ptx_type.startswith("s"):
        return -(1 << (bits - 1)) <= value < (1 << (bits - 1))
    return -(1 << (bits - 1)) <= value < (1 << bits)
