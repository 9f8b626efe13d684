"""Kernel arguments from the command line: `.npy` buffers, `TYPE:VALUE` scalars and `.json`
tensor maps (cuTensorMapEncodeTiled's arguments over a `.npy` buffer).

numpy cannot name ml_dtypes types in a `.npy` header: a bfloat16 array is saved with the
raw dtype `|V2` (float8 types as `|V1`). Such a file needs `--dtype FILE=bfloat16` (or a
bare `--dtype bfloat16` for every raw buffer), which views the stored bytes as that type;
`FILE=TYPE` also reinterprets any array whose element size matches (uint16 as bfloat16).
Written back, the array is again `|V2`: read it with `np.load(path).view(ml_dtypes.bfloat16)`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from smalti.sim.tensormap_encode import TensorMapEncodeTiled, load_json
from smalti.tools.cli_common import ToolError

SCALAR_TYPES: dict[str, type] = {
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
}

# PTX's exact float spellings: 0f + 8 hex digits (f32 bits), 0d + 16 hex digits (f64 bits).
_FLOAT_BITS = {"0f": (np.uint32, np.float32, 8), "0d": (np.uint64, np.float64, 16)}


@dataclass(frozen=True)
class BufferArg:
    """A device buffer: the array (updated in place by the run) and the file it came from."""

    path: str
    array: np.ndarray

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class ScalarArg:
    """A scalar kernel parameter, typed as the numpy scalar of its PTX type."""

    text: str
    value: np.generic


@dataclass(frozen=True)
class TensorMapArg:
    """A CUtensorMap parameter from a JSON file: cuTensorMapEncodeTiled's arguments over a
    buffer (shared with a buffer argument of the same file, so a TMA store shows there)."""

    path: str
    encoding: TensorMapEncodeTiled
    buffer: BufferArg  # a buffer argument's, or loaded for the map (then also written out)


KernelArg = BufferArg | ScalarArg | TensorMapArg


def parse_dims(text: str, what: str) -> tuple[int, int, int]:
    """`X[,Y[,Z]]` as three positive ints (missing ones are 1)."""
    parts = text.split(",")
    try:
        dims = [int(p, 0) for p in parts]
    except ValueError:
        dims = []
    if not 1 <= len(parts) <= 3 or len(dims) != len(parts) or any(d < 1 for d in dims):
        raise ToolError(f"--{what} wants X[,Y[,Z]] with positive integers, not {text!r}")
    return (*dims, *([1] * (3 - len(dims))))  # type: ignore[return-value]


ALL_RAW = "*"  # the --dtype key of a bare TYPE: every buffer stored with a raw |V dtype


def parse_dtype_overrides(items: list[str]) -> dict[str, np.dtype]:
    """`FILE=TYPE` options as file (path as given or base name) -> dtype; a bare `TYPE`
    applies to every buffer stored as raw `|V` elements."""
    overrides = {}
    for item in items:
        name, sep, type_name = item.rpartition("=")
        if (sep and not name) or not type_name:
            raise ToolError(f"--dtype wants FILE=TYPE or TYPE (e.g. a.npy=bfloat16), "
                            f"not {item!r}")
        overrides[name if sep else ALL_RAW] = resolve_dtype(type_name)
    return overrides


def resolve_dtype(name: str) -> np.dtype:
    """A numpy or ml_dtypes dtype by name (`bfloat16`, `float8_e4m3fn`, `float32`, ...)."""
    found = getattr(ml_dtypes, name, None)
    if isinstance(found, type) and issubclass(found, np.generic):
        return np.dtype(found)
    try:
        return np.dtype(name)
    except TypeError:
        raise ToolError(f"unknown dtype {name!r} (numpy names or ml_dtypes names such as "
                        "bfloat16, float8_e4m3fn, float8_e5m2)") from None


def parse_scalar(text: str) -> ScalarArg | None:
    """`TYPE:VALUE` as a typed scalar; None when TYPE is not a scalar type name."""
    type_name, sep, value_text = text.partition(":")
    scalar_type = SCALAR_TYPES.get(type_name)
    if not sep or scalar_type is None:
        return None
    dtype = np.dtype(scalar_type)
    if dtype.kind in "ui":
        return ScalarArg(text, _parse_int(value_text, dtype, text))
    return ScalarArg(text, _parse_float(value_text, dtype, text))


def _parse_int(value_text: str, dtype: np.dtype, text: str) -> np.generic:
    try:
        value = int(value_text, 0)
    except ValueError:
        raise ToolError(f"{text!r}: {value_text!r} is not an integer") from None
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ToolError(f"{text!r}: {value} is out of range [{info.min}, {info.max}]")
    return dtype.type(value)


def _parse_float(value_text: str, dtype: np.dtype, text: str) -> np.generic:
    prefix = value_text[:2].lower()
    if prefix in _FLOAT_BITS:
        bits_type, float_type, digits = _FLOAT_BITS[prefix]
        if len(value_text) != 2 + digits:
            raise ToolError(f"{text!r}: {prefix} wants exactly {digits} hex digits")
        try:
            value = float(np.array(int(value_text[2:], 16), bits_type).view(float_type))
        except ValueError:
            raise ToolError(f"{text!r}: {value_text[2:]!r} is not hexadecimal") from None
    else:
        try:
            value = float(value_text)
        except ValueError:
            raise ToolError(f"{text!r}: {value_text!r} is not a number") from None
    with np.errstate(over="ignore"):
        converted = dtype.type(value)
    if np.isinf(converted) and np.isfinite(value):
        raise ToolError(f"{text!r}: {value} overflows {dtype.name}")
    return converted


def load_buffer(path: str, overrides: dict[str, np.dtype]) -> BufferArg:
    """A `.npy` file as a C-ordered, writable array (with its --dtype override applied)."""
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ToolError(f"no such file: {path} (an argument is a .npy file or TYPE:VALUE "
                        f"with TYPE one of {', '.join(SCALAR_TYPES)})") from None
    except (OSError, ValueError) as error:
        raise ToolError(f"cannot load {path} as .npy: {error}") from None
    if not isinstance(array, np.ndarray):
        raise ToolError(f"{path} is an .npz archive; give one .npy file per buffer")
    array = np.ascontiguousarray(array)
    override = overrides.get(path, overrides.get(os.path.basename(path)))
    if override is None and array.dtype.kind == "V":
        override = overrides.get(ALL_RAW)
    if override is not None:
        if override.itemsize != array.dtype.itemsize:
            raise ToolError(f"--dtype {override.name} for {path}: its elements are "
                            f"{array.dtype.itemsize} bytes ({array.dtype}), "
                            f"{override.name} needs {override.itemsize}")
        array = array.view(override)
    elif array.dtype.kind == "V":
        raise ToolError(f"{path} holds raw {array.dtype.str} elements, which is how numpy saves "
                        f"ml_dtypes arrays: name the type, e.g. --dtype "
                        f"{os.path.basename(path)}=bfloat16")
    return BufferArg(path, array)


def parse_args(items: list[str], overrides: dict[str, np.dtype]) -> list[KernelArg]:
    """Every positional kernel argument, in order (each --dtype must name one of them)."""
    args: list[KernelArg | str] = []
    for item in items:
        scalar = parse_scalar(item)
        if scalar is not None:
            args.append(scalar)
        elif item.endswith(".json"):
            args.append(item)  # a tensor map, resolved once every buffer is loaded
        else:
            args.append(load_buffer(item, overrides))
    buffers = [a for a in args if isinstance(a, BufferArg)]
    args = [load_tensor_map(a, buffers, overrides) if isinstance(a, str) else a for a in args]
    unused = set(overrides) - {a.path for a in buffers} - {a.name for a in buffers} - {ALL_RAW}
    if unused:
        raise ToolError(f"--dtype names no buffer argument: {', '.join(sorted(unused))}")
    return args


def load_tensor_map(path: str, buffers: list[BufferArg],
                    overrides: dict[str, np.dtype]) -> TensorMapArg:
    """A tensor map JSON file (see the README's smalti-sim paragraph): its "buffer" is the
    array of the buffer argument naming the same file, else loaded from it."""
    try:
        description = load_json(path)
    except FileNotFoundError:
        raise ToolError(f"no such file: {path}") from None
    except ValueError as error:
        raise ToolError(str(error)) from None
    target = os.path.realpath(description["buffer"])
    shared = [b for b in buffers if os.path.realpath(b.path) == target]
    buffer = shared[0] if shared else load_buffer(description["buffer"], overrides)
    try:
        encoding = TensorMapEncodeTiled.from_json(description, buffer.array)
        encoding.tensor_map()
    except (ValueError, TypeError) as error:
        raise ToolError(f"{path}: {error}") from None
    return TensorMapArg(path, encoding, buffer)


def output_buffers(args: list[KernelArg]) -> list[BufferArg]:
    """The buffers a run may write, each once: buffer arguments, then tensor maps' own."""
    found: list[BufferArg] = []
    for arg in args:
        buffer = arg if isinstance(arg, BufferArg) else getattr(arg, "buffer", None)
        if buffer is not None and all(buffer is not b for b in found):
            found.append(buffer)
    return found


def check_distinct_names(args: list[KernelArg]) -> None:
    """Raise ToolError when two buffers would be written to the same --out-dir file."""
    names = [a.name for a in output_buffers(args)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ToolError(f"buffers share a file name ({', '.join(duplicates)}); "
                        "--out-dir would write them over each other")
