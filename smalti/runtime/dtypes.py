"""The numpy dtype of each MLIR element type a kernel's arguments may have.

Narrow floats are ml_dtypes types, one element per byte in numpy (and, FP4 aside, in the
buffers the simulator sees): FP8 e4m3/e5m2, FP6 e2m3/e3m2 and FP4 e2m1 data, and the E8M0 scales of
block-scaled MMA (PTX ISA section "Alternate Floating Point Data Formats"; the MX formats
of the OCP Microscaling spec). PTX's UE4M3 scale (an e4m3 with sign bit 0) has no numpy or
MLIR type of its own: it travels as f8E4M3FN (`SCALE_TYPES`). int4 (MLIR i4) is ml_dtypes'
too. Kernel buffers of 4-bit types (i4, f4E2M1FN) hold two elements per byte, as XLA passes
them: smalti.runtime.subbyte packs and unpacks the numpy arrays.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

NUMPY_DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f6E2M3FN": np.dtype(ml_dtypes.float6_e2m3fn),
    "f6E3M2FN": np.dtype(ml_dtypes.float6_e3m2fn),
    "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
    "f8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu),
    "i1": np.dtype(np.bool_),
    "i4": np.dtype(ml_dtypes.int4),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
}

ELEMENT_BITS: dict[str, int] = {"f6E2M3FN": 6, "f6E3M2FN": 6, "f4E2M1FN": 4, "i4": 4, "i1": 1}
"""Bits of an element whose numpy dtype is wider than the type (one per byte in numpy)."""

SCALE_TYPES: dict[str, str] = {"ue8m0": "f8E8M0FNU", "ue4m3": "f8E4M3FN"}
"""Block-scale types of `tcgen05.mma ... .block_scale` (PTX ISA `tcgen05.mma`, block
scaling: `.ue8m0` for the MX formats, `.ue4m3` for NVFP4) and the MLIR element type that
carries each."""
