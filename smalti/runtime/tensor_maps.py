"""The one place host-side tensor maps come from: a kernel's TensorMapRecords (recorded by the
lowering) and its argument arrays.

`encode_arguments` gives what `cuTensorMapEncodeTiled` takes (dims innermost first, byte
strides of all but the innermost dim, box, swizzle) for the CUDA launcher; `sim_tensor_maps`
gives the simulator's `smalti.sim.TensorMap` records built from the same fields.

A map over 4-bit elements (i4, f4E2M1FN; two per byte, smalti.runtime.subbyte) is a map over
bytes (CU_TENSOR_MAP_DATA_TYPE_UINT8) whose innermost extent and box are halved: shared
memory receives the packed bytes as they are in global memory, on sm_90a and sm_100a alike,
and the kernel halves its innermost coordinate (smalti/lowering/tma.py). That is what
tcgen05's `.kind::mxf4` / `.kind::mxf4nvf4` read (packed K-major operands). (cuda.h: sm_100a's
CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B "copies 16 x U4 packed values ... no gaps": the same
bytes, its extents counted in elements; 16U4_ALIGN16B and 16U6_ALIGN16B leave 8- and 4-byte
gaps after every 8 or 12 bytes, the padded shared-memory form `.kind::f8f6f4` reads 4- and
6-bit operands in, which these maps do not make: the dialect refuses those operands.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from smalti.dialect.kernel import KernelSignature, TensorMapRecord
from smalti.runtime import subbyte
from smalti.runtime.dtypes import NUMPY_DTYPES
from smalti.sim import ParamStruct, TensorMap
from smalti.sim.tensormap import TENSOR_MAP_BYTES


@dataclass(frozen=True)
class EncodeArguments:
    """cuTensorMapEncodeTiled's arguments for one record (innermost dimension first)."""

    dtype: str
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]  # bytes, of dims 1.. (dim 0 is contiguous)
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle: int | None
    oob_fill: str = "zero"


def encode_arguments(record: TensorMapRecord, array: np.ndarray) -> EncodeArguments:
    """The encode arguments of `record` over `array`, the kernel argument it names (for
    4-bit elements: its packed bytes, `packed_view`)."""
    if subbyte.is_packed(record.dtype):
        return encode_arguments(byte_record(record), packed_view(record, array))
    if tuple(array.shape) != record.shape:
        raise ValueError(f"tensor map {record.param} is over a {record.shape} array, got "
                         f"{array.shape}")
    if array.strides[-1] != array.itemsize:
        raise ValueError(f"tensor map {record.param}: the innermost dim must be contiguous")
    return EncodeArguments(record.dtype, tuple(reversed(array.shape)),
                           tuple(reversed(array.strides[:-1])), tuple(reversed(record.box)),
                           (1,) * len(record.box), record.swizzle)


def byte_record(record: TensorMapRecord) -> TensorMapRecord:
    """A record of 4-bit elements as the record of the bytes holding them (i8: TMA's
    UINT8), its innermost extent and box halved."""
    if record.shape[-1] % 2 or record.box[-1] % 2:
        raise ValueError(f"tensor map {record.param}: 4-bit rows and boxes must have an even "
                         f"number of elements, got {record.shape} and {record.box}")
    return dataclasses.replace(record, dtype="i8",
                               shape=(*record.shape[:-1], record.shape[-1] // 2),
                               box=(*record.box[:-1], record.box[-1] // 2))


def packed_view(record: TensorMapRecord, array: np.ndarray) -> np.ndarray:
    """The bytes of a 4-bit buffer shaped as `byte_record(record)` says. `array` is the
    device buffer (packed uint8, as the simulator holds it) or an array of the record's
    element shape strided one byte per element, as numpy's int4 (the launcher's stand-in,
    whose strides halve into the packed buffer's)."""
    if array.dtype == np.uint8 and array.ndim == 1:
        shape = byte_record(record).shape
        return array[:math.prod(shape)].view(np.int8).reshape(shape)
    if tuple(array.shape) != record.shape:
        raise ValueError(f"tensor map {record.param} is over a {record.shape} array, got "
                         f"{array.shape}")
    strides = (*(s // 2 for s in array.strides[:-1]), 1)
    shape = byte_record(record).shape
    raw = np.zeros(1, np.int8)
    return np.lib.stride_tricks.as_strided(raw, shape, strides)


def sim_tensor_map(record: TensorMapRecord, array: np.ndarray) -> TensorMap:
    """The simulator's tensor map for `record` over the device buffer `array`."""
    if subbyte.is_packed(record.dtype):
        return sim_tensor_map(byte_record(record), packed_view(record, array))
    arguments = encode_arguments(record, array)
    return TensorMap(array, box=tuple(reversed(arguments.box_dims)), swizzle=arguments.swizzle,
                     oob_fill=arguments.oob_fill)


def symmetric_view(record: TensorMapRecord, heap: np.ndarray) -> np.ndarray:
    """The symmetric buffer a record maps, as an array over (aliasing) one device's heap."""
    assert record.symmetric_offset is not None
    dtype = NUMPY_DTYPES[record.dtype]
    nbytes = math.prod(record.shape) * dtype.itemsize
    start = record.symmetric_offset
    return heap[start:start + nbytes].view(dtype).reshape(record.shape)


def sim_tensor_maps(signature: KernelSignature, buffers: Sequence[object],
                    heaps: Sequence[np.ndarray] = ()) -> list[TensorMap | ParamStruct]:
    """The simulator's tensor-map arguments of a kernel, in parameter order: a map per
    record, or for a symmetric buffer's record one per device (`heaps[p]` is device p's
    symmetric heap) in one parameter."""
    maps: list[TensorMap | ParamStruct] = []
    for record in signature.tensor_maps:
        if record.symmetric_offset is None:
            maps.append(sim_tensor_map(record, buffers[record.arg]))
            continue
        maps.append(ParamStruct(bytes(TENSOR_MAP_BYTES * len(heaps)), tensor_maps={
            p * TENSOR_MAP_BYTES: sim_tensor_map(record, symmetric_view(record, heap))
            for p, heap in enumerate(heaps)}))
    return maps
