"""The one place host-side tensor maps come from: a kernel's TensorMapRecords (recorded by the
lowering) and its argument arrays.

`encode_arguments` gives what `cuTensorMapEncodeTiled` takes (dims innermost first, byte
strides of all but the innermost dim, box, swizzle) for the CUDA launcher; `sim_tensor_maps`
gives the simulator's `smalti.sim.TensorMap` records built from the same fields.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from smalti.dialect.kernel import KernelSignature, TensorMapRecord
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
    """The encode arguments of `record` over `array`, the kernel argument it names."""
    if tuple(array.shape) != record.shape:
        raise ValueError(f"tensor map {record.param} is over a {record.shape} array, got "
                         f"{array.shape}")
    if array.strides[-1] != array.itemsize:
        raise ValueError(f"tensor map {record.param}: the innermost dim must be contiguous")
    return EncodeArguments(record.dtype, tuple(reversed(array.shape)),
                           tuple(reversed(array.strides[:-1])), tuple(reversed(record.box)),
                           (1,) * len(record.box), record.swizzle)


def sim_tensor_map(record: TensorMapRecord, array: np.ndarray) -> TensorMap:
    """The simulator's tensor map for `record` over the device buffer `array`."""
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
