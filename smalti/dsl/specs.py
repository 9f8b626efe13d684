"""Call-time checks: the arrays a kernel is called with, named by the body's parameters."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from smalti.dsl.dtypes import mlir_name

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ArraySpec:
    """The static part of an array argument or result: its shape and dtype."""

    shape: Shape
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"


def spec_of(value: object, what: str) -> ArraySpec:
    """The spec of an array-like (jax.Array, tracer, numpy array, ShapeDtypeStruct)."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{what} must be an array (or jax.ShapeDtypeStruct), got "
                        f"{type(value).__name__}")
    if mlir_name(dtype) is None:
        raise TypeError(f"{what} has dtype {np.dtype(dtype).name}, which smalti kernels do "
                        "not support")
    shape = tuple(int(s) for s in shape)
    if not shape or any(s <= 0 for s in shape):
        raise ValueError(f"{what} must have a non-empty static shape, got {shape}")
    return ArraySpec(shape, np.dtype(dtype))


def check_expected(spec: ArraySpec, expected: object, what: str) -> None:
    """TypeError on a dtype mismatch, ValueError on a shape mismatch, naming `what`."""
    want = spec_of(expected, f"the declared spec of {what}")
    if spec.dtype != want.dtype:
        raise TypeError(f"{what} must have dtype {want.dtype.name}, got {spec.dtype.name}")
    if spec.shape != want.shape:
        raise ValueError(f"{what} must have shape {want.shape}, got {spec.shape}")


def resolve(value: object, inputs: Sequence[ArraySpec], devices: int | None = None) -> object:
    """A decorator option given as a callable of the input specs, evaluated for `inputs`
    (and, for a collective kernel, `devices=` its device count when it takes that keyword)."""
    if not isinstance(value, Callable):
        return value
    if devices is not None and "devices" in inspect.signature(value).parameters:
        return value(*inputs, devices=devices)
    return value(*inputs)


def normalize_grid(grid: object, name: str) -> tuple[int, ...]:
    grid = (grid,) if isinstance(grid, int) else tuple(grid)  # type: ignore[arg-type]
    if not 1 <= len(grid) <= 3 or any(not isinstance(g, int) or g < 1 for g in grid):
        raise ValueError(f"kernel {name}: grid must be 1 to 3 positive ints, got {grid!r}")
    return grid


def out_specs(out_shape: object, name: str) -> tuple[tuple[ArraySpec, ...], bool]:
    """The output specs, and whether the kernel returns a single array (not a tuple)."""
    if isinstance(out_shape, tuple | list):
        return tuple(spec_of(o, f"out_shape[{i}] of kernel {name}")
                     for i, o in enumerate(out_shape)), False
    return (spec_of(out_shape, f"out_shape of kernel {name}"),), True
