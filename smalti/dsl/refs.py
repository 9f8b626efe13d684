"""Refs to global or shared memory: indexing loads an Array, assigning stores one, and
`ref.at[...]` names a window without loading it (the global side of a TMA copy)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, vector

from smalti.dialect.checks import is_gmem_type, is_smem_type
from smalti.dialect.ops import VectorLoadOp, VectorStoreOp
from smalti.dialect.ops_dynamic import LoadScalarOp, MaskedLoadOp, MaskedStoreOp
from smalti.dsl.array import Array, Shape, scalar_array, vector_type
from smalti.dsl.dtypes import bit_width, memory_bytes, numpy_dtype
from smalti.dsl.index import Index, as_index
from smalti.dsl.locations import user_error
from smalti.dsl.trace import create, dsl_entry, emit_value


@dataclass(frozen=True)
class Window:
    """A static-shaped window of a ref: where it starts and which dims it keeps."""

    starts: tuple[Index, ...]
    sizes: Shape
    kept: tuple[bool, ...]  # False where an integer index drops the dim

    @property
    def shape(self) -> Shape:
        return tuple(s for s, keep in zip(self.sizes, self.kept, strict=True) if keep)


@dataclass(frozen=True)
class RefView:
    """A window of a ref, not loaded: what `ref.at[rows, cols]` names for a TMA copy."""

    ref: Ref
    window: Window


class _At:
    """`ref.at[...]`: index expressions give RefViews."""

    def __init__(self, ref: Ref) -> None:
        self._ref = ref

    def __getitem__(self, key: object) -> RefView:
        # A global array's TMA window may hang over its end (loads zero-fill, stores clip);
        # subclasses (symmetric refs, for multimem) are not TMA windows.
        return RefView(self._ref, self._ref.window(
            key, hanging=type(self._ref) is Ref and not self._ref.is_smem))


class Ref:
    """A memref in global memory (a kernel argument) or shared memory (a declared buffer):
    `ref[i:i + 128, :]` loads, `ref[...] = x` stores, `ref.at[...]` is a window for TMA."""

    def __init__(self, value: ir.Value, name: str) -> None:
        memref = ir.MemRefType(value.type)
        self._value = value
        self.name = name
        self.shape: Shape = tuple(memref.shape)
        self.dtype: np.dtype = numpy_dtype(memref.element_type)
        self.is_smem = is_smem_type(memref)

    @property
    def value(self) -> ir.Value:
        """The memref value."""
        return self._value

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the whole ref (e.g. the transaction count of a TMA copy into it)."""
        return math.ceil(math.prod(self.shape) * memory_bytes(self.dtype))

    @property
    def at(self) -> _At:
        """`ref.at[rows, cols]`: a RefView of that window (nothing is loaded)."""
        return _At(self)

    @property
    def T(self) -> Ref:
        """Only shared-memory refs the kernel declares have a transposed view (SharedRef.T)."""
        where = ("a global ref" if not self.is_smem else
                 "a shared-memory ref not declared in the kernel's smem=[...]")
        raise user_error(TypeError, f"{self.name}.T: only a 2-D shared-memory ref declared in "
                                    f"the kernel's smem=[...] has a transposed view; "
                                    f"{self.name} is {where}")

    def __repr__(self) -> str:
        space = ", smem" if self.is_smem else ""
        return f"Ref({self.name}: {self.dtype.name}{list(self.shape)}{space})"

    def window(self, key: object, accessed: bool = False, hanging: bool = False) -> Window:
        """Resolve an index expression into a window; located IndexError/TypeError if bad.
        `accessed`: the window is loaded or stored, so it must lie inside the ref wherever
        its traced start can be (a TMA copy's window may hang over: TMA clips it).
        `hanging`: a static window may also run past the end of a dim it starts inside."""
        key = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise user_error(IndexError, "an index can only have a single ellipsis ('...')")
        if Ellipsis in key:
            at = key.index(Ellipsis)
            key = (*key[:at], *([slice(None)] * (self.ndim - len(key) + 1)), *key[at + 1:])
        if len(key) > self.ndim:
            raise user_error(IndexError, f"too many indices for {self.name} of rank {self.ndim}")
        key = (*key, *([slice(None)] * (self.ndim - len(key))))
        starts, sizes, kept = [], [], []
        for dim, (k, size) in enumerate(zip(key, self.shape, strict=True)):
            if isinstance(k, slice):
                start, length = self._slice(dim, k, size, hanging)
                keep = True
            else:
                start, length, keep = as_index(k, f"an index of {self.name}"), 1, False
                if start.static is not None and start.static < 0:
                    start = Index((), start.static + size)
            end = size - 1 if hanging else size - length  # the last start allowed
            if start.static is not None and not 0 <= start.static <= end:
                raise user_error(IndexError, f"window [{start.static}, {start.static + length}) "
                                             f"of dim {dim} is out of bounds for {self.name} of "
                                             f"shape {self.shape}")
            starts.append(start)
            sizes.append(length)
            kept.append(keep)
        if not any(kept):
            raise user_error(IndexError, f"indexing every dim of {self.name} gives a scalar; "
                                         "keep at least one dim (a slice)")
        window = Window(tuple(starts), tuple(sizes), tuple(kept))
        if accessed:
            self.check_reach(window)
        return window

    def check_reach(self, window: Window) -> None:
        """A located IndexError if a traced start can put `window` (loaded or stored) outside
        the ref, naming the values (program ids, loop counters) that do."""
        for dim, (start, length) in enumerate(zip(window.starts, window.sizes, strict=True)):
            self._check_reach(dim, start, length, self.shape[dim])

    def _check_reach(self, dim: int, start: Index, length: int, size: int) -> None:
        bounds = None if start.static is not None else start.bounds()
        if bounds is None:
            return
        least, greatest = bounds
        if greatest + length > size:
            raise user_error(IndexError, f"the window of dim {dim} of {self.name} reaches "
                                         f"[{greatest}, {greatest + length}) when "
                                         f"{start.extreme(largest=True)}, past the dim's size "
                                         f"{size} (is the grid or the loop too long?)")
        if least < 0:
            raise user_error(IndexError, f"the window of dim {dim} of {self.name} starts at "
                                         f"{least} when {start.extreme(largest=False)}, "
                                         "before the dim's start")

    def _slice(self, dim: int, k: slice, size: int, hanging: bool = False
               ) -> tuple[Index, int]:
        if k.step not in (None, 1):
            raise user_error(IndexError, f"strided slices are not supported (dim {dim} of "
                                         f"{self.name} has step {k.step!r})")
        start = as_index(0 if k.start is None else k.start, "a slice start")
        stop = as_index(size if k.stop is None else k.stop, "a slice stop")
        if start.static is not None and stop.static is not None:
            start_value, stop_value = (v + size if v < 0 else v
                                       for v in (start.static, stop.static))
            if not 0 <= start_value <= stop_value <= (math.inf if hanging else size) or (
                    hanging and start_value >= size):
                raise user_error(IndexError, f"slice [{start.static}:{stop.static}] of dim "
                                             f"{dim} is out of bounds for {self.name} of shape "
                                             f"{self.shape}")
            if stop_value == start_value:
                raise user_error(IndexError, f"empty slice [{start.static}:{stop.static}] of dim "
                                             f"{dim} of {self.name} (size {size})")
            return Index((), start_value), stop_value - start_value
        length = (stop - start).static
        if length is None or length <= 0:
            raise user_error(IndexError, f"the slice of dim {dim} of {self.name} must have a "
                                         "static positive length, like `i:i + 128`")
        return start, length

    def loaded(self, window: Window, vector_value: ir.Value) -> Array:
        """The Array a load of `window` gives, from the vector an op loaded (of the window's
        full rank): the dims integer indices dropped are dropped."""
        if window.shape == window.sizes:
            return Array(vector_value)
        return Array(emit_value(vector.ShapeCastOp, [vector_value],
                                vector_type(window.shape, self.dtype)))

    def stored(self, window: Window, value: object, verb: str = "storing") -> ir.Value:
        """`value` (an Array or a scalar, broadcast to the window) as the vector an op stores
        into `window`, of its full rank; a located TypeError for another dtype."""
        if not isinstance(value, Array):
            value = scalar_array(value, window.shape, self.dtype)
        if value.dtype != self.dtype:
            raise user_error(TypeError, f"{verb} a {value.dtype.name} array into {self.name} "
                                        f"of dtype {self.dtype.name}; cast it with .astype")
        return full_rank(window, value)

    @dsl_entry(VectorLoadOp, LoadScalarOp)
    def __getitem__(self, key: object) -> Array | Index:
        """`ref[i:i + 128, :]` loads an Array; an integer or Index in every dim (`table[b, k]`)
        reads one element of an int32 global ref at run time, as an Index."""
        scalar_key = self._scalar_key(key)
        if scalar_key is not None:
            return self._load_scalar(scalar_key)
        return self.load_window(self.window(key, accessed=True))

    @dsl_entry(VectorStoreOp)
    def __setitem__(self, key: object, value: object) -> None:
        self.store_window(self.window(key, accessed=True), value)

    def load_window(self, window: Window) -> Array:
        """`window` (checked) loaded into registers (smalti.vector_load)."""
        indices = [s.materialize() for s in window.starts]
        loaded = create(VectorLoadOp, source=self._value, indices=indices,
                        result_types=[vector_type(window.sizes, self.dtype)]).result
        return self.loaded(window, loaded)

    def store_window(self, window: Window, value: object) -> None:
        """`value` stored into `window` (checked) (smalti.vector_store)."""
        stored = self.stored(window, value)
        indices = [s.materialize() for s in window.starts]
        create(VectorStoreOp, value=stored, destination=self._value, indices=indices)

    def _scalar_key(self, key: object) -> tuple | None:
        """The key if it indexes every dim with an integer or an Index (a scalar), else None."""
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != self.ndim or any(isinstance(k, slice) or k is Ellipsis or k is None
                                        for k in key):
            return None
        return key

    def _load_scalar(self, key: tuple) -> Index:
        """One element read at run time (smalti.load_scalar, then arith.index_cast): the same
        address in every thread, so a value the warpgroup may branch on."""
        if not is_gmem_type(self._value.type):
            raise user_error(TypeError, f"indexing every dim of {self.name} gives a scalar; "
                                        "only global refs (kernel arguments) give run-time "
                                        "scalars: keep at least one dim (a slice)")
        if self.dtype not in SCALAR_DTYPES:
            raise user_error(TypeError, f"{self.name}[...] reads a run-time index, which must "
                                        f"be int32 or int64; {self.name} is {self.dtype.name}")
        indices = []
        for dim, (k, size) in enumerate(zip(key, self.shape, strict=True)):
            index = as_index(k, f"an index of {self.name}")
            if index.static is not None:
                position = index.static + size if index.static < 0 else index.static
                if not 0 <= position < size:
                    raise user_error(IndexError, f"index {index.static} is out of bounds for "
                                                 f"dim {dim} of {self.name} of shape "
                                                 f"{self.shape}")
                index = Index((), position)
            # A traced index is not checked against its range while tracing: a pipeline's
            # index map reads steps ahead under a guard (`step < steps`) that its range
            # does not know; a read out of bounds at run time faults in the simulator.
            indices.append(index.materialize())
        element = create(LoadScalarOp, source=self._value, indices=indices,
                         result_types=[ir.MemRefType(self._value.type).element_type]).result
        return Index.of(emit_value(arith.IndexCastOp, [element], ir.IndexType.get()))


