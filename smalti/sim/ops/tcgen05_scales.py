"""Block scaling for tcgen05.mma: element types of the f8f6f4 and mx kinds, scale factor types,
the scale vector sizes, and where the scale factors lie in tensor memory.

PTX ISA, "tcgen05.mma" (block scaling, `.kind::mxf8f6f4`, `.kind::mxf4`, `.kind::mxf4nvf4`
with `.block_scale`): D = (A * scale_A) @ (B * scale_B) + D, each scale factor multiplying a
block of consecutive K elements of one row of A (one column of B). One MMA covers 32 bytes of
K per row: 32 elements of .kind::mxf8f6f4 (each in a byte), 64 of .kind::mxf4 and
.kind::mxf4nvf4 (E2M1 packed two to a byte, the first in the low nibble). `.scale_vec::NX`
gives N scale factors per row per MMA (blocks of K/N elements); `.block32` / `.block16` name
the block size instead. Allowed: .kind::mxf8f6f4 1X (UE8M0), .kind::mxf4 2X (UE8M0),
.kind::mxf4nvf4 2X (UE8M0) or 4X (UE8M0 or UE4M3).

Scale factor types: UE8M0 is 2^(e - 127) (0xFF is NaN); UE4M3 is E4M3 without its sign.

Shared memory formats of .kind::f8f6f4 / .kind::mxf8f6f4 (PTX ISA 5.5.1.1, the packed
sub-byte formats; TMA's CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B / 16U6_ALIGN16B write them):
E4M3/E5M2 take a byte each; 6- and 4-bit types come in groups of 16 elements per 16 bytes,
packed from the group's first bit (element j at bits 6j / 4j, little-endian) and padded
(.b6x16_p32: 12 bytes then 4 of padding; .b4x16_p64: 8 then 8), so 32 bytes of K are 32
elements whatever the type.

Scale factor layout in tensor memory for M = 128 (the "Scale factor A/B" layout the ISA draws
for the 4x1 data path, which CUTLASS's `tmem_sf_frg` allocates): the scale factors of row m
of A lie in lane m, column col(scale_A) + m // 32, bytes id_A .. id_A + N - 1 of that 32-bit
column (id_A: the descriptor's matrix A scale factor data ID); those of column n of B lie in
column col(scale_B) + n // 32, lane n % 32 of each 32-lane quarter: the quarter computing
rows 32q .. 32q + 31 of D reads the copy in lanes 32q .. 32q + 31, so B's scale factors are
replicated in all four quarters (tcgen05.cp's .32x128b.warpx4 writes them so).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

K_BYTES = 32  # bytes of K per row one MMA covers
SCALE_VECTORS = {"scale_vec::1X": 1, "scale_vec::2X": 2, "scale_vec::4X": 4}
BLOCKS = {"block32": 32, "block16": 16}
ALLOWED = {  # kind -> {scale factors per row per MMA: allowed scale types}
    "mxf8f6f4": {1: ("ue8m0",)},
    "mxf4": {2: ("ue8m0",)},
    "mxf4nvf4": {2: ("ue8m0",), 4: ("ue8m0", "ue4m3")},
}
DEFAULT_VECTORS = {"mxf8f6f4": 1, "mxf4": 2}
SCALE_IDS = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}  # allowed scale factor data IDs
BYTE_TYPES = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
PADDED = {"e2m3": (ml_dtypes.float6_e2m3fn, 6), "e3m2": (ml_dtypes.float6_e3m2fn, 6),
          "e2m1": (ml_dtypes.float4_e2m1fn, 4)}  # type, bits per element (16 per 16 bytes)


def packed(kind: str) -> bool:
    """Whether the kind packs two E2M1 elements to a byte (.kind::mxf4, .kind::mxf4nvf4)."""
    return kind in ("mxf4", "mxf4nvf4")


def k_of(kind: str) -> int:
    """K elements of one MMA of a kind whose elements are at most a byte."""
    return 2 * K_BYTES if packed(kind) else K_BYTES


def vectors(kind: str, modifier: str | None) -> int:
    """Scale factors per row per MMA from `.scale_vec::NX` / `.blockB` (None: the default)."""
    if modifier is None:
        if kind not in DEFAULT_VECTORS:
            raise ValueError(f".kind::{kind} needs .scale_vec::2X/4X or .block32/.block16")
        return DEFAULT_VECTORS[kind]
    count = SCALE_VECTORS.get(modifier) or k_of(kind) // BLOCKS[modifier]
    if count not in ALLOWED[kind]:
        raise ValueError(f".kind::{kind} does not take .{modifier}")
    return count


def data_bytes(itype: str, kind: str) -> np.ndarray:
    """Which of a row's 32 bytes hold data (the padding of .b6x16_p32 / .b4x16_p64 groups is
    never read, and need not be written)."""
    k = np.arange(K_BYTES)
    if packed(kind) or itype not in PADDED:
        return k
    return k[k % 16 < 2 * PADDED[itype][1]]


def element_values(raw: np.ndarray, itype: str, kind: str) -> np.ndarray:
    """float64 values (rows x K) of rows of 32 bytes (rows x 32, uint8) of `itype`."""
    raw = np.ascontiguousarray(raw, np.uint8)
    if packed(kind):
        nibbles = np.stack([raw & 0x0F, raw >> 4], axis=-1).reshape(raw.shape[0], -1)
        return nibbles.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    if itype in BYTE_TYPES:
        return raw.view(BYTE_TYPES[itype]).astype(np.float64)
    dtype, width = PADDED[itype]
    groups = raw.reshape(raw.shape[0], -1, 16)[..., :2 * width]  # the packed bytes per group
    stream = np.unpackbits(groups, axis=-1, bitorder="little")  # bit i of the group at i
    fields = stream.reshape(*groups.shape[:2], 16, width)
    bits = (fields << np.arange(width, dtype=np.uint8)).sum(axis=-1).astype(np.uint8)
    return bits.reshape(raw.shape[0], -1).view(dtype).astype(np.float64)


def scale_values(raw: np.ndarray, scale_type: str) -> np.ndarray:
    """float64 values of UE8M0 / UE4M3 scale factor bytes."""
    raw = np.asarray(raw, np.uint8)
    if scale_type == "ue8m0":
        out = np.ldexp(1.0, raw.astype(np.int64) - 127)
        return np.where(raw == 0xFF, np.nan, out)
    return (raw & 0x7F).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def a_cells(column: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(lanes, columns) (rows x 1) of the 32-bit cells holding A's scale factors."""
    m = np.arange(rows)[:, None]
    return m, column + m // 32


