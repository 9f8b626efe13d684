"""`jax.export` for functions that call smalti kernels, in one call each way.

smalti's custom calls (`smalti_simulate` on CPU, `smalti_launch` on CUDA) are its own, so
JAX's compatibility check refuses them unless told otherwise: `export` says so for exactly
those targets, and `deserialize` registers them before JAX compiles what it reads.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from smalti.runtime.cpu_target import TARGET_NAME as CPU_TARGET_NAME
from smalti.runtime.jax_integration import exporting, register_targets
from smalti.runtime.launcher import TARGET_NAME as CUDA_TARGET_NAME

SMALTI_TARGETS = (CPU_TARGET_NAME, CUDA_TARGET_NAME)
PLATFORMS = ("cpu", "cuda")  # where smalti kernels run: the simulator, and NVIDIA GPUs


def export(fun: Callable[..., Any], *, platforms: Sequence[str] | None = None,
           disabled_checks: Sequence[Any] = (), **options: Any) -> Callable[..., Any]:
    """`jax.export.export(fun, platforms=..., ...)` for a function that calls smalti kernels:
    returns the function of argument shapes that gives the `jax.export.Exported`. `fun` may
    be jitted or not; `platforms` any of "cpu" and "cuda" (default: JAX's default backend).
    The exported module holds each kernel's PTX (CPU) and cubin (CUDA); serialize it with
    `Exported.serialize()` and read it back with `smalti.runtime.deserialize`."""
    import jax
    from jax import export as jax_export

    unsupported = sorted(set(platforms or ()) - set(PLATFORMS))
    if unsupported:
        raise ValueError(f"smalti kernels run on {' and '.join(PLATFORMS)}; cannot export "
                         f"for {', '.join(unsupported)}")
    jitted = fun if isinstance(fun, jax.stages.Wrapped) else jax.jit(fun)
    checks = [*disabled_checks,
              *(jax_export.DisabledSafetyCheck.custom_call(t) for t in SMALTI_TARGETS)]
    exporter = jax_export.export(jitted, platforms=platforms, disabled_checks=checks,
                                 **options)

    def trace(*args: Any, **kwargs: Any) -> Any:
        with exporting() as silenced:
            exported = exporter(*args, **kwargs)
        if silenced:
            warnings.warn(f"debug_print output of smalti kernel(s) {', '.join(silenced)} is "
                          "not printed by the exported CUDA code (its Python callback cannot "
                          "be serialized); the CPU code prints it", stacklevel=2)
        return exported

    return trace


def deserialize(blob: bytes | bytearray) -> Any:
    """`jax.export.deserialize(blob)`, after registering smalti's targets in this process."""
    from jax import export as jax_export

    register_targets()
    return jax_export.deserialize(blob)
