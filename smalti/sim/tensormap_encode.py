"""Tensor maps described the way `cuTensorMapEncodeTiled` is called, over a numpy buffer.

Code that encodes its own tensor maps (CUTLASS's host adapters, Triton's launcher, a CUDA
program) passes the driver a global address, dimensions and byte strides innermost first, a
box, element strides and the enums. `TensorMapEncodeTiled` takes exactly those arguments, with
the global address given as a numpy buffer and a byte offset into it, and stands for the
`CUtensorMap` kernel parameter in `run_ptx` (or inside a `ParamStruct`); `smalti-sim` reads the
same description from JSON (`from_json`).

Enums may be given by the driver's name (`CU_TENSOR_MAP_DATA_TYPE_FLOAT16`), its suffix
(`FLOAT16`, case-insensitive), or its integer value. The rules checked are the driver's
(CUDA Driver API, cuTensorMapEncodeTiled), with one relaxation CUTLASS relies on: a dimension
of extent 1 may have a global stride of 0.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import ml_dtypes
import numpy as np

from smalti.sim.tensormap import TensorMap

# CUtensorMapDataType (cuda.h), as numpy element types. 16U4_ALIGN8B (sm_100: 4-bit elements
# packed two to a byte, in shared memory as in global) is held as bytes (PACKED_4BIT);
# 16U4_ALIGN16B and 16U6_FP6_ALIGN16B (padded in shared memory) are not simulated.
DATA_TYPES: dict[str, tuple[int, np.dtype]] = {
    "UINT8": (0, np.dtype(np.uint8)),
    "UINT16": (1, np.dtype(np.uint16)),
    "UINT32": (2, np.dtype(np.uint32)),
    "INT32": (3, np.dtype(np.int32)),
    "UINT64": (4, np.dtype(np.uint64)),
    "INT64": (5, np.dtype(np.int64)),
    "FLOAT16": (6, np.dtype(np.float16)),
    "FLOAT32": (7, np.dtype(np.float32)),
    "FLOAT64": (8, np.dtype(np.float64)),
    "BFLOAT16": (9, np.dtype(ml_dtypes.bfloat16)),
    "FLOAT32_FTZ": (10, np.dtype(np.float32)),
    "TFLOAT32": (11, np.dtype(np.float32)),
    "TFLOAT32_FTZ": (12, np.dtype(np.float32)),
    "16U4_ALIGN8B": (13, np.dtype(np.uint8)),
}
PACKED_4BIT = 13  # its dimensions and box count 4-bit elements; the inner ones halve to bytes
INTERLEAVES = {"NONE": 0, "16B": 1, "32B": 2}
SWIZZLES = {"NONE": 0, "32B": 1, "64B": 2, "128B": 3}
SWIZZLE_BYTES = {0: None, 1: 32, 2: 64, 3: 128}
L2_PROMOTIONS = {"NONE": 0, "L2_64B": 1, "L2_128B": 2, "L2_256B": 3}
OOB_FILLS = {"NONE": 0, "NAN_REQUEST_ZERO_FMA": 1}
PREFIXES = {
    "data_type": "CU_TENSOR_MAP_DATA_TYPE_",
    "interleave": "CU_TENSOR_MAP_INTERLEAVE_",
    "swizzle": "CU_TENSOR_MAP_SWIZZLE_",
    "l2_promotion": "CU_TENSOR_MAP_L2_PROMOTION_",
    "oob_fill": "CU_TENSOR_MAP_FLOAT_OOB_FILL_",
}


def enum_value(what: str, value: str | int, table: dict[str, Any]) -> int:
    """The integer of a driver enum given by full name, suffix or value."""
    values = {name: (entry[0] if isinstance(entry, tuple) else entry)
              for name, entry in table.items()}
    if isinstance(value, bool) or not isinstance(value, int | str | np.integer):
        raise ValueError(f"{what} must be a name or an integer, got {value!r}")
    if not isinstance(value, str):
        if int(value) not in values.values():
            raise ValueError(f"{what} {int(value)} is not one of {sorted(values.values())}")
        return int(value)
    name = value.upper()
    name = name.removeprefix(PREFIXES[what])
    if what == "l2_promotion" and name in ("64B", "128B", "256B"):
        name = "L2_" + name
    if name not in values:
        raise ValueError(f"unknown {what} {value!r} (one of {', '.join(values)})")
    return values[name]


@dataclass(frozen=True, eq=False)
class TensorMapEncodeTiled:
    """`cuTensorMapEncodeTiled`'s arguments, over `buffer` (bytes from `offset` on).

    Sizes are innermost first, as the driver takes them: `global_dim` (rank entries),
    `global_strides` (bytes, rank - 1 entries: the stride of dimensions 1 .. rank-1),
    `box_dim` and `element_strides` (rank entries). `buffer` is any C-contiguous numpy
    array; its bytes are the tensor's memory, so a TMA store through the map writes it.
    """

    buffer: np.ndarray
    data_type: str | int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...] | None = None
    interleave: str | int = "NONE"
    swizzle: str | int = "NONE"
    l2_promotion: str | int = "NONE"
    oob_fill: str | int = "NONE"
    offset: int = 0

    def tensor_map(self) -> TensorMap:
        """The simulator's record of this encoding (built once; ValueError when the driver
        would refuse the arguments)."""
        return self._record

    @cached_property
    def _record(self) -> TensorMap:
        rank = len(self.global_dim)
        if not 1 <= rank <= 5:
            raise ValueError(f"invalid tensor map: rank must be 1 to 5, got {rank}")
        if len(self.global_strides) != rank - 1:
            raise ValueError(f"invalid tensor map: {rank - 1} global strides expected (rank "
                             f"{rank}), got {len(self.global_strides)}")
        if len(self.box_dim) != rank:
            raise ValueError(f"invalid tensor map: box_dim has {len(self.box_dim)} entries, "
                             f"the rank is {rank}")
        data_type = enum_value("data_type", self.data_type, DATA_TYPES)
        dtype = DATA_TYPES[_name(DATA_TYPES, data_type)][1]
        global_dim, box_dim = self.global_dim, self.box_dim
        if data_type == PACKED_4BIT:
            global_dim, box_dim = _packed_bytes(global_dim, box_dim, self.element_strides)
        if enum_value("interleave", self.interleave, INTERLEAVES) != 0:
            raise ValueError("invalid tensor map: interleaved layouts are not simulated")
        swizzle = SWIZZLE_BYTES[enum_value("swizzle", self.swizzle, SWIZZLES)]
        enum_value("l2_promotion", self.l2_promotion, L2_PROMOTIONS)  # checked, no effect
        fill = "nan" if enum_value("oob_fill", self.oob_fill, OOB_FILLS) else "zero"
        array = strided_view(self.buffer, self.offset, dtype, global_dim, self.global_strides)
        strides = tuple(reversed(self.element_strides or (1,) * rank))
        return TensorMap(array, box=tuple(reversed(box_dim)), swizzle=swizzle,
                         oob_fill=fill, element_strides=strides)

    @classmethod
    def from_json(cls, description: dict, buffer: np.ndarray) -> TensorMapEncodeTiled:
        """The encoding a JSON object describes (its "buffer" already loaded as `buffer`)."""
        known = {"buffer", "data_type", "global_dim", "global_strides", "box_dim",
                 "element_strides", "interleave", "swizzle", "l2_promotion", "oob_fill",
                 "offset"}
        unknown = set(description) - known
        if unknown:
            raise ValueError(f"unknown tensor map field(s): {', '.join(sorted(unknown))}")
        missing = {"data_type", "global_dim", "global_strides", "box_dim"} - set(description)
        if missing:
            raise ValueError(f"the tensor map needs {', '.join(sorted(missing))}")
        fields = {k: v for k, v in description.items() if k != "buffer"}
        for key in ("global_dim", "global_strides", "box_dim", "element_strides"):
            if key in fields:
                fields[key] = tuple(int(v) for v in fields[key])
        return cls(buffer, **fields)


def _packed_bytes(global_dim: tuple[int, ...], box_dim: tuple[int, ...],
                  element_strides: tuple[int, ...] | None
                  ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The byte extents of a 16U4_ALIGN8B map's inner dimension: its elements come in groups
    of 16 (8 bytes) that TMA copies as they lie (CUTLASS's NVFP4 operands)."""
    if global_dim[0] % 16 or box_dim[0] % 16:
        raise ValueError(f"invalid tensor map: 16U4_ALIGN8B needs an inner dimension "
                         f"({global_dim[0]}) and inner box ({box_dim[0]}) that are multiples "
                         "of 16 elements")
    if element_strides and element_strides[0] != 1:
        raise ValueError("invalid tensor map: 16U4_ALIGN8B needs an inner element stride of 1")
    return ((global_dim[0] // 2, *global_dim[1:]), (box_dim[0] // 2, *box_dim[1:]))


def _name(table: dict, value: int) -> str:
    return next(name for name, entry in table.items() if entry[0] == value)


def strided_view(buffer: np.ndarray, offset: int, dtype: np.dtype, dims: tuple[int, ...],
                 strides: tuple[int, ...]) -> np.ndarray:
    """A numpy view (outermost dimension first) of the tensor `dims`/`strides` (innermost
    first, strides in bytes for dimensions 1..) starting `offset` bytes into `buffer`."""
    if not isinstance(buffer, np.ndarray):
        raise ValueError(f"invalid tensor map: the buffer must be a numpy array, got "
                         f"{type(buffer).__name__}")
    if not buffer.flags.c_contiguous:
        raise ValueError("invalid tensor map: the buffer must be C-contiguous")
    raw = buffer.reshape(-1).view(np.uint8)
    elem = dtype.itemsize
    if any(int(d) < 1 for d in dims) or any(int(s) < 0 for s in strides):
        raise ValueError(f"invalid tensor map: dimensions {dims} must be positive and strides "
                         f"{strides} non-negative")
    span = elem + (int(dims[0]) - 1) * elem + sum(
        (int(d) - 1) * int(s) for d, s in zip(dims[1:], strides, strict=True))
    if offset < 0 or offset + span > raw.size:
        raise ValueError(f"invalid tensor map: the tensor spans bytes [{offset}, "
                         f"{offset + span}) of a {raw.size}-byte buffer")
    if offset % elem:
        raise ValueError(f"invalid tensor map: offset {offset} is not a multiple of the "
                         f"{elem}-byte element")
    units = -(-span // elem)
    base = raw[offset:offset + units * elem].view(f"u{elem}")
    view = np.lib.stride_tricks.as_strided(
        base, shape=tuple(int(d) for d in reversed(dims)),
        strides=(*(int(s) for s in reversed(strides)), elem))
    return view.view(dtype)


def load_json(path: str) -> dict:
    """The "tensor_map" object of a JSON file (a ValueError says what is wrong)."""
    try:
        with open(path) as f:
            document = json.load(f)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("tensor_map"), dict):
        raise ValueError(f'{path}: expected {{"tensor_map": {{...}}}}')
    description = dict(document["tensor_map"])
    if "buffer" not in description:
        raise ValueError(f'{path}: the tensor map needs "buffer" (a .npy file)')
    buffer = description["buffer"]
    if not os.path.isabs(buffer):
        description["buffer"] = os.path.join(os.path.dirname(path), buffer)
    return description
