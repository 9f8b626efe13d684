"""wgmma operands: matrix descriptors, where an operand's elements lie in shared memory, the
register fragments of A and of the accumulator, and elements read as float64 values.

PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions": "Matrix
Descriptor Format", "Shared Memory Matrix Layout", "Register Fragments".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import ml_dtypes
import numpy as np

from smalti.sim.swizzle import swizzle

WARPGROUP = 128
M = 64
INPUTS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32,
          "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
K_OF = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
SPAN_OF_MODE = {0: None, 1: 128, 2: 64, 3: 32}
TF32_MASK = np.uint32(0xFFFFE000)  # tf32 keeps 10 mantissa bits; the rest are ignored


@dataclass(frozen=True)
class Descriptor:
    """A decoded matrix descriptor (PTX ISA, "Matrix Descriptor Format")."""

    start: int
    lbo: int
    sbo: int
    base_offset: int
    span: int | None

    @classmethod
    def decode(cls, value: int) -> Descriptor:
        field = lambda lo, bits: (value >> lo) & ((1 << bits) - 1)  # noqa: E731
        return cls(field(0, 14) << 4, field(16, 14) << 4, field(32, 14) << 4, field(49, 3),
                   SPAN_OF_MODE[field(62, 2)])


def esize_of(itype: str) -> int:
    """Bytes per element of input type `itype`."""
    return np.dtype(INPUTS[itype]).itemsize


@lru_cache(maxsize=256)
def operand_addresses(desc: Descriptor, rows: int, esize: int, mn_major: bool) -> np.ndarray:
    """Byte addresses (rows x K) of a rows x 32-byte operand under `desc`, swizzle applied.

    Canonical layouts (PTX ISA, "Shared Memory Matrix Layout"; CUTLASS names them by
    swizzle): K-major: 8-row groups SBO apart, rows 16 bytes apart (no swizzle; the second
    16 bytes of K LBO away) or one swizzle span apart (K contiguous). MN-major: 8 K-rows 16
    bytes (no swizzle) or a span apart, MN contiguous within 16 bytes / one span; the next
    16 bytes of MN (no swizzle) SBO away, the next span of MN LBO away, the next 8 K LBO
    (no swizzle) or SBO away.
    """
    k = 32 // esize
    mn = np.arange(rows, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    span = desc.span
    if not mn_major:
        kb = kk * esize
        if span is None:
            offset = (mn % 8) * 16 + (mn // 8) * desc.sbo + kb % 16 + (kb // 16) * desc.lbo
        else:
            offset = (mn % 8) * span + (mn // 8) * desc.sbo + kb
    else:
        mb = mn * esize
        if span is None:
            offset = mb % 16 + (mb // 16) * desc.sbo + (kk % 8) * 16 + (kk // 8) * desc.lbo
        else:
            offset = mb % span + (mb // span) * desc.lbo + (kk % 8) * span + (kk // 8) * desc.sbo
    addresses = swizzle(desc.start + offset, span)
    addresses.flags.writeable = False  # shared by every call with this descriptor (cached)
    return addresses


def distinct(idx: np.ndarray) -> np.ndarray:
    """The sorted distinct values of non-negative byte indices lying in a narrow range (an
    operand's bytes): a bitmap over the range, much cheaper than np.unique's hashing."""
    flat = idx.reshape(-1)
    low = int(flat.min())
    seen = np.zeros(int(flat.max()) - low + 1, np.bool_)
    seen[flat - low] = True
    return np.flatnonzero(seen) + low


@dataclass(frozen=True, eq=False)
class Layout:
    """Where an operand lies within its block's shared memory: each element's first byte
    (rows x K) and the operand's distinct bytes, sorted. Cached, so compared by identity."""

    addresses: np.ndarray
    bytes: np.ndarray


@lru_cache(maxsize=256)
def layout(desc_value: int, rows: int, itype: str, mn_major: bool, size: int) -> Layout | None:
    """The layout of an operand under descriptor `desc_value` in `size` bytes of shared
    memory; None where the descriptor faults (a non-zero matrix base offset, or bytes past
    the block's end: issuing warpgroup by warpgroup reports which)."""
    desc = Descriptor.decode(desc_value)
    esize = esize_of(itype)
    addresses = operand_addresses(desc, rows, esize, mn_major)
    if desc.base_offset or int(addresses.max()) + esize > size:
        return None
    spread = distinct(addresses[..., None] + np.arange(esize))
    spread.flags.writeable = False
    return Layout(addresses, spread)


@lru_cache(maxsize=256)
def union(first: Layout, second: Layout) -> np.ndarray:
    """The sorted distinct bytes of two layouts together (cached per pair of layouts)."""
    both = np.union1d(first.bytes, second.bytes)
    both.flags.writeable = False
    return both


def accumulator_units(natural: np.ndarray) -> np.ndarray:
    """D tiles (S x 64 x N, f32 or f16) as the 32-bit register units (one f32, or two f16
    sharing a register) in register-file order, a view: register (j, h[, l]) of thread
    s*128 + t at [j, h, (l,) s, w, q, p], t = 32w + 4q + p. PTX ISA, wgmma D fragments:
    register i = 4j + 2h + l of thread t holds row 16w + 8h + q, column 8j + 2p + l (f16:
    elements l = 0, 1 share register 2j + h, l = 0 in the low half)."""
    tiles, _, n = natural.shape
    units = natural.view(np.uint32)
    if natural.dtype == np.float32:
        return units.reshape(tiles, 4, 2, 8, n // 8, 4, 2).transpose(4, 2, 6, 0, 1, 3, 5)
    return units.reshape(tiles, 4, 2, 8, n // 8, 4).transpose(4, 2, 0, 1, 3, 5)


def a_fragment_coords(esize: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, K index) arrays (128 threads x 4 registers x elements) of A held in registers."""
    per = 4 // esize
    t = np.arange(WARPGROUP)[:, None, None]
    j = np.arange(4)[None, :, None]
    e = np.arange(per)[None, None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * (j & 1)
    kbyte = 4 * (t % 4) + 16 * (j >> 1) + e * esize
    return np.broadcast_to(row, kbyte.shape), kbyte // esize


def from_bits(bits: np.ndarray, itype: str) -> np.ndarray:
    """Raw unsigned bits of `itype` elements as float64 values."""
    if itype == "tf32":
        return (bits & TF32_MASK).view(np.float32).astype(np.float64)
    return bits.view(INPUTS[itype]).astype(np.float64)


def values(raw: np.ndarray, itype: str) -> np.ndarray:
    """Raw little-endian bytes (..., esize) of `itype` as float64 values."""
    bits = np.ascontiguousarray(raw).view(f"<u{esize_of(itype)}")[..., 0]
    return from_bits(bits, itype)


def load(data: np.ndarray, local: np.ndarray, blocks: np.ndarray, itype: str,
         block_size: int) -> np.ndarray:
    """float64 values (S x rows x K) of an operand of S warpgroups from shared memory `data`
    (blocks of `block_size` bytes): element (r, k) of warpgroup i starts `local[r, k]` bytes
    into block blocks[i] (`local`: one layout for all, or S x rows x K, one each).

    Operand elements are aligned to their size, so where blocks are too they are gathered
    whole; with one layout for all, each block is copied and the layout picked from it."""
    esize = esize_of(itype)
    if block_size % esize:
        flat = local + (blocks * block_size)[:, None, None]
        return values(data[flat[..., None] + np.arange(esize)], itype)
    units = data.view(f"<u{esize}").reshape(-1, block_size // esize)
    index = local >> (esize.bit_length() - 1)  # (esize is a power of two)
    if index.ndim == 2:
        return from_bits(units[blocks][:, index], itype)
    return from_bits(units[blocks[:, None, None], index], itype)
