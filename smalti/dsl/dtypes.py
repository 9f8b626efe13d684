"""Element types: numpy dtypes (what JAX arrays carry) and their MLIR spellings."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from smalti.dialect.bindings import scalar_type, type_name
from smalti.runtime.dtypes import ELEMENT_BITS, NUMPY_DTYPES, SCALE_TYPES
from smalti.tiling.smem import ElementSize, element_size

MLIR_NAMES: dict[np.dtype, str] = {dtype: name for name, dtype in NUMPY_DTYPES.items()}


def mlir_name(dtype: object) -> str | None:
    """The MLIR spelling of a numpy-like dtype ("f32", "bf16", ...), None if unsupported."""
    try:
        return MLIR_NAMES.get(np.dtype(dtype))
    except TypeError:
        return None


def mlir_type(dtype: np.dtype) -> ir.Type:
    """The MLIR element type of a supported dtype (needs a context)."""
    return scalar_type(MLIR_NAMES[np.dtype(dtype)])


def numpy_dtype(element_type: ir.Type) -> np.dtype:
    return NUMPY_DTYPES[type_name(element_type)]


FLOAT_NAMES = frozenset({"f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2", "f6E2M3FN",
                         "f6E3M2FN", "f4E2M1FN", "f8E8M0FNU"})

float4_e2m1fn = np.dtype(ml_dtypes.float4_e2m1fn)
"""FP4 e2m1 (NVFP4 / MXFP4 data; MLIR f4E2M1FN)."""
float6_e2m3fn = np.dtype(ml_dtypes.float6_e2m3fn)
"""FP6 e2m3 (MXFP6 data; MLIR f6E2M3FN)."""
float6_e3m2fn = np.dtype(ml_dtypes.float6_e3m2fn)
"""FP6 e3m2 (MXFP6 data; MLIR f6E3M2FN)."""
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
"""E8M0: the power-of-two block scale of the MX formats (PTX .ue8m0; MLIR f8E8M0FNU)."""
ue4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
"""UE4M3, NVFP4's block scale (PTX .ue4m3): an e4m3 whose sign bit is 0, carried as
float8_e4m3fn (neither numpy nor MLIR has an unsigned e4m3)."""
SCALE_DTYPES: dict[str, np.dtype] = {name: NUMPY_DTYPES[mlir]
                                     for name, mlir in SCALE_TYPES.items()}
"""The dtype of each block-scale type, by its PTX name ("ue8m0", "ue4m3")."""


def is_float(dtype: np.dtype) -> bool:
    return mlir_name(dtype) in FLOAT_NAMES


def bit_width(dtype: np.dtype) -> int:
    """Bits of one element (4 for FP4, 6 for FP6, 1 for bool, else the item size)."""
    return ELEMENT_BITS.get(mlir_name(dtype) or "", np.dtype(dtype).itemsize * 8)


def memory_bytes(dtype: np.dtype) -> ElementSize:
    """Bytes one element takes in memory: FP4 and int4 pack two per byte (Fraction(1, 2)),
    as buffers and shared memory hold them."""
    return element_size(bit_width(dtype))
