"""Shared-memory transforms: how a logical array is tiled, transposed and swizzled in SMEM.

Transforms apply in order to the logical shape and produce the physical shape, whose
elements are stored row-major; a swizzle (last, at most one) then permutes 16-byte chunks
of the byte addresses. Sizes, spans and boxes are measured in bytes; a 4-bit element is half
a byte (`element_bytes` Fraction(1, 2): two per byte, the lower index in the low nibble), so a
128-byte swizzle row holds 256 of them. Swizzle, on a byte address a within an aligned
pattern (PTX ISA, "Shared memory matrix layout"; NOTES.md): the 16-byte chunk bits [6:4] XOR
the 128-byte row bits [9:7], masked to the span: 128 B `a ^ (((a >> 7) & 7) << 4)`, 64 B
`a ^ (((a >> 7) & 3) << 4)`, 32 B `a ^ (((a >> 7) & 1) << 4)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smalti.tiling.layouts import LayoutError, Shape

SWIZZLE_SPANS = (32, 64, 128)
TMA_MAX_BOX = 256  # elements per box dimension (cuTensorMapEncodeTiled)
TMA_MAX_RANK = 5
TMA_ALIGN_BYTES = 16

ElementSize = int | Fraction  # bytes of one element: Fraction(1, 2) for 4-bit types


def element_size(bits: int) -> ElementSize:
    """Bytes one element of `bits` bits takes in memory: 4-bit ones half a byte, an i1 a
    whole byte."""
    return Fraction(1, 2) if bits == 4 else max(bits // 8, 1)


def byte_count(elements: int, element_bytes: ElementSize) -> int:
    """Whole bytes `elements` elements take (4-bit ones two per byte, rounded up)."""
    return math.ceil(elements * element_bytes)


def _bytes_text(size: ElementSize) -> str:
    return f"{size}-byte" if size == int(size) else f"{int(8 * size)}-bit"


@dataclass(frozen=True)
class TileTransform:
    """Split the trailing len(tiling) dims into (dim / tile) x tile, tiles innermost."""

    tiling: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.tiling or any(t <= 0 for t in self.tiling):
            raise LayoutError(f"tile {list(self.tiling)} must be a non-empty list of positive "
                              "sizes")


@dataclass(frozen=True)
class SwizzleTransform:
    """XOR the 16-byte chunk index with the row index within a `swizzle_bytes` pattern."""

    swizzle_bytes: int

    def __post_init__(self) -> None:
        if self.swizzle_bytes not in SWIZZLE_SPANS:
            raise LayoutError(f"swizzle must be 32, 64 or 128 bytes, got {self.swizzle_bytes}")


@dataclass(frozen=True)
class TransposeTransform:
    """Permute the dims: physical dim j is dim permutation[j] of the shape so far."""

    permutation: tuple[int, ...]

    def __post_init__(self) -> None:
        if sorted(self.permutation) != list(range(len(self.permutation))):
            raise LayoutError(f"{list(self.permutation)} is not a permutation")


Transform = TileTransform | SwizzleTransform | TransposeTransform


def swizzle_address(address: np.ndarray, swizzle_bytes: int) -> np.ndarray:
    """The swizzled byte address (see the module docstring); an involution."""
    mask = swizzle_bytes // 16 - 1
    return address ^ (((address >> 7) & mask) << 4)


def physical_shape(transforms: Sequence[Transform], shape: Shape, element_bytes: ElementSize
                   ) -> Shape:
    """The physical shape of a `shape` array of `element_bytes` elements after transforms."""
    physical, _ = _apply(transforms, tuple(shape), element_bytes, None)
    return physical


def physical_address(transforms: Sequence[Transform], shape: Shape,
                     element_bytes: ElementSize) -> np.ndarray:
    """[*shape] -> the byte offset in SMEM of every logical element (of a 4-bit element: the
    byte holding it)."""
    shape = tuple(shape)
    physical, indices = _apply(transforms, shape, element_bytes, list(np.indices(shape)))
    assert indices is not None
    strides = np.array([math.prod(physical[j + 1:]) for j in range(len(physical))])
    size = Fraction(element_bytes)
    offset = sum((i * s for i, s in zip(indices, strides, strict=True)),
                 np.zeros(shape, dtype=np.int64)) * size.numerator // size.denominator
    match transforms[-1] if transforms else None:
        case SwizzleTransform(swizzle_bytes=span):
            return swizzle_address(offset, span)
    return offset


def _apply(transforms: Sequence[Transform], shape: Shape, element_bytes: ElementSize,
           indices: list[np.ndarray] | None) -> tuple[Shape, list[np.ndarray] | None]:
    """Follow the transforms: the physical shape and, if given, the indices into it."""
    if element_bytes <= 0:
        raise LayoutError(f"element size must be positive, got {element_bytes} bytes")
    for n, transform in enumerate(transforms):
        match transform:
            case TileTransform(tiling=tile):
                k = len(tile)
                if k > len(shape) or any(s % t for s, t in zip(shape[-k:], tile, strict=True)):
                    raise LayoutError(f"tile {list(tile)} does not divide shape {list(shape)}")
                head = shape[:-k]
                shape = (*head, *(s // t for s, t in zip(shape[-k:], tile, strict=True)), *tile)
                if indices is not None:
                    tail = indices[len(head):]
                    indices = [*indices[:len(head)],
                               *(i // t for i, t in zip(tail, tile, strict=True)),
                               *(i % t for i, t in zip(tail, tile, strict=True))]
            case TransposeTransform(permutation=perm):
                if len(perm) != len(shape):
                    raise LayoutError(f"transpose {list(perm)} does not match the rank of "
                                      f"{list(shape)}")
                shape = tuple(shape[p] for p in perm)
                if indices is not None:
                    indices = [indices[p] for p in perm]
            case SwizzleTransform(swizzle_bytes=span):
                if n != len(transforms) - 1:
                    raise LayoutError("a swizzle must be the last SMEM transform")
                inner = (shape[-1] if shape else 1) * element_bytes
                if inner != span:
                    raise LayoutError(
                        f"a {span}-byte swizzle needs the innermost dim to span exactly {span} "
                        f"bytes; physical shape {list(shape)} of {_bytes_text(element_bytes)} "
                        f"elements spans {inner}")
            case _:
                raise TypeError(f"not an SMEM transform: {transform!r}")
    return shape, indices


def wgmma_operand_transforms(shape: Shape, element_bytes: ElementSize, swizzle: int,
                             transposed: bool, tile_rows: int = 8) -> tuple[Transform, ...]:
    """The canonical SMEM form of a 2-D WGMMA operand: tiles of `tile_rows` rows (8 by
    default, the core-matrix group; any multiple of 8 gives the same bytes within a tile)
    spanning the swizzle.

    `transposed` means the memory holds the operand's transpose (an MN-major operand), so
    the dims are swapped before tiling. Raises LayoutError when the shape does not tile.
    """
    if len(shape) != 2:
        raise LayoutError(f"a WGMMA operand is 2-D, got shape {list(shape)}")
    if swizzle not in SWIZZLE_SPANS or swizzle % element_bytes:
        raise LayoutError(f"no {swizzle}-byte swizzle for {_bytes_text(element_bytes)} "
                          "elements")
    if tile_rows % 8:
        raise LayoutError(f"WGMMA operand tiles have a multiple of 8 rows, not {tile_rows}")
    tile = TileTransform((tile_rows, swizzle // element_bytes))
    transforms: tuple[Transform, ...] = (
        (TransposeTransform((1, 0)), tile, SwizzleTransform(swizzle)) if transposed
        else (tile, SwizzleTransform(swizzle)))
    physical_shape(transforms, shape, element_bytes)
    return transforms


WGMMA_M_BLOCK = 64  # rows of A one wgmma instruction reads
WGMMA_K_BYTES = 32  # bytes of K one wgmma instruction reads


def wgmma_stride_problem(transforms: Sequence[Transform], shape: Shape,
                         element_bytes: ElementSize, operand: str,
                         a_rows: int = WGMMA_M_BLOCK) -> str | None:
    """Why one wgmma descriptor per instruction (a start address and two strides, computed
    once for the operand) cannot describe `operand` ("A": M x K, "B": K x N) stored with
    `transforms`, or None if it can: the 8-row groups each instruction reads (`a_rows` rows
    of A: 64 for wgmma, M for tcgen05.mma; all N of B; every K step) must lie one stride
    apart everywhere, as they do when the tiles are 8 rows tall, or cover the instruction's
    rows, or K fits one swizzle span."""
    linear = [t for t in transforms if not isinstance(t, SwizzleTransform)]
    offsets = physical_address(linear, tuple(shape), element_bytes)
    if operand == "B":
        offsets = offsets.T  # index as (MN, K) for both operands
    mn, k = offsets.shape
    extent = min(a_rows, mn) if operand == "A" else mn  # rows one instruction reads
    k_step = max(WGMMA_K_BYTES // element_bytes, 1)
    transposed = bool(transforms) and isinstance(transforms[0], TransposeTransform)
    mn_major = transposed != (operand == "B")
    if mn_major:  # swizzle-span chunks along MN (LBO), 8-row groups along K (SBO)
        spans = [t for t in transforms if isinstance(t, SwizzleTransform)]
        chunk = spans[0].swizzle_bytes // element_bytes if spans else extent
        walks = (("MN", chunk, extent // chunk if extent > chunk else 1, 0),
                 ("K", 8, k_step // 8 if k_step > 8 else 1, 1))
    else:  # 8-row groups along MN (SBO)
        walks = (("MN", 8, extent // 8, 0),)
    for name, step, count, axis in walks:
        if count < 2:
            continue
        stride = (offsets[step, 0] if axis == 0 else offsets[0, step]) - offsets[0, 0]
        for block in range(0, mn, extent):
            for kk in range(0, k, k_step):
                origin = offsets[block, kk]
                for i in range(1, count):
                    at = offsets[block + i * step, kk] if axis == 0 else offsets[block,
                                                                                 kk + i * step]
                    if at - origin != i * stride:
                        return (f"wgmma's descriptor steps {name} by one stride, but this "
                                f"{operand}'s {step}-row groups are not evenly spaced in shared "
                                "memory: use tiles of 8 rows, or tiles covering "
                                f"{f'{extent} rows of A' if operand == 'A' else 'all of N'}")
    return None


def descriptor_layout_problem(transforms: Sequence[Transform], shape: Shape,
                              element_bytes: ElementSize, operand: str, a_rows: int = WGMMA_M_BLOCK
                              ) -> str | None:
    """Why a shared memory matrix descriptor (wgmma's, or tcgen05.mma's reading `a_rows`
    rows of A per instruction) cannot describe `operand` ("A" or "B") stored with
    `transforms`, or None if it can: 8k-row tiles one swizzle span wide, swizzled,
    optionally after a 2-D transpose, with evenly spaced 8-row groups."""
    body = tuple(transforms)
    if body and isinstance(body[0], TransposeTransform) and body[0].permutation == (1, 0):
        body = body[1:]
    return (swizzled_tiles_problem(transforms, body, shape, element_bytes,
                                   "the matrix descriptor")
            or wgmma_stride_problem(transforms, shape, element_bytes, operand, a_rows))


def swizzled_tiles_problem(transforms: Sequence[Transform], body: Sequence[Transform],
                           shape: Shape, element_bytes: ElementSize, reader: str) -> str | None:
    """Why `reader` cannot read `body` (`transforms` after an optional transpose) as tiles
    of 8k rows one swizzle span wide then that swizzle, or `transforms` do not fit `shape`."""
    match tuple(body):
        case (TileTransform(tiling=(rows, cols)), SwizzleTransform(swizzle_bytes=span)):
            if rows % 8 or cols * element_bytes != span:
                return (f"{reader} reads tiles of 8k rows and one {span}-byte swizzle span, "
                        f"not {rows}x{cols}")
        case _:
            return (f"{reader} reads shared memory as 2-D tiles then a swizzle, optionally "
                    "transposed first")
    try:
        physical_shape(transforms, shape, element_bytes)
    except LayoutError as error:
        return str(error)
    return None


def tall_tile_rows(rows: int) -> int:
    """The most rows (a multiple of 8 dividing `rows`, at most a TMA box) that one SMEM tile
    can hold: taller tiles keep more rows consecutive, so TMA moves them in fewer boxes."""
    best = 8
    candidate = 8
    while candidate <= min(rows, TMA_MAX_BOX):
        if rows % candidate == 0:
            best = candidate
        candidate += 8
    return best


def tma_incompatibility(transforms: Sequence[Transform], element_bytes: ElementSize,
                        shape: Shape | None = None) -> str | None:
    """Why TMA cannot produce this SMEM layout in one box per tile, or None if it can.

    A box is the innermost tile (or the whole `shape` when untiled): at most 5 dims of at
    most 256 elements, its inner extent a multiple of 16 bytes and, under a swizzle, equal
    to the swizzle span; the innermost logical dim stays innermost (TMA cannot transpose).
    """
    tiles = [t for t in transforms if isinstance(t, TileTransform)]
    swizzles = [t for t in transforms if isinstance(t, SwizzleTransform)]
    if len(tiles) > 1:
        return "TMA writes one level of tiles"
    if swizzles and transforms[-1] is not swizzles[-1]:
        return "a swizzle must be the last SMEM transform"
    for t in transforms:
        if isinstance(t, TransposeTransform) and t.permutation[-1] != len(t.permutation) - 1:
            return "TMA cannot move the innermost dim (its global stride must be 1)"
    box = tiles[0].tiling if tiles else shape
    if box is None:
        return "the box is unknown: give the shape of an untiled ref"
    if len(box) > TMA_MAX_RANK:
        return f"a TMA box has at most {TMA_MAX_RANK} dims, this one has {len(box)}"
    if any(b > TMA_MAX_BOX for b in box):
        return f"a TMA box dim holds at most {TMA_MAX_BOX} elements, box is {list(box)}"
    inner = box[-1] * element_bytes
    if inner % TMA_ALIGN_BYTES:
        return f"the box inner extent ({inner} bytes) must be a multiple of 16 bytes"
    if element_bytes < 1 and box[-1] % 2:
        return f"a box of 4-bit elements spans whole bytes, not {box[-1]} elements"
    if swizzles and inner != swizzles[-1].swizzle_bytes:
        return (f"the box inner extent ({inner} bytes) must equal the "
                f"{swizzles[-1].swizzle_bytes}-byte swizzle span")
    if shape is not None:
        try:
            physical_shape(transforms, shape, element_bytes)
        except LayoutError as error:
            return str(error)
    return None


def tma_compatible(transforms: Sequence[Transform], element_bytes: ElementSize,
                   shape: Shape | None = None) -> bool:
    """True when TMA can write (and read) SMEM laid out by `transforms`."""
    return tma_incompatibility(transforms, element_bytes, shape) is None
