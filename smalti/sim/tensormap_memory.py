"""Tensor maps in device memory: the 128 bytes that `tensormap.replace` writes and TMA reads.

PTX ISA, "tensormap.replace": a tensor map is an opaque 1024-bit object whose fields a kernel
replaces one at a time (global address, rank, box, global dimensions and strides, element
strides, element type, interleave, swizzle, fill mode), in shared or global memory, before a
`tensormap.cp_fenceproxy` copies it to global memory for TMA (Triton's
`tl.make_tensor_descriptor` builds each map so, from zeros). `CUtensorMap`'s byte layout is not
documented, so the simulator keeps its own, below; field values are the ISA's encodings
(rank as rank - 1, element types .u8=0 .. .bf16=10, swizzle 0..3 for none/32B/64B/128B,
fill 0 zero / 1 NaN). A host-encoded map (`smalti.sim.TensorMap`) is a record tag instead
(tensormap.py); the first field replaced in a copy of one turns the copy into this layout,
its global address found among the launch's buffers.

Layout (little endian): bytes 0-15 the record tag (zero here), 16 global address (u64),
24 rank - 1 (u32), 28 element type, 29 interleave, 30 swizzle, 31 fill mode, 32 swizzle
atomicity (u8 each), 36 box dimensions (5 x u32), 56 global dimensions (5 x u32),
80 global strides of dimensions 1-4 in bytes (4 x u64), 112 element strides (5 x u8).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from smalti.sim.errors import Fault
from smalti.sim.tensormap import MAGIC, TENSOR_MAP_BYTES, TensorMap, lookup
from smalti.sim.tensormap_encode import SWIZZLE_BYTES, strided_view

MAX_RANK = 5
# field -> (byte offset, bytes per value, values)
FIELDS: dict[str, tuple[int, int, int]] = {
    "global_address": (16, 8, 1),
    "rank": (24, 4, 1),
    "elemtype": (28, 1, 1),
    "interleave_layout": (29, 1, 1),
    "swizzle_mode": (30, 1, 1),
    "fill_mode": (31, 1, 1),
    "swizzle_atomicity": (32, 1, 1),
    "box_dim": (36, 4, 5),
    "global_dim": (56, 4, 5),
    "global_stride": (80, 8, 4),
    "element_stride": (112, 1, 5),
}
# The ISA's .elemtype encodings (tensormap.replace), as numpy element types.
ELEMENT_TYPES: dict[int, np.dtype] = {
    0: np.dtype(np.uint8), 1: np.dtype(np.uint16), 2: np.dtype(np.uint32),
    3: np.dtype(np.int32), 4: np.dtype(np.uint64), 5: np.dtype(np.int64),
    6: np.dtype(np.float16), 7: np.dtype(np.float32), 8: np.dtype(np.float32),
    9: np.dtype(np.float64), 10: np.dtype(ml_dtypes.bfloat16), 11: np.dtype(np.float32),
    12: np.dtype(np.float32),
}
ELEMENT_CODES = {np.dtype(np.uint8): 0, np.dtype(np.uint16): 1, np.dtype(np.uint32): 2,
                 np.dtype(np.int32): 3, np.dtype(np.uint64): 4, np.dtype(np.int64): 5,
                 np.dtype(np.float16): 6, np.dtype(np.float32): 7, np.dtype(np.float64): 9,
                 np.dtype(ml_dtypes.bfloat16): 10}


def replace(raw: np.ndarray, name: str, ordinal: int | None, value: int) -> None:
    """Write field `name` (entry `ordinal` of the per-dimension ones) of the map in `raw`
    (128 uint8, updated in place); ValueError for an ordinal out of range."""
    offset, size, count = FIELDS[name]
    index = 0 if ordinal is None else int(ordinal)
    if not 0 <= index < count:
        raise ValueError(f"ordinal {index} of .{name} is outside 0..{count - 1}")
    start = offset + index * size
    raw[start:start + size] = np.frombuffer(
        int(value % (1 << (8 * size))).to_bytes(size, "little"), np.uint8)


def field_values(raw: np.ndarray, name: str) -> list[int]:
    """The values of field `name` in the map bytes `raw`."""
    offset, size, count = FIELDS[name]
    data = bytes(raw[offset:offset + size * count])
    return [int.from_bytes(data[i * size:(i + 1) * size], "little") for i in range(count)]


@dataclass(frozen=True)
class DeviceMap:
    """A map's fields as the layout holds them (sizes innermost first, as PTX's)."""

    address: int
    rank: int
    elemtype: int
    interleave: int
    swizzle: int
    fill: int
    box: tuple[int, ...]
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # of dimensions 1 .. rank-1, in bytes
    element_strides: tuple[int, ...]

    @classmethod
    def read(cls, raw: np.ndarray) -> DeviceMap:
        rank = field_values(raw, "rank")[0] + 1
        n = min(rank, MAX_RANK)
        return cls(
            address=field_values(raw, "global_address")[0],
            rank=rank,
            elemtype=field_values(raw, "elemtype")[0],
            interleave=field_values(raw, "interleave_layout")[0],
            swizzle=field_values(raw, "swizzle_mode")[0],
            fill=field_values(raw, "fill_mode")[0],
            box=tuple(field_values(raw, "box_dim")[:n]),
            dims=tuple(field_values(raw, "global_dim")[:n]),
            strides=tuple(field_values(raw, "global_stride")[:max(n - 1, 0)]),
            element_strides=tuple(field_values(raw, "element_stride")[:n]),
        )

    def resolve(self, region) -> TensorMap:
        """The map as a TensorMap over device memory; `region(address, nbytes)` gives the
        bytes of global memory there (a uint8 view) or raises Fault. ValueError names what
        makes the map invalid."""
        if not 1 <= self.rank <= MAX_RANK:
            raise ValueError(f"rank {self.rank} is outside 1..{MAX_RANK}")
        dtype = ELEMENT_TYPES.get(self.elemtype)
        if dtype is None:
            raise ValueError(f"element type {self.elemtype} is not simulated")
        if self.interleave:
            raise ValueError("interleaved layouts are not simulated")
        if self.swizzle not in SWIZZLE_BYTES:
            raise ValueError(f"swizzle mode {self.swizzle} is not one of 0..3")
        if 0 in self.dims or 0 in self.box or 0 in self.element_strides:
            raise ValueError(f"a zero in the global dimensions {self.dims}, box {self.box} or "
                             f"element strides {self.element_strides} (a field never set?)")
        elem = dtype.itemsize
        span = elem * self.dims[0] + sum(
            (d - 1) * s for d, s in zip(self.dims[1:], self.strides, strict=True))
        memory = region(self.address, span)
        array = strided_view(memory, 0, dtype, self.dims, self.strides)
        return TensorMap(array, box=tuple(reversed(self.box)),
                         swizzle=SWIZZLE_BYTES[self.swizzle],
                         oob_fill="nan" if self.fill else "zero",
                         element_strides=tuple(reversed(self.element_strides)),
                         address=self.address)


def is_record(raw: np.ndarray) -> bool:
    """Whether the bytes carry a host record's tag rather than fields."""
    return bytes(raw[:len(MAGIC)]) == MAGIC


