"""The one place host-side tensor maps come from: a kernel's TensorMapRecords (recorded by the
lowering) and its argument arrays.

`encode_arguments` gives what `cuTensorMapEncodeTiled` takes (dims innermost first, byte
strides of all but the innermost dim, box, swizzle) for the CUDA launcher; `sim_tensor_maps`
gives the simulator's `smalti.sim.TensorMap` records built from the same fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from smalti.dialect.kernel import KernelSignature, TensorMapRecord
from smalti.sim import TensorMap


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


def sim_tensor_maps(signature: KernelSignature, buffers: Sequence[object]) -> list[TensorMap]:
    """The simulator's tensor-map arguments of a kernel, in parameter order."""
    return [sim_tensor_map(record, buffers[record.arg]) for record in signature.tensor_maps]
