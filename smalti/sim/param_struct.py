"""By-value struct parameters whose bytes hold device pointers and tensor maps.

CUTLASS passes one `Params` struct (`.param .align 64 .b8 params[N]`, a __grid_constant__
argument) holding problem sizes, strides, raw device pointers and `CUtensorMap`s. A test builds
its bytes from CUTLASS's own layout, but cannot know the device addresses the simulator gives
numpy buffers, nor encode a CUtensorMap: `ParamStruct` names them by offset, and the launch
writes each buffer's device address (a u64) and each map's 128 bytes there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from smalti.sim.tensormap import TENSOR_MAP_BYTES, TensorMap
from smalti.sim.tensormap_encode import TensorMapEncodeTiled

AnyTensorMap = TensorMap | TensorMapEncodeTiled


@dataclass(frozen=True, eq=False)
class ParamStruct:
    """`data`: the struct's bytes; `pointers`: offset -> a numpy array, a device buffer of the
    launch whose address is written at that offset; `tensor_maps`: offset -> a tensor map
    (smalti.sim.TensorMap or TensorMapEncodeTiled) whose 128 bytes go there."""

    data: bytes
    pointers: Mapping[int, np.ndarray] = field(default_factory=dict)
    tensor_maps: Mapping[int, AnyTensorMap] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Check that every placed value fits in the struct and is aligned."""
        size = len(self.data)
        for offset, array in self.pointers.items():
            if not isinstance(array, np.ndarray):
                raise ValueError(f"pointer at offset {offset} must be a numpy array, got "
                                 f"{type(array).__name__}")
            if offset % 8 or not 0 <= offset <= size - 8:
                raise ValueError(f"pointer offset {offset} is not an 8-byte aligned offset in "
                                 f"the {size}-byte struct")
        for offset in self.tensor_maps:
            if offset % 64 or not 0 <= offset <= size - TENSOR_MAP_BYTES:
                raise ValueError(f"tensor map offset {offset} is not a 64-byte aligned offset "
                                 f"of 128 bytes in the {size}-byte struct")

    def encode(self, address_of) -> bytes:
        """The struct's bytes with `address_of(array)` (its device address) and each map's
        bytes placed."""
        out = bytearray(self.data)
        for offset, array in self.pointers.items():
            out[offset:offset + 8] = np.uint64(address_of(array)).tobytes()
        for offset, tm in self.tensor_maps.items():
            record = tm.tensor_map() if isinstance(tm, TensorMapEncodeTiled) else tm
            out[offset:offset + TENSOR_MAP_BYTES] = record.encode()
        return bytes(out)
