"""Element types: numpy dtypes (what JAX arrays carry) and their MLIR spellings."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from smalti.dialect.bindings import scalar_type, type_name
from smalti.runtime.dtypes import NUMPY_DTYPES

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


FLOAT_NAMES = frozenset({"f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2"})


def is_float(dtype: np.dtype) -> bool:
    return mlir_name(dtype) in FLOAT_NAMES


def bit_width(dtype: np.dtype) -> int:
    return 1 if np.dtype(dtype) == np.bool_ else np.dtype(dtype).itemsize * 8
