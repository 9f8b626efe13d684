"""Shared-memory swizzle modes: the byte-address permutation TMA and wgmma apply.

A swizzle of span S (32, 64 or 128 bytes) XORs the 16-byte chunk index within an S-byte row
(address bits [4, 4+b)) with the row index within the repeating pattern (bits [7, 7+b)),
b = log2(S / 16); the pattern repeats every 8 * S bytes. PTX ISA, "Tensor Copy: Swizzling
Modes" and "Matrix Descriptor" (swizzle field). The map is an involution: it is its own
inverse.
"""

from __future__ import annotations

import numpy as np

SPANS = (None, 32, 64, 128)
CHUNK = 16  # bytes permuted as a unit


def check_span(span: int | None) -> None:
    """Fail for a swizzle span that is not None, 32, 64 or 128."""
    if span not in SPANS:
        raise ValueError(f"swizzle must be None, 32, 64 or 128 bytes, got {span!r}")


def swizzle(addresses: np.ndarray | int, span: int | None) -> np.ndarray:
    """Physical byte addresses of logical byte `addresses` under swizzle span `span`."""
    check_span(span)
    a = np.asarray(addresses, dtype=np.int64)
    if span is None:
        return a
    mask = span // CHUNK - 1  # 1, 3 or 7: how many row bits reach the chunk index
    return a ^ (((a >> 7) & mask) << 4)


def repeat_bytes(span: int | None) -> int:
    """Bytes after which the swizzle pattern repeats (an alignment that keeps it intact)."""
    check_span(span)
    return 16 if span is None else 8 * span
