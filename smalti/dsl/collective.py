"""Collective kernels in the DSL: kernels that run on every device of a mesh axis at once and
reach each other's memory from inside.

    @sd.kernel(out_shape=..., mesh_axis="x",
               symmetric=[sd.Symmetric((n * 64, 128), jnp.float32), sd.Semaphores(1)])
    def all_gather(x_ref, out_ref, gathered, sems):
        me = sd.device_index()
        for peer in range(sd.device_count()):
            sd.remote_ref(gathered, peer)[me * 64:me * 64 + 64, :] = x_ref[...]
            sems[0].signal(peer)
        sems[0].wait(sd.device_count())
        out_ref[...] = gathered[...]

`symmetric=[...]` declares the kernel's symmetric buffers (the same offset on every device),
one more body parameter each after the shared-memory ones: `sd.Symmetric(shape, dtype)` is a
ref, `sd.Semaphores(n)` an array of n semaphores. The kernel is called inside `jax.shard_map`
over `mesh_axis`; its device count is that axis's size (or `devices=` of `sd.kernel`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from smalti.dialect.checks import symmetric_memory_space
from smalti.dialect.ops_collective import (
    SYMMETRIC_ALIGNMENT,
    DeviceIndexOp,
    MultimemLoadReduceOp,
    MultimemRedOp,
    MultimemStoreOp,
    RemoteRefOp,
    SemaphoreSignalOp,
    SemaphoreWaitOp,
    SliceSymmetricOp,
)
from smalti.dsl.array import Array, vector_type
from smalti.dsl.dtypes import mlir_name, mlir_type
from smalti.dsl.index import Index, IndexLike, as_index
from smalti.dsl.locations import SourcePosition, user_error, user_position
from smalti.dsl.refs import Ref, RefView
from smalti.dsl.smem import round_up
from smalti.dsl.trace import active, create, dsl_entry, emit_value


@dataclass(frozen=True)
class Symmetric:
    """A symmetric buffer: `shape` elements of `dtype` at the same offset on every device."""

    shape: tuple[int, ...]
    dtype: object
    where: SourcePosition | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        if not self.shape or any(isinstance(s, bool) or not isinstance(s, int) or s < 1
                                 for s in self.shape):
            raise user_error(ValueError, f"sd.Symmetric needs a shape of positive ints, got "
                                         f"{self.shape!r}")
        if mlir_name(self.dtype) is None:
            raise user_error(TypeError, f"sd.Symmetric of dtype {self.dtype!r}: kernels hold "
                                        "the dtypes of smalti.dsl.dtypes")
        if self.where is None:
            object.__setattr__(self, "where", user_position())

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Semaphores:
    """`count` semaphores (i32 counters in the symmetric heap, zero between kernels)."""

    count: int
    where: SourcePosition | None = None

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise user_error(ValueError, f"sd.Semaphores needs a positive count, got "
                                         f"{self.count!r}")
        if self.where is None:
            object.__setattr__(self, "where", user_position())

    @property
    def nbytes(self) -> int:
        return 4 * self.count


SymmetricDecl = Symmetric | Semaphores


def plan_symmetric(decls: Sequence[object], kernel: str) -> tuple[tuple[int, SymmetricDecl],
                                                                     ...]:
    """(offset, declaration) of each symmetric declaration, aligned to SYMMETRIC_ALIGNMENT."""
    placed, offset = [], 0
    for decl in decls:
        if not isinstance(decl, Symmetric | Semaphores):
            raise TypeError(f"kernel {kernel}: symmetric=[...] takes sd.Symmetric and "
                            f"sd.Semaphores, got {decl!r}")
        placed.append((offset, decl))
        offset += round_up(decl.nbytes, SYMMETRIC_ALIGNMENT)
    return tuple(placed)


class SymmetricRef(Ref):
    """A ref to a symmetric buffer: this device's copy, or (from `sd.remote_ref`) a peer's.
    Loads and stores work as on any global ref."""

    def __init__(self, value: ir.Value, name: str, device: str = "") -> None:
        super().__init__(value, name)
        self.device = device

    def __repr__(self) -> str:
        where = f" on device {self.device}" if self.device else ""
        return f"SymmetricRef({self.name}: {self.dtype.name}{list(self.shape)}{where})"


class Semaphore:
    """Semaphore `index` of a `SemaphoreArray`."""

    def __init__(self, array: SemaphoreArray, index: Index) -> None:
        self.array, self.index = array, index

    @dsl_entry(SemaphoreSignalOp)
    def signal(self, device: IndexLike, increment: int = 1) -> None:
        """Add `increment` to this semaphore on `device`, after what the warpgroup wrote
        before (released at system scope)."""
        _positive(increment, "increment")
        create(SemaphoreSignalOp, semaphores=self.array.value, index=self.index.materialize(),
               device=_device(device), increment=increment)

    @dsl_entry(SemaphoreWaitOp)
    def wait(self, value: int = 1) -> None:
        """Wait until this device's semaphore holds `value`, then take it off (what its
        signallers wrote before signalling is visible after)."""
        _positive(value, "value")
        create(SemaphoreWaitOp, semaphores=self.array.value, index=self.index.materialize(),
               value=value)


class SemaphoreArray:
    """The semaphores an `sd.Semaphores(n)` declares: `sems[i].signal(device)`,
    `sems[i].wait(value)`."""

    def __init__(self, value: ir.Value, count: int, name: str) -> None:
        self.value, self.count, self.name = value, count, name

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"SemaphoreArray({self.name}: {self.count})"

    def __getitem__(self, index: IndexLike) -> Semaphore:
        position = as_index(index, f"an index of {self.name}")
        if position.static is not None and not 0 <= position.static < self.count:
            raise user_error(IndexError, f"semaphore {position.static} is out of range for "
                                         f"{self.name} of {self.count}")
        return Semaphore(self, position)


def _positive(value: object, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise user_error(ValueError, f"a semaphore's {what} must be a positive int, got "
                                     f"{value!r}")


def _device(device: IndexLike) -> ir.Value:
    """A device index (a Python int or a traced Index) in range for the kernel."""
    position = as_index(device, "a device index")
    devices = _devices()
    if position.static is not None and not 0 <= position.static < devices:
        raise user_error(IndexError, f"device {position.static} is out of range for the "
                                     f"kernel's {devices} devices")
    return position.materialize()


def _devices() -> int:
    devices = active().devices
    if devices is None:
        raise user_error(RuntimeError, "this is a collective operation: declare the kernel "
                                       "with sd.kernel(..., mesh_axis=...)")
    return devices


def allocate_symmetric(placements: Sequence[tuple[int, SymmetricDecl]], names: Sequence[str]
                       ) -> list[SymmetricRef | SemaphoreArray]:
    """Emit the slices of the declared symmetric buffers; the body's parameters for them."""
    params: list[SymmetricRef | SemaphoreArray] = []
    for (offset, decl), name in zip(placements, names, strict=True):
        assert decl.where is not None
        location = decl.where.location()
        shape, element = ((decl.count,), ir.IntegerType.get_signless(32)) \
            if isinstance(decl, Semaphores) else (decl.shape, mlir_type(decl.dtype))
        ref_type = ir.MemRefType.get(list(shape), element, memory_space=symmetric_memory_space())
        start = emit_value(arith.ConstantOp, [], ir.IndexType.get(),
                           {"value": ir.IntegerAttr.get(ir.IndexType.get(), offset)},
                           location=location)
        value = create(SliceSymmetricOp, offset=start, result_types=[ref_type],
                       location=location).result
        params.append(SemaphoreArray(value, decl.count, name) if isinstance(decl, Semaphores)
                      else SymmetricRef(value, name))
    return params


