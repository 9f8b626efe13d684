"""The element types of generated programs: one table, read by the generator, both
emitters and the numpy reference."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    """An element type: its MLIR name, numpy dtype, the DSL's spelling, and its class."""

    name: str  # the MLIR element type: f32, bf16, f16, i32, i16, i1
    numpy: np.dtype
    dsl: str  # the expression the DSL source names it by
    kind: str  # "float", "int" or "bool"
    bits: int
    precision: int = 0  # floats: significand bits, the implicit one included
    min_exponent: int = 0  # floats: the exponent of the smallest normal number
    max_finite: float = 0.0
    computes: bool = True  # fp8: PTX computes nothing in it (it is converted and moved)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"


F32 = DType("f32", np.dtype(np.float32), "jnp.float32", "float", 32, 24, -126,
            float(np.finfo(np.float32).max))
BF16 = DType("bf16", np.dtype(ml_dtypes.bfloat16), "jnp.bfloat16", "float", 16, 8, -126,
             float(ml_dtypes.finfo(ml_dtypes.bfloat16).max))
F16 = DType("f16", np.dtype(np.float16), "jnp.float16", "float", 16, 11, -14,
            float(np.finfo(np.float16).max))
# fp8 formats: converted to and from the other floats (saturating, `.satfinite`), moved,
# selected; README: wgmma operands, docs/dsl.md: kernel arguments.
F8E4M3 = DType("f8E4M3FN", np.dtype(ml_dtypes.float8_e4m3fn), "jnp.float8_e4m3fn", "float", 8,
               4, -6, 448.0, computes=False)
F8E5M2 = DType("f8E5M2", np.dtype(ml_dtypes.float8_e5m2), "jnp.float8_e5m2", "float", 8, 3, -14,
               57344.0, computes=False)
I32 = DType("i32", np.dtype(np.int32), "jnp.int32", "int", 32)
I16 = DType("i16", np.dtype(np.int16), "jnp.int16", "int", 16)
I1 = DType("i1", np.dtype(np.bool_), "jnp.bool_", "bool", 1)

DTYPES: dict[str, DType] = {d.name: d for d in (F32, BF16, F16, F8E4M3, F8E5M2, I32, I16, I1)}
FLOATS = ("f32", "bf16", "f16")  # the float types arithmetic is done in
FP8 = ("f8E4M3FN", "f8E5M2")
INTS = ("i32", "i16")
# Kernel arguments (docs/dsl.md, "Dtypes"): i16 and bool arguments do not compile in the DSL;
# .mlir kernels take i16 and i1 buffers too (tests/test_issue14_regressions.py).
ARGUMENT_DTYPES = {"mlir": ("f32", "bf16", "f16", "i32", "i16", "i1", *FP8),
                   "dsl": ("f32", "bf16", "f16", "i32", *FP8)}


def dtype(name: str) -> DType:
    return DTYPES[name]


__all__ = ["ARGUMENT_DTYPES", "BF16", "DTYPES", "F8E4M3", "F8E5M2", "F16", "F32", "FLOATS", "FP8",
           "I1", "I16", "I32", "INTS", "DType", "dtype"]
