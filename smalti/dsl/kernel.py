"""`@kernel`: a Python function over refs, traced per input signature into a smalti kernel,
compiled through the cache, and called with jax.Arrays (jit or not)."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jaxlib.mlir import ir

from smalti.dialect.context import make_context
from smalti.dialect.launch import (
    CLUSTER_ATTR,
    DEVICES_ATTR,
    GRID_ATTR,
    KERNEL_ATTR,
    MAX_DEVICES,
    MAX_PORTABLE_CLUSTER,
    MESH_AXIS_ATTR,
    WARPGROUPS_ATTR,
)
from smalti.dialect.ops_sync import ClusterBarrierOp, InitializeBarrierOp
from smalti.dsl.collective import allocate_symmetric, plan_symmetric
from smalti.dsl.dtypes import mlir_type
from smalti.dsl.refs import Ref
from smalti.dsl.smem import Placement, SmemStack, plan_smem
from smalti.dsl.smem_refs import allocate
from smalti.dsl.specs import (
    ArraySpec,
    check_expected,
    normalize_grid,
    out_specs,
    resolve,
    spec_of,
)
from smalti.dsl.tmem import NO_TMEM, TmemPlan, allocate_tmem, free_tmem, plan_tmem
from smalti.dsl.trace import TraceInfo, tracing
from smalti.runtime.cache import CompiledKernel, compile_kernel
from smalti.runtime.compiler import DEFAULT_ARCH
from smalti.runtime.jax_integration import call_kernel


@dataclass(frozen=True)
class LaunchOptions:
    """What the decorator says about launching, as given (values or callables of inputs)."""

    grid: object
    warpgroups: int
    cluster: tuple[int, int, int]
    out_shape: object
    in_specs: tuple[object, ...] | None
    smem: object = ()
    mesh_axis: str | None = None  # a collective kernel's mesh axis
    devices: int | None = None  # its devices along it (None: the axis's size at the call)
    symmetric: tuple[object, ...] = ()


@dataclass(frozen=True)
class Traced:
    """One traced instance of a kernel: its MLIR module and the specs it was traced for."""

    module: ir.Operation
    inputs: tuple[ArraySpec, ...]
    outputs: tuple[ArraySpec, ...]
    single_output: bool
    grid: tuple[int, ...]
    smem_bytes: int = 0
    cluster: tuple[int, int, int] = (1, 1, 1)
    devices: int | None = None  # a collective kernel's

    @property
    def mlir(self) -> str:
        """The module as text, with the user's file:line locations."""
        return self.module.get_asm(enable_debug_info=True)