@dsl_entry(DeviceIndexOp)
def device_index() -> Index:
    """This device's index along the kernel's mesh axis (0 to device_count() - 1)."""
    devices = _devices()
    value = create(DeviceIndexOp, result_types=[ir.IndexType.get()]).result
    return Index.of(value, 0, devices - 1, "device_index()")


def device_count() -> int:
    """The number of devices along the kernel's mesh axis (static: known while tracing)."""
    return _devices()


@dsl_entry(RemoteRefOp)
def remote_ref(ref: SymmetricRef, device: IndexLike) -> SymmetricRef:
    """`ref`'s copy on `device`: loads and stores through it reach that device's memory."""
    if not isinstance(ref, SymmetricRef):
        raise user_error(TypeError, "remote_ref takes a symmetric ref (declared in the "
                                    f"kernel's symmetric=[...]), got {ref!r}")
    position = as_index(device, "a device index")
    value = create(RemoteRefOp, source=ref.value, device=_device(position)).result
    return SymmetricRef(value, ref.name,
                        "traced" if position.static is None else str(position.static))


def _multimem_window(view: object, what: str) -> tuple[RefView, list[ir.Value]]:
    """A window of a symmetric ref, checked to lie inside it, and its start indices."""
    if isinstance(view, SymmetricRef):
        view = view.at[...]
    if not isinstance(view, RefView) or not isinstance(view.ref, SymmetricRef):
        raise user_error(TypeError, f"{what} takes a window of a symmetric ref, like "
                                    f"buf.at[rows, :]; got {view!r}")
    view.ref.check_reach(view.window)
    return view, [s.materialize() for s in view.window.starts]


@dsl_entry(MultimemStoreOp)
def multimem_store(view: RefView | SymmetricRef, value: object) -> None:
    """Store `value` into the window on every device at once (through multicast)."""
    view, indices = _multimem_window(view, "multimem_store")
    create(MultimemStoreOp, value=view.ref.stored(view.window, value, "multimem_store of"),
           destination=view.ref.value, indices=indices)


@dsl_entry(MultimemRedOp)
def multimem_red(view: RefView | SymmetricRef, value: object, reduction: str = "add") -> None:
    """Reduce `value` into the window on every device at once, atomically per element."""
    view, indices = _multimem_window(view, "multimem_red")
    create(MultimemRedOp, value=view.ref.stored(view.window, value, "multimem_red of"),
           destination=view.ref.value, indices=indices, reduction=reduction)


@dsl_entry(MultimemLoadReduceOp)
def multimem_load_reduce(view: RefView | SymmetricRef, reduction: str = "add") -> Array:
    """The window reduced over every device's copy (f16/bf16 sums accumulate in f32)."""
    view, indices = _multimem_window(view, "multimem_load_reduce")
    loaded = create(MultimemLoadReduceOp, source=view.ref.value, indices=indices,
                    reduction=reduction,
                    result_types=[vector_type(view.window.sizes, view.ref.dtype)]).result
    return view.ref.loaded(view.window, loaded)
