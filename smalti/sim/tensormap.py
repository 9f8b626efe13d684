"""Host-side TMA tensor maps: the record `cuTensorMapEncodeTiled` would encode, checked.

`CUtensorMap` is opaque (128 bytes, 64-byte aligned), so the simulator keeps its own record
and puts a magic tag and an id in the 128 bytes passed as the kernel parameter; TMA
instructions read those bytes back, wherever the program copied them, and find the record.

Dimensions follow numpy order (outermost first) in this API; PTX coordinates and the driver's
arrays are innermost first. The rules checked are the driver's for tiled tensor maps (CUDA
Driver API, "Tensor Map Object Management", cuTensorMapEncodeTiled).
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from smalti.sim.swizzle import check_span

TENSOR_MAP_BYTES = 128
MAGIC = b"SMALTITM"
MAX_RANK = 5
MAX_BOX = 256
MAX_ELEMENT_STRIDE = 8
FLOATS = (np.float16, np.float32, np.float64, ml_dtypes.bfloat16)
FP8 = (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
       ml_dtypes.float8_e8m0fnu)  # moved as bytes (a UINT8 map): no NaN fill

_ids = itertools.count(1)
_records: weakref.WeakValueDictionary[int, TensorMap] = weakref.WeakValueDictionary()


@dataclass(frozen=True, eq=False)
class TensorMap:
    """A tiled tensor map over numpy `array`: box shape, swizzle span, out-of-bounds fill."""

    array: np.ndarray
    box: tuple[int, ...]
    swizzle: int | None = None
    oob_fill: str = "zero"
    element_strides: tuple[int, ...] | None = None
    interleave: int | None = None
    # The tensor's device address, for a map read from device memory (tensormap.replace):
    # alignment is checked on it. None: `array` is the user's, checked by its host pointer.
    address: int | None = None

    def __post_init__(self) -> None:
        """Apply the encode rules, then register the record under a fresh id."""
        object.__setattr__(self, "box", tuple(int(b) for b in self.box))
        strides = self.element_strides or (1,) * len(self.box)
        object.__setattr__(self, "element_strides", tuple(int(s) for s in strides))
        _validate(self)
        ident = next(_ids)
        object.__setattr__(self, "ident", ident)
        _records[ident] = self

    @property
    def rank(self) -> int:
        return self.array.ndim

    @property
    def elem(self) -> int:
        """Bytes per element."""
        return self.array.dtype.itemsize

    @property
    def tile_shape(self) -> tuple[int, ...]:
        """Elements per dimension one copy moves: ceil(box / element stride)."""
        return tuple(-(-b // s) for b, s in zip(self.box, self.element_strides, strict=True))

    @property
    def tile_bytes(self) -> int:
        """Bytes one copy moves (and counts as mbarrier tx), out-of-bounds elements included."""
        return int(np.prod(self.tile_shape)) * self.elem

    def encode(self) -> bytes:
        """The 128 parameter bytes standing for this map."""
        return (MAGIC + np.uint64(self.ident).tobytes()).ljust(TENSOR_MAP_BYTES, b"\0")

    def indices(self, coords: tuple[int, ...]) -> tuple[list[np.ndarray], np.ndarray]:
        """Per-dimension element indices of the box at `coords` (innermost first) and the
        in-bounds mask over the tile."""
        index, inside = [], np.ones(self.tile_shape, np.bool_)
        for d, (start, box, step, extent) in enumerate(zip(
                reversed(coords), self.box, self.element_strides, self.array.shape,
                strict=True)):
            idx = int(start) + np.arange(0, box, step)
            index.append(idx)
            ok = (idx >= 0) & (idx < extent)
            shape = [1] * self.rank
            shape[d] = idx.size
            inside = inside & ok.reshape(shape)
        return index, inside


def lookup(raw: bytes | np.ndarray) -> TensorMap | None:
    """The record whose `encode()` produced these 128 bytes, if any."""
    raw = bytes(np.asarray(raw, np.uint8).reshape(-1)[:16])
    if raw[:8] != MAGIC:
        return None
    return _records.get(int(np.frombuffer(raw[8:16], np.uint64)[0]))


def _fail(rule: str) -> None:
    raise ValueError(f"invalid TensorMap: {rule}")


def _validate(tm: TensorMap) -> None:
    array = tm.array
    if not isinstance(array, np.ndarray):
        _fail(f"array must be a numpy array, got {type(array).__name__}")
    if not 1 <= array.ndim <= MAX_RANK:
        _fail(f"tensor rank must be 1 to {MAX_RANK}, got {array.ndim}")
    known = array.dtype.kind in "uif" or array.dtype.type in (*FLOATS, *FP8)
    if array.dtype.itemsize not in (1, 2, 4, 8) or not known:
        _fail(f"unsupported element type {array.dtype}")
    if (array.ctypes.data if tm.address is None else tm.address) % 16:
        _fail("the global address must be 16-byte aligned")
    if any(n == 0 or n > 1 << 32 for n in array.shape):
        _fail(f"every global dimension must be in [1, 2^32], got {array.shape}")
    if array.strides[-1] != array.dtype.itemsize:
        _fail("the innermost dimension must be contiguous (stride of one element)")
    for s, n in zip(array.strides[:-1], array.shape[:-1], strict=True):
        if s == 0 and n == 1:
            continue  # a unit dimension's stride is never used (CUTLASS passes 0)
        if s <= 0 or s % 16 or s >= 1 << 40:
            _fail(f"global strides must be positive multiples of 16 bytes below 2^40 (0 for "
                  f"a dimension of extent 1), got {array.strides[:-1]} bytes")
    if len(tm.box) != array.ndim:
        _fail(f"box has {len(tm.box)} dimensions, the tensor {array.ndim}")
    if any(not 1 <= b <= MAX_BOX for b in tm.box):
        _fail(f"box dimensions must be in [1, {MAX_BOX}], got {tm.box}")
    if len(tm.element_strides) != array.ndim or any(
            not 1 <= s <= MAX_ELEMENT_STRIDE for s in tm.element_strides):
        _fail(f"element strides must be {array.ndim} values in [1, {MAX_ELEMENT_STRIDE}], "
              f"got {tm.element_strides}")
    if tm.interleave is not None:
        _fail("interleaved layouts (interleave=16 or 32) are not simulated; use None")
    inner = tm.box[-1] * tm.elem
    if inner % 16:
        _fail(f"the inner box extent must be a multiple of 16 bytes, got {inner} bytes")
    try:
        check_span(tm.swizzle)
    except ValueError as e:
        _fail(str(e))
    if tm.swizzle is not None and inner > tm.swizzle:
        _fail(f"the inner box extent ({inner} bytes) must not exceed the swizzle span "
              f"({tm.swizzle} bytes)")
    if tm.oob_fill not in ("zero", "nan"):
        _fail(f"oob_fill must be 'zero' or 'nan', got {tm.oob_fill!r}")
    if tm.oob_fill == "nan" and array.dtype.type not in FLOATS:
        _fail("oob_fill='nan' needs a floating-point element type")