def b_cells(column: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(lanes, columns) (4 quarters x n) of the cells holding B's scale factors, one copy per
    32-lane quarter."""
    q = np.arange(4)[:, None]
    j = np.arange(n)[None, :]
    lanes, columns = np.broadcast_arrays(32 * q + j % 32, column + j // 32)
    return lanes.copy(), columns.copy()


def scale_bytes(words: np.ndarray, first: int, count: int) -> np.ndarray:
    """Bytes first .. first + count - 1 of 32-bit cells (... x count)."""
    shifts = 8 * (first + np.arange(count, dtype=np.uint32))
    return ((words[..., None].astype(np.uint32) >> shifts) & 0xFF).astype(np.uint8)


def scaled_product(a: np.ndarray, b: np.ndarray, scale_a: np.ndarray,
                   scale_b: np.ndarray) -> np.ndarray:
    """sum over blocks j of scale_a[m, j] * scale_b[m // 32, n, j] * (a_j @ b_j.T)[m, n]: a
    (M x K), b (N x K), scale_a (M x S), scale_b (4 x N x S), K split into S blocks."""
    rows, k = a.shape
    count = scale_a.shape[1]
    size = k // count
    quarter = np.arange(rows) // 32
    out = np.zeros((rows, b.shape[0]))
    for j in range(count):
        part = a[:, j * size:(j + 1) * size] @ b[:, j * size:(j + 1) * size].T
        out += part * scale_a[:, j, None] * scale_b[quarter, :, j]
    return out
