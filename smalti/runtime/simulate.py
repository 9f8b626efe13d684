"""Run a compiled kernel on the CPU through the PTX simulator, with checked arguments."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from smalti.dialect.kernel import KernelSignature
from smalti.runtime.compiler import CompiledModule
from smalti.sim import run_ptx

NUMPY_DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
}


def check_arguments(signature: KernelSignature, args: tuple) -> list:
    """The kernel's arguments as the simulator takes them; TypeError/ValueError name the
    argument that does not match the signature."""
    if len(args) != len(signature.args):
        raise TypeError(f"kernel @{signature.name} takes {len(signature.args)} arguments, "
                        f"got {len(args)}")
    checked = []
    for position, (value, arg) in enumerate(zip(args, signature.args, strict=True)):
        dtype = NUMPY_DTYPES[arg.dtype]
        if arg.shape is None:
            checked.append(dtype.type(value))
            continue
        if not isinstance(value, np.ndarray):
            raise TypeError(f"argument #{position} of @{signature.name} must be an array, got "
                            f"{type(value).__name__}")
        if value.dtype != dtype:
            raise TypeError(f"argument #{position} of @{signature.name} must have dtype "
                            f"{dtype.name}, got {value.dtype.name}")
        if value.shape != arg.shape:
            raise ValueError(f"argument #{position} of @{signature.name} must have shape "
                             f"{arg.shape}, got {value.shape}")
        checked.append(np.ascontiguousarray(value))
    return checked


def run_simulated(compiled: CompiledModule, *args, kernel: str | None = None, **options) -> list:
    """Run `kernel` on copies of `args`; return the arguments after the run (buffers updated).
    `options` go to `smalti.sim.run_ptx` (async_completion, seed, spurious_waits)."""
    signature = compiled.signature(kernel)
    buffers = [a.copy() if isinstance(a, np.ndarray) else a
               for a in check_arguments(signature, args)]
    from smalti.runtime.tensor_maps import sim_tensor_maps

    run_ptx(compiled.ptx, signature.name, signature.grid, signature.block,
            [*buffers, *sim_tensor_maps(signature, buffers)], shared_bytes=signature.smem_bytes,
            **options)
    return buffers
