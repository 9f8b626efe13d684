"""Call-time checks: the arrays a kernel is called with, named by the body's parameters; and
the BlockSpecs of pipelines (which block of an array each step reads or writes)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from smalti.dsl.dtypes import mlir_name
from smalti.dsl.locations import user_error, user_position
from smalti.tiling import Transform

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


class BlockSpec:
    """Which block of a global array each step of `sd.emit_pipeline` reads or writes:
    `block_shape` (2-D or more; it must divide the array; None marks a squeezed dim: one
    index of it per step, absent from the buffer, as `ref.at[i, ...]` drops it), and
    `index_map(*step_indices)`,
    the block's index along each dim (its window starts at index * block size; the map may
    use values captured from the kernel, such as program_id). `transforms` (smalti.tiling
    tile/swizzle transforms) fix the shared-memory tiling of the block's buffers; by default
    layout inference picks it from the buffers' uses (TMA, wgmma)."""

    __slots__ = ("block_shape", "index_map", "transforms", "where")

    def __init__(self, block_shape: Sequence[int | None], index_map: Callable[..., object],
                 transforms: Sequence[Transform] = ()) -> None:
        shape = tuple(block_shape) if isinstance(block_shape, Sequence) else None
        if shape is None or sum(s is not None for s in shape) < 2 or any(
                s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 1)
                for s in shape):
            raise user_error(ValueError, "BlockSpec needs a block_shape of two or more "
                                         "positive Python ints (and None for squeezed dims), "
                                         f"got {block_shape!r}")
        if not callable(index_map):
            raise user_error(TypeError, "BlockSpec's index_map must be callable (step "
                                        f"indices -> block indices), got {index_map!r}")
        transforms = tuple(transforms)
        if not all(isinstance(t, Transform) for t in transforms):
            raise user_error(TypeError, "BlockSpec's transforms must be smalti.tiling "
                                        f"transforms, got {transforms!r}")
        for name, value in (("block_shape", shape), ("index_map", index_map),
                            ("transforms", transforms), ("where", user_position())):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"BlockSpec is immutable (setting {name})")

    @property
    def buffer_shape(self) -> tuple[int, ...]:
        """The shape of the block's shared-memory buffer: the block without squeezed dims."""
        return tuple(s for s in self.block_shape if s is not None)

    @property
    def squeezes(self) -> bool:
        return None in self.block_shape

    def __repr__(self) -> str:
        transforms = f", transforms={list(self.transforms)}" if self.transforms else ""
        return f"BlockSpec({self.block_shape}{transforms}) at {self.where}"