def fields_of_record(raw: np.ndarray, device_address) -> np.ndarray:
    """The 128 layout bytes of the host record tagged in `raw`, its global address given by
    `device_address(array)` (None when the tensor is not in device memory)."""
    record = lookup(raw)
    if record is None:
        raise Fault("the tensor map's record tag names no live smalti.sim.TensorMap")
    code = ELEMENT_CODES.get(np.dtype(record.array.dtype))
    if code is None:  # float8 and other 1-byte types move as bytes (a UINT8 map)
        code = 0 if record.array.dtype.itemsize == 1 else None
    address = device_address(record.array)
    if code is None or address is None:
        what = ("its tensor is not in one of the launch's device buffers" if address is None
                else f"element type {record.array.dtype} has no tensormap encoding")
        raise Fault(f"tensormap.replace on a copy of a host-encoded tensor map: {what}")
    out = np.zeros(TENSOR_MAP_BYTES, np.uint8)
    rank = record.rank
    replace(out, "global_address", None, address)
    replace(out, "rank", None, rank - 1)
    replace(out, "elemtype", None, code)
    swizzle = {v: k for k, v in SWIZZLE_BYTES.items()}[record.swizzle]
    replace(out, "swizzle_mode", None, swizzle)
    replace(out, "fill_mode", None, int(record.oob_fill == "nan"))
    for d in range(rank):  # innermost first
        axis = rank - 1 - d
        replace(out, "box_dim", d, record.box[axis])
        replace(out, "global_dim", d, record.array.shape[axis])
        replace(out, "element_stride", d, record.element_strides[axis])
        if d:
            replace(out, "global_stride", d - 1, record.array.strides[axis])
    return out