SCALAR_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))  # what ref[i, j] reads as an Index


def full_rank(window: Window, value: Array) -> ir.Value:
    """`value` broadcast to `window`'s shape, as the vector of its full rank (with the dims
    integer indices dropped) that the memory ops of the window take."""
    if value.shape != window.shape:
        value = value.broadcast_to(window.shape)
    if window.shape == window.sizes:
        return value.value
    return emit_value(vector.ShapeCastOp, [value.value], vector_type(window.sizes, value.dtype))


MASKED_BITS = (16, 32, 64)  # the element widths masked accesses move


def _view(view: object, what: str) -> RefView:
    """A RefView (a whole Ref is its window `ref.at[...]`); a located TypeError otherwise."""
    if isinstance(view, Ref):
        return view.at[...]
    if not isinstance(view, RefView):
        raise user_error(TypeError, f"{what} takes a window of a ref (`ref.at[rows, cols]`), "
                                    f"got {type(view).__name__}")
    return view


def _inside(view: RefView, what: str) -> None:
    """A located IndexError unless an unmasked access of `view` lies inside its ref (`.at`
    lets a global window hang over the end, for TMA and for masked accesses)."""
    ref, window = view.ref, view.window
    for dim, (start, length) in enumerate(zip(window.starts, window.sizes, strict=True)):
        if start.static is not None and start.static + length > ref.shape[dim]:
            raise user_error(IndexError, f"{what} without a mask: window [{start.static}, "
                                         f"{start.static + length}) of dim {dim} hangs over "
                                         f"the end of {ref.name} of shape {ref.shape}; give "
                                         "a mask that is false past the end")
    ref.check_reach(window)


