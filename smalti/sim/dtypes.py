"""PTX types as numpy dtypes: raw register storage, typed views, and width changes."""

from __future__ import annotations

import ml_dtypes
import numpy as np

UINT_OF_BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
# .b128 (sm_90+ registers of ld/st/mov.b128 and clusterlaunchcontrol responses) has no numpy
# integer: its raw bits are 16-byte items, moved whole and split by the ops that use them.
B128 = np.dtype("V16")
UINT_OF_BITS[128] = B128
SINT_OF_BITS = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}

# How instruction semantics see the bits of each scalar PTX type. Packed types (f16x2,
# bf16x2, and the fp8 pairs e4m3x2/e5m2x2) are seen as their container and split by the ops
# that use them.
VIEW: dict[str, type] = {
    "pred": np.bool_,
    "b8": np.uint8, "u8": np.uint8, "s8": np.int8,
    "b16": np.uint16, "u16": np.uint16, "s16": np.int16,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32,
    "f16x2": np.uint32, "bf16x2": np.uint32, "tf32": np.uint32,
    "e4m3x2": np.uint16, "e5m2x2": np.uint16,
    "b64": np.uint64, "u64": np.uint64, "s64": np.int64, "f64": np.float64,
    "b128": B128,
}

BITS: dict[str, int] = {
    "pred": 1, "b8": 8, "u8": 8, "s8": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
    "e4m3x2": 16, "e5m2x2": 16,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128,
}

SIGNED = frozenset({"s8", "s16", "s32", "s64"})
UNSIGNED = frozenset({"u8", "u16", "u32", "u64"})
BIT = frozenset({"b8", "b16", "b32", "b64"})
INTEGER = SIGNED | UNSIGNED | BIT
FLOAT = frozenset({"f32", "f64"})
HALF = frozenset({"f16", "bf16", "f16x2", "bf16x2"})
TYPES = frozenset(VIEW)

# 16-bit element dtype of each half-precision type, scalar or packed.
HALF_ELEMENT = {"f16": np.float16, "f16x2": np.float16,
                "bf16": ml_dtypes.bfloat16, "bf16x2": ml_dtypes.bfloat16}


def storage_dtype(declared: str) -> type:
    """The raw-bits dtype of a register declared `.reg .declared` (pred is bool)."""
    if declared == "pred":
        return np.bool_
    return UINT_OF_BITS[max(BITS[declared], 16)]


def resize_bits(bits: np.ndarray, to_bits: int, signed: bool) -> np.ndarray:
    """Truncate or extend raw unsigned bits to `to_bits` wide (sign-extending if `signed`).

    PTX ISA, "Operand Size Exceeding Instruction-Type Size": a source register wider than the
    instruction type is truncated to its low bits; a destination register wider than the type
    receives the value zero- or (for signed types) sign-extended.
    """
    from_bits = bits.dtype.itemsize * 8
    if from_bits == to_bits:
        return bits
    if to_bits < from_bits:
        return bits.astype(UINT_OF_BITS[to_bits])
    if signed:
        return bits.view(SINT_OF_BITS[from_bits]).astype(SINT_OF_BITS[to_bits]).view(
            UINT_OF_BITS[to_bits])
    return bits.astype(UINT_OF_BITS[to_bits])


def bits_as(bits: np.ndarray, ptx_type: str) -> np.ndarray:
    """View raw register bits as values of `ptx_type` (truncating a wider register)."""
    if ptx_type == "pred":
        return bits.astype(np.bool_, copy=False)
    if bits.dtype == np.bool_:
        bits = bits.astype(np.uint16)
    width = BITS[ptx_type]
    return resize_bits(bits, width, False).view(VIEW[ptx_type])


def as_bits(values: np.ndarray, ptx_type: str, register_bits: int) -> np.ndarray:
    """Raw bits of `values` (of `ptx_type`) widened to a register of `register_bits`."""
    if ptx_type == "pred" or register_bits == 1:
        return np.asarray(values).astype(np.bool_, copy=False)
    typed = np.asarray(values).astype(VIEW[ptx_type], copy=False)
    raw = typed.view(UINT_OF_BITS[BITS[ptx_type]])
    return resize_bits(raw, register_bits, ptx_type in SIGNED)


def constant(value: int | float, ptx_type: str) -> np.ndarray:
    """A 0-d array holding immediate `value` as `ptx_type` (integers wrap to the width)."""
    if ptx_type == "pred":
        return np.array(bool(value))
    width = BITS[ptx_type]
    view = VIEW[ptx_type]
    if isinstance(value, float):
        if ptx_type in FLOAT or ptx_type in HALF_ELEMENT:
            return np.array(value, dtype=HALF_ELEMENT.get(ptx_type, view))
        floats = {16: np.float16, 32: np.float32, 64: np.float64}
        return np.array(value, dtype=floats[width]).view(UINT_OF_BITS[width]).view(view)
    if ptx_type in FLOAT or ptx_type in ("f16", "bf16"):
        return np.array(value, dtype=view)
    raw = np.array(int(value) % (1 << width), dtype=UINT_OF_BITS[width])
    return raw.view(view)
