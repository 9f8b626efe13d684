"""Buffers of 4-bit elements (i4, f4E2M1FN) as kernels see them: two elements per byte, the
first in the low nibble.

That is how XLA hands jnp.int4 / jnp.uint4 / jnp.float4_e2m1fn arrays to a custom call on
CPU under jax 0.10.2 and 0.12 (checked by tests/test_subbyte_abi.py; XLA's GPU backend packs
4-bit arrays the same way, not checked here without a GPU), and what the hardware reads:
TMA's packed 4-bit formats and tcgen05's 4-bit operands. The XLA FFI buffer of such an
array says one byte per element (`ByteWidth` is 1 for S4/U4/F4E2M1FN, so `size_bytes()` is
the element count), but only ceil(n / 2) bytes are there.

numpy (ml_dtypes) keeps one 4-bit element per byte instead, so host arrays are packed on the
way into the simulator's device memory and unpacked on the way out (`pack`, `unpack`).

FP6 (f6E2M3FN, f6E3M2FN) is not packed: jax 0.10.2 has no XLA type for it, and jax 0.12
hands it to a custom call one element per byte with FFI dtype INVALID; kernels take it as
bytes (TMA moves it as u8), never as the 12-bytes-per-16 form of CU_TENSOR_MAP_DATA_TYPE_
16U6_ALIGN16B.
"""

from __future__ import annotations

import math

import numpy as np

from smalti.runtime.dtypes import NUMPY_DTYPES

PACKED_BITS: dict[str, int] = {"i4": 4, "f4E2M1FN": 4}
"""Element types stored two per byte in kernel buffers, and their bits."""


def is_packed(dtype: str) -> bool:
    return dtype in PACKED_BITS


def packed_bytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes of a buffer of `shape` elements of `dtype` as the kernel sees it."""
    count = math.prod(shape)
    return -(-count * PACKED_BITS[dtype] // 8) if is_packed(dtype) else \
        count * NUMPY_DTYPES[dtype].itemsize


def pack(array: np.ndarray) -> np.ndarray:
    """A numpy array of a 4-bit dtype (one element per byte, in its low nibble) as packed
    bytes (uint8)."""
    nibbles = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & 0xF
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def unpack(packed: np.ndarray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Packed bytes as a numpy array of `dtype` (one element per byte) and `shape`."""
    raw = np.asarray(packed, np.uint8).reshape(-1)
    nibbles = np.empty(raw.size * 2, np.uint8)
    nibbles[0::2], nibbles[1::2] = raw & 0xF, raw >> 4
    count = math.prod(shape)
    return nibbles[:count].view(NUMPY_DTYPES[dtype]).reshape(shape)  # reads the low nibble


__all__ = ["PACKED_BITS", "is_packed", "pack", "packed_bytes", "unpack"]