def _masked(view: RefView, mask: object, what: str) -> ir.Value:
    """The mask of a masked access of `view`, checked, as the vector of the window's full
    rank; a located error for a ref or a dtype masked accesses do not take."""
    ref = view.ref
    if not is_gmem_type(ref.value.type):
        raise user_error(TypeError, f"{what} with a mask takes a window of a global ref (a "
                                    f"kernel argument); {ref.name} is not one")
    if bit_width(ref.dtype) not in MASKED_BITS:
        raise user_error(TypeError, f"{what} with a mask moves 16-, 32- or 64-bit elements; "
                                    f"{ref.name} is {ref.dtype.name}")
    if not isinstance(mask, Array) or mask.dtype != np.bool_:
        got = mask.dtype.name if isinstance(mask, Array) else type(mask).__name__
        raise user_error(TypeError, f"{what}'s mask must be a bool Array (a comparison such as "
                                    f"`rows < n`), got {got}")
    try:
        fits = np.broadcast_shapes(mask.shape, view.window.shape) == view.window.shape
    except ValueError:
        fits = False
    if not fits:
        raise user_error(ValueError, f"{what}'s mask of shape {mask.shape} does not broadcast "
                                     f"to the window's shape {view.window.shape} (a row mask "
                                     f"is `rows[:, None] < n`)")
    return full_rank(view.window, mask)