class Kernel:
    """A traced-on-demand kernel; call it with arrays, like a jax function."""

    def __init__(self, fn: Callable[..., None], options: LaunchOptions,
                 name: str | None = None, arch: str = DEFAULT_ARCH) -> None:
        self.fn = fn
        self.options = options
        self.name = re.sub(r"\W", "_", name or fn.__name__)
        self.arch = arch
        self.params = [p.name for p in inspect.signature(fn).parameters.values()]
        self._compiled: dict[tuple, tuple[Traced, CompiledKernel]] = {}
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<smalti kernel {self.name}({', '.join(self.params)})>"

    def input_specs(self, args: tuple) -> tuple[ArraySpec, ...]:
        """Check the call's arrays; TypeError/ValueError naming the parameter that is wrong."""
        declared = self.options.in_specs
        count = len(declared) if declared is not None else None
        specs = []
        for position, value in enumerate(args):
            param = self.params[position] if position < len(self.params) else f"#{position}"
            what = f"argument '{param}' of kernel {self.name}"
            spec = spec_of(value, what)
            if declared is not None and position < len(declared) and declared[position] is not None:
                check_expected(spec, declared[position], what)
            specs.append(spec)
        if count is not None and count != len(args):
            raise TypeError(f"kernel {self.name} takes {count} input arrays, got {len(args)}")
        return tuple(specs)

    def devices(self) -> int | None:
        """A collective kernel's device count: `devices=`, else the size of its mesh axis
        in the shard_map being traced (ValueError outside one); None if not collective."""
        axis = self.options.mesh_axis
        if axis is None or self.options.devices is not None:
            return self.options.devices
        import jax

        manual = tuple(getattr(jax.sharding.get_abstract_mesh(), "manual_axes", ()) or ())
        if axis not in manual:
            raise ValueError(f"kernel {self.name} is collective over mesh axis '{axis}': call "
                             f"it inside jax.shard_map over a mesh with that axis, or give "
                             f"sd.kernel(..., devices=N) to compile it for N devices")
        return int(jax.lax.axis_size(axis))

    def trace(self, *args: Any, devices: int | None = None) -> Traced:
        """Trace the body for the specs of `args` (arrays or jax.ShapeDtypeStructs); a
        collective kernel for `devices` devices (default: `self.devices()`)."""
        inputs = self.input_specs(args)
        devices = self.devices() if devices is None else devices
        outputs, single = out_specs(resolve(self.options.out_shape, inputs, devices),
                                    self.name)
        shared, tmem = plan_tmem(resolve(self.options.smem, inputs, devices), self.name,
                                 self.options.warpgroups)
        placements, smem_bytes = plan_smem(shared, self.name)
        symmetric = plan_symmetric(resolve(self.options.symmetric, inputs, devices), self.name)
        scratch = len(placements) + len(tmem.decls)
        if len(self.params) != len(inputs) + len(outputs) + scratch + len(symmetric):
            smem = f", {len(placements)} shared-memory refs" if placements else ""
            smem += f", {len(tmem.decls)} tensor-memory refs" if tmem.decls else ""
            heap = f", {len(symmetric)} symmetric refs" if symmetric else ""
            raise TypeError(f"kernel {self.name} takes {len(self.params)} refs "
                            f"({', '.join(self.params)}) but is called with {len(inputs)} "
                            f"inputs and declares {len(outputs)} outputs{smem}{heap}")
        grid = normalize_grid(resolve(self.options.grid, inputs, devices), self.name)
        check_cluster(grid, self.options.cluster, self.name)
        smem = SmemStack(smem_bytes)
        module = self._build(inputs + outputs, grid, placements, symmetric, devices, smem,
                             tmem)
        return Traced(module, inputs, outputs, single, grid, smem.peak, self.options.cluster,
                      devices)

    def _build(self, refs: tuple[ArraySpec, ...], grid: tuple[int, ...],
               placements: tuple[Placement, ...], symmetric: tuple = (),
               devices: int | None = None, smem: SmemStack | None = None,
               tmem: TmemPlan = NO_TMEM) -> ir.Operation:
        code = self.fn.__code__
        context = make_context()
        with context, ir.Location.file(code.co_filename, code.co_firstlineno, 1) as location:
            module = ir.Module.create(location)
            types = [ir.MemRefType.get(list(s.shape), mlir_type(s.dtype)) for s in refs]
            attributes = {
                "sym_name": ir.StringAttr.get(self.name),
                "function_type": ir.TypeAttr.get(ir.FunctionType.get(types, [])),
                KERNEL_ATTR: ir.UnitAttr.get(),
                GRID_ATTR: ir.DenseI64ArrayAttr.get(list(grid)),
                WARPGROUPS_ATTR: ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                    self.options.warpgroups),
            }
            if self.options.cluster != (1, 1, 1):
                attributes[CLUSTER_ATTR] = ir.DenseI64ArrayAttr.get(list(self.options.cluster))
            if devices is not None:
                attributes[DEVICES_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                              devices)
                attributes[MESH_AXIS_ATTR] = ir.StringAttr.get(self.options.mesh_axis or "x")
            with ir.InsertionPoint(module.body):
                func = ir.Operation.create("func.func", attributes=attributes, regions=1,
                                           loc=location)
            block = func.regions[0].blocks.append(*types)
            info = TraceInfo(self.name, (*grid, 1, 1)[:3], self.options.warpgroups,
                             self.options.cluster, devices, smem=smem)
            with ir.InsertionPoint(block), tracing(info):
                arguments = [Ref(arg, param) for arg, param in
                             zip(block.arguments, self.params, strict=False)]
                first = len(arguments)
                names = self.params[first:first + len(placements) + len(tmem.decls)]
                shared_names, tmem_names = tmem.split(names)
                shared = allocate(placements, shared_names)
                tensor = allocate_tmem(tmem, tmem_names, self.options.warpgroups)
                scratch = tmem.merge(shared, tensor)
                heap = allocate_symmetric(
                    symmetric, self.params[len(arguments) + len(scratch):])
                result = self.fn(*arguments, *scratch, *heap)
                if smem is not None:
                    smem.finish()
                if result is not None:
                    raise TypeError(f"kernel {self.name} ({code.co_filename}:"
                                    f"{code.co_firstlineno}) must return None: outputs are "
                                    "written through their refs")
                free_tmem(tensor, tmem)
                ir.Operation.create("func.return", loc=location)
            if info.collective_copies:
                publish_barrier_inits(block)
        return module.operation

    def compile(self, *args: Any, devices: int | None = None
                ) -> tuple[Traced, CompiledKernel]:
        """Trace and compile for the specs of `args` (cached per signature and by content);
        a collective kernel for `devices` devices (default: `self.devices()`)."""
        devices = self.devices() if devices is None else devices
        key = (*self.input_specs(args), devices)
        hit = self._compiled.get(key)
        if hit is None:
            traced = self.trace(*args, devices=devices)
            hit = (traced, compile_kernel(traced.module, arch=self.arch))
            self._compiled[key] = hit
        return hit

    def __call__(self, *args: Any) -> Any:
        """Run the kernel on `args`: the output arrays (one, or a tuple as out_shape says)."""
        traced, compiled = self.compile(*args)
        results = call_kernel(compiled, args, [(o.shape, o.dtype) for o in traced.outputs],
                              cluster=self.options.cluster)
        return results[0] if traced.single_output else tuple(results)


