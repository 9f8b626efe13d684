"""The input data of a program: seeded by the program's seed and each ref's name, so the
same program (and its minimised forms, which keep ref names) gets the same data."""

from __future__ import annotations

import zlib

import numpy as np

from tests.differential.dtypes import DTYPES
from tests.differential.numerics import round_to
from tests.differential.program import Program, Ref

SPECIAL_FLOATS = (np.nan, np.inf, -np.inf, 0.0, -0.0)


def make_inputs(program: Program, instance: int = 0) -> list[np.ndarray]:
    """One array per input ref, in order; `instance` numbers the input sets of a batch."""
    return [make_input(program.seed, ref, instance) for ref in program.inputs]


def make_input(seed: int, ref: Ref, instance: int = 0) -> np.ndarray:
    """Floats: normal values at a scale drawn per ref, sometimes with a sprinkling of NaN,
    infinities and zeros; ints: small values, or the whole range; bools: coin flips."""
    entropy = [seed & 0xFFFFFFFF, zlib.crc32(ref.name.encode())] + ([instance] if instance
                                                                      else [])
    rng = np.random.default_rng(entropy)
    dtype = DTYPES[ref.dtype]
    if dtype.is_bool:
        return rng.random(ref.shape) < rng.uniform(0.2, 0.8)
    if dtype.is_int:
        if rng.random() < 0.2:
            info = np.iinfo(dtype.numpy)
            return rng.integers(info.min, info.max, ref.shape, endpoint=True).astype(dtype.numpy)
        return rng.integers(-100, 100, ref.shape, endpoint=True).astype(dtype.numpy)
    scale = float(rng.choice([1.0, 1.0, 4.0, 0.25, 100.0]))
    values = rng.standard_normal(ref.shape) * scale
    if rng.random() < 0.3:
        values = np.round(values * 4) / 4  # ties and exact zeros
    if rng.random() < 0.15:
        spots = rng.random(ref.shape) < 0.01
        values = np.where(spots, rng.choice(SPECIAL_FLOATS, ref.shape), values)
    if not dtype.computes:  # fp8: the finite range (e4m3fn has no infinities)
        values = np.where(np.isnan(values), values, np.clip(values, -dtype.max_finite,
                                                            dtype.max_finite))
    return round_to(values, dtype)


__all__ = ["make_input", "make_inputs"]