@dsl_entry(MaskedLoadOp)
def load(view: RefView | Ref, *, mask: Array | None = None, other: object = 0) -> Array:
    """The window `view` (`ref.at[...]`) loaded into registers; with `mask` (a bool Array of
    the window's shape, or broadcastable to it, such as `rows[:, None] < n`), only where the
    mask holds: elsewhere the result is `other` (a number, an Index or an Array) and memory
    is not read, so a window of a global ref may hang over the ref's end where it is masked.
    Without a mask it is `ref[...]` of the window (which must then lie inside the ref)."""
    view = _view(view, "load")
    ref, window = view.ref, view.window
    if mask is None:
        _inside(view, "load")
        return ref.load_window(window)
    predicate = _masked(view, mask, "load")
    if isinstance(other, Array) and other.dtype != ref.dtype:
        raise user_error(TypeError, f"load's other is {other.dtype.name}, {ref.name} is "
                                    f"{ref.dtype.name}; cast it with .astype")
    fallback = ref.stored(window, other, "loading")
    indices = [s.materialize() for s in window.starts]
    loaded = create(MaskedLoadOp, source=ref.value, mask=predicate, other=fallback,
                    indices=indices, result_types=[vector_type(window.sizes, ref.dtype)])
    return ref.loaded(window, loaded.result)


@dsl_entry(MaskedStoreOp)
def store(view: RefView | Ref, value: object, *, mask: Array | None = None) -> None:
    """`value` (an Array broadcastable to the window, or a number) stored into the window
    `view` (`ref.at[...]`); with `mask`, only where it holds: the other elements of memory
    are not written, so a window of a global ref may hang over its end where it is masked.
    Without a mask it is `ref[...] = value` of the window (which must lie inside the ref)."""
    view = _view(view, "store")
    ref, window = view.ref, view.window
    if mask is None:
        _inside(view, "store")
        ref.store_window(window, value)
        return
    predicate = _masked(view, mask, "store")
    stored = ref.stored(window, value)
    indices = [s.materialize() for s in window.starts]
    create(MaskedStoreOp, value=stored, destination=ref.value, mask=predicate,
           indices=indices)
