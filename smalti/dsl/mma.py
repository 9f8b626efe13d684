"""`wgmma(acc, a, b)`: acc + a @ b on the tensor cores, A and B in shared memory (or A in
registers), the f32 accumulator in registers."""

from __future__ import annotations

import numpy as np

from smalti.dialect.ops_mma import MAX_N, WGMMA_K_BYTES, WGMMA_M
from smalti.dsl.array import Array
from smalti.dsl.dtypes import mlir_name
from smalti.dsl.locations import user_error
from smalti.dsl.refs import Ref
from smalti.dsl.smem_refs import StagedRef
from smalti.dsl.trace import emit_value

INPUT_DTYPES = ("bf16", "f16")


def _operand(x: object, what: str, registers_ok: bool) -> Ref | Array:
    if isinstance(x, StagedRef):
        raise user_error(TypeError, f"wgmma's {what} {x.name} has {len(x)} stages; pass one "
                                    f"of them, like {x.name}[stage]")
    if isinstance(x, Ref) and x.is_smem:
        pass
    elif not (registers_ok and isinstance(x, Array)):
        where = "a shared-memory ref" + (" or an Array" if registers_ok else "")
        raise user_error(TypeError, f"wgmma's {what} must be {where}, got {x!r}")
    if len(x.shape) != 2:
        raise user_error(ValueError, f"wgmma's {what} must be 2-D, got shape {x.shape}")
    if mlir_name(x.dtype) not in INPUT_DTYPES:
        raise user_error(TypeError, f"wgmma's {what} must be bfloat16 or float16, got "
                                    f"{x.dtype.name}")
    return x


def wgmma(acc: Array, a: Ref | Array, b: Ref) -> Array:
    """acc + a @ b (wgmma.mma_async): acc (M, N) f32, a (M, K), b (K, N) of bf16 or f16."""
    if not isinstance(acc, Array) or acc.ndim != 2 or acc.dtype != np.float32:
        raise user_error(TypeError, "wgmma's accumulator must be a 2-D float32 Array, got "
                                    f"{acc!r}")
    a = _operand(a, "A", registers_ok=True)
    b = _operand(b, "B", registers_ok=False)
    if a.dtype != b.dtype:
        raise user_error(TypeError, f"wgmma's A ({a.dtype.name}) and B ({b.dtype.name}) must "
                                    "have the same dtype")
    (m, n), (a_m, k), (b_k, b_n) = acc.shape, a.shape, b.shape
    if (a_m, b_n) != (m, n) or k != b_k:
        raise user_error(ValueError, f"wgmma: A {a.shape} @ B {b.shape} does not fit the "
                                     f"accumulator {acc.shape}")
    k_step = WGMMA_K_BYTES // a.dtype.itemsize
    if m % WGMMA_M or n % 8 or not 8 <= n <= MAX_N or k % k_step:
        raise user_error(ValueError, f"wgmma needs M a multiple of {WGMMA_M}, N a multiple of "
                                     f"8 in [8, {MAX_N}] and K a multiple of {k_step}; got "
                                     f"M={m}, N={n}, K={k}")
    value = acc.value
    return Array(emit_value("smalti.wgmma", [value, a.value, b.value], value.type))
