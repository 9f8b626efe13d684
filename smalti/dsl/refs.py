"""Refs to global or shared memory: indexing loads an Array, assigning stores one, and
`ref.at[...]` names a window without loading it (the global side of a TMA copy)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import vector

from smalti.dialect.checks import is_smem_type
from smalti.dialect.ops import VectorLoadOp, VectorStoreOp
from smalti.dsl.array import Array, Shape, scalar_array, vector_type
from smalti.dsl.dtypes import memory_bytes, numpy_dtype
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
        if value.shape != window.shape:
            value = value.broadcast_to(window.shape)
        if window.shape == window.sizes:
            return value.value
        return emit_value(vector.ShapeCastOp, [value.value],
                          vector_type(window.sizes, self.dtype))

    @dsl_entry(VectorLoadOp)
    def __getitem__(self, key: object) -> Array:
        window = self.window(key, accessed=True)
        indices = [s.materialize() for s in window.starts]
        loaded = create(VectorLoadOp, source=self._value, indices=indices,
                        result_types=[vector_type(window.sizes, self.dtype)]).result
        return self.loaded(window, loaded)

    @dsl_entry(VectorStoreOp)
    def __setitem__(self, key: object, value: object) -> None:
        window = self.window(key, accessed=True)
        stored = self.stored(window, value)
        indices = [s.materialize() for s in window.starts]
        create(VectorStoreOp, value=stored, destination=self._value, indices=indices)