def check_cluster(grid: tuple[int, ...], cluster: tuple[int, int, int], name: str) -> None:
    """The grid must be a whole number of clusters (ValueError naming the kernel)."""
    for axis, (g, c) in enumerate(zip((*grid, 1, 1)[:3], cluster, strict=True)):
        if g % c:
            raise ValueError(f"kernel {name}: grid {grid} is not a whole number of clusters "
                             f"{cluster}: along axis {axis}, {g} blocks do not divide into "
                             f"clusters of {c}")


def publish_barrier_inits(block: ir.Block) -> None:
    """A cluster barrier after the kernel's mbarrier inits, so that no peer multicasts into
    this CTA (completing its barriers) before they are initialised."""
    inits = [op for op in block.operations
             if isinstance(op.operation.opview, InitializeBarrierOp)]
    if inits:
        last = inits[-1].operation
        with ir.InsertionPoint.after(last):
            ClusterBarrierOp.build(loc=last.location)


def kernel(*, grid: object = (1,), out_shape: object, warpgroups: int = 1,
           cluster: tuple[int, ...] = (1, 1, 1), in_specs: tuple[object, ...] | None = None,
           smem: object = (), mesh_axis: str | None = None, devices: int | None = None,
           symmetric: object = (), name: str | None = None, arch: str = DEFAULT_ARCH
           ) -> Callable[[Callable[..., None]], Kernel]:
    """Decorate `body(*input_refs, *output_refs, *smem_refs)` into a Kernel.

    `grid` (1-3 ints) and `out_shape` (a jax.ShapeDtypeStruct or a tuple of them) may also
    be callables of the inputs' specs (objects with .shape and .dtype). `in_specs`, when
    given, declares each input's shape and dtype (checked at the call). `smem` lists the
    kernel's shared memory (sd.SMEM, sd.Barriers, sd.Union; or a callable of the inputs'
    specs giving that list): one more body parameter per array or barrier array.
    `smem` may also hold tensor-memory arrays (sd.TMEM, sm_100a), allocated at kernel start
    and freed at its end. `warpgroups` is the number of 128-thread warpgroups per block;
    with more than one, `sd.warpgroup_region` gives some of them code (and register
    budgets) of their own.
    `cluster` (1 to 3 ints, at most 8 blocks) groups the grid's blocks into clusters that run
    together: `sd.cluster_id`, `sd.block_id_in_cluster` and `sd.cluster_rank` say where a
    block is, and `sd.async_copy(..., collective=axis)` shares one TMA load among the
    blocks of a cluster along `axis` (each loads a part and multicasts it).
    `mesh_axis` makes a collective kernel (smalti.dsl.collective): it runs on every device of
    that axis of the `jax.shard_map` it is called in (`devices`, when given, is their count;
    otherwise the axis's size at the call), and `symmetric` declares its symmetric buffers
    and semaphores (sd.Symmetric, sd.Semaphores), one more body parameter each."""
    if not isinstance(warpgroups, int) or warpgroups < 1:
        raise ValueError(f"warpgroups must be a positive int, got {warpgroups!r}")
    cluster_dims = (*tuple(cluster), 1, 1)[:3]
    if len(tuple(cluster)) > 3 or any(not isinstance(c, int) or c < 1 for c in cluster_dims):
        raise ValueError(f"cluster must be 1 to 3 positive ints, got {cluster!r}")
    if math.prod(cluster_dims) > MAX_PORTABLE_CLUSTER:
        raise ValueError(f"cluster {cluster!r} has {math.prod(cluster_dims)} blocks; a portable "
                         f"cluster has at most {MAX_PORTABLE_CLUSTER}")
    if mesh_axis is None and (devices is not None or symmetric):
        raise ValueError("devices= and symmetric=[...] are for collective kernels: give the "
                         "mesh axis they run along, sd.kernel(..., mesh_axis='x')")
    if mesh_axis is not None and (not isinstance(mesh_axis, str) or not mesh_axis):
        raise ValueError(f"mesh_axis must be a mesh axis name, got {mesh_axis!r}")
    if devices is not None and (not isinstance(devices, int) or not 1 <= devices <= MAX_DEVICES):
        raise ValueError(f"devices must be an int from 1 to {MAX_DEVICES}, got {devices!r}")
    options = LaunchOptions(grid, warpgroups, cluster_dims, out_shape,
                            None if in_specs is None else tuple(in_specs),
                            tuple(smem) if isinstance(smem, list) else smem, mesh_axis, devices,
                            tuple(symmetric) if isinstance(symmetric, list) else symmetric)

    def decorate(fn: Callable[..., None]) -> Kernel:
        if not callable(smem):  # a static declaration is checked (e.g. its size) right away
            plan_smem(plan_tmem(smem, name or fn.__name__, warpgroups)[0], name or fn.__name__)
        return Kernel(fn, options, name, arch)

    return decorate
